// YAML -> workflow model. Strict: every problem is a diagnostic with a location.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace agentctl {

/// A parsed document, or nothing when it has errors. Warnings may accompany a document.
struct parse_result {
    std::optional<workflow> document;
    /// When the YAML was readable but the document has errors: what could be read (bad fields
    /// left at their defaults), so that semantic problems can be reported in the same pass.
    /// Never run it.
    std::optional<workflow> partial;
    diagnostics diags;
    /// load_workflow(): the bytes it read and parsed (what the workflow digest is of), so
    /// that a run's journal records exactly the document that ran.
    std::string source;
};

/// Parses `source` (named `file_name` in diagnostics). Reports every problem found in one
/// pass. Sources larger than limits::max_document_bytes are refused without parsing.
parse_result parse_workflow(std::string_view source, std::string_view file_name);

/// Reads `path` (refusing files over limits::max_document_bytes before reading them whole)
/// and parses it, then reads the variables files it names (load_workflow_vars(), from the
/// workflow's folder). An unreadable file is a diagnostic with code "file_unreadable".
parse_result load_workflow(const std::string& path);

/// A variables file: a YAML or JSON mapping of data (docs/DESIGN.md, "Variables").
struct vars_result {
    std::optional<boost::json::object> vars;
    diagnostics diags;
};
/// Reads a variables file of at most limits::max_vars_file_bytes. Refused: anything but a
/// mapping, duplicate keys, the include keys (`varsFiles`, `include`, `includes`) and the
/// reserved names (is_reserved_variable()); each problem located in the file.
vars_result load_vars_file(const std::string& path);
/// The same from text already read; `file` names it in diagnostics.
vars_result parse_vars(std::string_view text, const std::string& file);

/// Reads the variables files `wf` names (spec.varsFiles, then each task's varsFiles, in
/// order) from `dir`, the workflow's folder, into wf.loaded_vars_files; a problem reading one
/// is a diagnostic at the field that names it. `captured` (file name as written -> mapping: a
/// resumed run's, recorded when it started) is used instead of the file where it has the name.
/// At most limits::max_vars_files files and limits::max_vars_total_bytes in all.
void load_workflow_vars(workflow& wf, const std::string& dir, diagnostics& diags,
                        const boost::json::object* captured = nullptr);

/// `KEY=JSON` from `--var`: VALUE must be valid JSON (a string is `'"text"'`); KEY must be a
/// name that is not reserved. Returns false (with a diagnostic) otherwise.
bool parse_var_assignment(std::string_view text, std::string& key, boost::json::value& value,
                          diagnostics& diags);

/// A JSON or YAML document holding one mapping, as given to `--inputs-file`.
struct inputs_result {
    std::optional<boost::json::object> inputs;
    diagnostics diags;
};
/// Reads an inputs file (`-`: standard input) of at most limits::max_inputs_file_bytes.
/// JSON is read with Boost.JSON; text that is not JSON is read as YAML (up to
/// limits::max_yaml_inputs_file_bytes). Duplicate keys are errors either way, located.
inputs_result load_inputs_file(const std::string& path);
/// The same from text already read; `file` names it in diagnostics.
inputs_result parse_inputs(std::string_view text, const std::string& file);

/// How the items of an items file are separated.
enum class item_separator {
    line,  ///< one item per line: `\n` ends an item, a `\r` before it is dropped
    nul,   ///< `\0` ends an item; items are kept byte for byte
};

/// The items of `--items NAME=FILE`: a JSON array of strings, or nothing on errors.
struct items_result {
    std::optional<boost::json::array> items;
    diagnostics diags;
};
/// Reads FILE (`-`: standard input) in chunks. A last item without a separator counts; an
/// empty file has no items. An item longer than limits::max_item_bytes, invalid UTF-8 (and,
/// between lines, a NUL byte) is a diagnostic naming the item's line (or number); no more than
/// that much of an item is ever held.
items_result load_items_file(const std::string& path, item_separator separator = item_separator::line);

/// Splits items arriving in chunks of any size (used by load_items_file, and by tests).
class items_splitter {
public:
    items_splitter(std::string file, item_separator separator)
        : file_(std::move(file)), separator_(separator) {}
    void feed(std::string_view chunk);
    /// Ends the input: the items, or the diagnostics.
    items_result finish();

private:
    void take(std::string_view item, bool too_long);

    std::string file_;
    item_separator separator_;
    std::string partial_;            ///< the item read so far, at most max_item_bytes + 1 bytes
    bool partial_too_long_ = false;  ///< its bytes beyond that were dropped
    boost::json::array items_;
    diagnostics diags_;
    std::size_t reported_ = 0;
};

/// `KEY=VALUE` from `--input`: VALUE parsed as JSON when it is valid JSON, else kept as a
/// string. Returns false (with a diagnostic) when there is no `=` or the key is empty.
bool parse_input_assignment(std::string_view text, std::string& key, boost::json::value& value,
                            diagnostics& diags);

}  // namespace agentctl
