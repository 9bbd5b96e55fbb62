// JSON Schema through valijson. valijson reports a bad schema by exception (enabled below) and
// never fetches a remote document without a fetch callback, which we never give it.
//
// What valijson would do badly is refused or worked around here first (docs/DESIGN.md,
// "Extensions"), because a crash in `check` or in the engine is not an answer:
// - A schema that applies itself to the same value forever (`{"$ref": "#"}`,
//   `{"allOf": [{"$ref": "#"}]}`) sends valijson into endless recursion: refused.
// - `$ref` must point inside the schema ("#..."); a nested `$id` is refused (valijson resolves
//   every "#" against the root, which would silently differ from the standard).
// - libstdc++'s default regex executor recurses once per character (a 40 000-character
//   string overflows an 8 MiB stack). `pattern` regexes are compiled here with the
//   polynomial (breadth-first) executor; valijson still uses the recursive one for
//   `patternProperties` and for the `format` checks of date, time and date-time, so property
//   names and digit runs are bounded before those can see them.
#define VALIJSON_USE_EXCEPTIONS 1

#include "plan/schema.hpp"

#include <valijson/adapters/boost_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validation_visitor.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cctype>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string_view>
#include <unordered_map>

namespace json = boost::json;

namespace agentctl {

namespace {
/// Longest property name matched against `patternProperties`, and longest run of digits in a
/// string checked by a date/time `format` (the recursive regex executor's stack use).
constexpr std::size_t max_regex_key_bytes = 1024;
constexpr std::size_t max_format_digit_run = 1024;

constexpr auto regex_flags = std::regex::ECMAScript | std::regex_constants::__polynomial;
}  // namespace

struct json_schema::impl {
    valijson::Schema schema;
    /// `pattern` regexes by source text, compiled with the polynomial executor. valijson adds
    /// what it does not find here (nothing, since every `pattern` string is compiled).
    mutable std::unordered_map<std::string, std::regex> regexes;
    bool pattern_properties = false;  ///< the schema has `patternProperties`
    bool date_formats = false;        ///< the schema has `format` date, time or date-time
};

namespace {

constexpr std::string_view draft7_uri = "http://json-schema.org/draft-07/schema";
constexpr std::string_view draft4_uri = "http://json-schema.org/draft-04/schema";

std::string pointer_token(std::string_view key) {
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

/// The value at JSON pointer `pointer` in `root`, or nullptr.
const json::value* resolve(const json::value& root, std::string_view pointer) {
    const json::value* at = &root;
    while (!pointer.empty()) {
        if (pointer.front() != '/') return nullptr;
        pointer.remove_prefix(1);
        std::size_t end = pointer.find('/');
        std::string_view raw = pointer.substr(0, end);
        pointer = end == std::string_view::npos ? std::string_view() : pointer.substr(end);
        std::string token;
        for (std::size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1'))
                token += raw[++i] == '0' ? '~' : '/';
            else
                token += raw[i];
        }
        if (at->is_object()) {
            at = at->get_object().if_contains(token);
        } else if (at->is_array()) {
            if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos) return nullptr;
            std::size_t i = std::stoul(token);
            at = i < at->get_array().size() ? &at->get_array()[i] : nullptr;
        } else {
            return nullptr;
        }
        if (!at) return nullptr;
    }
    return at;
}

/// "#/a%25b" -> "/a%b" (URI fragment to JSON pointer); nullopt when not a local reference.
std::optional<std::string> local_pointer(std::string_view ref) {
    if (ref.empty() || ref.front() != '#') return std::nullopt;
    std::string out;
    for (std::size_t i = 1; i < ref.size(); ++i) {
        auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
        if (ref[i] == '%' && i + 2 < ref.size() && hex(ref[i + 1]) && hex(ref[i + 2])) {
            out += static_cast<char>(std::stoi(std::string(ref.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += ref[i];
        }
    }
    return out;
}

/// A place inside a schema document: its JSON pointer and the matching dotted document path.
struct schema_place {
    const json::value* value;
    std::string pointer;

    schema_place member(std::string_view key, const json::value* v = nullptr) const {
        return {v, pointer + "/" + pointer_token(key)};
    }
    schema_place item(std::size_t i, const json::value* v = nullptr) const {
        return {v, pointer + "/" + std::to_string(i)};
    }
};

/// Subschemas applied to the same value as `place` (draft 7): the in-place applicators.
std::vector<schema_place> in_place_children(const schema_place& place) {
    std::vector<schema_place> out;
    if (!place.value->is_object()) return out;
    const json::object& o = place.value->get_object();
    for (std::string_view key : {"not", "if", "then", "else"})
        if (const json::value* v = o.if_contains(key)) out.push_back(place.member(key, v));
    for (std::string_view key : {"allOf", "anyOf", "oneOf"}) {
        const json::value* v = o.if_contains(key);
        if (!v || !v->is_array()) continue;
        schema_place list = place.member(key);
        for (std::size_t i = 0; i < v->get_array().size(); ++i)
            out.push_back(list.item(i, &v->get_array()[i]));
    }
    if (const json::value* v = o.if_contains("dependencies"); v && v->is_object()) {
        schema_place map = place.member("dependencies");
        for (const auto& m : v->get_object())
            if (m.value().is_object() || m.value().is_bool()) out.push_back(map.member(m.key(), &m.value()));
    }
    return out;
}

/// Calls `fn` on every subschema of `place` (draft 7 keywords), depth first, `place` first.
void for_each_subschema(const schema_place& place, const std::function<void(const schema_place&)>& fn) {
    fn(place);
    if (!place.value->is_object()) return;
    const json::object& o = place.value->get_object();
    auto visit = [&](const schema_place& p) {
        if (p.value->is_object() || p.value->is_bool()) for_each_subschema(p, fn);
    };
    for (const auto& child : in_place_children(place)) visit(child);
    for (std::string_view key :
         {"additionalItems", "additionalProperties", "contains", "propertyNames", "items"})
        if (const json::value* v = o.if_contains(key)) visit(place.member(key, v));
    if (const json::value* v = o.if_contains("items"); v && v->is_array()) {
        schema_place list = place.member("items");
        for (std::size_t i = 0; i < v->get_array().size(); ++i) visit(list.item(i, &v->get_array()[i]));
    }
    for (std::string_view key : {"properties", "patternProperties", "definitions"}) {
        const json::value* v = o.if_contains(key);
        if (!v || !v->is_object()) continue;
        schema_place map = place.member(key);
        for (const auto& m : v->get_object()) visit(map.member(m.key(), &m.value()));
    }
}

/// Calls `fn(key, value)` for every member of every object in `v`, at any depth.
void for_each_member(const json::value& v,
                     const std::function<void(std::string_view, const json::value&)>& fn) {
    if (v.is_array()) {
        for (const auto& item : v.get_array()) for_each_member(item, fn);
    } else if (v.is_object()) {
        for (const auto& m : v.get_object()) {
            fn(m.key(), m.value());
            for_each_member(m.value(), fn);
        }
    }
}

bool regex_compiles(const std::string& pattern, std::string& error) {
    try {
        std::regex re(pattern, regex_flags);
        return true;
    } catch (const std::regex_error& e) {
        error = e.what();
        return false;
    }
}

struct failure {
    std::string error;
    std::string pointer;
};

/// A chain of in-place applicators that comes back to where it started.
std::optional<failure> find_cycle(const json::value& root, const std::vector<schema_place>& places) {
    enum class mark { unseen, active, done };
    std::map<std::string, mark> marks;
    std::vector<std::string> stack;
    std::optional<failure> found;

    std::function<void(const std::string&)> dfs = [&](const std::string& pointer) {
        if (found) return;
        mark& m = marks[pointer];
        if (m == mark::done) return;
        if (m == mark::active) {
            auto begin = std::find(stack.begin(), stack.end(), pointer);
            std::string chain;
            for (auto it = begin; it != stack.end(); ++it) chain += "#" + *it + " -> ";
            // Located at the step that closes the loop.
            const std::string& last = stack.back();
            const json::value* closing = resolve(root, last);
            bool by_ref = closing && closing->is_object() && closing->get_object().contains("$ref");
            found =
                failure{"the schema applies itself to the same value without end: " + chain + "#" + pointer,
                        by_ref ? last + "/$ref" : last};
            return;
        }
        const json::value* v = resolve(root, pointer);
        if (!v || !v->is_object()) {
            m = mark::done;
            return;
        }
        m = mark::active;
        stack.push_back(pointer);
        const json::value* ref = v->get_object().if_contains("$ref");
        if (ref && ref->is_string())
            if (auto target = local_pointer(ref->get_string())) dfs(*target);
        for (const auto& child : in_place_children({v, pointer})) dfs(child.pointer);
        stack.pop_back();
        marks[pointer] = mark::done;
    };
    for (const auto& p : places) dfs(p.pointer);
    return found;
}

bool is_draft4(const json::value& document) {
    if (!document.is_object()) return false;
    const json::value* s = document.get_object().if_contains("$schema");
    return s && s->is_string() && std::string_view(s->get_string()).starts_with(draft4_uri);
}

/// What valijson does not check or would crash on (see the top of this file).
std::optional<failure> precheck(const json::value& root) {
    if (!root.is_object() && !root.is_bool()) return failure{"a schema must be an object or a boolean", ""};
    if (root.is_object()) {
        if (const json::value* s = root.get_object().if_contains("$schema")) {
            std::string_view uri = s->is_string() ? std::string_view(s->get_string()) : std::string_view();
            if (!uri.empty() && uri.back() == '#') uri.remove_suffix(1);
            if (uri != draft7_uri && uri != draft4_uri)
                return failure{"unsupported $schema (draft 7 and draft 4 are supported)", "/$schema"};
        }
    }
    std::vector<schema_place> places;
    for_each_subschema({&root, ""}, [&](const schema_place& p) { places.push_back(p); });
    for (const auto& p : places) {
        if (!p.value->is_object()) continue;
        const json::object& o = p.value->get_object();
        if (const json::value* v = o.if_contains("$ref");
            v && v->is_string() && !local_pointer(v->get_string()))
            return failure{
                "$ref \"" + std::string(v->get_string()) +
                    "\" points outside the schema; only references inside it (\"#/...\") are supported",
                p.member("$ref").pointer};
        std::string_view id = is_draft4(root) ? "id" : "$id";
        if (const json::value* v = o.if_contains(id); v && v->is_string() && !p.pointer.empty())
            return failure{std::string(id) + " is supported at the root of a schema only",
                           p.member(id).pointer};
        if (const json::value* v = o.if_contains("pattern"); v && v->is_string()) {
            std::string why;
            if (!regex_compiles(std::string(v->get_string()), why))
                return failure{"pattern is not a supported regular expression: " + why,
                               p.member("pattern").pointer};
        }
        if (const json::value* v = o.if_contains("patternProperties"); v && v->is_object()) {
            for (const auto& m : v->get_object()) {
                std::string why;
                if (!regex_compiles(std::string(m.key()), why))
                    return failure{"patternProperties key is not a supported regular expression: " + why,
                                   p.member("patternProperties").member(m.key()).pointer};
            }
        }
    }
    return find_cycle(root, places);
}

valijson::SchemaParser::Version version_of(const json::value& document) {
    return is_draft4(document) ? valijson::SchemaParser::kDraft4 : valijson::SchemaParser::kDraft7;
}

/// Compiles `document` into `schema`; returns the reason on failure, "" on success. Runs the
/// precheck first, so valijson only sees what it can handle.
std::string populate(const json::value& document, valijson::SchemaParser::Version version,
                     valijson::Schema& schema) {
    if (auto f = precheck(document)) return f->error;
    try {
        valijson::SchemaParser parser(version);
        parser.populateSchema(valijson::adapters::BoostJsonAdapter(document), schema);
        return {};
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        std::string why = e.what();
        return why.empty() ? "not a valid JSON Schema" : why;
    }
}

/// valijson names the rule, not the place. The deepest subschema that fails alone with the
/// same reason is the place (one that merely refers to another part fails differently).
std::string locate(const json::value& document, valijson::SchemaParser::Version version,
                   const std::string& reason) {
    std::string best;
    for_each_subschema({&document, ""}, [&](const schema_place& p) {
        if (p.pointer.size() <= best.size()) return;
        valijson::Schema alone;
        if (populate(*p.value, version, alone) == reason) best = p.pointer;
    });
    return best;
}

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

/// Strings and names the recursive regex executor must not see (see the top of this file).
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

/// Dotted document path of a pointer into a schema at `base` (for diagnostics).
std::string path_of(const json::value& document, const std::string& base, const std::string& pointer) {
    std::string path = base;
    std::string walked;
    std::size_t start = 0;
    while (start < pointer.size()) {
        std::size_t slash = pointer.find('/', start + 1);
        std::string token =
            pointer.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        const json::value* parent = resolve(document, walked);
        walked += token;
        const json::value* here = resolve(document, walked);
        if (!parent || !here) break;
        std::string key;
        for (std::size_t i = 1; i < token.size(); ++i) {
            if (token[i] == '~' && i + 1 < token.size())
                key += token[++i] == '0' ? '~' : '/';
            else
                key += token[i];
        }
        path += parent->is_array() ? "[" + key + "]" : "." + key;
        if (slash == std::string::npos) break;
        start = slash;
    }
    return path;
}

}  // namespace

json_schema::json_schema(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
json_schema::~json_schema() = default;

std::unique_ptr<json_schema> json_schema::compile(const json::value& document, std::string& error,
                                                  std::string& pointer) {
    error.clear();
    pointer.clear();
    if (auto f = precheck(document)) {
        error = std::move(f->error);
        pointer = std::move(f->pointer);
        return nullptr;
    }
    auto version = version_of(document);
    auto p = std::make_unique<impl>();
    error = populate(document, version, p->schema);
    if (!error.empty()) {
        pointer = locate(document, version, error);
        return nullptr;
    }
    // Every `pattern` string anywhere (a superset of the real ones), so valijson never builds
    // a recursive-executor regex of its own for `pattern`.
    for_each_member(document, [&](std::string_view key, const json::value& v) {
        if (key == "patternProperties") p->pattern_properties = true;
        if (key == "format" && v.is_string() &&
            (v.get_string() == "date" || v.get_string() == "time" || v.get_string() == "date-time"))
            p->date_formats = true;
        if (key != "pattern" || !v.is_string() || p->regexes.count(std::string(v.get_string()))) return;
        try {
            p->regexes.emplace(std::string(v.get_string()),
                               std::regex(std::string(v.get_string()), regex_flags));
        } catch (const std::regex_error&) {
            // Not in a schema position (the precheck compiled all of those): never used.
        }
    });
    return std::unique_ptr<json_schema>(new json_schema(std::move(p)));
}

namespace {

// Unescapes the last token of a JSON pointer.
std::string last_token(const std::string& pointer) {
    std::string key;
    for (std::size_t i = pointer.rfind('/') + 1; i < pointer.size(); ++i) {
        if (pointer[i] == '~' && i + 1 < pointer.size())
            key += pointer[++i] == '0' ? '~' : '/';
        else
            key += pointer[i];
    }
    return key;
}

// Sets the part at `pointer` aside so that the rest of the schema can be checked: a subschema
// becomes `{}` (valid in every draft), a keyword (or a subschema already set aside, e.g. under
// a patternProperties key that is no regular expression) is removed from its object. False
// when nothing can be set aside: the root, or a place that does not resolve.
bool set_aside(json::value& document, const std::string& pointer) {
    if (pointer.empty()) return false;
    auto* parent = const_cast<json::value*>(resolve(document, pointer.substr(0, pointer.rfind('/'))));
    auto* at = const_cast<json::value*>(resolve(document, pointer));
    if (!parent || !at) return false;
    const bool set_aside_already = at->is_object() && at->get_object().empty();
    if ((at->is_object() || at->is_bool()) && !set_aside_already) {
        *at = json::object();
        return true;
    }
    if (parent->is_object()) return parent->get_object().erase(last_token(pointer)) > 0;
    if (!set_aside_already) {
        *at = json::object();
        return true;
    }
    return false;
}

// The keyword of the subschema at `pointer` that makes it fail with `error` on its own: the
// first member whose removal changes the outcome. "" when none does alone.
std::string faulty_keyword(const json::value& document, const std::string& pointer,
                           const std::string& error) {
    const json::value* at = resolve(document, pointer);
    if (!at || !at->is_object()) return {};
    for (const auto& m : at->get_object()) {
        json::value without = *at;
        without.get_object().erase(m.key());
        std::string e, p;
        if (json_schema::compile(without, e, p) || e != error) return std::string(m.key());
    }
    return {};
}

}  // namespace

std::vector<json_schema::problem> json_schema::problems(const json::value& document, std::size_t max) {
    std::vector<problem> out;
    json::value copy = document;
    while (out.size() < max) {
        std::string error, pointer;
        if (compile(copy, error, pointer)) break;
        out.push_back({error, pointer});
        // valijson names the subschema; setting aside only its keyword at fault keeps the rest
        // of that subschema checked.
        std::string keyword = faulty_keyword(copy, pointer, error);
        if (!set_aside(copy, keyword.empty() ? pointer : pointer + "/" + pointer_token(keyword))) break;
    }
    return out;
}

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

std::string schema_errors_text(const std::vector<schema_error>& errors, std::size_t max) {
    std::string out;
    for (std::size_t i = 0; i < errors.size() && i < max; ++i) {
        if (!out.empty()) out += "; ";
        out += "at " + (errors[i].pointer.empty() ? std::string("/") : errors[i].pointer) + ": " +
               errors[i].message;
    }
    if (errors.size() > max) out += " (" + std::to_string(errors.size() - max) + " more)";
    return out;
}

void check_schemas(const workflow& wf, diagnostics& diags) {
    auto check = [&](std::string_view key, const boost::json::value& document, const std::string& base) {
        for (const auto& p : json_schema::problems(document)) {
            std::string path = path_of(document, base, p.pointer);
            diags.error("invalid_schema", path,
                        std::string(key) + (p.pointer.empty() ? "" : " at " + p.pointer) +
                            " is not a valid JSON Schema: " + p.error,
                        "write a draft 7 JSON Schema whose $refs point inside it (\"#/definitions/...\")",
                        wf.where(path));
        }
    };
    for (const auto& a : wf.actions) {
        if (!a.extension) continue;
        check("inputSchema", a.extension->input_schema, "spec.actions." + a.name + ".inputSchema");
        check("outputSchema", a.extension->output_schema, "spec.actions." + a.name + ".outputSchema");
    }
    for (std::size_t i = 0; i < wf.tasks.size(); ++i)
        if (wf.tasks[i].output_schema)
            check("outputSchema", *wf.tasks[i].output_schema,
                  "spec.tasks[" + std::to_string(i) + "].outputSchema");
}

}  // namespace agentctl
