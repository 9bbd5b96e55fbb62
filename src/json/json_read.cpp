// JSON text through Boost.JSON's parser, with the checks it does not make and exact numbers.
#include <agentctl/json.hpp>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>

#include <charconv>
#include <cmath>
#include <unordered_set>

namespace agentctl {
namespace {

/// Builds a value from Boost.JSON's parser events (through its value_stack, as
/// boost::json::parser does) and adds what that parser does not check: duplicate keys, NUL
/// characters, and numbers JSON data here cannot hold, each with the place it was written.
/// Numbers are converted from their text with std::from_chars.
class handler {
public:
    static constexpr std::size_t max_object_size = boost::json::object::max_size();
    static constexpr std::size_t max_array_size = boost::json::array::max_size();
    static constexpr std::size_t max_key_size = boost::json::string::max_size();
    static constexpr std::size_t max_string_size = boost::json::string::max_size();

    handler(std::string_view text, std::string_view root_name, std::size_t max_string_bytes)
        : text_(text), root_name_(root_name), max_string_bytes_(max_string_bytes) {}

    bool on_document_begin(boost::system::error_code&) {
        values_.reset();
        return true;
    }
    bool on_document_end(boost::system::error_code&) { return true; }
    bool on_object_begin(boost::system::error_code&) {
        enter(true);
        return true;
    }
    bool on_object_end(std::size_t n, boost::system::error_code&) {
        levels_.pop_back();
        values_.push_object(n);
        after_value();
        return true;
    }
    bool on_array_begin(boost::system::error_code&) {
        enter(false);
        return true;
    }
    bool on_array_end(std::size_t n, boost::system::error_code&) {
        levels_.pop_back();
        values_.push_array(n);
        after_value();
        return true;
    }
    bool on_key_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
        if (key_.empty()) key_at_ = quote_of(s);
        key_.append(s.data(), s.size());
        values_.push_chars(s);
        return true;
    }
    bool on_key(boost::json::string_view s, std::size_t, boost::system::error_code&) {
        if (key_.empty()) key_at_ = quote_of(s);
        key_.append(s.data(), s.size());
        level& l = levels_.back();
        l.key = key_;
        if (!l.keys.insert(key_).second)
            problem("duplicate_key", key_at_, "duplicate key `" + key_ + "` in " + path(levels_.size() - 1),
                    "each key may appear once; the first one is kept");
        values_.push_key(s);
        key_.clear();
        return true;
    }
    bool on_string_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
        if (!in_string_) string_at_ = quote_of(s);
        in_string_ = true;
        nul_ = nul_ || s.find('\0') != boost::json::string_view::npos;
        values_.push_chars(s);
        return true;
    }
    bool on_string(boost::json::string_view s, std::size_t size, boost::system::error_code&) {
        if (!in_string_) string_at_ = quote_of(s);
        in_string_ = false;
        if (nul_ || s.find('\0') != boost::json::string_view::npos)
            problem("nul_byte", string_at_, path(levels_.size()) + " contains a NUL character",
                    "remove the \\u0000 escape");
        if (size > max_string_bytes_)
            problem("item_too_long", string_at_,
                    path(levels_.size()) + " is " + std::to_string(size) +
                        " bytes long, more than the limit of " + std::to_string(max_string_bytes_) +
                        " bytes per string",
                    "");
        nul_ = false;
        values_.push_string(s);
        after_value();
        return true;
    }
    bool on_number_part(boost::json::string_view s, boost::system::error_code&) {
        if (number_.empty()) number_at_ = where(s);
        number_.append(s.data(), s.size());
        return true;
    }
    bool on_int64(std::int64_t i, boost::json::string_view s, boost::system::error_code&) {
        number_done(s);
        number_.clear();
        values_.push_int64(i);
        after_value();
        return true;
    }
    bool on_uint64(std::uint64_t u, boost::json::string_view s, boost::system::error_code&) {
        number_done(s);
        number_.clear();
        values_.push_uint64(u);
        after_value();
        return true;
    }
    bool on_double(double, boost::json::string_view s, boost::system::error_code&) {
        std::size_t at = number_done(s);
        // Boost.JSON 1.81 converts some decimals one unit in the last place off; from_chars
        // is exact, as the YAML reader's conversion is.
        double d = 0;
        auto [end, ec] = std::from_chars(number_.data(), number_.data() + number_.size(), d);
        bool integer = number_.find_first_of(".eE") == std::string::npos;
        if (integer || ec != std::errc() || end != number_.data() + number_.size() || !std::isfinite(d))
            problem("out_of_range", at,
                    path(levels_.size()) + ": " + number_.substr(0, 40) + (number_.size() > 40 ? "..." : "") +
                        (integer ? " does not fit in 64 bits" : " is out of the range of a double"),
                    "write a smaller number, or a string");
        values_.push_double(d);
        number_.clear();
        after_value();
        return true;
    }
    bool on_bool(bool b, boost::system::error_code&) {
        values_.push_bool(b);
        after_value();
        return true;
    }
    bool on_null(boost::system::error_code&) {
        values_.push_null();
        after_value();
        return true;
    }
    bool on_comment_part(boost::json::string_view, boost::system::error_code&) { return true; }
    bool on_comment(boost::json::string_view, boost::system::error_code&) { return true; }

