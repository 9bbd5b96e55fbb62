// `${{ root.path }}` templates and `when` conditions.
//
// Roots: `inputs.`, `vars.` (variables and foreach/matrix bindings), `with.` (the task's
// input, in action args/cwd only) and `tasks.<id>.output.`. Path segments are [A-Za-z0-9_-]+;
// a segment of digits also indexes an array. A string that is exactly one template keeps the
// JSON type of the value; templates embedded in text take scalars only. A string that is
// exactly one test (`${{ not path }}`, `${{ path == literal }}`, ...) renders a boolean, as
// the reference's do. Rendering is one pass over the original text: rendered values are data
// and are never expanded again.
#pragma once

#include <boost/json/value.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

enum class template_root { inputs, vars, with, tasks };

/// `vars.jobSlot`: the job slot a task runs in, 1..jobs, the lowest one free when it starts
/// and held across its retries (GNU parallel's `{%}`). The engine binds it as an attempt is
/// dispatched, so it may be used in action args and cwd only (docs/DESIGN.md, "Job slots").
inline constexpr std::string_view job_slot_var = "jobSlot";

/// One reference inside a template string.
struct template_ref {
    template_root root = template_root::inputs;
    std::vector<std::string> path;  ///< after the root; for tasks: {id, "output", ...}
    std::string text;               ///< as written between `${{` and `}}`, trimmed

    /// The referenced task id (root == tasks), else "".
    std::string_view task_id() const;
    /// Whether it is `vars.jobSlot`.
    bool is_job_slot() const {
        return root == template_root::vars && path.size() == 1 && path[0] == job_slot_var;
    }
};

/// A `when` expression, or a test in a template: `path`, `not path`, or `path OP literal`
/// with OP one of == != < <= > >=. The expression may also be wrapped in `${{ }}`.
struct condition {
    enum class op_t { truthy, falsy, eq, ne, lt, le, gt, ge };
    std::string expression;  ///< as written
    template_ref left;
    op_t op = op_t::truthy;
    boost::json::value right;  ///< literal; unused for truthy/falsy
};

/// A string split into literal text and references.
struct template_string {
    struct part {
        std::string literal;              ///< used when !ref
        std::optional<template_ref> ref;  ///< a reference
        /// A test of `ref` (`not path`, `path == literal`, ...): the part renders its boolean.
        /// Only ever the whole string.
        std::optional<condition> test;
    };
    std::vector<part> parts;

    bool has_refs() const;
    /// True when the whole string is one reference (it then keeps the value's JSON type).
    bool is_single_ref() const { return parts.size() == 1 && parts[0].ref.has_value(); }
};

/// Parses a string. Returns nothing and sets `error` on bad syntax or an unknown root.
std::optional<template_string> parse_template(std::string_view text, std::string& error);

/// True when `text` contains `${{`.
bool looks_templated(std::string_view text);

/// Every reference in a JSON value (strings searched recursively). Stops at the first
/// syntax error, which is returned in `error` with the dotted sub-path in `error_path`.
bool collect_refs(const boost::json::value& value, std::vector<template_ref>& refs, std::string& error,
                  std::string& error_path);

/// What templates can see while rendering.
struct render_context {
    const boost::json::value* inputs = nullptr;  ///< object
    const boost::json::value* vars = nullptr;    ///< object
    const boost::json::value* with = nullptr;    ///< any
    /// Output of a finished task, or nullptr when unknown/unavailable.
    std::function<const boost::json::value*(std::string_view task_id)> task_output;
};

/// Looks a reference up. Returns nullptr and sets `error` when the path is missing.
const boost::json::value* resolve(const template_ref& ref, const render_context& ctx, std::string& error);

/// Renders every template in `value`. Returns nothing and sets `error` when a path is missing
/// or an object/array is embedded in text.
std::optional<boost::json::value> render(const boost::json::value& value, const render_context& ctx,
                                         std::string& error);

/// Renders one string that must produce a string (argv elements, cwd). Scalars are
/// converted to text; objects and arrays are an error.
std::optional<std::string> render_text(std::string_view text, const render_context& ctx, std::string& error);

std::optional<condition> parse_condition(std::string_view text, std::string& error);

/// Evaluates a condition. == and != compare JSON values with their types; < <= > >= need
/// numbers on both sides. Missing paths are errors, not false.
std::optional<bool> evaluate(const condition& c, const render_context& ctx, std::string& error);

}  // namespace agentctl
