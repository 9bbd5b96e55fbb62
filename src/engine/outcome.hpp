// Results that the scheduler builds itself, and the run's outcome from its task results.
#pragma once

#include "engine/admission.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace agentctl {

task_result skipped_result(error_code code, std::string message);
task_result failed_result(error_code code, std::string message);

/// A copy of `r` without its captured streams: stdout_text, stderr_text, and the output's
/// `stdout` and `stderr` where the output holds them (streams_in_output). `in_place`: those
/// two stay where they are, as empty strings: a journal final's result then has its end's
/// JSON, which the journal stores once (docs/JOURNAL.md, "results").
task_result without_streams(const task_result& r, bool in_place = false);

/// A task is a failure unless it succeeded, was skipped or was cancelled.
bool is_failure(task_state s);

/// The aggregate `index` of an expanded task: `{items: [{index, taskId, state, output,
/// error}]}`, and its state from its children's. Without its items (output null,
/// `output_released`) when `view.release_unread_aggregates` and nothing reads it.
task_result aggregate_result(const run_view& view, std::uint32_t index);

/// One item of an aggregate's output: child `child` (a plan index) with its final result
/// `r` (nullptr: it has none, and is listed as skipped).
boost::json::object aggregate_item(const plan& p, std::uint32_t child, const task_result* r);

/// The run's `output`: rendered spec.outputs, or task id -> output when there are none.
boost::json::value render_outputs(const run_view& view);

/// "a, b, c, d, e and 3 more": the first tasks of `needing`, by id.
std::string task_list(const plan& p, const std::vector<std::uint32_t>& needing);

/// The run-level error of a run that needs approval and has no approver: names the tasks.
task_error approval_required_error(const plan& p, const std::vector<std::uint32_t>& needing);

}  // namespace agentctl
