// The command lines agentctl runs against Slurm: one `srun` per attempt, and the batched
// squeue, scancel, scontrol and sinfo calls around it; and srun's own environment. Pure:
// argv and environment vectors only (see docs/SLURM.md, sections 3, 4 and 10).
#pragma once

#include "runner/slurm/job.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::slurm {

/// Resource options from the command line; empty or absent ones are not passed.
struct resource_options {
    std::string partition;                       ///< --partition (Slurm reads a,b as "either")
    std::string account;                         ///< --account
    std::string qos;                             ///< --qos
    std::optional<std::uint32_t> cpus_per_task;  ///< --cpus-per-task, >= 1
    std::optional<std::uint64_t> mem_mib;        ///< --mem in MiB, >= 1
};

/// Everything one attempt's srun command line is made of.
struct srun_request {
    std::string srun;  ///< absolute path of srun
    std::string run_id;
    job_owner owner;
    std::string task_id;
    std::uint32_t attempt = 1;  ///< >= 1
    std::string executable;     ///< resolved and allow-listed, absolute
    std::vector<std::string> args;
    std::string cwd;                          ///< authorised working directory, absolute
    std::vector<std::string> env_names;       ///< declared names only; the values are in srun's environment
    std::optional<std::uint64_t> timeout_ms;  ///< agentctl's own timeout of the attempt
    std::uint64_t kill_grace_ms = 0;          ///< killGraceSeconds, in ms
    resource_options resources;
    /// srun forwards its own stdin to the task (extension requests) instead of --input=none.
    bool forward_stdin = false;
};

/// An argument vector, or why none could be made.
struct argv_result {
    std::vector<std::string> argv;
    std::string error;  ///< empty when argv is usable
    explicit operator bool() const { return error.empty(); }
};

/// `SRUN --quiet --ntasks=1 --nodes=1 --job-name=NAME --input=none --unbuffered --mpi=none
/// --chdir=CWD --export=NAMES|NONE [--time=MIN] [resource options] -- EXE ARGS...`.
/// Refuses (error set, argv empty) a relative srun, executable or cwd, a control character in
/// any flag value, a NUL in an argument, and an environment name env_name_error() refuses.
argv_result srun_argv(const srun_request& request);

/// One allocation worker's step (docs/WORKER.md, "One worker per node").
struct worker_step_request {
    std::string srun;          ///< absolute path of srun
    std::uint64_t job_id = 0;  ///< the allocation
    std::string node;          ///< the node it runs on
    std::uint32_t cpus = 0;    ///< the allocation's CPUs on that node; 0: not passed
    std::string name;          ///< the step's name (job_name() of "worker.NODE", the generation)
    std::string agentctl;      ///< absolute path of this agentctl, the same file on the node
};

/// `SRUN --jobid=ID --overlap --nodes=1 --ntasks=1 --nodelist=NODE [--cpus-per-task=C]
/// --mem=0 --unbuffered --mpi=none --kill-on-bad-exit=1 --quiet --export=NONE --job-name=NAME
/// -- AGENTCTL worker`. Refuses a relative srun or agentctl, an empty node or name, and a
/// control character in any of them.
argv_result worker_step_argv(const worker_step_request& request);

/// The allocation agentctl asks for with --slurm-nodes (docs/WORKER.md, "Asking for nodes").
struct salloc_request {
    std::string salloc;                   ///< absolute path of salloc
    std::string name;                     ///< the job's name (job_name() of "allocation"), how it is found
    std::uint32_t nodes = 0;              ///< >= 1
    std::string time;                     ///< --time, Slurm's syntax; empty: the partition's default
    std::string partition, account, qos;  ///< passed when not empty
};

/// `SALLOC --no-shell --quiet --nodes=N --exclusive --job-name=NAME [--time=T]
/// [--partition=P] [--account=A] [--qos=Q]`: whole nodes (a worker uses all of a node's CPUs),
/// no shell (salloc returns once granted; the allocation lives until scancel or its time
/// limit). Refuses a relative salloc, no nodes, an empty name and control characters.
argv_result salloc_argv(const salloc_request& request);

/// `scontrol show job -d -o ID`: with the CPUs of each node (`Nodes=H CPU_IDs=0-7`).
std::vector<std::string> scontrol_show_job_detail(std::string_view scontrol, std::uint64_t job_id);

