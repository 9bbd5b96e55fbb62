// JSON Schema for extension.process actions and task outputs, through valijson (draft 7;
// draft 4 when declared).
//
// The front end compiles every `inputSchema` and `outputSchema` at `check` time; the engine
// validates a task's input and an extension's (or a task's) output with the same compiled schema. Pure: no
// remote references are fetched (a `$ref` to another document is an error), nothing is read.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/value.hpp>

#include <memory>
#include <string>
#include <vector>

namespace agentctl {

/// One reason a value does not satisfy a schema.
struct schema_error {
    std::string pointer;  ///< JSON pointer (RFC 6901) into the value: "" is the root, "/items/0"
    std::string message;
};

/// A compiled JSON Schema document. validate() may add to a cache of compiled regexes, so one
/// instance must not be used by two threads at once.
class json_schema {
public:
    /// Compiles `document` (an object or a boolean). On failure returns nullptr and sets
    /// `error` (valijson's reason) and `pointer` (JSON pointer into `document` of the part at
    /// fault, when known; "" otherwise).
    static std::unique_ptr<json_schema> compile(const boost::json::value& document, std::string& error,
                                                std::string& pointer);

    /// A place in a schema document that is at fault, and why.
    struct problem {
        std::string error;
        std::string pointer;  ///< JSON pointer into the document; "" for the root
    };
    /// Every problem of `document` (at most `max`), not only the first: once one is found, the
    /// part at fault is set aside (the keyword removed, or the subschema replaced by `{}`) in a
    /// copy, and the rest is checked again. Empty when compile() would succeed.
    static std::vector<problem> problems(const boost::json::value& document, std::size_t max = 20);

    ~json_schema();
    json_schema(const json_schema&) = delete;
    json_schema& operator=(const json_schema&) = delete;

    /// Every problem of `value`, in document order; empty when it is valid. Never throws but
    /// for allocation failure.
    std::vector<schema_error> validate(const boost::json::value& value) const;

private:
    struct impl;
    explicit json_schema(std::unique_ptr<impl> p);
    std::unique_ptr<impl> impl_;
};

/// "at /a/b: message; at /c: message" for at most `max` errors (and "(N more)").
std::string schema_errors_text(const std::vector<schema_error>& errors, std::size_t max = 5);

/// Front-end rule: every extension.process `inputSchema` and `outputSchema`, and every task's
/// `outputSchema`, compiles (`invalid_schema`, one per problem, located at the part of the
/// schema at fault when known).
void check_schemas(const workflow& wf, diagnostics& diags);

}  // namespace agentctl
