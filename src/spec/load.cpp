// The front end's only file access: the workflow and the inputs file, both size-capped.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include "spec/reader.hpp"

#include <boost/json/parse.hpp>

#include <filesystem>
#include <fstream>

namespace agentctl {
namespace {

void too_large(diagnostics& diags, const std::string& path, std::uintmax_t size) {
    std::string size_text = size > limits::max_document_bytes ? std::to_string(size) + " bytes" : "larger";
    diags.error("file_too_large", "",
                path + " is " + size_text + ", more than the limit of " +
                    std::to_string(limits::max_document_bytes) + " bytes",
                "split the document, or move large data elsewhere", {path, 0, 0});
}

// Reads `path` whole unless it is larger than the document cap: a regular file's size is
// checked before reading, and no more than cap + 1 bytes are ever read (the file may grow,
// or be a pipe).
bool read_capped(const std::string& path, std::string& out, diagnostics& diags) {
    namespace fs = std::filesystem;
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec) {
        diags.error("file_unreadable", "", "cannot read " + path + ": " + ec.message(), "", {path, 0, 0});
        return false;
    }
    if (fs::is_directory(status)) {
        diags.error("file_unreadable", "", "cannot read " + path + ": it is a directory", "", {path, 0, 0});
        return false;
    }
    if (fs::is_regular_file(status)) {
        auto size = fs::file_size(path, ec);
        if (!ec && size > limits::max_document_bytes) {
            too_large(diags, path, size);
            return false;
        }
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        diags.error("file_unreadable", "", "cannot open " + path,
                    "check that the file exists and is readable", {path, 0, 0});
        return false;
    }
    out.resize(limits::max_document_bytes + 1);
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    if (in.bad()) {
        diags.error("file_unreadable", "", "error while reading " + path, "", {path, 0, 0});
        return false;
    }
    out.resize(static_cast<std::size_t>(in.gcount()));
    if (out.size() > limits::max_document_bytes) {
        too_large(diags, path, 0);
        return false;
    }
    return true;
}

}  // namespace

parse_result load_workflow(const std::string& path) {
    std::string text;
    parse_result result;
    if (!read_capped(path, text, result.diags)) return result;
    return parse_workflow(text, path);
}

inputs_result load_inputs_file(const std::string& path) {
    inputs_result result;
    std::string text;
    if (!read_capped(path, text, result.diags)) return result;
    // JSON is read as YAML too: one parser, with duplicate keys and locations reported.
    auto tree = read_yaml_tree(text, path, result.diags);
    if (!tree) return result;
    tree_reader reader(*tree, path, result.diags, nullptr);
    if (!reader.has_root()) {
        result.diags.error("not_a_mapping", "", "the inputs file is empty",
                           "write a mapping of input names to values", {path, 1, 1});
        return result;
    }
    place root = reader.root();
    if (reader.node(root).kind != yaml::node::kind_t::mapping) {
        reader.error(root, "not_a_mapping", "an inputs file holds a mapping, found " + reader.describe(root),
                     "write a mapping of input names to values");
        return result;
    }
    auto inputs = reader.json_object(root);
    if (!result.diags.has_errors()) result.inputs = std::move(inputs);
    return result;
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
