// Running a compiled plan: the scheduler, on the caller's executor.
//
// The library creates no threads, no io_context, installs no signal handler and keeps no
// global state. Everything runs on the executor given to async_run().
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/events.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/runner.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

enum class run_state { succeeded, failed, cancelled };
std::string_view to_string(run_state);

/// An answer to "may this task run?".
enum class approval_answer { yes, no, all };

/// Asks for approval of tasks whose plan says `requires_approval`.
class approver {
public:
    virtual ~approver() = default;
    /// Completion signature: void(approval_answer). `all` approves this and every later task.
    virtual void async_approve(const plan& p, std::uint32_t task_index,
                               boost::asio::any_completion_handler<void(approval_answer)> handler) = 0;
};

/// Holds back new attempts while closed; running attempts are never affected (their
/// timeouts, caps, drains and kills go on exactly). A front end whose own output lags
/// behind its reader closes it, so that supervision never waits on that reader.
class dispatch_gate {
public:
    virtual ~dispatch_gate() = default;
    /// Asked before each attempt starts, on the run's executor; while it answers false the
    /// scheduler asks again every `recheck` until it opens. Must not block.
    virtual bool open() = 0;
    static constexpr std::chrono::milliseconds recheck{10};
};

/// What a resumed run takes over from the earlier segments of its journal (async_resume()
/// fills it from the journal; indexed like plan::tasks).
struct resume_state {
    /// A final result to reuse instead of running the task; it is reused only while none of
    /// the task's needs runs again in this segment (dependants of what runs again run).
    std::vector<std::optional<task_result>> reuse;
    /// The highest attempt number recorded for each task: this segment numbers on from it.
    std::vector<std::uint32_t> attempts_before;
};

struct run_options {
    /// Overrides plan::max_concurrency; 1..4096. The engine lowers it to what the descriptor
    /// limit can hold (raising the soft limit first) and says so in a warning.
    std::optional<int> jobs;
    bool keep_going = false;  ///< treat every task as `failure: continue`
    std::string run_id;       ///< empty: generated
    std::string base_dir;     ///< absolute: --workspace, else the workflow's folder
    std::string search_path;  ///< PATH used to resolve bare command names (agentctl's own)
    /// Reads agentctl's own environment for `{env: NAME}` sources and engine clients.
    std::function<std::optional<std::string>(std::string_view)> host_env;
    containment_policy containment = containment_policy::automatic;
    std::chrono::milliseconds drain_grace{250};
    task_runner* runner = nullptr;  ///< nullptr: the built-in host/container runner
    event_sink* events = nullptr;   ///< optional
    approver* approvals = nullptr;  ///< nullptr: a task needing approval stops the run before any effect
    dispatch_gate* gate = nullptr;  ///< nullptr: always open
    /// Told of every engine client used, so that its containers die with us (crash safety).
    watchdog* watch = nullptr;
    /// Containers that dead owners left on the engines this run uses, removed before anything
    /// starts, are added here (the caller prints them with its own cgroup sweep).
    sweep_report* leftovers = nullptr;
    /// Records the run (docs/JOURNAL.md, docs/DESIGN.md "Journal"): the run before any effect,
    /// each attempt's intent (committed before the attempt starts), its handle, its end, each
    /// task's final result, the run's end. With a journal, a finished task's captured output
    /// leaves memory once recorded unless something reads it later (plan_task::
    /// output_referenced): its result in run_report::tasks is then `streams_released`.
    /// nullptr: nothing is recorded and every result stays whole in memory.
    journal_writer* journal = nullptr;
    /// The run's record as the caller knows it (workflow source and path, argv, inputs,
    /// options); the engine fills in the run id, the digests, the task count and the owner.
    /// Not used when resuming (the run is recorded already).
    journal_run record;
    /// Resuming a run of the journal (async_resume() sets it); nullptr for a new run.
    const resume_state* resume = nullptr;
};

/// What a run produced. `tasks` is indexed like plan::tasks.
struct run_report {
    std::string run_id;
    run_state state = run_state::failed;
    std::vector<task_result> tasks;
    boost::json::value output;  ///< rendered spec.outputs, or task id -> output when there are none
    std::optional<task_error> error;  ///< a run-level failure (approval, budget, setup)
    std::chrono::milliseconds duration{0};

    std::vector<diagnostic> warnings;  ///< e.g. jobs lowered to fit the descriptor limit
    bool resumed = false;  ///< a resume: results say whether they were `reused`

    /// 0 succeeded, 3 approval or policy, 4 failed, 130 cancelled (exit_status).
    int exit_code() const;
};

/// Task ids that need approval under the plan's policy.
std::vector<std::uint32_t> tasks_requiring_approval(const plan& p);

namespace detail {
void async_run_impl(boost::asio::any_io_executor ex, const plan& p, run_options options,
                    boost::asio::any_completion_handler<void(run_report)> handler);
}

/// Runs `p` to completion. `p` (and options' runner, events, approvals) must outlive the
/// operation.
///
/// Completion signature: void(run_report). Cancellation through the token's slot: total or
/// partial stops dispatching and terminates running tasks gracefully (a second, terminal
/// request kills them at once); the operation completes only after every task coroutine has
/// finished and every child process is reaped. Thread safety: use from the executor's thread.
template <typename Token>
auto async_run(boost::asio::any_io_executor ex, const plan& p, run_options options, Token&& token) {
    return boost::asio::async_initiate<Token, void(run_report)>(
        [](auto handler, boost::asio::any_io_executor e, const plan* pp, run_options o) {
            detail::async_run_impl(std::move(e), *pp, std::move(o), std::move(handler));
        },
        token, std::move(ex), &p, std::move(options));
}

}  // namespace agentctl
