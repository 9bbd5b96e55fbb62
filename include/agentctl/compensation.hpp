// Compensation (docs/CONTROL_FLOW.md, "Compensation"): which effects of a terminal run are
// undone, by a separate run linked to it. The plan is made from the journal alone; the
// compensation run is an ordinary run of the journal (resumed with `resume`).
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/error.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/session.hpp>
#include <agentctl/spec.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// A source effect that a compensation run undid: what `effectReconciliations` lists (status
/// `compensated`), read from the linked compensation runs, never stored in the source run.
struct compensated_effect {
    std::string source_run_id;
    std::string source_task_id;
    std::string compensation_run_id;
    std::string compensation_task_id;
    std::string compensation_effect_id;  ///< `RUN:TASK:ATTEMPT` of the undo's attempt
};

/// An effect that keeps its task from being compensated until an operator settles it.
struct compensation_block {
    std::string source_task_id;
    std::string code;  ///< unreconciled_effect, unreconciled_compensation_effect, compensation_input_invalid
    std::string message;
};

/// What `agentctl compensate RUN [--plan]` would do.
struct compensation_plan {
    journal_run source;
    compensation_spec settings;               ///< the source workflow's spec.compensation
    std::string run_id;                       ///< the compensation run's id, when there is something to run
    compensation_request request;             ///< the undos, in the order they run
    std::vector<std::string> actions;         ///< each undo's action, parallel to request.items
    std::vector<compensated_effect> already;  ///< undone by earlier compensation runs
    std::vector<compensation_block> blocked;  ///< uncertain effects: nothing runs while any is left
    diagnostics diags;
    exit_status status = exit_status::success;
    std::string message;  ///< the refusal
    std::optional<journal_errc> journal_code;

    bool ok() const { return status == exit_status::success; }
    bool executable() const { return ok() && !request.items.empty(); }
};

/// The id of the `n`th compensation run (from 1) of run `source`: `SOURCE-compensation-N`.
/// The journal finds a source's compensation runs by these ids (no schema change).
std::string compensation_run_id(std::string_view source, std::uint32_t n);

/// The compensation task that undoes source task `source_task_id`: `compensate-ID`.
std::string compensation_task_id(std::string_view source_task_id);

/// A run's recorded compensation selection (`options.mode == "compensation"`), else nullopt.
std::optional<compensation_request> recorded_compensation(const journal_run& run);

/// The options a compensation run records (`mode`, `sourceRunId`, its selection; one job;
/// failures do not stop the others), as JSON text for journal_run::options_json.
std::string compensation_options_json(const compensation_request& request);

/// Plans the compensation of run `source_run_id`: the source must be terminal and not itself
/// a compensation run; its succeeded tasks with `compensate`, in reverse plan order, less
/// those already compensated (`only_task`: that source task, or that declared task's
/// children, only). A task whose effect, or whose earlier undo, is uncertain blocks the plan
/// (exit 3); a compensation run still running or interrupted refuses it
/// (`compensation_in_progress`: resume that run). Synchronous; journal reads only.
compensation_plan prepare_compensation(journal& db, std::string_view source_run_id,
                                       const std::optional<std::string>& only_task,
                                       const owner_alive_fn& alive);

/// Every source effect the compensation runs of `source_run_id` undid, in run then plan order.
journal_result<std::vector<compensated_effect>> compensated_effects(journal& db,
                                                                    std::string_view source_run_id);

/// The compensation run's document: the source's actions, policy and inputs, with one task per
/// undo (`compensate-ID`, `failure: continue`, in the given order, one at a time) and no
/// outputs; `approval: always | never` of spec.compensation replaces the policy's approval.
/// An item naming no declared task with `compensate` is an error in `diags`.
workflow compensation_workflow(const workflow& source, const compensation_request& request,
                               diagnostics& diags);

}  // namespace agentctl
