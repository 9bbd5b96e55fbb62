// The front end's only file access: the workflow, the inputs file and items files (`-` is
// standard input for the last two).
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value_stack.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unordered_set>

namespace agentctl {
namespace {

constexpr std::string_view stdin_name = "<stdin>";

std::string display_name(const std::string& path) {
    return path == "-" ? std::string(stdin_name) : path;
}

void too_large(diagnostics& diags, const std::string& name, std::uintmax_t size, std::uint64_t cap,
               std::string help) {
    std::string size_text = size > cap ? std::to_string(size) + " bytes" : "larger";
    diags.error("file_too_large", "",
                name + " is " + size_text + ", more than the limit of " + std::to_string(cap) + " bytes",
                std::move(help), {name, 0, 0});
}

// Opens `path` (`-`: standard input) for reading, or reports why not.
bool open_input(const std::string& path, std::ifstream& in, diagnostics& diags) {
    namespace fs = std::filesystem;
    const std::string name = display_name(path);
    const std::string real = path == "-" ? "/dev/stdin" : path;
    std::error_code ec;
    auto status = fs::status(real, ec);
    if (ec) {
        diags.error("file_unreadable", "", "cannot read " + name + ": " + ec.message(), "", {name, 0, 0});
        return false;
    }
    if (fs::is_directory(status)) {
        diags.error("file_unreadable", "", "cannot read " + name + ": it is a directory", "", {name, 0, 0});
        return false;
    }
    in.open(real, std::ios::binary);
    if (!in) {
        diags.error("file_unreadable", "", "cannot open " + name,
                    "check that the file exists and is readable", {name, 0, 0});
        return false;
    }
    return true;
}

// Reads `path` whole unless it is larger than `cap`: a regular file's size is checked before
// reading, and no more than cap + 1 bytes are ever read (the file may grow, or be a pipe).
bool read_capped(const std::string& path, std::uint64_t cap, std::string help, std::string& out,
                 diagnostics& diags) {
    namespace fs = std::filesystem;
    const std::string name = display_name(path);
    std::ifstream in;
    if (!open_input(path, in, diags)) return false;
    std::error_code ec;
    if (path != "-" && fs::is_regular_file(path, ec)) {
        auto size = fs::file_size(path, ec);
        if (!ec && size > cap) {
            too_large(diags, name, size, cap, std::move(help));
            return false;
        }
        if (!ec) out.reserve(static_cast<std::size_t>(size) + 1);
    }
    // Grows as data arrives: a pipe of a few bytes does not cost the cap in memory.
    constexpr std::size_t chunk = 1 << 16;
    for (;;) {
        std::size_t used = out.size();
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, cap + 1 - used));
        out.resize(used + want);
        in.read(out.data() + used, static_cast<std::streamsize>(want));
        out.resize(used + static_cast<std::size_t>(in.gcount()));
        if (in.bad()) {
            diags.error("file_unreadable", "", "error while reading " + name, "", {name, 0, 0});
            return false;
        }
        if (out.size() > cap) {
            too_large(diags, name, 0, cap, std::move(help));
            return false;
        }
        if (!in) return true;  // end of file
    }
}

