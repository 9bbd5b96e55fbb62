// The plan compiler: workflow -> immutable plan. This file is its driver; plan/compiler.hpp
// names the other parts.
//
// Steps, each reporting every problem it finds before the next runs:
//   inputs -> policy rules -> extension schemas -> task ids, actions, needs -> cycles ->
//   template syntax and roots -> routes' destinations -> expansion sizes and budgets ->
//   nodes (singles with their rendered `with`/args/cwd; for an expanded task its children's
//   template and its aggregate, every child rendered once to check it) -> deterministic
//   topological order -> processes -> digest.
// Tasks are first generated in "declaration order" (each expanded task's children in item
// order, then its aggregate); that position is the tie-breaker of the topological sort.
#include "plan/compiler.hpp"
#include "plan/plan_detail.hpp"
#include "plan/schema.hpp"
#include "policy/policy.hpp"

#include <agentctl/plan.hpp>

#include <exception>
#include <limits>

namespace agentctl {

namespace plan_compiler {

void compiler::merge_inputs() {
    boost::json::object merged = wf_.inputs;
    std::unordered_set<std::string> warned;
    for (const auto& [key, value] : options_.input_overrides) {
        if (!wf_.inputs.contains(key) && warned.insert(key).second) {
            std::vector<std::string_view> declared;
            for (const auto& m : wf_.inputs) declared.emplace_back(m.key().data(), m.key().size());
            std::string hint = nearest(key, declared);
            std::string message = "input `" + key + "` is not declared in spec.inputs; it is kept";
            diags_.warning(
                "undeclared_input", "spec.inputs." + key, message,
                hint.empty() ? "declare it under spec.inputs with a default" : "did you mean `" + hint + "`?",
                wf_.where("spec.inputs"));
            out_.warnings.push_back(std::move(message));
        }
        merged[key] = value;
    }
    inputs_ = std::move(merged);
}

void compiler::list_processes() {
    constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> process_of(wf_.actions.size(), none);
    for (std::uint32_t a = 0; a < wf_.actions.size(); ++a) {
        const action_spec& act = wf_.actions[a];
        if (!act.is_process()) continue;
        plan_process p;
        p.action_index = a;
        if (act.isolation == isolation_mode::container && act.container) {
            switch (act.container->runtime) {
                case engine_choice::auto_select:
                    p.engines = {"docker", "podman"};
                    break;
                case engine_choice::docker:
                    p.engines = {"docker"};
                    break;
                case engine_choice::podman:
                    p.engines = {"podman"};
                    break;
            }
        }
        process_of[a] = static_cast<std::uint32_t>(out_.processes.size());
        out_.processes.push_back(std::move(p));
    }
    // Declared ids in plan order (an expanded task where its first child is).
    std::vector<bool> seen(wf_.tasks.size(), false);
    for (const auto& t : out_.nodes) {
        if (seen[t.declared_index]) continue;
        seen[t.declared_index] = true;
        std::uint32_t a = t.action_index;
        if (!t.route && !t.subworkflow && process_of[a] != none)
            out_.processes[process_of[a]].tasks.push_back(wf_.tasks[t.declared_index].id);
    }
}

// A valid plan whose process tasks need approval cannot run unattended: `run` without
// --interactive on a terminal refuses it before anything starts. Said at `check` (and
// `doctor`), not first at `run`.
void compiler::warn_about_approval() {
    std::size_t needing = 0;
    std::string first;
    for (std::uint32_t v = 0; v < out_.nodes.size(); ++v) {
        const plan_task& t = out_.nodes[v];
        const std::uint32_t tasks = t.kind == plan_task::kind_t::child ? t.child_count : 1;
        if (!t.requires_approval || tasks == 0) continue;
        if (needing == 0) first = out_.task_id(out_.node_starts[v]);
        needing += tasks;
    }
    if (needing == 0) return;
    const bool written = wf_.locations.contains("spec.policy.approval");
    const std::string path = written                                 ? "spec.policy.approval"
                             : wf_.locations.contains("spec.policy") ? "spec.policy"
                                                                     : "spec";
    std::string mode(to_string(wf_.policy.approval));
    std::string message =
        "approval is \"" + mode + "\"" + (written ? "" : " (the default)") + ": " + std::to_string(needing) +
        (needing == 1 ? " process task needs" : " process tasks need") + " approval (`" + first + "`" +
        (needing > 1 ? " and more" : "") +
        "), so `agentctl run` refuses to start unless it runs with --interactive on a terminal";
    diags_.warning("approval_blocks_unattended_run", path, std::move(message),
                   "for unattended runs set `approval: never` in spec.policy; to approve each task, run with "
                   "--interactive on a terminal",
                   wf_.where(path));
}

compile_result compiler::run() {
    out_.workflow_name = wf_.metadata.name;
    out_.workflow_digest = wf_.source_digest;
    out_.max_concurrency = wf_.runtime.max_concurrency.value_or(1);
    out_.kill_grace_seconds = wf_.runtime.kill_grace_seconds;
    out_.budgets = wf_.runtime.budgets;
    out_.policy = wf_.policy;
    out_.actions = wf_.actions;
    out_.outputs = wf_.outputs;
    out_.compensation = wf_.compensation;
    if (wf_.compensation_of) out_.source_run_id = wf_.compensation_of->source_run_id;

    merge_inputs();
    policy::check_policy(wf_, diags_);
    // A flat workflow's tasks are checked where they are written: the document's here, the
    // definitions' by the flattener.
    check_schemas(flat_ ? *flat_->source : wf_, diags_);
    index_tasks();
    find_cycles();
    parse_action_templates();
    resolve_workflow_vars();
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        if (tasks_[i].skip) continue;
        resolve_task_vars(i);
        parse_task_templates(i);
        check_compensation(i);
        prepare_expansion(i);
    }
    check_routes();
    check_task_output_paths();
    if (check_budgets()) generate();
    check_outputs();
    if (diags_.has_errors()) return {std::nullopt, std::move(diags_)};
    order();
    mark_referenced_outputs();
    list_processes();
    warn_about_approval();
    out_.inputs = std::move(inputs_);
    out_.plan_digest = detail::compute_plan_digest(out_);
    return {std::move(out_), std::move(diags_)};
}

}  // namespace plan_compiler

compile_result compile(const workflow& wf, const compile_options& options) {
    try {
        if (!plan_compiler::has_subworkflows(wf)) return plan_compiler::compiler(wf, options).run();
        diagnostics found;
        plan_compiler::flat_workflow flat;
        plan_compiler::flatten_subworkflows(wf, found, flat);
        plan_compiler::compiler c(flat.wf, options, &flat);
        c.diags().append(found);
        return c.run();
    } catch (const std::exception& e) {
        // Only allocation failures are expected here; they must not escape the front end.
        compile_result r;
        r.diags.error("internal_error", "", std::string("the plan could not be compiled: ") + e.what());
        return r;
    }
}

}  // namespace agentctl
