// Applying a compiled JSON Schema to a value (compiling it, and what valijson would do badly:
// the top of schema.cpp).
#include "plan/schema_detail.hpp"

#include <valijson/adapters/boost_json_adapter.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validation_visitor.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <exception>
#include <string_view>

namespace json = boost::json;

namespace agentctl {

using detail::pointer_token;

namespace {

/// Longest property name matched against `patternProperties`, and longest run of digits in a
/// string checked by a date/time `format` (the recursive regex executor's stack use).
constexpr std::size_t max_regex_key_bytes = 1024;
constexpr std::size_t max_format_digit_run = 1024;

// "<root>", "[key]", "[0]" -> "/key/0".
std::string pointer_of(const std::vector<std::string>& context) {
    std::string out;
    for (std::size_t i = 1; i < context.size(); ++i) {
        std::string_view c = context[i];
        if (c.size() >= 2 && c.front() == '[' && c.back() == ']') c = c.substr(1, c.size() - 2);
        out += "/" + pointer_token(c);
    }
    return out;
}

// Messages that only repeat a deeper error one level up.
bool is_summary(std::string_view message) {
    for (std::string_view prefix : {"Failed to validate against schema associated with property name",
                                    "Failed to validate item #", "Failed to validate against child schema #"})
        if (message.starts_with(prefix)) return true;
    return false;
}

std::size_t longest_digit_run(std::string_view s) {
    std::size_t best = 0, run = 0;
    for (char c : s) {
        run = (c >= '0' && c <= '9') ? run + 1 : 0;
        best = std::max(best, run);
    }
    return best;
}

/// Strings and names the recursive regex executor must not see (see the top of schema.cpp).
struct regex_guard {
    bool pattern_properties;
    bool date_formats;
};

void check_regex_inputs(const json::value& v, const std::string& at, regex_guard s,
                        std::vector<schema_error>& out) {
    auto digits = [&](std::string_view text, const std::string& where) {
        if (s.date_formats && longest_digit_run(text) > max_format_digit_run)
            out.push_back({where, "a run of " + std::to_string(longest_digit_run(text)) +
                                      " digits is too long to check against a date or time format (at most " +
                                      std::to_string(max_format_digit_run) + ")"});
    };
    if (v.is_string()) {
        digits(v.get_string(), at);
    } else if (v.is_array()) {
        for (std::size_t i = 0; i < v.get_array().size(); ++i)
            check_regex_inputs(v.get_array()[i], at + "/" + std::to_string(i), s, out);
    } else if (v.is_object()) {
        for (const auto& m : v.get_object()) {
            std::string where = at + "/" + pointer_token(m.key());
            if (s.pattern_properties && m.key().size() > max_regex_key_bytes)
                out.push_back({where, "a property name of " + std::to_string(m.key().size()) +
                                          " bytes is too long to match against patternProperties (at most " +
                                          std::to_string(max_regex_key_bytes) + ")"});
            digits(m.key(), where);
            check_regex_inputs(m.value(), where, s, out);
        }
    }
}

}  // namespace

std::vector<schema_error> json_schema::validate(const json::value& value) const {
    std::vector<schema_error> out;
    check_regex_inputs(value, "", {impl_->pattern_properties, impl_->date_formats}, out);
    if (!out.empty()) return out;
    valijson::ValidationResults results;
    try {
        valijson::adapters::BoostJsonAdapter target(value);
        valijson::ValidationVisitor<valijson::adapters::BoostJsonAdapter> visitor(
            target, std::vector<std::string>(1, "<root>"), true, &results, impl_->regexes);
        if (visitor.validateSchema(impl_->schema)) return out;
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        out.push_back({"", std::string("the schema could not be applied: ") + e.what()});
        return out;
    }
    for (const auto& e : results) {
        if (is_summary(e.description)) continue;
        schema_error err{pointer_of(e.context), e.description};
        bool seen = std::any_of(out.begin(), out.end(), [&](const schema_error& o) {
            return o.pointer == err.pointer && o.message == err.message;
        });
        if (!seen) out.push_back(std::move(err));
    }
    if (out.empty()) out.push_back({"", "the value does not match the schema"});
    return out;
}

}  // namespace agentctl
