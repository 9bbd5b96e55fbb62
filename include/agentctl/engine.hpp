// Running a compiled plan: the scheduler, on the caller's executor.
//
// The library creates no threads, no io_context, installs no signal handler and keeps no
// global state. Everything runs on the executor given to async_run().
//
// A run takes its settings (plain values), its collaborators (objects the caller owns, each
// optional, held by pointer) and gives a report, as Ninja's Builder takes a BuildConfig beside
// its BuildLog* and Status*. Resuming a run of the journal is resume.hpp.
#pragma once

#include <agentctl/backend.hpp>
#include <agentctl/diagnostic.hpp>
#include <agentctl/journal_run.hpp>
#include <agentctl/process_types.hpp>
#include <agentctl/task_result.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

struct plan;
class task_runner;
class event_sink;
class journal_writer;
struct resume_state;

enum class run_state { succeeded, failed, cancelled };
std::string_view to_string(run_state);

/// An answer to "may this task run?".
enum class approval_answer { yes, no, all };

/// Asks for approval of tasks whose plan says `requires_approval`.
class approver {
public:
    virtual ~approver() = default;

    /// Completion signature: void(approval_answer). `all` approves this and every later task.
    /// Not cancellable: the run waits for the answer (a cancelled run then starts nothing).
    template <typename Token>
    auto async_approve(const plan& p, std::uint32_t task_index, Token&& token) {
        return boost::asio::async_initiate<Token, void(approval_answer)>(initiate_approve{}, token, this, &p,
                                                                         task_index);
    }

private:
    /// What implementations override (Asio's type_erasure/line_reader.hpp shape).
    virtual void async_approve_impl(const plan& p, std::uint32_t task_index,
                                    boost::asio::any_completion_handler<void(approval_answer)> handler) = 0;

    struct initiate_approve {
        template <typename Handler>
        void operator()(Handler&& handler, approver* self, const plan* p, std::uint32_t task_index) const {
            self->async_approve_impl(*p, task_index, std::forward<Handler>(handler));
        }
    };
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

/// Lets a front end end one running attempt as its timeout would, at a time the front end
/// decides while the run goes on (GNU parallel's `--timeout N%`, a share of the median runtime
/// of the jobs that succeeded: docs/PARALLEL.md). The run binds it while it runs.
class task_expiry {
public:
    /// Ends task `task_index`'s running attempt as a timeout does: its process tree is
    /// terminated gracefully, the attempt ends `timed_out` with `reason` as its message and is
    /// retried when the task's retry.on has timeout. Nothing when the task has no attempt
    /// running (or no run is bound). Call on the run's executor.
    void expire(std::uint32_t task_index, const std::string& reason) const {
        if (expire_) expire_(task_index, reason);
    }

    /// Set by the run while it runs (engine only).
    std::function<void(std::uint32_t, const std::string&)> expire_;
};

/// What a run does: plain values.
struct run_settings {
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
    /// Each builtin.shell.exec process writes its stdout and stderr straight to this process's
    /// own (descriptors 1 and 2, inherited): nothing is captured, redacted or capped, and each
    /// result says so (task_result::output_passed_through). The jobs' output may interleave.
    /// Local host processes only: with the slurm backend, a container action or a secret in an
    /// action's environment (its output could not be redacted) the run fails before any effect.
    /// Other actions (extension.process speaks its protocol on stdout) capture as always.
    /// `agentctl parallel -u` (docs/PARALLEL.md, "Output").
    bool pass_output = false;
    /// `run --check`: a preview. Nothing with an effect runs and no approval is asked:
    /// processes give `{status: requires_execution}`, builtin.write says what it would write,
    /// builtin.read, assign and assert run (docs/DESIGN.md, "Files").
    bool check = false;
    /// `run --diff`: each builtin.write result carries its diff (else `diff` is null).
    bool diff = false;
    /// Without a journal: whether run_report::tasks keeps the captured streams of the tasks
    /// that succeeded. A front end that never prints them (the CLI's human output) sets it
    /// false, and a succeeded task's streams then leave memory when it ends, unless something
    /// reads its output later (plan::output_referenced()); failed tasks keep theirs. So memory
    /// stays flat however much the tasks print (docs/CAPTURE.md, "Without a journal").
    bool keep_streams = true;
    /// With a journal: the run's record as the caller knows it (workflow source and path,
    /// argv, inputs, options); the engine fills in the run id, the digests, the task count and
    /// the owner. Not used when resuming (the run is recorded already).
    journal_run record;
};

/// Whom a run talks to: each optional, each owned by the caller and outliving the run.
struct run_collaborators {
    task_runner* runner = nullptr;  ///< nullptr: the built-in runner (host, container, Slurm)
    event_sink* events = nullptr;
    approver* approvals = nullptr;  ///< nullptr: a task needing approval stops the run before any effect
    dispatch_gate* gate = nullptr;  ///< nullptr: always open
    task_expiry* expiry = nullptr;  ///< nullptr: attempts end by their own timeouts only
    /// Told of every engine client and Slurm job used, so that they die with us (crash safety).
    watchdog* watch = nullptr;
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
    std::chrono::milliseconds duration{0};  ///< the whole run's: a resume's counts its earlier segments

    std::vector<diagnostic> warnings;  ///< e.g. jobs lowered to fit the descriptor limit
    bool resumed = false;  ///< a resume: results say whether they were `reused`
    /// The built-in runner: containers that dead owners left on the engines this run uses,
    /// removed before anything started (a front end prints them with its own sweep).
    std::vector<swept_container> leftovers;

    /// 0 succeeded, 3 approval or policy, 4 failed, 130 cancelled (exit_status).
    int exit_code() const;
};

/// A new run id (`run-` and 16 random hex digits), as a run makes when run_settings::run_id
/// is empty: for a front end that must know the id before the run starts.
std::string new_run_id();

/// Task ids that need approval under the plan's policy.
std::vector<std::uint32_t> tasks_requiring_approval(const plan& p);

namespace detail {
void async_run_impl(boost::asio::any_io_executor ex, const plan& p, run_settings settings,
                    run_collaborators with, const resume_state* resume,
                    boost::asio::any_completion_handler<void(run_report)> handler);
}

/// Runs `p` to completion. `p` and the collaborators must outlive the operation.
///
/// Completion signature: void(run_report). Cancellation through the token's slot: total or
/// partial stops dispatching and terminates running tasks gracefully (a second, terminal
/// request kills them at once); the operation completes only after every task coroutine has
/// finished and every child process is reaped. Thread safety: use from the executor's thread.
template <typename Token>
auto async_run(boost::asio::any_io_executor ex, const plan& p, run_settings settings, run_collaborators with,
               Token&& token) {
    return boost::asio::async_initiate<Token, void(run_report)>(
        [](auto handler, boost::asio::any_io_executor e, const plan* pp, run_settings s,
           run_collaborators w) {
            detail::async_run_impl(std::move(e), *pp, std::move(s), w, nullptr, std::move(handler));
        },
        token, std::move(ex), &p, std::move(settings), with);
}

/// async_run() with no collaborators: the built-in runner, no events, no approver, no journal.
template <typename Token>
auto async_run(boost::asio::any_io_executor ex, const plan& p, run_settings settings, Token&& token) {
    return async_run(std::move(ex), p, std::move(settings), run_collaborators{}, std::forward<Token>(token));
}

}  // namespace agentctl
