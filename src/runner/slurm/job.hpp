// Slurm jobs as agentctl names and reads them: the job-name scheme, job states, and parsers
// for `squeue --format` and `scontrol show job -o` output. Pure: no I/O, no clock, no
// environment (see docs/SLURM.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentctl::slurm {

/// The agentctl that submitted a job, as a job name carries it.
struct job_owner {
    std::string host;        ///< job_name_host() of agentctl's host name
    long pid = 0;            ///< > 0
    std::string start_time;  ///< the process start time, decimal digits (clock ticks since boot)
};

/// The fields of one of our job names.
struct job_name_fields {
    std::string run_id;
    job_owner owner;
    std::string task;           ///< job_name_task() of the task id (shortened when long)
    std::uint32_t attempt = 0;  ///< >= 1
};

/// Every name of ours starts with this.
inline constexpr std::string_view job_name_prefix = "agentctl:";
inline constexpr std::size_t max_run_id_length = 64;
inline constexpr std::size_t max_host_length = 64;
inline constexpr std::size_t max_task_length = 200;

/// A host name as a name field: characters outside [A-Za-z0-9.-] become '_', at most
/// max_host_length; "unknown" when empty. Compare owners through this, never raw names.
std::string job_name_host(std::string_view host);

/// A task id as a name field: characters outside [A-Za-z0-9_.-] become '_'; an id longer than
/// max_task_length keeps its first 183 characters, then '~' and 16 hex digits of its hash.
std::string job_name_task(std::string_view task_id);

/// `agentctl:RUN:HOST:PID:START:TASK:ATTEMPT`. Returns nothing, with `error` saying why, when
/// the run id is not 1-64 characters of [A-Za-z0-9_-], or the owner or attempt is not usable.
std::optional<std::string> job_name(std::string_view run_id, const job_owner& owner, std::string_view task_id,
                                    std::uint32_t attempt, std::string& error);

/// The fields of a name job_name() made; nothing for any other name.
std::optional<job_name_fields> parse_job_name(std::string_view name);

/// Reads a process start time by pid: nullopt = no such process, "" = exists, unknown.
using start_time_reader = std::function<std::optional<std::string>(long pid)>;

/// True only when `owner` was on `our_host` (job_name_host spelling) and its pid is gone or
/// now has another start time. Another host, or an unknown start time: false, never touched.
bool owner_is_dead(const job_owner& owner, std::string_view our_host, const start_time_reader& start_time_of);

/// A job state, as squeue's %T, scontrol's JobState= (or squeue's short %t) spell it.
enum class job_state {
    pending,
    running,
    suspended,
    completing,
    completed,
    cancelled,
    failed,
    timeout,
    node_fail,
    preempted,
    boot_fail,
    deadline,
    out_of_memory,
    configuring,
    resizing,
    requeued,
    requeue_fed,
    requeue_hold,
    revoked,
    signaling,
    special_exit,
    stage_out,
    stopped,
    resv_del_hold,
    unknown,  ///< a state this code does not know
};

/// "PENDING", "CANCELLED by 0" (the first word counts), "PD", ...; unknown otherwise.
job_state parse_job_state(std::string_view text);
/// The long upper-case name ("NODE_FAIL"); "UNKNOWN" for unknown.
std::string_view to_string(job_state s);
/// False only for the final states. An unknown state counts as active: it never confirms
/// that a job is gone. COMPLETING is active: the program may still run.
bool is_active(job_state s);

/// A pending job's reason (squeue's %r) that no wait can satisfy: the request exceeds what
/// its partition is configured to give (more nodes, a longer time), so it would pend until an
/// administrator changes the partition (docs/SLURM.md, section 13).
bool never_granted(std::string_view reason);

/// The squeue format every query of ours uses: no field but the last (the name) can hold '|'.
inline constexpr std::string_view squeue_format = "%i|%T|%r|%N|%j";

/// One line of squeue_format output.
struct queue_entry {
    std::uint64_t job_id = 0;
    job_state state = job_state::unknown;
    std::string state_text;  ///< as printed
    std::string reason;      ///< "None", "Resources", ...
    std::string nodes;       ///< empty while pending
    std::string name;
};

/// Lines of squeue_format output; lines that do not parse (array or heterogeneous job ids,
/// headers, blanks) are skipped.
std::vector<queue_entry> parse_squeue(std::string_view output);

/// The entries of run `run_id` submitted by exactly `owner` that are not final: what a run
/// must cancel before it ends (also when it never learnt their ids).
std::vector<queue_entry> jobs_of_run(const std::vector<queue_entry>& entries, std::string_view run_id,
                                     const job_owner& owner);

/// The entries, not final, of agentctl runs whose owner is dead on `our_host`
/// (owner_is_dead) and, when `run_ids` is not empty, whose run is one of them: the leftovers
/// a later agentctl cancels. A name that does not parse, another host, or a live or unknown
/// owner: never selected.
std::vector<queue_entry> jobs_of_dead_runs(const std::vector<queue_entry>& entries, std::string_view our_host,
                                           const start_time_reader& start_time_of,
                                           const std::vector<std::string>& run_ids = {});

/// "X:Y" of scontrol's ExitCode=: the exit status and the signal.
struct exit_pair {
    int status = 0;
    int signal = 0;
};
std::optional<exit_pair> parse_exit_pair(std::string_view text);

/// One job of `scontrol show job -o`: its Key=value fields in order, unknown keys kept.
struct job_record {
    std::vector<std::pair<std::string, std::string>> fields;

    /// The value of `key` (exact, case-sensitive), if present.
    std::optional<std::string_view> get(std::string_view key) const;
    std::optional<std::uint64_t> job_id() const;
    job_state state() const;  ///< JobState=; unknown when absent
    std::optional<exit_pair> exit_code() const;
};

/// One record per non-empty line. A word without '=' continues the previous value (so a
/// WorkDir or Command holding a space survives); a line with no JobId= is skipped.
std::vector<job_record> parse_scontrol_jobs(std::string_view output);

}  // namespace agentctl::slurm
