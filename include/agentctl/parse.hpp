// YAML -> workflow model. Strict: every problem is a diagnostic with a location.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/spec.hpp>

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
};

/// Parses `source` (named `file_name` in diagnostics). Reports every problem found in one
/// pass. Sources larger than limits::max_document_bytes are refused without parsing.
parse_result parse_workflow(std::string_view source, std::string_view file_name);

/// Reads `path` (refusing files over limits::max_document_bytes before reading them whole)
/// and parses it. An unreadable file is a diagnostic with code "file_unreadable".
parse_result load_workflow(const std::string& path);

/// A JSON or YAML document holding one mapping, as given to `--inputs-file`.
struct inputs_result {
    std::optional<boost::json::object> inputs;
    diagnostics diags;
};
inputs_result load_inputs_file(const std::string& path);

/// `KEY=VALUE` from `--input`: VALUE parsed as JSON when it is valid JSON, else kept as a
/// string. Returns false (with a diagnostic) when there is no `=` or the key is empty.
bool parse_input_assignment(std::string_view text, std::string& key, boost::json::value& value,
                            diagnostics& diags);

}  // namespace agentctl
