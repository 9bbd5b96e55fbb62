// Template functions that also say which diagnostic code a failure maps to. The public
// functions in <agentctl/template.hpp> wrap these and keep only the message.
#pragma once

#include <agentctl/template.hpp>

#include <boost/json/value.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::detail {

/// A failed parse, resolve or render: a diagnostic code and a message.
struct template_error {
    std::string code;  ///< template_syntax, template_unknown_root, template_missing_path, ...
    std::string message;
};

std::optional<template_string> parse_template(std::string_view text, template_error& error);
const boost::json::value* resolve(const template_ref& ref, const render_context& ctx, template_error& error);
std::optional<boost::json::value> render(const boost::json::value& value, const render_context& ctx,
                                         template_error& error);
std::optional<std::string> render_text(std::string_view text, const render_context& ctx,
                                       template_error& error);
std::optional<condition> parse_condition(std::string_view text, template_error& error);
/// Evaluates a test: == and != compare JSON values with their types; < <= > >= need numbers
/// (template_not_number); a missing path is template_missing_path.
std::optional<bool> evaluate(const condition& c, const render_context& ctx, template_error& error);

/// Renders a parsed string: a single reference keeps its type, anything else is text.
std::optional<boost::json::value> render_parsed(const template_string& ts, const render_context& ctx,
                                                template_error& error);
/// Renders a parsed string that must be text (argv elements, cwd).
std::optional<std::string> render_parsed_text(const template_string& ts, const render_context& ctx,
                                              template_error& error);

/// Calls `visit(sub_path, text)` for every string holding `${{` in `value`, in document
/// order. `sub_path` is relative to `value`: "" for the value itself, else `.key` / `[i]`
/// steps. Stops and returns false as soon as `visit` does.
bool for_each_templated(const boost::json::value& value,
                        const std::function<bool(const std::string& sub_path, std::string_view text)>& visit);

/// Text of a scalar as embedded in a string: strings as is, numbers as JSON, true/false/null.
std::string scalar_text(const boost::json::value& v);

/// `root.a.b` for messages.
std::string ref_text(const template_ref& ref);

}  // namespace agentctl::detail
