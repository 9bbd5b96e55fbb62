// The interface between the scheduler and whatever runs one task attempt.
//
// The engine renders a task, then hands one attempt to a task_runner. The real runner
// spawns a host process or a container; tests use a fake. Results are data: a task that
// exits non-zero is a result, not an error.
#pragma once

#include <agentctl/error.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/process.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// Final state of a task in a run (docs/CONTRACT.md, "Results").
enum class task_state {
    succeeded,
    failed,                 ///< non-zero exit, signal death, or an error before/after the process
    timed_out,
    cancelled,
    output_limit_exceeded,
    spawn_failed,
    skipped,                ///< `when` was false, a dependency did not succeed, or the run stopped first
};
std::string_view to_string(task_state);

struct task_error {
    error_code code = error_code::internal_error;
    std::string message;  ///< redacted
};

/// What one task (all its attempts) produced. Strings are redacted and valid UTF-8.
struct task_result {
    task_state state = task_state::skipped;
    std::uint32_t attempts = 0;
    std::optional<int> exit_code;
    std::optional<int> signal;
    std::string stdout_text;
    std::string stderr_text;
    bool stdout_lossy = false;  ///< invalid UTF-8 in the raw bytes was replaced
    bool stderr_lossy = false;
    std::uint64_t duration_ms = 0;
    std::string command;       ///< the resolved executable (host) or the engine client (container)
    std::vector<std::string> argv;  ///< the command line the task asked for: command, then rendered args
    std::string isolation;     ///< "process" | "container" | "" for pure actions
    std::string engine;        ///< container: "docker" | "podman"
    std::string containment;   ///< "cgroup" | "process-group" | "engine" | "slurm"
    std::string backend = "local";              ///< where the last attempt ran: "local" | "slurm"
    std::optional<std::uint64_t> slurm_job_id;  ///< slurm: the last attempt's job, once squeue listed it
    std::string slurm_node;                     ///< slurm: the node it ran on, as squeue printed it
    std::string slurm_state;  ///< slurm: the job's final state ("COMPLETED", "NODE_FAIL", ...), if seen
    std::uint32_t descendants_killed = 0;
    resource_usage usage;
    std::string limit_stream;  ///< output_limit_exceeded: "stdout" | "stderr" | "combined output"
    std::uint64_t limit_bytes = 0;
    std::uint64_t output_bytes = 0;  ///< bytes captured, for the output budget
    std::optional<task_error> error;
    boost::json::value output;  ///< what `tasks.<id>.output` refers to
    /// The text is kept once: in `output.stdout` and `output.stderr` (builtin actions, whose
    /// output holds them anyway), and stdout_text and stderr_text are empty. Read the text
    /// through stdout_of() and stderr_of().
    bool streams_in_output = false;
    /// A resumed run took this result over from an earlier segment instead of running the task.
    bool reused = false;
    /// The run's journal holds this result whole; here the captured streams (and the output's
    /// copies of them) were let go to keep memory flat. Read them from the journal.
    bool streams_released = false;
    /// A foreach/matrix aggregate whose output (one item per child) nothing later in the run
    /// reads: its `output` is null, and it is recorded so. Its items are its children's
    /// results, read back from theirs (the report's tasks or the journal; the reports).
    bool output_released = false;
};

/// The task's captured stdout (redacted, valid UTF-8), wherever it is kept.
inline std::string_view stdout_of(const task_result& t) {
    if (t.streams_in_output && t.output.is_object())
        if (auto* s = t.output.get_object().if_contains("stdout"); s && s->is_string()) return s->get_string();
    return t.stdout_text;
}

/// The task's captured stderr, like stdout_of().
inline std::string_view stderr_of(const task_result& t) {
    if (t.streams_in_output && t.output.is_object())
        if (auto* s = t.output.get_object().if_contains("stderr"); s && s->is_string()) return s->get_string();
    return t.stderr_text;
}

/// What identifies a started attempt, as soon as it is known: what a later process needs to
/// find it again (the journal's handle of the attempt).
struct attempt_started {
    std::optional<int> pid;        ///< host process leader (or engine client)
    std::uint64_t start_lo = 0;    ///< its start time (clock ticks after boot) is in [lo, hi]
    std::uint64_t start_hi = 0;
    std::string cgroup;            ///< its cgroup leaf, if any
    std::string container;         ///< container name, if any
    std::string container_engine;  ///< "docker" | "podman"
    std::string slurm_job_id;      ///< Slurm job, once known
};

/// Everything a runner needs for one attempt, already rendered by the engine.
struct attempt_request {
    const plan* compiled = nullptr;
    std::uint32_t task_index = 0;
    std::string task_id;
    std::uint32_t attempt = 1;  ///< 1-based
    boost::json::value with;    ///< the task's rendered input
    std::vector<std::string> args;  ///< rendered action args
    std::optional<std::string> cwd;  ///< rendered, relative to the workspace root
    /// Called (on the run's executor, possibly more than once as more becomes known) with
    /// what identifies the attempt once it started. Empty: nothing is called.
    std::function<void(const attempt_started&)> on_started;

    /// The task's node: its action, limits, timeout (a child's template; its id is task_id).
    const plan_task& task() const { return compiled->node(task_index); }
    const action_spec& action() const { return compiled->action_of(task()); }
};

/// Runs attempts. Implementations are used from one executor (one thread) at a time.
class task_runner {
public:
    virtual ~task_runner() = default;

    /// Called once before the first attempt of a run: checks and resolves what every attempt
    /// will need (workspace, secrets, container engines and images). A failure stops the run
    /// before any task starts. Completion signature: void(std::optional<task_error>).
    /// The default completes with no error. `ex` is the run's executor.
    virtual void async_prepare(boost::asio::any_io_executor ex,
                               boost::asio::any_completion_handler<void(std::optional<task_error>)> handler);

    /// Runs one attempt. Completion signature: void(task_result). Cancellation through the
    /// handler's slot: terminal kills at once; partial/total terminate gracefully; either way
    /// the result is `cancelled` with the output captured so far.
    virtual void async_run(const attempt_request& request,
                           boost::asio::any_completion_handler<void(task_result)> handler) = 0;

    /// Called once when a run ends, after its last attempt completed (also when prepare
    /// failed or the run was cancelled): finishes what attempts left for later, such as
    /// stopped containers awaiting removal, and checks that nothing the run created is left.
    /// Completion signature: void(std::optional<task_error>); an error fails the run. Not
    /// cancellable. The default completes with no error. `ex` is the run's executor.
    virtual void async_finish(boost::asio::any_io_executor ex,
                              boost::asio::any_completion_handler<void(std::optional<task_error>)> handler);
};

}  // namespace agentctl