// Line and column (code points) of byte `offset`, for diagnostics about JSON text.
source_location locate(std::string_view text, std::size_t offset, const std::string& file) {
    offset = std::min(offset, text.size());
    int line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < offset; ++i)
        if (text[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    return {file, line, yaml::column_of(text, line_start, offset)};
}

/// Builds inputs from Boost.JSON's parser events (through its value_stack, as
/// boost::json::parser does) and adds what that parser does not check: duplicate keys, NUL
/// characters, and numbers JSON data here cannot hold, each with the place it was written.
class inputs_handler {
public:
    static constexpr std::size_t max_object_size = boost::json::object::max_size();
    static constexpr std::size_t max_array_size = boost::json::array::max_size();
    static constexpr std::size_t max_key_size = boost::json::string::max_size();
    static constexpr std::size_t max_string_size = boost::json::string::max_size();

    explicit inputs_handler(std::string_view text) : text_(text) {}

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
    bool on_string(boost::json::string_view s, std::size_t, boost::system::error_code&) {
        if (!in_string_) string_at_ = quote_of(s);
        in_string_ = false;
        if (nul_ || s.find('\0') != boost::json::string_view::npos)
            problem("nul_byte", string_at_, path(levels_.size()) + " contains a NUL character",
                    "remove the \\u0000 escape");
        nul_ = false;
        values_.push_string(s);
        after_value();
        return true;
    }
    bool on_number_part(boost::json::string_view, boost::system::error_code&) { return true; }
    bool on_int64(std::int64_t i, boost::json::string_view s, boost::system::error_code&) {
        where(s);
        values_.push_int64(i);
        after_value();
        return true;
    }
    bool on_uint64(std::uint64_t u, boost::json::string_view s, boost::system::error_code&) {
        where(s);
        values_.push_uint64(u);
        after_value();
        return true;
    }
    bool on_double(double d, boost::json::string_view s, boost::system::error_code&) {
        std::size_t at = where(s);
        bool integer = s.find_first_of(".eE") == boost::json::string_view::npos;
        if (integer || !std::isfinite(d) || (d == 0 && s.find_first_of("123456789") < s.find_first_of("eE")))
            problem("out_of_range", at,
                    path(levels_.size()) + ": " + std::string(s.data(), std::min<std::size_t>(s.size(), 40)) +
                        (integer ? " does not fit in 64 bits" : " is out of the range of a double"),
                    "write a smaller number, or a string");
        values_.push_double(d);
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

    struct finding {
        std::string code;
        std::size_t offset;
        std::string message;
        std::string help;
    };
    const std::vector<finding>& findings() const { return findings_; }
    /// The last offset known to be inside the text: near the place of a parse error.
    std::size_t last_offset() const { return last_; }

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
        return out.empty() ? "the inputs" : "`" + out + "`";
    }
    void problem(std::string code, std::size_t offset, std::string message, std::string help) {
        constexpr std::size_t max_findings = 100;
        if (findings_.size() < max_findings)
            findings_.push_back({std::move(code), offset, std::move(message), std::move(help)});
    }

    std::string_view text_;
    boost::json::value_stack values_;
    std::vector<level> levels_;
    std::string key_;
    std::size_t key_at_ = 0, string_at_ = 0, last_ = 0;
    bool in_string_ = false, nul_ = false;
    std::vector<finding> findings_;
};

// The text as JSON: true when it was JSON (the result, or its problems, are in `result`).
bool parse_inputs_json(std::string_view text, const std::string& file, inputs_result& result,
                       boost::system::error_code& error, std::size_t& error_offset) {
    boost::json::parse_options options;
    options.max_depth = static_cast<std::size_t>(yaml::max_depth);
    boost::json::basic_parser<inputs_handler> parser(options, text);
    std::size_t used = parser.write_some(false, text.data(), text.size(), error);
    if (!error && used < text.size()) error = boost::json::error::extra_data;
    if (error) {
        error_offset = used;
        return false;
    }
    for (const auto& f : parser.handler().findings())
        result.diags.error(f.code, "", f.message, f.help, locate(text, f.offset, file));
    if (result.diags.has_errors()) return true;
    boost::json::value v = parser.handler().release();
    if (!v.is_object()) {
        result.diags.error("not_a_mapping", "",
                           std::string("an inputs file holds a mapping, found ") +
                               (v.is_array() ? "an array" : "a single value"),
                           "write a mapping of input names to values", locate(text, 0, file));
        return true;
    }
    result.inputs = std::move(v.get_object());
    return true;
}

void parse_inputs_yaml(std::string_view text, const std::string& path, inputs_result& result) {
    auto tree = read_yaml_tree(text, path, result.diags);
    if (!tree) return;
    tree_reader reader(*tree, path, result.diags, nullptr);
    if (!reader.has_root()) {
        result.diags.error("not_a_mapping", "", "the inputs file is empty",
                           "write a mapping of input names to values", {path, 1, 1});
        return;
    }
    place root = reader.root();
    if (reader.node(root).kind != yaml::node::kind_t::mapping) {
        reader.error(root, "not_a_mapping", "an inputs file holds a mapping, found " + reader.describe(root),
                     "write a mapping of input names to values");
        return;
    }
    auto inputs = reader.json_object(root);
    if (!result.diags.has_errors()) result.inputs = std::move(inputs);
}

}  // namespace

parse_result load_workflow(const std::string& path) {
    std::string text;
    parse_result result;
    if (!read_capped(path, limits::max_document_bytes,
                     "split the workflow, or move large data into an inputs file", text, result.diags))
        return result;
    result = parse_workflow(text, path);
    result.source = std::move(text);
    return result;
}

inputs_result parse_inputs(std::string_view text, const std::string& file) {
    inputs_result result;
    boost::system::error_code error;
    std::size_t error_offset = 0;
    if (parse_inputs_json(text, file, result, error, error_offset)) return result;
    // Not JSON: YAML, unless the name says JSON, or the text is too large for the YAML parser.
    const bool json_name = file.size() >= 5 && file.compare(file.size() - 5, 5, ".json") == 0;
    const bool yaml_size = text.size() <= limits::max_yaml_inputs_file_bytes;
    if (!json_name && yaml_size) {
        parse_inputs_yaml(text, file, result);
        return result;
    }
    std::string message = error == boost::json::error::too_deep
                              ? "the inputs nest deeper than " + std::to_string(yaml::max_depth) + " levels"
                              : "invalid JSON: " + error.message();
    std::string help = json_name ? "check the JSON syntax here (a file named *.json is read as JSON only)"
                                 : "write JSON (YAML inputs files are read up to " +
                                       std::to_string(limits::max_yaml_inputs_file_bytes) + " bytes)";
    result.diags.error(error == boost::json::error::too_deep ? "yaml_syntax" : "json_syntax", "", message,
                       help, locate(text, error_offset, file));
    return result;
}

