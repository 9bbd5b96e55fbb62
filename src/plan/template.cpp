// `${{ path }}` templates and `when` conditions (docs/DESIGN.md, "Plan").
//
// A template string is parsed once into literal and reference parts; rendering walks those
// parts and copies values out. Nothing rendered is ever parsed again, so a value that itself
// contains `${{ x }}` stays literal text.
#include "plan/template_detail.hpp"

#include <agentctl/diagnostic.hpp>
#include <agentctl/json.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <charconv>

namespace agentctl {
namespace {

constexpr std::string_view open_mark = "${{";
constexpr std::string_view close_mark = "}}";

std::string_view trim(std::string_view s) {
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool is_segment_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool is_path_char(char c) {
    return is_segment_char(c) || c == '.';
}

std::string_view root_name(template_root r) {
    switch (r) {
        case template_root::inputs:
            return "inputs";
        case template_root::vars:
            return "vars";
        case template_root::with:
            return "with";
        case template_root::tasks:
            return "tasks";
    }
    return "";
}

std::string quoted(std::string_view s) {
    return "`" + std::string(s) + "`";
}

// Parses the text between `${{` and `}}` (already trimmed) as `root.seg.seg`.
bool parse_ref(std::string_view inner, template_ref& ref, detail::template_error& error) {
    ref.text = std::string(inner);
    if (inner.empty()) {
        error = {"template_syntax", "empty template `${{ }}`: write a path such as `inputs.name`"};
        return false;
    }
    for (char c : inner) {
        if (!is_path_char(c)) {
            error = {"template_syntax",
                     "template " + quoted(inner) +
                         " is not a path: only `root.a.b` with segments of letters, digits, "
                         "`_` and `-` is allowed (no functions, operators or spaces)"};
            return false;
        }
    }
    std::vector<std::string> segments;
    std::size_t start = 0;
    while (true) {
        std::size_t dot = inner.find('.', start);
        std::string_view seg =
            inner.substr(start, dot == std::string_view::npos ? inner.size() - start : dot - start);
        if (seg.empty()) {
            error = {"template_syntax", "template " + quoted(inner) + " has an empty path segment"};
            return false;
        }
        segments.emplace_back(seg);
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    const std::string& root = segments.front();
    if (root == "memory") {
        error = {"unsupported_feature", "template " + quoted(inner) +
                                            " reads working memory (`memory.`), a feature of the reference's "
                                            "agents; agentctl has no working memory"};
        return false;
    }
    if (root == "inputs") {
        ref.root = template_root::inputs;
    } else if (root == "vars") {
        ref.root = template_root::vars;
    } else if (root == "with") {
        ref.root = template_root::with;
    } else if (root == "tasks") {
        ref.root = template_root::tasks;
    } else {
        std::string hint = nearest(root, {"inputs", "vars", "with", "tasks"});
        error = {"template_unknown_root",
                 "template " + quoted(inner) + " uses the unknown root " + quoted(root) +
                     "; roots are `inputs.`, `vars.`, `with.` and `tasks.<id>.output.`" +
                     (hint.empty() ? std::string() : " (did you mean `" + hint + "`?)")};
        return false;
    }
    if (segments.size() < 2) {
        error = {"template_syntax", "template " + quoted(inner) + " needs a path after the root, e.g. `" +
                                        root + (root == "tasks" ? ".<id>.output`" : ".name`")};
        return false;
    }
    if (ref.root == template_root::tasks && (segments.size() < 3 || segments[2] != "output")) {
        error = {"template_syntax",
                 "template " + quoted(inner) +
                     ": a task reference is `tasks.<id>.output` or `tasks.<id>.output.<path>`"};
        return false;
    }
    ref.path.assign(std::make_move_iterator(segments.begin() + 1), std::make_move_iterator(segments.end()));
    return true;
}

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

bool is_number(const boost::json::value& v) {
    return v.is_int64() || v.is_uint64() || v.is_double();
}

double as_double(const boost::json::value& v) {
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    return v.get_double();
}

// -1, 0, 1. Integers compare exactly; anything with a double compares as doubles.
int compare_numbers(const boost::json::value& a, const boost::json::value& b) {
    if (!a.is_double() && !b.is_double()) {
        bool a_neg = a.is_int64() && a.get_int64() < 0;
        bool b_neg = b.is_int64() && b.get_int64() < 0;
        if (a_neg != b_neg) return a_neg ? -1 : 1;
        if (a_neg) {
            auto x = a.get_int64(), y = b.get_int64();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        auto x = a.is_int64() ? static_cast<std::uint64_t>(a.get_int64()) : a.get_uint64();
        auto y = b.is_int64() ? static_cast<std::uint64_t>(b.get_int64()) : b.get_uint64();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : (x > y ? 1 : 0);
}

// Type-sensitive equality: "1" != 1, but 1 == 1.0 (both numbers).
bool json_equal(const boost::json::value& a, const boost::json::value& b) {
    if (is_number(a) && is_number(b)) return compare_numbers(a, b) == 0;
    return a == b;
}

bool truthy(const boost::json::value& v) {
    switch (v.kind()) {
        case boost::json::kind::null:
            return false;
        case boost::json::kind::bool_:
            return v.get_bool();
        case boost::json::kind::int64:
            return v.get_int64() != 0;
        case boost::json::kind::uint64:
            return v.get_uint64() != 0;
        case boost::json::kind::double_:
            return v.get_double() != 0.0;
        case boost::json::kind::string:
            return !v.get_string().empty();
        case boost::json::kind::array:
            return !v.get_array().empty();
        case boost::json::kind::object:
            return !v.get_object().empty();
    }
    return false;
}

bool walk_templated(const boost::json::value& value, std::string& path,
                    const std::function<bool(const std::string&, std::string_view)>& visit) {
    switch (value.kind()) {
        case boost::json::kind::string: {
            std::string_view s(value.get_string().data(), value.get_string().size());
            return !looks_templated(s) || visit(path, s);
        }
        case boost::json::kind::array: {
            const auto& a = value.get_array();
            for (std::size_t i = 0; i < a.size(); ++i) {
                std::size_t mark = path.size();
                path += "[" + std::to_string(i) + "]";
                bool go_on = walk_templated(a[i], path, visit);
                path.resize(mark);
                if (!go_on) return false;
            }
            return true;
        }
        case boost::json::kind::object:
            for (const auto& m : value.get_object()) {
                std::size_t mark = path.size();
                path += ".";
                path.append(m.key().data(), m.key().size());
                bool go_on = walk_templated(m.value(), path, visit);
                path.resize(mark);
                if (!go_on) return false;
            }
            return true;
        default:
            return true;
    }
}

}  // namespace

std::string_view template_ref::task_id() const {
    if (root != template_root::tasks || path.empty()) return {};
    return path.front();
}

bool template_string::has_refs() const {
    for (const auto& p : parts)
        if (p.ref) return true;
    return false;
}

bool looks_templated(std::string_view text) {
    return text.find(open_mark) != std::string_view::npos;
}

namespace detail {

std::string ref_text(const template_ref& ref) {
    std::string out(root_name(ref.root));
    for (const auto& seg : ref.path) out += "." + seg;
    return out;
}

std::string scalar_text(const boost::json::value& v) {
    if (v.is_string()) return std::string(v.get_string().data(), v.get_string().size());
    return to_json(v);
}

// `not path` or `path OP literal` rather than a path: the reference's tests.
bool is_test(std::string_view inner) {
    return inner.starts_with("not ") || inner.starts_with("not\t") ||
           inner.find_first_of("=!<>") != std::string_view::npos;
}

std::optional<boost::json::value> render_parsed(const template_string& ts, const render_context& ctx,
                                                template_error& error) {
    if (ts.is_single_ref() && ts.parts[0].test) {
        auto value = evaluate(*ts.parts[0].test, ctx, error);
        if (!value) return std::nullopt;
        return boost::json::value(*value);
    }
    if (ts.is_single_ref()) {
        const boost::json::value* v = resolve(*ts.parts[0].ref, ctx, error);
        if (!v) return std::nullopt;
        return *v;
    }
    std::string text;
    for (const auto& part : ts.parts) {
        if (!part.ref) {
            text += part.literal;
            continue;
        }
        const boost::json::value* v = resolve(*part.ref, ctx, error);
        if (!v) return std::nullopt;
        if (v->is_object() || v->is_array()) {
            error = template_error{"template_not_scalar",
                                   "`${{ " + part.ref->text + " }}` is " +
                                       (v->is_object() ? "an object" : "an array") +
                                       "; only a string that is exactly one template may hold it"};
            return std::nullopt;
        }
        text += scalar_text(*v);
    }
    return boost::json::value(boost::json::string(text));
}

std::optional<std::string> render_parsed_text(const template_string& ts, const render_context& ctx,
                                              template_error& error) {
    auto v = render_parsed(ts, ctx, error);
    if (!v) return std::nullopt;
    if (v->is_object() || v->is_array()) {
        error = {"template_not_scalar", "`${{ " + ts.parts[0].ref->text + " }}` renders to " +
                                            (v->is_object() ? "an object" : "an array") +
                                            "; a string is needed here"};
        return std::nullopt;
    }
    return scalar_text(*v);
}

std::optional<template_string> parse_template(std::string_view text, template_error& error) {
    template_string out;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t open = text.find(open_mark, pos);
        std::string_view literal =
            text.substr(pos, open == std::string_view::npos ? text.size() - pos : open - pos);
        if (!literal.empty()) {
            if (!out.parts.empty() && !out.parts.back().ref)
                out.parts.back().literal += literal;
            else
                out.parts.push_back({std::string(literal), std::nullopt, std::nullopt});
        }
        if (open == std::string_view::npos) break;
        std::size_t close = text.find(close_mark, open + open_mark.size());
        if (close == std::string_view::npos) {
            error = {"template_syntax",
                     "unclosed `${{` at offset " + std::to_string(open) + ": end it with `}}`"};
            return std::nullopt;
        }
        std::string_view inner = trim(text.substr(open + open_mark.size(), close - open - open_mark.size()));
        template_string::part part;
        if (is_test(inner)) {
            auto c = parse_condition(inner, error);
            if (!c) return std::nullopt;
            part.ref = c->left;
            part.test = std::move(*c);
        } else {
            template_ref ref;
            if (!parse_ref(inner, ref, error)) return std::nullopt;
            part.ref = std::move(ref);
        }
        out.parts.push_back(std::move(part));
        pos = close + close_mark.size();
    }
    for (const auto& part : out.parts) {
        if (!part.test || out.parts.size() == 1) continue;
        error = {"template_syntax", "`${{ " + part.test->expression +
                                        " }}` is a test: it renders a boolean, so it must be the whole "
                                        "string, not part of a text"};
        return std::nullopt;
    }
    return out;
}

const boost::json::value* resolve(const template_ref& ref, const render_context& ctx, template_error& error) {
    const boost::json::value* base = nullptr;
    std::size_t first = 0;
    switch (ref.root) {
        case template_root::inputs:
            base = ctx.inputs;
            break;
        case template_root::vars:
            base = ctx.vars;
            break;
        case template_root::with:
            base = ctx.with;
            break;
        case template_root::tasks:
            base = ctx.task_output ? ctx.task_output(ref.task_id()) : nullptr;
            first = 2;  // skip `<id>.output`
            if (!base) {
                error = {"template_missing_path", "`" + ref_text(ref) + "`: the output of task `" +
                                                      std::string(ref.task_id()) + "` is not available"};
                return nullptr;
            }
            break;
    }
    if (!base) {
        error = {"template_missing_path", "`" + ref_text(ref) + "`: nothing is bound to `" +
                                              std::string(root_name(ref.root)) + "` here"};
        return nullptr;
    }
    const boost::json::value* cur = base;
    for (std::size_t i = first; i < ref.path.size(); ++i) {
        const std::string& seg = ref.path[i];
        const boost::json::value* next = nullptr;
        if (cur->is_object()) {
            next = cur->get_object().if_contains(seg);
        } else if (cur->is_array() && all_digits(seg)) {
            std::size_t index = 0;
            auto [ptr, ec] = std::from_chars(seg.data(), seg.data() + seg.size(), index);
            if (ec == std::errc() && index < cur->get_array().size()) next = &cur->get_array()[index];
        }
        if (!next) {
            std::string where(root_name(ref.root));
            for (std::size_t j = 0; j < i; ++j) where += "." + ref.path[j];
            error = {"template_missing_path", "`" + ref_text(ref) + "` does not exist: `" + where +
                                                  "` has no " + (cur->is_array() ? "item " : "member ") +
                                                  quoted(seg)};
            return nullptr;
        }
        cur = next;
    }
    return cur;
}

std::optional<boost::json::value> render(const boost::json::value& value, const render_context& ctx,
                                         template_error& error) {
    switch (value.kind()) {
        case boost::json::kind::string: {
            std::string_view s(value.get_string().data(), value.get_string().size());
            if (!looks_templated(s)) return value;
            auto ts = parse_template(s, error);
            if (!ts) return std::nullopt;
            return render_parsed(*ts, ctx, error);
        }
        case boost::json::kind::array: {
            boost::json::array out;
            out.reserve(value.get_array().size());
            for (const auto& item : value.get_array()) {
                auto r = render(item, ctx, error);
                if (!r) return std::nullopt;
                out.push_back(std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
        case boost::json::kind::object: {
            boost::json::object out;
            out.reserve(value.get_object().size());
            for (const auto& m : value.get_object()) {
                auto r = render(m.value(), ctx, error);
                if (!r) return std::nullopt;
                out.emplace(m.key(), std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
        default:
            return value;
    }
}

std::optional<std::string> render_text(std::string_view text, const render_context& ctx,
                                       template_error& error) {
    if (!looks_templated(text)) return std::string(text);
    auto ts = parse_template(text, error);
    if (!ts) return std::nullopt;
    return render_parsed_text(*ts, ctx, error);
}

std::optional<condition> parse_condition(std::string_view text, template_error& error) {
    condition c;
    c.expression = std::string(text);
    std::string_view s = trim(text);
    if (s.starts_with(open_mark) && s.ends_with(close_mark) &&
        s.size() >= open_mark.size() + close_mark.size())
        s = trim(s.substr(open_mark.size(), s.size() - open_mark.size() - close_mark.size()));
    bool negate = false;
    if (s.starts_with("not ") || s.starts_with("not\t")) {
        negate = true;
        s = trim(s.substr(4));
    }
    std::size_t end = 0;
    while (end < s.size() && is_path_char(s[end])) ++end;
    if (end == 0) {
        error = {"invalid_condition", "condition " + quoted(text) +
                                          " must start with a path: `path`, `not path` or `path OP literal`"};
        return std::nullopt;
    }
    if (!parse_ref(s.substr(0, end), c.left, error)) return std::nullopt;
    std::string_view rest = trim(s.substr(end));
    if (rest.empty()) {
        c.op = negate ? condition::op_t::falsy : condition::op_t::truthy;
        return c;
    }
    if (negate) {
        error = {"invalid_condition", "condition " + quoted(text) +
                                          ": `not` takes a path only (write `path == false` "
                                          "or `path != literal` to compare)"};
        return std::nullopt;
    }
    static constexpr std::pair<std::string_view, condition::op_t> ops[] = {
        {"==", condition::op_t::eq}, {"!=", condition::op_t::ne}, {"<=", condition::op_t::le},
        {">=", condition::op_t::ge}, {"<", condition::op_t::lt},  {">", condition::op_t::gt},
    };
    bool found = false;
    for (const auto& [token, op] : ops) {
        if (rest.starts_with(token)) {
            c.op = op;
            rest = trim(rest.substr(token.size()));
            found = true;
            break;
        }
    }
    if (!found) {
        error = {"invalid_condition",
                 "condition " + quoted(text) + ": expected one of == != < <= > >= after the path"};
        return std::nullopt;
    }
    if (rest.empty()) {
        error = {"invalid_condition",
                 "condition " + quoted(text) + ": the comparison needs a literal on the right"};
        return std::nullopt;
    }
    if (rest.size() >= 2 && rest.front() == '\'' && rest.back() == '\'') {
        c.right = boost::json::string(rest.substr(1, rest.size() - 2));
    } else {
        json_read_result literal = read_json(rest);
        // A bare word that is not JSON compares as a string: `inputs.env == prod`.
        c.right = literal.value ? std::move(*literal.value) : boost::json::value(boost::json::string(rest));
    }
    bool ordering = c.op == condition::op_t::lt || c.op == condition::op_t::le ||
                    c.op == condition::op_t::gt || c.op == condition::op_t::ge;
    if (ordering && !is_number(c.right)) {
        error = {"invalid_condition", "condition " + quoted(text) + ": < <= > >= compare numbers; " +
                                          quoted(rest) + " is not a number"};
        return std::nullopt;
    }
    return c;
}

std::optional<bool> evaluate(const condition& c, const render_context& ctx, template_error& error) {
    const boost::json::value* left = resolve(c.left, ctx, error);
    if (!left) {
        error.message = "`" + c.expression + "`: " + error.message;
        return std::nullopt;
    }
    switch (c.op) {
        case condition::op_t::truthy:
            return truthy(*left);
        case condition::op_t::falsy:
            return !truthy(*left);
        case condition::op_t::eq:
            return json_equal(*left, c.right);
        case condition::op_t::ne:
            return !json_equal(*left, c.right);
        default:
            break;
    }
    if (!is_number(*left) || !is_number(c.right)) {
        error = {"template_not_number", "`" + c.expression + "`: `" + ref_text(c.left) + "` is " +
                                            to_json(*left) + ", not a number"};
        return std::nullopt;
    }
    int cmp = compare_numbers(*left, c.right);
    switch (c.op) {
        case condition::op_t::lt:
            return cmp < 0;
        case condition::op_t::le:
            return cmp <= 0;
        case condition::op_t::gt:
            return cmp > 0;
        case condition::op_t::ge:
            return cmp >= 0;
        default:
            return std::nullopt;
    }
}

bool for_each_templated(
    const boost::json::value& value,
    const std::function<bool(const std::string& sub_path, std::string_view text)>& visit) {
    std::string path;
    return walk_templated(value, path, visit);
}

}  // namespace detail

std::optional<template_string> parse_template(std::string_view text, std::string& error) {
    detail::template_error e;
    auto r = detail::parse_template(text, e);
    if (!r) error = std::move(e.message);
    return r;
}

bool collect_refs(const boost::json::value& value, std::vector<template_ref>& refs, std::string& error,
                  std::string& error_path) {
    return detail::for_each_templated(value, [&](const std::string& sub_path, std::string_view text) {
        detail::template_error e;
        auto ts = detail::parse_template(text, e);
        if (!ts) {
            error = std::move(e.message);
            error_path = sub_path;
            return false;
        }
        for (auto& part : ts->parts)
            if (part.ref) refs.push_back(std::move(*part.ref));
        return true;
    });
}

const boost::json::value* resolve(const template_ref& ref, const render_context& ctx, std::string& error) {
    detail::template_error e;
    const auto* v = detail::resolve(ref, ctx, e);
    if (!v) error = std::move(e.message);
    return v;
}

std::optional<boost::json::value> render(const boost::json::value& value, const render_context& ctx,
                                         std::string& error) {
    detail::template_error e;
    auto r = detail::render(value, ctx, e);
    if (!r) error = std::move(e.message);
    return r;
}

std::optional<std::string> render_text(std::string_view text, const render_context& ctx, std::string& error) {
    detail::template_error e;
    auto r = detail::render_text(text, ctx, e);
    if (!r) error = std::move(e.message);
    return r;
}

std::optional<condition> parse_condition(std::string_view text, std::string& error) {
    detail::template_error e;
    auto r = detail::parse_condition(text, e);
    if (!r) error = std::move(e.message);
    return r;
}

std::optional<bool> evaluate(const condition& c, const render_context& ctx, std::string& error) {
    detail::template_error e;
    auto r = detail::evaluate(c, ctx, e);
    if (!r) error = std::move(e.message);
    return r;
}

}  // namespace agentctl
