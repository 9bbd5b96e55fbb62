// A task's `compensate` at compile time (docs/CONTROL_FLOW.md, "Compensation"): the action it
// names must exist and have an effect to undo with, and its `with` may read only what is known
// once the task has run: inputs, variables, the task's own output and its needs' (directly or
// through their needs).
#include "compiler.hpp"

#include <agentctl/compensation.hpp>

#include <algorithm>

namespace agentctl::plan_compiler {
namespace {

// The action kinds whose effect is a mutation: what an undo can be made of.
bool mutates(action_kind k) {
    return k == action_kind::shell_exec || k == action_kind::extension_process || k == action_kind::write;
}

}  // namespace

void compiler::check_compensation(std::size_t i) {
    const task_spec& spec = wf_.tasks[i];
    if (!spec.compensate) return;
    const compensate_spec& c = *spec.compensate;
    const std::string base = task_path(i) + ".compensate";
    if (spec.uses == "router") {
        error("compensation_without_effect", base,
              "task `" + spec.id + "` is a router: it has no effect to compensate",
              "put `compensate` on the task whose effect it undoes");
        return;
    }
    auto it = action_ids_.find(c.action);
    if (it == action_ids_.end()) {
        std::vector<std::string_view> names;
        for (const auto& a : wf_.actions) names.push_back(a.name);
        std::string hint = nearest(c.action, names);
        error("unknown_action", base + ".uses",
              "the compensation of task `" + spec.id + "` uses `action:" + c.action +
                  "`, but spec.actions has no `" + c.action + "`",
              hint.empty() ? "declare the action under spec.actions" : "did you mean `action:" + hint + "`?");
    } else if (!mutates(wf_.actions[it->second].kind)) {
        error("compensation_without_effect", base + ".uses",
              "the compensation of task `" + spec.id + "` uses `action:" + c.action +
                  "`, which has no effect: an undo must change something",
              "use a builtin.write, builtin.shell.exec or extension.process action");
    }

    std::vector<site> sites;
    bool ok = parse_sites(c.with, base + ".with", sites);
    ok = check_roots(sites, {.inputs = true, .vars = true, .tasks = true}, "a compensation's `with`") && ok;
    if (!ok) return;
    // What has run when task i has: the task itself and everything it needs, transitively.
    std::vector<bool> ran(tasks_.size(), false);
    std::vector<std::uint32_t> stack{static_cast<std::uint32_t>(i)};
    while (!stack.empty()) {
        std::uint32_t t = stack.back();
        stack.pop_back();
        if (ran[t]) continue;
        ran[t] = true;
        for (auto d : tasks_[t].needs) stack.push_back(d);
    }
    for (const auto& s : sites) {
        if (s.ref.root != template_root::tasks) continue;
        std::string id(s.ref.task_id());
        auto known = declared_ids_.find(id);
        if (known == declared_ids_.end()) {
            std::vector<std::string_view> names;
            for (const auto& t : wf_.tasks) names.push_back(t.id);
            std::string hint = nearest(id, names);
            error("template_unknown_task", s.path,
                  "`${{ " + s.ref.text + " }}`: there is no task `" + id + "`",
                  hint.empty() ? "refer to a task declared in spec.tasks" : "did you mean `" + hint + "`?");
        } else if (!ran[known->second]) {
            error("compensation_reads_unrun_task", s.path,
                  "the compensation of task `" + spec.id + "` reads `tasks." + id + ".output`, but `" + id +
                      "` may not have run when `" + spec.id + "` did",
                  "read the task's own output, or that of a task it needs (directly or through its needs)");
        }
    }
}

}  // namespace agentctl::plan_compiler

namespace agentctl {

std::string compensation_task_id(std::string_view source_task_id) {
    return "compensate-" + std::string(source_task_id);
}

workflow compensation_workflow(const workflow& source, const compensation_request& request,
                               diagnostics& diags) {
    workflow wf = source;
    wf.tasks.clear();
    wf.outputs.clear();
    wf.subworkflows.clear();
    wf.compensation = {};
    // One undo at a time, each one whatever became of the others.
    wf.runtime.max_concurrency = 1;
    if (source.compensation.approval_mode == compensation_spec::approval::always)
        wf.policy.approval = approval_mode::always;
    if (source.compensation.approval_mode == compensation_spec::approval::never)
        wf.policy.approval = approval_mode::never;
    compensation_origin origin{request.source_run_id, {}};
    for (const auto& item : request.items) {
        auto declared = std::find_if(source.tasks.begin(), source.tasks.end(),
                                     [&](const task_spec& t) { return t.id == item.declared_task_id; });
        if (declared == source.tasks.end() || !declared->compensate) {
            diags.error("compensation_mismatch", "spec.tasks",
                        "the compensation run undoes task `" + item.source_task_id +
                            "`, but the workflow has no task `" + item.declared_task_id +
                            "` with `compensate`");
            continue;
        }
        const compensate_spec& c = *declared->compensate;
        task_spec t;
        t.id = compensation_task_id(item.source_task_id);
        t.uses = "action:" + c.action;
        t.action = c.action;
        t.with = item.with;
        t.retry = c.retry;
        t.timeout_ms = c.timeout_ms;
        t.failure = failure_mode::continue_run;
        wf.tasks.push_back(std::move(t));
        origin.source_task_ids.push_back(item.source_task_id);
    }
    wf.compensation_of = std::move(origin);
    return wf;
}

}  // namespace agentctl
