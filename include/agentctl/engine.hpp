// Running a compiled plan: the scheduler, on the caller's executor.
//
// The library creates no threads, no io_context, installs no signal handler and keeps no
// global state. Everything runs on the executor given to async_run().
#pragma once

#include <agentctl/backend.hpp>
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
#include <unordered_map>
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
/// fills it from the journal; indexed by plan index).
struct resume_state {
    /// What the scheduler needs of a final result it takes over, in a few bytes: its result
    /// whole is in the journal (and in `whole` where a run needs it in memory).
    struct reused_result {
        task_state state = task_state::succeeded;
        std::uint32_t attempts = 0;
        std::optional<int> exit_code;
        std::optional<task_error> error;
    };
    /// A final result to reuse instead of running the task; it is reused only while none of
    /// the task's needs runs again in this segment (dependants of what runs again run).
    std::vector<std::optional<reused_result>> reuse;
    /// Reused results kept whole: those a later template or spec.outputs reads (with their
    /// streams), declared tasks' (without: the run's default output lists them), and those
    /// whose final this resume records (final_from_attempt). Keyed by plan index.
    std::unordered_map<std::uint32_t, task_result> whole;
    /// The highest attempt number recorded for each task: this segment numbers on from it.
    std::vector<std::uint32_t> attempts_before;
    /// A reused result taken from an attempt's end whose final result was never committed
    /// (a crash between the two): that attempt's number, so that the final is recorded now,
    /// naming it. 0 (or absent): the task has its final result already.
    std::vector<std::uint32_t> final_from_attempt;
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
    /// Where host-process attempts run; `slurm`: one srun job each (docs/DESIGN.md, "Slurm
    /// backend"), and container actions are refused before any effect.
    backend_kind backend = backend_kind::local;
    slurm_options slurm;  ///< backend slurm: resource options of every job
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
    /// task's final result, the run's end. With a journal, a finished task's result leaves
    /// memory once recorded unless something reads its output later (plan::
    /// output_referenced()): run_report::tasks stays empty (run_report::outcomes has every
    /// task's state) and reports read the results from the journal. nullptr: nothing is
    /// recorded and every result stays whole in memory (run_report::tasks). Either way a
    /// foreach/matrix aggregate that nothing reads keeps no items (`output_released`: they
    /// are its children's results), run_report::output holds null in its place, and the
    /// run's output map holds no second copy of a captured stream (docs/CAPTURE.md).
    journal_writer* journal = nullptr;
    /// The run's record as the caller knows it (workflow source and path, argv, inputs,
    /// options); the engine fills in the run id, the digests, the task count and the owner.
    /// Not used when resuming (the run is recorded already).
    journal_run record;
    /// Resuming a run of the journal (async_resume() sets it); nullptr for a new run.
    const resume_state* resume = nullptr;
};

/// What a report keeps of every task, whatever it keeps of results: a few bytes each.
struct task_outcome {
    task_state state = task_state::skipped;
    std::uint32_t attempts = 0;
    bool reused = false;  ///< taken over from an earlier segment of the journal (resume)
    /// Decided in this run: run, or completed without running (a condition, a failed need, a
    /// template error), but not taken over and not left unstarted when the run stopped.
    bool executed = false;
};