/// The --time minutes for an attempt: ceil((timeout + grace) / 1 min) + 1, so that agentctl's
/// own deadline and kill path always come first; nullopt without a timeout (no --time: the
/// partition's default applies; --time=0 would mean unlimited). At most 2^31 - 1.
std::optional<std::uint64_t> time_limit_minutes(std::optional<std::uint64_t> timeout_ms,
                                                std::uint64_t grace_ms);

/// Why `name` cannot be passed with --export, or empty: it must match [A-Za-z_][A-Za-z0-9_]*,
/// not be one of export's keywords (ALL, NONE, NIL in any case) and not start with SLURM_ or
/// SRUN_ (srun reads those as its own options, from the environment their values travel in).
std::string env_name_error(std::string_view name);

/// Reads agentctl's own environment.
using environment_lookup = std::function<std::optional<std::string>(std::string_view)>;

/// srun's environment: SLURM_CONF from agentctl's environment when set, then `action_env`
/// ("NAME=value"). Nothing else: every SLURM_* variable of srun's environment reaches the
/// task, and an inherited SLURM_JOB_ID would make srun run a step of that job instead.
std::vector<std::string> client_environment(const environment_lookup& host_env,
                                            const std::vector<std::string>& action_env);

/// `squeue --noheader --states=all --format=squeue_format --name=N,...`: one command per
/// chunk of names such that the --name argument stays within `max_arg_bytes` (Linux takes
/// at most 128 KiB per argument). No names, no commands.
std::vector<std::vector<std::string>> squeue_by_names(std::string_view squeue,
                                                      const std::vector<std::string>& names,
                                                      std::size_t max_arg_bytes = 64 * 1024);

/// The same query by job id (--jobs=ID,...), chunked alike.
std::vector<std::vector<std::string>> squeue_by_ids(std::string_view squeue,
                                                    const std::vector<std::uint64_t>& ids,
                                                    std::size_t max_arg_bytes = 64 * 1024);

/// `squeue --noheader --me --format=squeue_format`: this user's jobs that are not final,
/// for finding a dead run's jobs by name.
std::vector<std::string> squeue_mine(std::string_view squeue);

/// `scancel --signal=SIG ID`: the signal to the job's steps; the job ends only if they do.
std::vector<std::string> scancel_signal(std::string_view scancel, std::uint64_t job_id,
                                        std::string_view signal);

/// `scancel --signal=KILL ID.0`: SIGKILL to the attempt's step at once. (`scancel
/// --signal=KILL ID` is an ordinary cancellation: SIGTERM, then SIGKILL after KillWait.)
std::vector<std::string> scancel_kill_step(std::string_view scancel, std::uint64_t job_id);

/// `scancel ID...`: cancels the jobs (SIGTERM, KillWait, SIGKILL). Its exit status says
/// nothing about whether they existed; confirm with squeue.
std::vector<std::string> scancel_jobs(std::string_view scancel, const std::vector<std::uint64_t>& ids);

/// `scancel --name=NAME`: the job of one attempt whose id is not known yet. One name only:
/// scancel reads `a,b` as a single name.
std::vector<std::string> scancel_by_name(std::string_view scancel, std::string_view name);

/// `scontrol show job -o ID`.
std::vector<std::string> scontrol_show_job(std::string_view scontrol, std::uint64_t job_id);

/// `scontrol ping`: fails in milliseconds when nothing listens on the controller's port.
std::vector<std::string> scontrol_ping(std::string_view scontrol);

/// True when `scontrol ping` output says a controller is UP.
bool ping_says_up(std::string_view output);

/// `sinfo --noheader --partition=P --format=%P|%a` (sinfo exits 0 for an unknown partition,
/// printing nothing).
std::vector<std::string> sinfo_partition(std::string_view sinfo, std::string_view partition);

/// `sinfo --noheader --format=%P|%a`: every partition, the default one marked with '*'.
std::vector<std::string> sinfo_partitions(std::string_view sinfo);

/// The default partition named in sinfo_partitions output, if any.
std::optional<std::string> default_partition(std::string_view sinfo_output);

/// The partitions of a --partition value: Slurm reads `a,b` as "any of these".
std::vector<std::string> split_partitions(std::string_view partition);

/// What sinfo_partition output says about `partition`.
struct partition_status {
    bool found = false;
    bool up = false;
    bool is_default = false;  ///< sinfo marks the default partition with '*'
};
partition_status parse_partition(std::string_view sinfo_output, std::string_view partition);

}  // namespace agentctl::slurm
