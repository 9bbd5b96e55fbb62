// How one srun attempt ended: the program's exit, or Slurm's time limit, a node failure, an
// out-of-memory kill, preemption, a cancellation... from what the launcher saw (srun's status
// and the tail of its stderr) and the job's final state from the controller. Pure. The
// measurements behind every rule are in docs/SLURM.md, section 5.
#pragma once

#include "runner/slurm/job.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace agentctl::slurm {

/// What srun printed about the end, found in its stderr tail. The program's stderr travels
/// on the same stream, so a program can forge these: they count only where the controller's
/// job state is not known, or agrees.
struct stderr_markers {
    bool time_limit = false;            ///< "DUE TO TIME LIMIT"
    bool node_failure = false;          ///< "Node failure on" / "DUE TO NODE FAILURE"
    bool out_of_memory = false;         ///< "task N: Out Of Memory" / "oom-kill event"
    bool preempted = false;             ///< "DUE TO PREEMPTION"
    bool cancelled = false;             ///< "CANCELLED AT" with no "DUE TO" (also after scancel --signal)
    bool launch_failed = false;         ///< srun got no job or could not start the step
    bool chdir_failed = false;          ///< "couldn't chdir to ...: going to /tmp instead"
    bool exec_not_found = false;        ///< "execve(): PATH: No such file or directory"
    bool exec_denied = false;           ///< "execve(): PATH: Permission denied"
    std::optional<int> task_exit_code;  ///< "task 0: Exited with exit code N"
    bool task_signal_line = false;      ///< "task 0: <signal description>" (Killed, Terminated, ...)
    std::string line;                   ///< the most telling srun/slurmstepd line (for messages), or empty
};

/// Scans the last lines srun wrote to stderr.
stderr_markers scan_stderr(std::string_view tail);

/// Everything known about one ended attempt.
struct end_evidence {
    std::optional<int> srun_exit;       ///< srun's exit status, when it exited
    std::optional<int> srun_signal;     ///< the signal srun died of, when it did
    std::string_view stderr_tail;       ///< the last KiBs of srun's stderr, whatever the output caps
    std::optional<job_state> state;     ///< the job's state from squeue/scontrol after the end, if known
    std::optional<exit_pair> job_exit;  ///< scontrol's ExitCode=, if known
    bool stopped_by_agentctl = false;   ///< agentctl cancelled it (timeout, cancellation, overflow)
};

/// The kinds of end the engine maps to task states.
enum class end_kind {
    succeeded,
    exit_nonzero,          ///< exit_nonzero
    signaled,              ///< signaled
    stopped,               ///< agentctl stopped it: the engine's own reason applies
    time_limit,            ///< slurm_time_limit
    node_failure,          ///< slurm_node_failure
    out_of_memory,         ///< oom_killed
    preempted,             ///< slurm_preempted
    cancelled,             ///< slurm_cancelled: by someone else
    boot_failure,          ///< slurm_boot_failure
    deadline,              ///< slurm_deadline
    executable_not_found,  ///< executable_not_found, on the node
    permission_denied,     ///< permission_denied, on the node
    cwd_unavailable,       ///< cwd_unavailable: the node lacked it and the program ran in /tmp
    launch_failed,         ///< slurm_launch_failed: no job, or its step never started
    unknown,               ///< slurm_unknown_end
};

/// The error code for a kind ("" for succeeded and stopped).
std::string_view error_code(end_kind kind);

/// How an attempt ended.
struct attempt_end {
    end_kind kind = end_kind::unknown;
    std::optional<int> exit_code;  ///< the program's, when known
    std::optional<int> signal;     ///< the signal that ended the program, when known
    bool from_job_state = false;   ///< decided by the controller's state, not srun's output
    std::string message;           ///< one line for the report
};

/// The job state first (when known and final), then srun's stderr markers, then its status.
attempt_end classify_end(const end_evidence& evidence);

}  // namespace agentctl::slurm
