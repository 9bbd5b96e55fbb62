// Resuming a run of the journal (docs/JOURNAL.md, "Resume"): recompile what was recorded,
// decide per task what happens, then run the rest.
#pragma once

#include <agentctl/engine.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/session.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace agentctl {

/// What a resumed run takes over from the earlier segments of its journal (prepare_resume()
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
    /// The time the earlier segments ran, as the journal recorded it: a resumed run's duration
    /// is the whole run's. (A segment whose agentctl died recorded none, and its claim had
    /// cleared the ones before it: those are not counted.)
    std::uint64_t duration_before_ms = 0;
};

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

/// What compiles `run` again as it was recorded: its document, inputs, variables, every
/// task's timeout and attempts, and a compensation run's selection; nullopt when its inputs
/// cannot be read.
std::optional<session_request> recorded_request(const journal_run& run);

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
void async_resume_impl(boost::asio::any_io_executor ex, const resume_plan& rp, run_settings settings,
                       run_collaborators with, boost::asio::any_completion_handler<void(run_report)> handler);
}

/// Runs a prepared resume (`rp.ok()`): claims the run in `with.journal` (required; a run
/// claimed meanwhile by a live owner is refused: the report's error is journal_failed, exit
/// 5), then runs `*rp.compiled` as async_run() does, with the run's id, taking over
/// `rp.state`. `settings.run_id` is set from `rp`, `settings.record` is not used. `rp` must
/// outlive the operation. Completion signature and cancellation: as async_run() (the claim
/// itself is not cancellable).
template <typename Token>
auto async_resume(boost::asio::any_io_executor ex, const resume_plan& rp, run_settings settings,
                  run_collaborators with, Token&& token) {
    return boost::asio::async_initiate<Token, void(run_report)>(
        [](auto handler, boost::asio::any_io_executor e, const resume_plan* r, run_settings s,
           run_collaborators w) {
            detail::async_resume_impl(std::move(e), *r, std::move(s), w, std::move(handler));
        },
        token, std::move(ex), &rp, std::move(settings), with);
}

}  // namespace agentctl
