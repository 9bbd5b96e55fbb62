// Templates at compile time: parsing every templated string once, the roots each place
// allows, task references against needs, and rendering each node's `with`, args and cwd
// (deferred to run time when they read task outputs); spec.outputs is checked here too.
#include "plan/compiler.hpp"
#include "policy/policy.hpp"

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>

namespace agentctl::plan_compiler {

bool compile_value(const boost::json::value& v, compiled_value& out) {
    out.source = &v;
    bool templated = false;
    detail::for_each_templated(v, [&](const std::string&, std::string_view) {
        templated = true;
        return false;
    });
    if (!templated) return true;
    if (v.is_string()) {
        out.kind = compiled_value::kind_t::text;
        detail::template_error e;
        auto ts = detail::parse_template(std::string_view(v.get_string().data(), v.get_string().size()), e);
        if (!ts) return false;
        out.text = std::move(*ts);
        return true;
    }
    bool ok = true;
    out.kind = v.is_array() ? compiled_value::kind_t::array : compiled_value::kind_t::object;
    if (v.is_array()) {
        out.children.resize(v.get_array().size());
        for (std::size_t i = 0; i < out.children.size(); ++i)
            ok = compile_value(v.get_array()[i], out.children[i]) && ok;
    } else {
        out.children.resize(v.get_object().size());
        std::size_t i = 0;
        for (const auto& m : v.get_object()) ok = compile_value(m.value(), out.children[i++]) && ok;
    }
    return ok;
}

std::optional<boost::json::value> render_compiled(const compiled_value& c, const render_context& ctx,
                                                  detail::template_error& error) {
    switch (c.kind) {
        case compiled_value::kind_t::literal:
            return *c.source;
        case compiled_value::kind_t::text:
            return detail::render_parsed(c.text, ctx, error);
        case compiled_value::kind_t::array: {
            boost::json::array out;
            out.reserve(c.children.size());
            for (const auto& child : c.children) {
                auto r = render_compiled(child, ctx, error);
                if (!r) return std::nullopt;
                out.push_back(std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
        case compiled_value::kind_t::object: {
            boost::json::object out;
            out.reserve(c.children.size());
            std::size_t i = 0;
            for (const auto& m : c.source->get_object()) {
                auto r = render_compiled(c.children[i++], ctx, error);
                if (!r) return std::nullopt;
                out.emplace(m.key(), std::move(*r));
            }
            return boost::json::value(std::move(out));
        }
    }
    return std::nullopt;
}

bool compiler::parse_site(std::string_view text, const std::string& path, std::vector<site>& out,
                          bool as_text) {
    detail::template_error e;
    auto ts = detail::parse_template(text, e);
    if (!ts) {
        if (first_time(e.code + "|" + path))
            error(e.code, path, e.message, "templates are `${{ root.path }}`");
        return false;
    }
    const bool scalar = as_text || !ts->is_single_ref();
    for (auto& part : ts->parts)
        if (part.ref) out.push_back({std::move(*part.ref), path, scalar});
    return true;
}

bool compiler::parse_sites(const boost::json::value& value, const std::string& base, std::vector<site>& out) {
    bool ok = true;
    detail::for_each_templated(value, [&](const std::string& sub, std::string_view text) {
        ok = parse_site(text, base + sub, out) && ok;
        return true;
    });
    return ok;
}

bool compiler::check_roots(const std::vector<site>& sites, root_set allowed, std::string_view place) {
    bool ok = true;
    for (const auto& s : sites) {
        if (allowed.allows(s.ref.root)) continue;
        ok = false;
        std::string why;
        switch (s.ref.root) {
            case template_root::with:
                why = "`with.` is the task's input: use it in action args and cwd";
                break;
            case template_root::vars:
                why = "`vars.` holds foreach/matrix bindings: use it in task with, when, args, cwd";
                break;
            case template_root::tasks:
                why = "task outputs are not known when " + std::string(place) + " is evaluated";
                break;
            case template_root::inputs:
                why = "use literal values here";
                break;
        }
        if (first_time("root|" + s.path + "|" + s.ref.text))
            error("template_unknown_root", s.path,
                  "`${{ " + s.ref.text + " }}`: this root is not available in " + std::string(place), why);
    }
    return ok;
}

// `tasks.X.output` must name a declared task that task `i` needs.
bool compiler::check_task_refs(const std::vector<site>& sites, std::size_t i, std::string_view via_action) {
    bool ok = true;
    const task_spec& spec = wf_.tasks[i];
    for (const auto& s : sites) {
        if (s.ref.root != template_root::tasks) continue;
        std::string id(s.ref.task_id());
        std::string who = via_action.empty()
                              ? "task `" + spec.id + "`"
                              : "task `" + spec.id + "` (through action `" + std::string(via_action) + "`)";
        auto it = declared_ids_.find(id);
        if (it == declared_ids_.end()) {
            ok = false;
            std::vector<std::string_view> names;
            for (const auto& t : wf_.tasks) names.push_back(t.id);
            std::string hint = nearest(id, names);
            if (first_time("task|" + s.path + "|" + id))
                error(
                    "template_unknown_task", s.path,
                    "`${{ " + s.ref.text + " }}`: there is no task `" + id + "`",
                    hint.empty() ? "refer to a task declared in spec.tasks" : "did you mean `" + hint + "`?");
        } else if (std::find(tasks_[i].needs.begin(), tasks_[i].needs.end(), it->second) ==
                   tasks_[i].needs.end()) {
            ok = false;
            if (first_time("need|" + std::to_string(i) + "|" + s.path + "|" + id))
                error("template_missing_need", s.path,
                      who + " refers to `tasks." + id + ".output` but does not need `" + id + "`",
                      "add `" + id + "` to the needs of `" + spec.id + "`");
        }
    }
    return ok;
}

void compiler::parse_action_templates() {
    actions_.resize(wf_.actions.size());
    for (std::size_t a = 0; a < wf_.actions.size(); ++a) {
        const action_spec& act = wf_.actions[a];
        action_templates& at = actions_[a];
        // Only templated strings are kept parsed; the others are copied as they are.
        auto parsed = [](std::string_view text) -> std::optional<template_string> {
            if (!looks_templated(text)) return std::nullopt;
            detail::template_error e;
            return detail::parse_template(text, e);
        };
        for (std::size_t j = 0; j < act.args.size(); ++j) {
            if (!looks_templated(act.args[j])) continue;
            at.templated = true;
            const std::string path = action_path(act) + ".args[" + std::to_string(j) + "]";
            at.ok = parse_site(act.args[j], path, at.sites, true) && at.ok;
        }
        if (act.cwd && looks_templated(*act.cwd)) {
            at.templated = true;
            at.ok = parse_site(*act.cwd, action_path(act) + ".cwd", at.sites, true) && at.ok;
        }
        if (!at.templated || !at.ok) continue;
        for (const auto& arg : act.args) at.args.push_back(parsed(arg));
        if (act.cwd) at.cwd = parsed(*act.cwd);
    }
}

void compiler::parse_task_templates(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    declared_task& t = tasks_[i];
    const action_spec* act = t.action ? &wf_.actions[*t.action] : nullptr;

    // `with`: the action's default object, then the task's members over it.
    bool ok = true;
    if (act && act->with.is_object() && (spec.with.is_object() || spec.with.is_null())) {
        boost::json::object merged = act->with.get_object();
        for (const auto& m : act->with.get_object()) {
            if (spec.with.is_object() && spec.with.get_object().contains(m.key())) continue;
            std::string base = action_path(*act) + ".with." + std::string(m.key());
            ok = parse_sites(m.value(), base, t.with_sites) && ok;
        }
        if (spec.with.is_object())
            for (const auto& m : spec.with.get_object()) merged[m.key()] = m.value();
        t.with = std::move(merged);
    } else if (!spec.with.is_null()) {
        t.with = spec.with;
    } else {
        t.with = boost::json::object();
    }
    ok = parse_sites(spec.with, task_path(i) + ".with", t.with_sites) && ok;
    ok = check_roots(t.with_sites, {.inputs = true, .vars = true, .tasks = true}, "task `with`") && ok;
    ok = check_task_refs(t.with_sites, i, "") && ok;

    // A loop's `while` guards each iteration as `when` does a task (the reader refuses both on
    // one task); `loop.output` is the reference's other name for `vars.loopPrevious`.
    std::optional<std::string> guard = spec.when;
    std::string guard_path = task_path(i) + ".when";
    if (spec.loop) {
        guard = spec.loop->condition;
        for (std::size_t at = 0; (at = guard->find("loop.output", at)) != std::string::npos;)
            guard->replace(at, 11, "vars.loopPrevious");
        guard_path = task_path(i) + ".loop.while";
    }
    if (guard) {
        detail::template_error e;
        auto c = detail::parse_condition(*guard, e);
        const std::string& path = guard_path;
        if (!c) {
            ok = false;
            error(e.code == "template_syntax" ? "invalid_condition" : e.code, path, e.message,
                  "write `path`, `not path` or `path OP literal` (OP: == != < <= > >=)");
        } else {
            t.when_sites.push_back({c->left, path});
            t.when = std::move(*c);
            ok = check_roots(t.when_sites, {.inputs = true, .vars = true, .tasks = true}, "`when`") && ok;
            ok = check_task_refs(t.when_sites, i, "") && ok;
        }
    }
    // A router's `select` reads what its condition could: the reader made sure it is one whole
    // `${{ path }}`, so its value keeps its JSON type when rendered.
    if (spec.route) {
        const std::string path = task_path(i) + ".route.select";
        if (parse_site(spec.route->select, path, t.select_sites)) {
            ok = check_roots(t.select_sites, {.inputs = true, .vars = true, .tasks = true},
                             "a router's `select`") &&
                 ok;
            ok = check_task_refs(t.select_sites, i, "") && ok;
        } else {
            ok = false;
        }
    }
    t.templates_ok = t.templates_ok && ok && compile_value(t.with, t.with_compiled);
    t.with_deferred = any_root(t.with_sites, template_root::tasks) || reads_deferred_var(t.with_sites, i);

    if (act && t.action && actions_[*t.action].templated) {
        const action_templates& at = actions_[*t.action];
        check_task_refs(at.sites, i, act->name);
        // The job slot is known when the attempt is dispatched: args holding it render then.
        t.argv_deferred =
            any_root(at.sites, template_root::tasks) || reads_deferred_var(at.sites, i) ||
            (t.with_deferred && any_root(at.sites, template_root::with)) ||
            std::any_of(at.sites.begin(), at.sites.end(), [](const site& s) { return s.ref.is_job_slot(); });
    }
}

// Resolves every `inputs.`, `vars.` (and, when bound, `with.`) reference; task outputs are
// checked against `needs` elsewhere. One diagnostic per declared task and reference.
bool compiler::check_sites(const std::vector<site>& sites, const render_context& ctx, std::size_t i,
                           const std::string& node_id, bool argv) {
    bool ok = true;
    const declared_task& t = tasks_[i];
    for (const auto& s : sites) {
        if (s.ref.root == template_root::tasks || (s.ref.root == template_root::with && !ctx.with)) continue;
        if (s.ref.root == template_root::vars && is_deferred_var(s.ref, i)) continue;  // known when it starts
        if (argv && s.ref.is_job_slot()) continue;  // a number, bound at dispatch
        detail::template_error e;
        if (const boost::json::value* v = detail::resolve(s.ref, ctx, e)) {
            if (!s.scalar || !(v->is_object() || v->is_array())) continue;
            ok = false;
            if (first_time("scalar|" + std::to_string(i) + "|" + s.path + "|" + s.ref.text))
                error("template_not_scalar", s.path,
                      "`${{ " + s.ref.text + " }}` is " + (v->is_object() ? "an object" : "an array") +
                          " and cannot be embedded in text (in `" + node_id + "`)",
                      "only a string that is exactly one template may hold an object or array; argv elements "
                      "and "
                      "cwd are always text");
            continue;
        }
        ok = false;
        if (!first_time("path|" + std::to_string(i) + "|" + s.path + "|" + s.ref.text)) continue;
        std::string help;
        if (s.ref.is_job_slot()) {
            help = "`vars.jobSlot` is bound when the attempt starts: use it in action args and cwd";
        } else if (s.ref.root == template_root::vars) {
            std::string names;
            for (const auto& m : t.vars) names += (names.empty() ? "" : ", ") + std::string(m.key());
            for (const auto& m : t.vars_deferred) names += (names.empty() ? "" : ", ") + std::string(m.key());
            help =
                "the variables of task `" + wf_.tasks[i].id + "` are: " + (names.empty() ? "(none)" : names);
            if (t.expansion == declared_task::expansion_t::foreach)
                help += "; it binds `vars." + wf_.tasks[i].foreach->as + "` and `vars.foreachIndex`";
            else if (t.expansion == declared_task::expansion_t::matrix)
                help += "; it binds `vars.matrix.<axis>` and `vars.matrixIndex`";
            else if (t.expansion == declared_task::expansion_t::loop)
                help += "; it binds `vars.loopIndex` and `vars.loopPrevious`";
        } else if (s.ref.root == template_root::inputs) {
            std::string names;
            for (const auto& m : inputs_.get_object())
                names += (names.empty() ? "" : ", ") + std::string(m.key());
            help = "inputs are: " + (names.empty() ? std::string("(none)") : names);
        } else {
            help = "the task's `with` has no such member";
        }
        std::string where = node_id == wf_.tasks[i].id ? "task `" + node_id + "`" : "`" + node_id + "`";
        error("template_missing_path", s.path, e.message + " (in " + where + ")", help);
    }
    return ok;
}

void compiler::render_node(plan_task& n, std::size_t i, const boost::json::value& vars) {
    declared_task& t = tasks_[i];
    render_context ctx;
    ctx.inputs = &inputs_;
    ctx.vars = &vars;
    bool ok = check_sites(t.with_sites, ctx, i, n.id);
    ok = check_sites(t.when_sites, ctx, i, n.id) && ok && t.templates_ok;
    ok = check_sites(t.vars_sites, ctx, i, n.id) && ok;
    ok = check_sites(t.select_sites, ctx, i, n.id) && ok;
    if (t.with_deferred || !ok) {
        n.with = t.with;
        n.with_deferred = t.with_deferred;
    } else {
        detail::template_error e;
        auto rendered = render_compiled(t.with_compiled, ctx, e);
        if (rendered) {
            n.with = std::move(*rendered);
        } else {
            ok = false;
            n.with = t.with;
            if (first_time("render|" + std::to_string(i) + "|" + e.code))
                error(e.code, task_path(i) + ".with", e.message + " (in `" + n.id + "`)",
                      "embed scalars only; pass objects and arrays as a whole value");
        }
    }
    if (!t.action || !actions_[*t.action].templated) return;
    const action_templates& at = actions_[*t.action];
    const action_spec& act = wf_.actions[*t.action];
    if (t.argv_deferred) {
        n.argv_deferred = true;
        if (at.ok && ok) check_sites(at.sites, ctx, i, n.id, true);
        return;
    }
    if (!at.ok || !ok) return;
    ctx.with = &n.with;
    if (!check_sites(at.sites, ctx, i, n.id)) return;
    std::vector<std::string> args;
    args.reserve(act.args.size());
    for (std::size_t j = 0; j < act.args.size(); ++j) {
        if (!at.args[j]) {
            args.push_back(act.args[j]);
            continue;
        }
        detail::template_error e;
        auto r = detail::render_parsed_text(*at.args[j], ctx, e);
        if (!r) {
            std::string path = action_path(act) + ".args[" + std::to_string(j) + "]";
            if (first_time("render|" + std::to_string(i) + "|" + path))
                error(e.code, path, e.message + " (in `" + n.id + "`)",
                      "each argument must render to one string");
            return;
        }
        args.push_back(std::move(*r));
    }
    n.args = std::move(args);
    if (act.cwd) {
        detail::template_error e;
        const std::string path = action_path(act) + ".cwd";
        auto r = at.cwd ? detail::render_parsed_text(*at.cwd, ctx, e) : std::optional<std::string>(*act.cwd);
        if (!r) {
            if (first_time("render|" + std::to_string(i) + "|" + path))
                error(e.code, path, e.message + " (in `" + n.id + "`)",
                      "cwd must render to one relative path");
            return;
        }
        std::string_view problem = policy::cwd_problem(*r);
        if (!problem.empty()) {
            if (first_time("cwd|" + std::to_string(i)))
                error(std::string(problem), path, "cwd renders to `" + *r + "` for `" + n.id + "`",
                      problem == "invalid_cwd" ? "cwd must be a non-empty path relative to workspaceRoot"
                                               : "cwd must stay inside workspaceRoot: no `..` components");
            return;
        }
        n.cwd = std::move(*r);
    }
}

// Every destination of a router is a declared task that needs the router (so it is admitted
// after the decision); each one gets a guard naming the router.
void compiler::check_routes() {
    for (std::uint32_t r = 0; r < wf_.tasks.size(); ++r) {
        const task_spec& router = wf_.tasks[r];
        if (tasks_[r].skip || !router.route) continue;
        auto guard = [&](const std::string& id, const std::string& path) {
            auto it = declared_ids_.find(id);
            if (it == declared_ids_.end()) {
                std::vector<std::string_view> names;
                for (const auto& t : wf_.tasks) names.push_back(t.id);
                std::string hint = nearest(id, names);
                error("unknown_route_destination", path,
                      "router `" + router.id + "` routes to `" + id + "`, which is not a task id",
                      hint.empty() ? "list ids of tasks declared in spec.tasks"
                                   : "did you mean `" + hint + "`?");
                return;
            }
            // A sub-workflow invocation waits for the router through its input boundary, which
            // holds the invocation's needs; the boundary is guarded too, so that its tasks are
            // skipped with it.
            std::optional<std::uint32_t> boundary = flat_ ? flat_->nodes[it->second].boundary : std::nullopt;
            declared_task& d = tasks_[boundary.value_or(it->second)];
            if (boundary) tasks_[it->second].route_guards.push_back(router.id);
            if (std::find(d.needs.begin(), d.needs.end(), r) == d.needs.end()) {
                error("route_destination_without_router", path,
                      "task `" + id + "` is a destination of router `" + router.id + "` but does not need it",
                      "add `" + router.id + "` to the needs of `" + id +
                          "`: a destination waits for the router's decision");
                return;
            }
            d.route_guards.push_back(router.id);
        };
        const std::string base = task_path(r) + ".route.";
        for (std::size_t k = 0; k < router.route->cases.size(); ++k) {
            const auto& destinations = router.route->cases[k].tasks;
            for (std::size_t j = 0; j < destinations.size(); ++j)
                guard(destinations[j],
                      base + "cases[" + std::to_string(k) + "].tasks[" + std::to_string(j) + "]");
        }
        for (std::size_t j = 0; j < router.route->otherwise.size(); ++j)
            guard(router.route->otherwise[j], base + "default[" + std::to_string(j) + "]");
    }
}

void compiler::check_outputs() {
    for (const auto& m : wf_.outputs) {
        std::vector<site> sites;
        const std::string base = "spec.outputs." + std::string(m.key());
        if (!parse_sites(m.value(), base, sites)) continue;
        check_roots(sites, {.inputs = true, .tasks = true}, "spec.outputs");
        check_task_output_paths(sites);
        render_context ctx;
        ctx.inputs = &inputs_;
        for (const auto& s : sites) {
            if (s.ref.root == template_root::tasks) output_refs_.emplace_back(s.ref.task_id());
            detail::template_error e;
            if (s.ref.root == template_root::inputs && !detail::resolve(s.ref, ctx, e)) {
                error("template_missing_path", s.path, e.message, "declare the input in spec.inputs");
            } else if (s.ref.root == template_root::tasks && generated_ &&
                       !declared_ids_.contains(std::string(s.ref.task_id())) &&
                       !child_owner(s.ref.task_id())) {
                error("template_unknown_task", s.path,
                      "`${{ " + s.ref.text + " }}`: there is no task `" + std::string(s.ref.task_id()) + "`",
                      "refer to a task of the plan");
            }
        }
    }
}

}  // namespace agentctl::plan_compiler
