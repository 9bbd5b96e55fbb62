// The admission decision: what to do with a task whose needs are all done. Pure (no Asio, no
// clock): the scheduler asks, then acts. Tested without an io_context.
#pragma once

#include <agentctl/attempt.hpp>
#include <agentctl/task_result.hpp>
#include <agentctl/template.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace agentctl {

namespace detail {
class child_renderer;
}

/// Foreach, matrix and loop children as admit() renders them, one expansion's templates parsed
/// and its template node copied once for all its children (plan::task() does both for each
/// child: docs/DESIGN.md, "Where a task's time goes").
class child_tasks {
public:
    explicit child_tasks(const plan& p);
    ~child_tasks();
    child_tasks(const child_tasks&) = delete;
    child_tasks& operator=(const child_tasks&) = delete;

    /// Child `index` (a plan index), as plan::task() returns it; valid until the next call.
    const plan_task& task(std::uint32_t index);

private:
    const plan& plan_;
    std::vector<std::unique_ptr<detail::child_renderer>> renderers_;  // by expansion slot, as needed
};

/// What a decision may look at.
struct run_view {
    const plan* compiled = nullptr;
    const boost::json::value* inputs = nullptr;  ///< the plan's merged inputs, as an object
    /// The final state of task `index`, or nullopt while it has none.
    std::function<std::optional<task_state>(std::uint32_t index)> state_of;
    /// The final result of task `index` as kept in memory, or nullptr: while it has none, and
    /// in a run with a journal for the results nothing reads (plan::output_referenced()).
    std::function<const task_result*(std::uint32_t index)> result_of;
    std::uint64_t output_reserved = 0;  ///< output bytes reserved by running tasks
    /// The job slot the task would run in (`vars.jobSlot` in its args and cwd), 1..jobs.
    std::uint32_t job_slot = 1;
    /// An aggregate nothing reads is built without its items (false: tests of admission).
    bool release_unread_aggregates = false;
    bool check = false;  ///< `run --check`: no approval is asked (nothing with an effect runs)
    /// Renders the children admitted; null: each is rendered by plan::task().
    child_tasks* children = nullptr;
};

/// The decision for one ready task.
struct admission {
    enum class kind_t {
        record,  ///< the task is complete without running anything: `result` is final
        start,   ///< run `request`; ask for approval first when `needs_approval`
    };
    kind_t kind = kind_t::record;
    task_result result;
    attempt_request request;
    std::uint64_t reservation = 0;  ///< start: bytes reserved against budgets.maxProcessOutputBytes
    bool needs_approval = false;
};

/// The result of a builtin.assign task of input `with`: the reference's shape, `{status,
/// changed, before, after, diff, output, predictability}`, its `output` the input.
task_result assign_result(const boost::json::value& with);
/// The result of a builtin.assert task: succeeded `{status, changed, passed}` when `that` is
/// true; failed with assertion_failed and the task's `message` when false; input_invalid
/// when `that` is not a boolean.
task_result assert_result(const boost::json::value& with);

/// The digest of what task `t`'s condition read, in the reference's form `sha256:v1:<hex>`:
/// of `{inputs, vars, memory, tasks}` as compact JSON with each map's keys sorted, `tasks`
/// holding the outputs of t's needs (the reference's, of every task finished before it).
std::string context_digest(const run_view& view, const plan_task& t, const boost::json::value& vars);

/// Decides for task `index`, whose needs are all final: skip it (a need did not succeed, its
/// condition is false), complete it here (an aggregate, an assign, a template or condition
/// error, an output budget that cannot cover it), or start it.
admission admit(const run_view& view, std::uint32_t index);

/// `t`'s variables, its deferred ones (reading task outputs) rendered now. False with `error`
/// (naming the variable) when one cannot be rendered.
bool resolve_vars(const run_view& view, const plan_task& t, boost::json::value& vars, std::string& error);

/// Renders `t`'s input, args and cwd into `request` with its variables `vars` (deferred
/// templates now, static ones as compiled). False with `error` when a template cannot be
/// rendered.
bool render_request(const run_view& view, const plan_task& t, const boost::json::value& vars,
                    attempt_request& request, std::string& error);

/// What templates see: the run's inputs, `vars`, `with`, and the outputs of final tasks.
render_context context_for(const run_view& view, const boost::json::value& vars,
                           const boost::json::value* with);

}  // namespace agentctl
