// The plan's tasks by plan index: singles and aggregates as stored, children rendered from
// their template and item when asked for (docs/DESIGN.md, "Plan": a plan stores no child).
#include "plan/compiler.hpp"
#include "plan/plan_detail.hpp"

#include <boost/json/array.hpp>

#include <algorithm>
#include <charconv>

namespace json = boost::json;

namespace agentctl {

namespace detail {

std::optional<child_id_parts> split_child_id(std::string_view id) {
    constexpr std::size_t digest_size = 12;
    if (id.size() < digest_size + 1) return std::nullopt;
    std::string_view digest = id.substr(id.size() - digest_size);
    if (digest.find_first_not_of("0123456789abcdef") != std::string_view::npos ||
        id[id.size() - digest_size - 1] != '-')
        return std::nullopt;
    std::string_view head = id.substr(0, id.size() - digest_size - 1);
    std::size_t digits = head.size();
    while (digits > 0 && head[digits - 1] >= '0' && head[digits - 1] <= '9') --digits;
    if (digits == head.size() || digits < 3 || head.substr(digits - 2, 2) != "--") return std::nullopt;
    return child_id_parts{head.substr(0, digits - 2), head.substr(digits), digest};
}

json::object expansion_bindings(std::string_view as, const json::array* items,
                                const std::vector<std::pair<std::string, const json::array*>>& axes,
                                std::uint64_t k) {
    json::object vars;
    vars.reserve(2);
    if (axes.empty()) {
        vars.emplace(as, (*items)[k]);
        vars.emplace("foreachIndex", static_cast<std::int64_t>(k));
        return vars;
    }
    json::object cell;
    cell.reserve(axes.size());
    std::vector<std::size_t> digits(axes.size());
    std::uint64_t rest = k;
    for (std::size_t a = axes.size(); a-- > 0;) {
        digits[a] = rest % axes[a].second->size();
        rest /= axes[a].second->size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a) cell.emplace(axes[a].first, (*axes[a].second)[digits[a]]);
    vars.emplace("matrix", std::move(cell));
    vars.emplace("matrixIndex", static_cast<std::int64_t>(k));
    return vars;
}

json::object loop_bindings(const json::array& previous, std::uint64_t k) {
    return json::object{{"loopIndex", static_cast<std::int64_t>(k)}, {"loopPrevious", previous[k]}};
}

json::object expansion_bindings(const plan_expansion& e, std::uint64_t k) {
    if (e.loop) return loop_bindings(e.items, k);
    std::vector<std::pair<std::string, const json::array*>> axes;
    axes.reserve(e.axes.size());
    for (const auto& [name, values] : e.axes) axes.emplace_back(name, &values);
    return expansion_bindings(e.as, &e.items, axes, k);
}

// What render() and render_text() would parse for each child, parsed once.
struct child_renderer::templates {
    bool with = false;                                 ///< `with` is rendered (not deferred, and it parses)
    plan_compiler::compiled_value with_compiled;       ///< points into the template node's `with`
    bool argv = false;                                 ///< args and cwd are rendered
    std::vector<std::optional<template_string>> args;  ///< nullopt: copied as written
    std::optional<template_string> cwd;                ///< nullopt: copied as written
};

child_renderer::child_renderer(const plan& p, const plan_expansion& e) : plan_(p), expansion_(e) {
    const plan_task& n = p.nodes[e.node];
    auto t = std::make_unique<templates>();
    // A template that does not parse does not render either: every child keeps it as written.
    t->with = !n.with_deferred && plan_compiler::compile_value(n.with, t->with_compiled);
    const action_spec& act = p.actions[n.action_index];
    bool templated = act.cwd && looks_templated(*act.cwd);
    for (const auto& a : act.args) templated = templated || looks_templated(a);
    t->argv = templated && !n.argv_deferred;
    if (t->argv) {
        auto parsed = [](const std::string& text) -> std::optional<template_string> {
            if (!looks_templated(text)) return std::nullopt;
            template_error error;
            return parse_template(text, error);
        };
        t->args.reserve(act.args.size());
        for (const auto& a : act.args) t->args.push_back(parsed(a));
        if (act.cwd) t->cwd = parsed(*act.cwd);
    }
    templates_ = std::move(t);
}

child_renderer::~child_renderer() = default;

child_parts child_renderer::render(std::uint32_t k) const {
    const plan_task& n = plan_.nodes[expansion_.node];
    child_parts c;
    json::value vars = expansion_bindings(expansion_, k);
    c.id = child_id(expansion_, n.parent, k);
    for (const auto& m : n.vars) vars.get_object().emplace(m.key(), m.value());
    render_context ctx;
    ctx.inputs = &plan_.inputs;
    ctx.vars = &vars;
    template_error error;
    // The compiler rendered every child once already (compile() fails otherwise), so these
    // renderings succeed; a failure would leave the template, as a deferred one is.
    std::optional<json::value> with;
    if (templates_->with) with = plan_compiler::render_compiled(templates_->with_compiled, ctx, error);
    c.with = with ? std::move(*with) : n.with;
    if (templates_->argv) {
        const action_spec& act = plan_.actions[n.action_index];
        ctx.with = &c.with;
        auto text = [&](const std::optional<template_string>& parsed, const std::string& written) {
            std::optional<std::string> r;
            if (parsed) r = render_parsed_text(*parsed, ctx, error);
            return r ? std::move(*r) : written;
        };
        std::vector<std::string> args;
        args.reserve(act.args.size());
        for (std::size_t j = 0; j < act.args.size(); ++j)
            args.push_back(text(templates_->args[j], act.args[j]));
        c.args = std::move(args);
        if (act.cwd) c.cwd = text(templates_->cwd, *act.cwd);
    }
    c.vars = std::move(vars.get_object());
    return c;
}

plan_task& child_renderer::task(std::uint32_t k) {
    if (!task_) {  // the fields every child shares, copied once
        task_ = plan_.nodes[expansion_.node];
        task_->first_child = 0;
        task_->child_count = 0;
    }
    plan_task& t = *task_;
    child_parts parts = render(k);
    t.id = std::move(parts.id);
    t.vars = std::move(parts.vars);
    t.with = std::move(parts.with);
    t.args = std::move(parts.args);
    t.cwd = std::move(parts.cwd);
    t.expansion_index = k;
    if (expansion_.loop) {
        t.vars_deferred = plan_.nodes[expansion_.node].vars_deferred;
        if (k > 0) {
            // The previous iteration's output: rendered when this one is admitted.
            if (auto* previous = t.vars.if_contains("loopPrevious")) {
                t.vars_deferred["loopPrevious"] = std::move(*previous);
                t.vars.erase("loopPrevious");
            }
        }
    }
    t.output_referenced = plan_.output_referenced(expansion_.first_child + k);
    return t;
}

child_parts render_child(const plan& p, const plan_expansion& e, std::uint32_t k) {
    return child_renderer(p, e).render(k);
}

}  // namespace detail

std::uint32_t plan::node_of(std::uint32_t i) const {
    // The last node starting at or before `i`: a child template without children starts
    // where the next node does and covers nothing, so it is never the answer.
    auto it = std::upper_bound(node_starts.begin(), node_starts.end(), i);
    return static_cast<std::uint32_t>(it - node_starts.begin()) - 1;
}

plan_task plan::task(std::uint32_t i) const {
    const plan_task& n = node(i);
    if (n.kind != plan_task::kind_t::child) return n;
    const plan_expansion& e = expansions[n.expansion_slot];
    detail::child_renderer children(*this, e);
    return std::move(children.task(i - e.first_child));
}

std::string plan::task_id(std::uint32_t i) const {
    const plan_task& n = node(i);
    if (n.kind != plan_task::kind_t::child) return n.id;
    const plan_expansion& e = expansions[n.expansion_slot];
    return detail::child_id(e, n.parent, i - e.first_child);
}

json::object plan::vars_of(std::uint32_t i) const {
    const plan_task& n = node(i);
    if (n.kind != plan_task::kind_t::child) return {};
    const plan_expansion& e = expansions[n.expansion_slot];
    return detail::expansion_bindings(e, i - e.first_child);
}

bool plan::output_referenced(std::uint32_t i) const {
    const plan_task& n = node(i);
    if (n.output_referenced || n.kind != plan_task::kind_t::child) return n.output_referenced;
    const plan_expansion& e = expansions[n.expansion_slot];
    return std::binary_search(e.referenced.begin(), e.referenced.end(), i - e.first_child);
}

std::optional<std::uint32_t> plan::previous_iteration(std::uint32_t i) const {
    const plan_task& n = node(i);
    if (n.kind != plan_task::kind_t::child || n.expansion != plan_task::expansion_t::loop ||
        i == n.first_child)
        return std::nullopt;
    return i - 1;
}

const plan_expansion* plan::expansion_of(std::uint32_t i) const {
    const plan_task& n = node(i);
    return n.kind == plan_task::kind_t::single ? nullptr : &expansions[n.expansion_slot];
}

std::optional<std::uint32_t> plan::find(std::string_view id) const {
    if (auto it = index.find(std::string(id)); it != index.end()) return it->second;
    auto parts = detail::split_child_id(id);
    if (!parts) return std::nullopt;
    auto it = index.find(std::string(parts->parent));
    if (it == index.end()) return std::nullopt;
    const plan_task& aggregate = node(it->second);
    if (aggregate.kind != plan_task::kind_t::aggregate) return std::nullopt;
    const plan_expansion& e = expansions[aggregate.expansion_slot];
    // Exactly the digits child_id() writes: `fan--12` is not `fan--0012`.
    if (parts->digits.size() != e.id_width) return std::nullopt;
    std::uint32_t k = 0;
    auto [end, ec] = std::from_chars(parts->digits.data(), parts->digits.data() + parts->digits.size(), k);
    if (ec != std::errc() || end != parts->digits.data() + parts->digits.size() || k >= e.count)
        return std::nullopt;
    if (task_id(e.first_child + k) != id) return std::nullopt;  // the digest of another item
    return e.first_child + k;
}

}  // namespace agentctl
