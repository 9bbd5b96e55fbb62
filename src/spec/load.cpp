// The front end's only file access: the workflow, the inputs file and items files (`-` is
// standard input for the last two).
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "spec/reader.hpp"
#include "spec/yaml_tree.hpp"

#include <boost/json/error.hpp>

#include <filesystem>
#include <fstream>

namespace agentctl {
namespace {

constexpr std::string_view stdin_name = "<stdin>";

// Why limits::max_item_bytes, for every diagnostic that refuses a longer item.
constexpr const char* item_too_long_help =
    "an item becomes an argument, and Linux passes no argument longer than 131071 bytes "
    "(MAX_ARG_STRLEN); put large data in a file and pass its name";

std::string display_name(const std::string& path) {
    return path == "-" ? std::string(stdin_name) : path;
}

// The folder of a file name as given: "" for a bare name.
std::string folder_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return "";
    return slash == 0 ? "/" : path.substr(0, slash);
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

// The text as JSON: true when it was JSON (the result, or its problems, are in `result`).
bool parse_inputs_json(std::string_view text, const std::string& file, inputs_result& result,
                       boost::system::error_code& error, std::size_t& error_offset) {
    json_read_result read =
        read_json(text, "the inputs", static_cast<std::size_t>(yaml::max_depth), limits::max_item_bytes);
    if (read.syntax) {
        error = read.syntax;
        error_offset = read.syntax_offset;
        return false;
    }
    for (const auto& f : read.findings)
        result.diags.error(f.code, "", f.message, f.code == "item_too_long" ? item_too_long_help : f.help,
                           locate(text, f.offset, file));
    if (!read.value) return true;
    if (!read.value->is_object()) {
        result.diags.error("not_a_mapping", "",
                           std::string("an inputs file holds a mapping, found ") +
                               (read.value->is_array() ? "an array" : "a single value"),
                           "write a mapping of input names to values", locate(text, 0, file));
        return true;
    }
    result.inputs = std::move(read.value->get_object());
    return true;
}

void parse_inputs_yaml(std::string_view text, const std::string& path, inputs_result& result) {
    auto tree = read_yaml_tree(text, path, result.diags);
    if (!tree) return;
    for (const auto& n : tree->nodes)
        if (n.kind == yaml::node::kind_t::scalar && n.text.size() > limits::max_item_bytes) {
            result.diags.error("item_too_long", "",
                               "a string of " + std::to_string(n.text.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(limits::max_item_bytes) + " bytes per string",
                               item_too_long_help, {path, n.line, n.column});
            return;
        }
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
    workflow* wf = result.document ? &*result.document : result.partial ? &*result.partial : nullptr;
    if (wf) {
        diagnostics vars_diags;
        load_workflow_vars(*wf, folder_of(path), vars_diags);
        // A document whose variables cannot be read is not runnable: it stays partial, so that
        // check_document still reports its other problems.
        if (vars_diags.has_errors() && result.document) {
            result.partial = std::move(result.document);
            result.document.reset();
        }
        result.diags.append(vars_diags);
    }
    return result;
}

vars_result parse_vars(std::string_view text, const std::string& file) {
    inputs_result read = parse_inputs(text, file);
    vars_result result;
    result.diags = std::move(read.diags);
    // The same reader as an inputs file: its messages say "inputs"; say what this is.
    for (auto& d : result.diags.items()) {
        if (d.code != "not_a_mapping") continue;
        d.message = "a variables file holds a mapping of names to values";
        d.help = "write `name: value` lines (YAML) or one JSON object";
    }
    if (!read.inputs) return result;
    for (const auto& m : *read.inputs) {
        std::string_view key(m.key().data(), m.key().size());
        std::string problem, help;
        if (key == "varsFiles" || key == "include" || key == "includes") {
            problem = "`" + std::string(key) + "`: a variables file cannot include other files";
            help = "list every file in varsFiles or pass each with --vars-file";
        } else if (is_reserved_variable(key)) {
            problem = "variable `" + std::string(key) + "` is reserved: the engine binds vars." +
                      std::string(key) + " itself";
            help = "rename the variable";
        }
        if (!problem.empty())
            result.diags.error(key == "varsFiles" || key == "include" || key == "includes"
                                   ? "invalid_vars_file"
                                   : "reserved_variable",
                               "", problem, help, {file, 0, 0});
    }
    if (!result.diags.has_errors()) result.vars = std::move(*read.inputs);
    return result;
}

vars_result load_vars_file(const std::string& path) {
    vars_result result;
    std::string text;
    if (!read_capped(path, limits::max_vars_file_bytes, "keep variables files small; put data in inputs",
                     text, result.diags))
        return result;
    return parse_vars(text, display_name(path));
}

void load_workflow_vars(workflow& wf, const std::string& dir, diagnostics& diags,
                        const boost::json::object* captured) {
    std::vector<std::pair<std::string, std::string>> named;  // where, file
    for (std::size_t i = 0; i < wf.vars_files.size(); ++i)
        named.emplace_back("spec.varsFiles[" + std::to_string(i) + "]", wf.vars_files[i]);
    for (std::size_t t = 0; t < wf.tasks.size(); ++t)
        for (std::size_t i = 0; i < wf.tasks[t].vars_files.size(); ++i)
            named.emplace_back("spec.tasks[" + std::to_string(t) + "].varsFiles[" + std::to_string(i) + "]",
                               wf.tasks[t].vars_files[i]);
    wf.loaded_vars_files.clear();
    std::uint64_t total = 0;
    for (std::size_t n = 0; n < named.size(); ++n) {
        auto& [where, file] = named[n];
        vars_file loaded{file, where, std::nullopt};
        const source_location at = wf.where(where);
        if (n == limits::max_vars_files) {
            diags.error(
                "too_many_vars_files", where,
                "the workflow names more than " + std::to_string(limits::max_vars_files) + " variables files",
                "merge them into fewer files", at);
        }
        if (n >= limits::max_vars_files) {
            wf.loaded_vars_files.push_back(std::move(loaded));
            continue;
        }
        const boost::json::value* kept = captured ? captured->if_contains(file) : nullptr;
        vars_result r;
        if (kept && kept->is_object()) {
            r.vars = kept->get_object();
        } else {
            const std::string path = dir.empty() || dir == "." ? file : dir + "/" + file;
            std::error_code ec;
            auto size = std::filesystem::file_size(path, ec);
            if (!ec) total += size;
            r = load_vars_file(path);
        }
        for (auto& d : r.diags.items()) {
            // A problem with the file as a whole points at the field that names it.
            if (d.location.line == 0) {
                d.message = "variables file `" + file + "`: " + d.message;
                d.location = at;
                d.path = where;
            }
            diags.add(std::move(d));
        }
        if (total > limits::max_vars_total_bytes) {
            diags.error("file_too_large", where,
                        "the variables files hold more than " + std::to_string(limits::max_vars_total_bytes) +
                            " bytes in all",
                        "keep variables small; put data in inputs", at);
            r.vars.reset();
            total = 0;  // said once
        }
        loaded.values = std::move(r.vars);
        wf.loaded_vars_files.push_back(std::move(loaded));
    }
}

bool parse_var_assignment(std::string_view text, std::string& key, boost::json::value& value,
                          diagnostics& diags) {
    auto eq = text.find('=');
    const std::string name(text.substr(0, eq == std::string_view::npos ? text.size() : eq));
    const std::string help = "write --var NAME=JSON: a number, true, or a quoted string such as 'env=\"qa\"'";
    if (eq == std::string_view::npos || eq == 0) {
        diags.error("invalid_var_assignment", "",
                    "--var " + std::string(text) + (eq == 0 ? ": the name is empty" : ": expected NAME=JSON"),
                    help);
        return false;
    }
    if (!is_valid_utf8(text) || text.find('\0') != std::string_view::npos) {
        diags.error("invalid_var_assignment", "", "--var " + name + " is not valid UTF-8 text", help);
        return false;
    }
    if (is_reserved_variable(name)) {
        diags.error("reserved_variable", "",
                    "--var " + name + ": the name is reserved: the engine binds vars." + name + " itself",
                    "choose another name");
        return false;
    }
    json_read_result read = read_json(text.substr(eq + 1), "the value");
    if (read.syntax || !read.value) {
        diags.error("invalid_var_assignment", "",
                    "--var " + name + ": `" + std::string(text.substr(eq + 1)) + "` is not JSON", help);
        return false;
    }
    if (!read.findings.empty()) {
        diags.error("invalid_var_assignment", "", "--var " + name + ": " + read.findings.front().message,
                    read.findings.front().help);
        return false;
    }
    key = name;
    value = std::move(*read.value);
    return true;
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

void items_splitter::take(std::string_view item, bool too_long) {
    const std::size_t number = items_.size() + 1;
    if (separator_ == item_separator::line && !item.empty() && item.back() == '\r') item.remove_suffix(1);
    const bool line = separator_ == item_separator::line;
    std::string_view code, problem;
    std::string help;
    if (too_long || item.size() > limits::max_item_bytes) {
        code = "item_too_long";
        problem = "is longer than the limit";
        help = item_too_long_help;
    } else if (line && item.find('\0') != std::string_view::npos) {
        code = "nul_byte";
        problem = "contains a NUL byte";
        help = "items are text, one per line; use --null for NUL-separated names";
    } else if (!is_valid_utf8(item)) {
        code = "invalid_utf8";
        problem = "is not valid UTF-8";
        help = line ? "items are text, one per line; use --null for NUL-separated names"
                    : "items must be UTF-8 text";
    }
    if (!problem.empty()) {
        constexpr std::size_t max_reported = 20;
        if (++reported_ <= max_reported) {
            std::string what = (line ? "line " : "item ") + std::to_string(number);
            std::string message = what + " of " + file_ + " " + std::string(problem);
            if (code == "item_too_long")
                message += " of " + std::to_string(limits::max_item_bytes) + " bytes per item";
            diags_.error(std::string(code), "", message, help,
                         {file_, line ? static_cast<int>(number) : 0, 0});
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
    // An item's bytes beyond the limit (plus one, for a `\r` the line may end with) are dropped
    // as they arrive: a 100 MB line costs no more memory than a long item.
    constexpr std::size_t keep = limits::max_item_bytes + 1;
    auto append = [&](std::string_view part) {
        std::size_t room = keep - std::min(keep, partial_.size());
        if (part.size() > room) partial_too_long_ = true;
        partial_.append(part.substr(0, room));
    };
    for (;;) {
        auto at = chunk.find(end);
        if (at == std::string_view::npos) break;
        if (partial_.empty() && !partial_too_long_) {
            take(chunk.substr(0, at), false);
        } else {
            append(chunk.substr(0, at));
            take(partial_, partial_too_long_);
            partial_.clear();
            partial_too_long_ = false;
        }
        chunk.remove_prefix(at + 1);
    }
    append(chunk);
}

items_result items_splitter::finish() {
    if (!partial_.empty() || partial_too_long_) {
        take(partial_, partial_too_long_);
        partial_.clear();
        partial_too_long_ = false;
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
    json_read_result read = read_json(raw, "the value");
    if (read.syntax) {
        value = boost::json::string(raw);
        return true;
    }
    if (!read.findings.empty()) {
        const json_finding& f = read.findings.front();
        diags.error("invalid_input_assignment", "", "--input " + key + ": " + f.message, f.help);
        return false;
    }
    value = std::move(*read.value);
    return true;
}

}  // namespace agentctl
