// What a task produced: its final state, its error, its captured streams and its output. Plain
// values, no Asio: reports, events and the journal use them without the engine.
#pragma once

#include <agentctl/error.hpp>
#include <agentctl/process_types.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// Final state of a task in a run (docs/CONTRACT.md, "Results").
enum class task_state {
    succeeded,
    failed,  ///< non-zero exit, signal death, or an error before/after the process
    timed_out,
    cancelled,
    output_limit_exceeded,
    spawn_failed,
    skipped,  ///< `when` was false, a dependency did not succeed, or the run stopped first
};
std::string_view to_string(task_state);

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
    std::string command;            ///< the resolved executable (host) or the engine client (container)
    std::vector<std::string> argv;  ///< the command line the task asked for: command, then rendered args
    std::string isolation;          ///< "process" | "container" | "" for pure actions
    std::string engine;             ///< container: "docker" | "podman"
    std::string containment;        ///< "cgroup" | "process-group" | "engine" | "slurm"
    std::string backend = "local";  ///< where the last attempt ran: "local" | "slurm"
    std::optional<std::uint64_t> slurm_job_id;  ///< slurm: the last attempt's job, once squeue listed it
    std::string slurm_node;                     ///< slurm: the node it ran on, as squeue printed it
    /// slurm, allocation mode: the worker that ran it, "worker.NODE:N" (its step's job name ends so)
    std::string slurm_worker;
    std::string slurm_state;  ///< slurm: the job's final state ("COMPLETED", "NODE_FAIL", ...), if seen
    std::uint32_t descendants_killed = 0;
    resource_usage usage;
    std::string limit_stream;  ///< output_limit_exceeded: "stdout" | "stderr" | "combined output"
    std::uint64_t limit_bytes = 0;
    std::uint64_t output_bytes = 0;  ///< bytes captured, for the output budget
    /// The process wrote its stdout and stderr straight to agentctl's own (run_settings::
    /// pass_output): nothing was captured, so the streams here are empty, not silent.
    bool output_passed_through = false;
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
        if (auto* s = t.output.get_object().if_contains("stdout"); s && s->is_string())
            return s->get_string();
    return t.stdout_text;
}

/// The task's captured stderr, like stdout_of().
inline std::string_view stderr_of(const task_result& t) {
    if (t.streams_in_output && t.output.is_object())
        if (auto* s = t.output.get_object().if_contains("stderr"); s && s->is_string())
            return s->get_string();
    return t.stderr_text;
}

}  // namespace agentctl