/// What a run produced. Results are indexed by plan index (plan::task()).
struct run_report {
    std::string run_id;
    run_state state = run_state::failed;
    /// Every task's outcome (empty when a resume could not claim its run: nothing ran).
    std::vector<task_outcome> outcomes;
    /// Every task's whole result, when the run had no journal. With a journal it is empty:
    /// the results are in the journal (journal::for_each_result(), journal_results), so that
    /// memory does not grow with the number of tasks (docs/DESIGN.md, "Engine").
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

// ---------------------------------------------------------------------------------------------
// Resume (docs/JOURNAL.md, "Resume")

/// What a resume does with one task, and why.
enum class resume_action {
    reuse,        ///< succeeded earlier: its result is taken over, it does not run
    keep_failed,  ///< failed definitely earlier, and --retry-failed was not given: result taken over
    run,          ///< never started, never finished, or failed and retried: it runs
    rerun,        ///< its last attempt is uncertain and --rerun-uncertain was given: it runs again
    uncertain,    ///< its last attempt is uncertain: the resume refuses (without --rerun-uncertain)
    aggregate,    ///< a foreach/matrix parent: recomputed from its children
};
/// "reuse", "keep_failed", "run", "rerun", "uncertain", "aggregate".
std::string_view to_string(resume_action);

struct resume_decision {
    resume_action action = resume_action::run;
    std::string reason;  ///< e.g. "succeeded in segment 0", "never started", "a need runs again"
};

/// How to resume.
struct resume_options {
    bool retry_failed = false;     ///< run tasks that failed definitely again
    bool rerun_uncertain = false;  ///< run tasks whose last attempt is uncertain again
};

/// A run of the journal, recompiled from its stored workflow and inputs, with what resuming it
/// would do. prepare_resume() fills it; async_resume() runs it.
struct resume_plan {
    journal_run run;                         ///< as recorded (the workflow source included)
    std::optional<plan> compiled;            ///< absent when the stored document no longer compiles
    diagnostics diags;                       ///< the recompilation's
    std::vector<resume_decision> decisions;  ///< by plan index
    std::vector<journal_attempt> uncertain;  ///< last attempts that may have had their effect
    resume_state state;                      ///< what the scheduler takes over
    /// Why it cannot go on: unknown_run, run_live, a journal error (exit 5), a stored
    /// document that does not compile the same (exit 2 or 5), uncertain attempts without
    /// rerun_uncertain (exit 3). success when it may.
    exit_status status = exit_status::success;
    std::string message;  ///< the refusal, naming the run (and the tasks)
    /// The journal's own failure behind a persistence refusal (unknown_run, run_live, ...).
    std::optional<journal_errc> journal_code;
    /// Whether the run was recorded as running by an owner `alive` called alive.
    bool live = false;

    bool ok() const { return status == exit_status::success; }
};

/// Loads run `run_id` from `db`, recompiles its stored workflow with its stored inputs (the
/// same plan digest, or it refuses), and decides for each task: succeeded tasks are reused,
/// never-started ones run, definitely failed ones are kept unless `retry_failed`, uncertain
/// ones refuse the resume unless `rerun_uncertain`; a task runs again when one of its needs
/// does. Reused results carry their streams only when a later template or spec.outputs reads
/// them (otherwise `streams_released`: a report reads them from the journal). `alive` tells
/// a live owner (a live run is refused). Synchronous: journal reads only; nothing runs.
resume_plan prepare_resume(journal& db, std::string_view run_id, const resume_options& options,
                           const owner_alive_fn& alive);

namespace detail {
void async_resume_impl(boost::asio::any_io_executor ex, const resume_plan& rp, run_options options,
                       boost::asio::any_completion_handler<void(run_report)> handler);
}

/// Runs a prepared resume (`rp.ok()`): claims the run in `options.journal` (required; a run
/// claimed meanwhile by a live owner is refused: the report's error is journal_failed, exit
/// 5), then runs `*rp.compiled` as async_run() does, with the run's id, taking over
/// `rp.state`. `options.run_id`, `record` and `resume` are set from `rp`. `rp` must outlive
/// the operation. Completion signature and cancellation: as async_run() (the claim itself is
/// not cancellable).
template <typename Token>
auto async_resume(boost::asio::any_io_executor ex, const resume_plan& rp, run_options options,
                  Token&& token) {
    return boost::asio::async_initiate<Token, void(run_report)>(
        [](auto handler, boost::asio::any_io_executor e, const resume_plan* r, run_options o) {
            detail::async_resume_impl(std::move(e), *r, std::move(o), std::move(handler));
        },
        token, std::move(ex), &rp, std::move(options));
}

}  // namespace agentctl