inputs_result load_inputs_file(const std::string& path) {
    inputs_result result;
    std::string text;
    if (!read_capped(path, limits::max_inputs_file_bytes, "pass large item lists with --items", text,
                     result.diags))
        return result;
    return parse_inputs(text, display_name(path));
}

void items_splitter::take(std::string_view item) {
    const std::size_t number = items_.size() + 1;
    if (separator_ == item_separator::line && !item.empty() && item.back() == '\r') item.remove_suffix(1);
    std::string_view problem;
    if (separator_ == item_separator::line && item.find('\0') != std::string_view::npos)
        problem = "contains a NUL byte";
    else if (!is_valid_utf8(item))
        problem = "is not valid UTF-8";
    if (!problem.empty()) {
        constexpr std::size_t max_reported = 20;
        if (++reported_ <= max_reported) {
            std::string what = separator_ == item_separator::line ? "line " + std::to_string(number)
                                                                  : "item " + std::to_string(number);
            diags_.error(problem.front() == 'c' ? "nul_byte" : "invalid_utf8", "",
                         what + " of " + file_ + " " + std::string(problem),
                         separator_ == item_separator::line
                             ? "items are text, one per line; use --null for NUL-separated names"
                             : "items must be UTF-8 text",
                         {file_, separator_ == item_separator::line ? static_cast<int>(number) : 0, 0});
        }
    }
    if (diags_.has_errors()) {
        items_.emplace_back(nullptr);  // keeps the count; the array is never returned
        return;
    }
    items_.emplace_back(boost::json::string(item));
}

void items_splitter::feed(std::string_view chunk) {
    const char end = separator_ == item_separator::nul ? '\0' : '\n';
    for (;;) {
        auto at = chunk.find(end);
        if (at == std::string_view::npos) break;
        if (partial_.empty()) {
            take(chunk.substr(0, at));
        } else {
            partial_.append(chunk.substr(0, at));
            take(partial_);
            partial_.clear();
        }
        chunk.remove_prefix(at + 1);
    }
    partial_.append(chunk);
}

items_result items_splitter::finish() {
    if (!partial_.empty()) {
        take(partial_);
        partial_.clear();
    }
    items_result r;
    if (reported_ > 20)
        diags_.error("invalid_utf8", "",
                     std::to_string(reported_ - 20) + " more items of " + file_ + " are invalid", "",
                     {file_, 0, 0});
    if (!diags_.has_errors()) r.items = std::move(items_);
    r.diags = std::move(diags_);
    return r;
}

items_result load_items_file(const std::string& path, item_separator separator) {
    const std::string name = display_name(path);
    std::ifstream in;
    items_result failed;
    if (!open_input(path, in, failed.diags)) return failed;
    items_splitter splitter(name, separator);
    std::string buffer(1 << 16, '\0');
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        splitter.feed(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())));
    }
    if (in.bad()) {
        failed.diags.error("file_unreadable", "", "error while reading " + name, "", {name, 0, 0});
        return failed;
    }
    return splitter.finish();
}

bool parse_input_assignment(std::string_view text, std::string& key, boost::json::value& value,
                            diagnostics& diags) {
    auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) {
        diags.error(
            "invalid_input_assignment", "",
            "--input " + std::string(text) + (eq == 0 ? ": the name is empty" : ": expected KEY=VALUE"),
            "write --input NAME=VALUE; VALUE is read as JSON when it is valid JSON, else as a string");
        return false;
    }
    std::string_view raw = text.substr(eq + 1);
    if (text.find('\0') != std::string_view::npos) {
        diags.error("nul_byte", "", "--input " + std::string(text.substr(0, eq)) + " contains a NUL byte");
        return false;
    }
    if (!is_valid_utf8(text)) {
        diags.error("invalid_input_assignment", "",
                    "--input " + std::string(text.substr(0, eq)) + " is not valid UTF-8");
        return false;
    }
    key = std::string(text.substr(0, eq));
    boost::system::error_code ec;
    auto parsed = boost::json::parse(raw, ec);
    value = ec ? boost::json::value(boost::json::string(raw)) : std::move(parsed);
    return true;
}

}  // namespace agentctl