    boost::json::value release() { return values_.release(); }

    std::vector<json_finding>& findings() { return findings_; }

private:
    struct level {
        bool object = false;
        std::size_t index = 0;  // array: items so far
        std::string key;        // object: the current key
        std::unordered_set<std::string> keys;
    };

    void enter(bool object) { levels_.push_back({object, 0, {}, {}}); }
    void after_value() {
        if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
    }
    // Offset of a view into the text; views into the parser's own buffer (escaped strings)
    // fall back to the last known offset.
    std::size_t where(boost::json::string_view s) {
        if (s.data() >= text_.data() && s.data() <= text_.data() + text_.size())
            last_ = static_cast<std::size_t>(s.data() - text_.data());
        return last_;
    }
    // The opening quote of a string whose first part is `s`.
    std::size_t quote_of(boost::json::string_view s) {
        bool inside = s.data() > text_.data() && s.data() <= text_.data() + text_.size();
        std::size_t at = where(s);
        return inside ? at - 1 : at;
    }
    // `a.b[2]`: where the value read inside the first `depth` levels is.
    std::string path(std::size_t depth) const {
        std::string out;
        for (std::size_t i = 0; i < depth && i < levels_.size(); ++i) {
            if (levels_[i].object)
                out += (out.empty() ? "" : ".") + levels_[i].key;
            else
                out += "[" + std::to_string(levels_[i].index) + "]";
        }
        return out.empty() ? std::string(root_name_) : "`" + out + "`";
    }
    void problem(std::string code, std::size_t offset, std::string message, std::string help) {
        constexpr std::size_t max_findings = 100;
        if (findings_.size() < max_findings)
            findings_.push_back({std::move(code), offset, std::move(message), std::move(help)});
    }

    // Completes the number whose last part is `s` (in number_); returns where it starts.
    std::size_t number_done(boost::json::string_view s) {
        if (number_.empty()) number_at_ = where(s);
        number_.append(s.data(), s.size());
        return number_at_;
    }

    std::string_view text_;
    std::string_view root_name_;
    std::size_t max_string_bytes_;
    boost::json::value_stack values_;
    std::vector<level> levels_;
    std::string key_;
    std::string number_;
    std::size_t key_at_ = 0, string_at_ = 0, number_at_ = 0, last_ = 0;
    bool in_string_ = false, nul_ = false;
    std::vector<json_finding> findings_;
};

}  // namespace

json_read_result read_json(std::string_view text, std::string_view root_name, std::size_t max_depth,
                           std::size_t max_string_bytes) {
    json_read_result result;
    boost::json::parse_options options;
    options.max_depth = max_depth;
    boost::json::basic_parser<handler> parser(options, text, root_name, max_string_bytes);
    std::size_t used = parser.write_some(false, text.data(), text.size(), result.syntax);
    if (!result.syntax && used < text.size()) result.syntax = boost::json::error::extra_data;
    if (result.syntax) {
        result.syntax_offset = used;
        return result;
    }
    result.findings = std::move(parser.handler().findings());
    if (result.findings.empty()) result.value = parser.handler().release();
    return result;
}

}  // namespace agentctl
