#include "engine/admission.hpp"

#include "engine/outcome.hpp"
#include "json/sha256.hpp"
#include "plan/plan_detail.hpp"

#include <agentctl/json.hpp>

#include <boost/json/object.hpp>

#include <algorithm>

namespace json = boost::json;

namespace agentctl {

child_tasks::child_tasks(const plan& p) : plan_(p), renderers_(p.expansions.size()) {}
child_tasks::~child_tasks() = default;

const plan_task& child_tasks::task(std::uint32_t index) {
    const plan_task& n = plan_.node(index);
    const plan_expansion& e = plan_.expansions[n.expansion_slot];
    auto& renderer = renderers_[n.expansion_slot];
    if (!renderer) renderer = std::make_unique<detail::child_renderer>(plan_, e);
    return renderer->task(index - e.first_child);
}

namespace {

// An object with its top-level members sorted by key, written compactly: the reference's
// maps (its inputs, variables and task outputs are sorted maps; what they hold keeps its order).
void write_sorted(json_writer& w, const json::object& o) {
    std::vector<const json::key_value_pair*> members;
    members.reserve(o.size());
    for (const auto& m : o) members.push_back(&m);
    std::sort(members.begin(), members.end(),
              [](const auto* a, const auto* b) { return a->key() < b->key(); });
    w.begin_object();
    for (const auto* m : members) {
        w.key(std::string_view(m->key().data(), m->key().size()));
        w.value(m->value());
    }
    w.end_object();
}

}  // namespace

std::string context_digest(const run_view& view, const plan_task& t, const json::value& vars) {
    json::object tasks;
    for (auto need : t.needs)
        if (const task_result* r = view.result_of(need)) tasks[view.compiled->task_id(need)] = r->output;
    string_sink text;
    {
        json_writer w(text);
        w.begin_object();
        w.key("inputs");
        write_sorted(w, view.inputs && view.inputs->is_object() ? view.inputs->get_object() : json::object());
        w.key("vars");
        write_sorted(w, vars.is_object() ? vars.get_object() : json::object());
        w.key("memory");
        write_sorted(w, json::object());
        w.key("tasks");
        write_sorted(w, tasks);
        w.end_object();
        w.flush();
    }
    sha256 hash;
    hash.update(text.text);
    return "sha256:v1:" + hash.hex();
}

render_context context_for(const run_view& view, const json::value& vars, const json::value* with) {
    render_context ctx;
    ctx.inputs = view.inputs;
    ctx.vars = &vars;
    ctx.with = with;
    ctx.task_output = [&view](std::string_view id) -> const json::value* {
        auto i = view.compiled->find(id);
        if (!i) return nullptr;
        const task_result* r = view.result_of(*i);
        return r ? &r->output : nullptr;
    };
    return ctx;
}

bool resolve_vars(const run_view& view, const plan_task& t, json::value& vars, std::string& error) {
    vars = json::value(t.vars);
    if (t.vars_deferred.empty()) return true;
    // Deferred variables read task outputs (and inputs), never other variables.
    json::value none = json::object();
    render_context ctx = context_for(view, none, nullptr);
    for (const auto& m : t.vars_deferred) {
        auto value = render(m.value(), ctx, error);
        if (!value) {
            error = "vars." + std::string(m.key()) + ": " + error;
            return false;
        }
        vars.get_object()[m.key()] = std::move(*value);
    }
    return true;
}

bool render_request(const run_view& view, const plan_task& t, const json::value& vars,
                    attempt_request& request, std::string& error) {
    const action_spec& action = view.compiled->action_of(t);
    render_context ctx = context_for(view, vars, nullptr);
    if (t.with_deferred) {
        auto with = render(t.with, ctx, error);
        if (!with) return false;
        request.with = std::move(*with);
    } else {
        request.with = t.with;
    }
    // Action-level `with` holds defaults; the task's keys win.
    if (action.with.is_object() && (request.with.is_object() || request.with.is_null())) {
        json::object merged = action.with.get_object();
        if (request.with.is_object())
            for (const auto& m : request.with.get_object()) merged[m.key()] = m.value();
        request.with = std::move(merged);
    }
    if (!action.is_process()) return true;

    ctx.with = &request.with;
    if (t.argv_deferred) {
        // The job slot is bound here, for args and cwd only.
        json::value argv_vars = vars;
        argv_vars.as_object()[job_slot_var] = view.job_slot;
        ctx.vars = &argv_vars;
        for (const auto& a : action.args) {
            auto s = render_text(a, ctx, error);
            if (!s) return false;
            request.args.push_back(std::move(*s));
        }
        if (action.cwd) {
            auto s = render_text(*action.cwd, ctx, error);
            if (!s) return false;
            request.cwd = std::move(*s);
        }
    } else {
        request.args = t.args ? *t.args : action.args;
        request.cwd = t.cwd ? t.cwd : action.cwd;
    }
    return true;
}

// The reference's result of an assignment: its input, as the value it now holds and as its
// output (docs/CONTRACT.md, "Results").
task_result assign_result(const json::value& with) {
    task_result r;
    r.state = task_state::succeeded;
    r.attempts = 1;
    r.output = json::object{{"status", "unchanged"},
                            {"changed", false},
                            {"before", nullptr},
                            {"after", with},
                            {"diff", nullptr},
                            {"output", with},
                            {"predictability", "fully_predictable"}};
    return r;
}

task_result assert_result(const json::value& with) {
    const json::value* that = with.is_object() ? with.get_object().if_contains("that") : nullptr;
    if (!that || !that->is_bool())
        return failed_result(error_code::input_invalid, "builtin.assert needs a boolean `that`, found " +
                                                            (that ? to_json(*that) : std::string("none")));
    if (!that->get_bool()) {
        const json::value* message = with.get_object().if_contains("message");
        task_result r = failed_result(error_code::assertion_failed, message && message->is_string()
                                                                        ? std::string(message->get_string())
                                                                        : std::string("assertion failed"));
        r.attempts = 1;
        return r;
    }
    task_result r;
    r.state = task_state::succeeded;
    r.attempts = 1;
    r.output = json::object{{"status", "unchanged"}, {"changed", false}, {"passed", true}};
    return r;
}

namespace {

// The first of the task's routers whose decision does not name it: the task is then
// skipped with that decision as its output (the reference's record). A router that did not
// succeed decided nothing: its dependants are skipped by their needs instead.
std::optional<task_result> route_skip(const run_view& view, const plan_task& node) {
    if (node.route_guards.empty()) return std::nullopt;
    const plan& p = *view.compiled;
    // A sub-workflow's boundary is guarded for its invocation.
    const std::string& declared = node.kind == plan_task::kind_t::child ? node.parent
                                  : node.subworkflow                    ? node.subworkflow->invocation
                                                                        : node.id;
    for (const auto& router : node.route_guards) {
        auto i = p.find(router);
        const task_result* decision = i ? view.result_of(*i) : nullptr;
        if (!decision || decision->state != task_state::succeeded || !decision->output.is_object()) continue;
        const json::object& o = decision->output.get_object();
        const json::value* destinations = o.if_contains("destinations");
        if (destinations && destinations->is_array()) {
            const json::array& names = destinations->get_array();
            if (std::find(names.begin(), names.end(), json::value(declared)) != names.end()) continue;
        }
        const json::value* selected = o.if_contains("selected");
        const json::value* matched = o.if_contains("matched");
        task_result r = skipped_result(error_code::route_not_selected,
                                       "router \"" + router + "\" selected " +
                                           (selected ? to_json(*selected) : std::string("null")) +
                                           ", which does not route to \"" + declared + "\"");
        r.output = json::object{{"reason", "route not selected"},
                                {"route", json::object{{"router", router},
                                                       {"selected", selected ? *selected : json::value()},
                                                       {"matched", matched ? *matched : json::value()}}}};
        return r;
    }
    return std::nullopt;
}

// A router's decision: the first case whose value is the selector's, as JSON values (1 and "1"
// differ), else the default.
task_result route_result(const route_spec& route, const json::value& selected) {
    const route_case* taken = nullptr;
    for (const auto& c : route.cases)
        if (c.equals == selected) {
            taken = &c;
            break;
        }
    json::array destinations;
    for (const auto& id : taken ? taken->tasks : route.otherwise) destinations.emplace_back(id);
    task_result r;
    r.state = task_state::succeeded;
    r.attempts = 1;
    r.output = json::object{
        {"selected", selected}, {"matched", taken != nullptr}, {"destinations", std::move(destinations)}};
    return r;
}

// A sub-workflow's pure nodes (docs/CONTROL_FLOW.md, "Sub-workflows"): the output is the
// node's `with` rendered (the boundary: the inputs; the aggregate: the definition's outputs);
// its schema is checked when it is recorded, as any task's outputSchema.
task_result subworkflow_result(const run_view& view, const plan_task& t, const json::value& vars) {
    json::value output = t.with;
    if (t.with_deferred) {
        std::string error;
        render_context ctx = context_for(view, vars, nullptr);
        auto rendered = render(t.with, ctx, error);
        if (!rendered)
            return failed_result(error_code::template_error,
                                 t.subworkflow->role == plan_subworkflow::role_t::input
                                     ? "sub-workflow inputs: " + error
                                     : "sub-workflow outputs: " + error);
        output = std::move(*rendered);
    }
    task_result r;
    r.state = task_state::succeeded;
    r.attempts = 1;
    r.output = std::move(output);
    return r;
}

// The aggregate waits for its boundary and every task of the invocation. A boundary
// that did not succeed means the invocation never started: skipped, as a task whose needs did
// not. A task inside that failed fails the invocation (counted once, as a foreach child's); one
// skipped by its own condition or route does not.
task_result subworkflow_aggregate(const run_view& view, const plan_task& t) {
    const plan& p = *view.compiled;
    std::size_t failed = 0;
    for (auto need : t.needs) {
        std::optional<task_state> state = view.state_of(need);
        const plan_task& n = p.node(need);
        const bool boundary = n.subworkflow && n.subworkflow->role == plan_subworkflow::role_t::input &&
                              n.subworkflow->invocation == t.subworkflow->invocation;
        if (boundary && state != task_state::succeeded)
            return skipped_result(error_code::dependency_not_succeeded,
                                  "dependency \"" + p.task_id(need) + "\" " +
                                      std::string(to_string(state.value_or(task_state::skipped))));
        if (state && is_failure(*state)) ++failed;
    }
    if (failed > 0) {
        const std::size_t n = t.subworkflow->children.size();
        return failed_result(error_code::child_failed, std::to_string(failed) + " of " + std::to_string(n) +
                                                           (n == 1 ? " task" : " tasks") +
                                                           " of workflow:" + t.subworkflow->name + " failed");
    }
    json::value vars = json::value(t.vars);  // the workflow's variables: the outputs may read them
    return subworkflow_result(view, t, vars);
}

}  // namespace

admission admit(const run_view& view, std::uint32_t index) {
    const plan& p = *view.compiled;
    const plan_task& node = p.node(index);
    admission out;
    auto record = [&](task_result r) {
        out.kind = admission::kind_t::record;
        out.result = std::move(r);
        return std::move(out);
    };
    // An expanded destination a router did not take is skipped whole, its aggregate too, so
    // that its dependants are skipped as a single task's would be.
    if (node.kind == plan_task::kind_t::aggregate) {
        if (auto skipped = route_skip(view, node)) return record(std::move(*skipped));
        // An aggregate lists every child with its state and output, failed ones included: one
        // failed item must not hide its siblings' results.
        return record(aggregate_result(view, index));
    }
    if (node.subworkflow && node.subworkflow->role == plan_subworkflow::role_t::aggregate) {
        if (auto skipped = route_skip(view, node)) return record(std::move(*skipped));
        return record(subworkflow_aggregate(view, node));
    }
    std::vector<std::uint32_t> needs = node.needs;
    if (auto previous = p.previous_iteration(index)) needs.push_back(*previous);
    for (auto need : needs) {
        std::optional<task_state> state = view.state_of(need);
        if (state != task_state::succeeded)
            return record(skipped_result(error_code::dependency_not_succeeded,
                                         "dependency \"" + p.task_id(need) + "\" " +
                                             std::string(to_string(state.value_or(task_state::skipped)))));
    }
    if (auto skipped = route_skip(view, node)) return record(std::move(*skipped));
    // A child is rendered here, once, as it is about to start.
    std::optional<plan_task> child;
    const plan_task* rendered = &node;
    if (node.kind == plan_task::kind_t::child)
        rendered = view.children ? &view.children->task(index) : &child.emplace(p.task(index));
    const plan_task& t = *rendered;
    json::value vars;
    if (std::string error; !resolve_vars(view, t, vars, error))
        return record(failed_result(error_code::template_error, error));
    if (t.when) {
        render_context ctx = context_for(view, vars, nullptr);
        std::string error;
        auto value = evaluate(*t.when, ctx, error);
        if (!value)
            return record(
                failed_result(error_code::condition_error, "when \"" + t.when->expression + "\": " + error));
        if (!*value) {
            task_result r =
                skipped_result(error_code::condition_false, "when \"" + t.when->expression + "\" is false");
            r.output =
                json::object{{"reason", "when condition was false"},
                             {"condition", json::object{{"expression", t.when->expression},
                                                        {"contextDigest", context_digest(view, t, vars)},
                                                        {"result", false}}}};
            return record(std::move(r));
        }
    }

    if (t.subworkflow) return record(subworkflow_result(view, t, vars));
    if (t.route) {
        std::string error;
        render_context ctx = context_for(view, vars, nullptr);
        auto selected = render(json::value(t.route->select), ctx, error);
        if (!selected)
            return record(
                failed_result(error_code::template_error, "select \"" + t.route->select + "\": " + error));
        return record(route_result(*t.route, *selected));
    }

    attempt_request request;
    request.compiled = &p;
    request.task_index = index;
    request.task_id = t.id;
    std::string error;
    if (!render_request(view, t, vars, request, error))
        return record(failed_result(error_code::template_error, error));

    const action_spec& action = p.action_of(t);
    // policy.toolsAllow / toolsDeny name capabilities; the reference decides them when the
    // effect is about to happen, so the document checks and the task fails here, unstarted.
    if (std::string_view capability = capability_of(action.kind); !capability_allowed(p.policy, capability)) {
        const auto& deny = p.policy.tools_deny;
        bool denied = std::find(deny.begin(), deny.end(), capability) != deny.end();
        return record(
            failed_result(error_code::capability_denied,
                          "policy denies " + std::string(capability) + " (" +
                              (denied ? "policy.toolsDeny lists it" : "policy.toolsAllow does not list it") +
                              "); the task was not started"));
    }
    if (action.kind == action_kind::assign) return record(assign_result(request.with));
    if (action.kind == action_kind::assert_that) return record(assert_result(request.with));

    std::uint64_t reservation = 0;  // what a process may print (a file action prints nothing)
    if (action.is_process())
        reservation = t.limits.combined_bytes * (action.kind == action_kind::extension_process ? 2 : 1);
    if (p.budgets.max_process_output_bytes && reservation > 0) {
        std::uint64_t budget = *p.budgets.max_process_output_bytes;
        if (view.output_reserved + reservation > budget)
            return record(failed_result(error_code::budget_exceeded,
                                        "budgets.maxProcessOutputBytes (" + std::to_string(budget) +
                                            ") cannot cover this task's output limit (" +
                                            std::to_string(reservation) + " bytes; " +
                                            std::to_string(budget - std::min(budget, view.output_reserved)) +
                                            " left); it was not started"));
    }
    out.kind = admission::kind_t::start;
    out.request = std::move(request);
    out.reservation = reservation;
    out.needs_approval = t.requires_approval && !view.check;
    return out;
}

}  // namespace agentctl
