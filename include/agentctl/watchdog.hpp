// Crash safety: what a process that dies without cleaning up (SIGKILL, the OOM killer) leaves
// behind is killed by its watchdog within moments, and what is left after that is found and
// removed by the next process that sweeps. See docs/CRASH_SAFETY.md.
//
// Both are opt-in. The library on its own still creates no thread, installs no signal handler
// and forks nothing: an application (the agentctl CLI) starts the watchdog itself, first thing
// in main(), and calls sweep_dead_owners() before it starts any run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::asio {
class execution_context;
}

namespace agentctl {

namespace detail {
class watchdog_channel;
}

/// How the watchdog behaves once its owner is gone.
struct watchdog_options {
    /// The watchdog appends one line per thing it does here ("owner-gone", "cgroup-killed PATH
    /// N", "container-removed ENGINE ID", "slurm-cancelled IDS", "failed ...", "clean-exit",
    /// "done MS"). Empty: it keeps no record.
    std::string report_path;
    /// How long host trees get to die after their SIGKILL before the watchdog moves on.
    std::chrono::milliseconds host_kill_bound{1500};
    /// Bound of each engine or scancel call the watchdog makes.
    std::chrono::milliseconds call_timeout{8000};
    /// Once it acts, the watchdog exits after this long whatever is left to do.
    std::chrono::seconds lifetime_bound{45};
};

/// A container engine client whose containers die with us: on our death the watchdog runs
/// `PATH ps --all --quiet --filter label=agentctl.owner=OWNER` and `PATH rm --force ...` on
/// what it lists, with exactly `env` as the client's environment, then lists again.
struct engine_client {
    std::string name;              ///< "docker" or "podman" (podman also gets --time=0)
    std::string path;              ///< absolute path of the client
    std::vector<std::string> env;  ///< "NAME=value": the engine's connection variables
    std::string owner_label;       ///< the agentctl.owner label value of our containers
};

/// How Slurm jobs are cancelled on our death: `SCANCEL_PATH ID...` with exactly `env`.
struct slurm_client {
    std::string scancel_path;      ///< absolute path of scancel
    std::vector<std::string> env;  ///< "NAME=value": SLURM_CONF and the like
};

/// A small process that outlives its owner just long enough to kill what the owner started:
/// the owner's cgroup directory (every host tree under cgroup containment, setsid escapes
/// included) with cgroup.kill, the process groups of trees without a cgroup, the containers of
/// the announced engines, the announced Slurm jobs. It learns of its owner's death when the
/// socket between them reaches end-of-file (or the owner's pidfd becomes readable) without
/// a clean-exit message; then it acts and exits, bounded by lifetime_bound.
///
/// It runs in its own session (a terminal's SIGINT or SIGHUP to agentctl's process group does
/// not reach it) and ignores INT, HUP, TERM, QUIT, PIPE and the job-control signals: only its
/// owner's end can make it act, only SIGKILL end it early. It holds no file descriptor of its
/// owner's but the socket and the pidfd, has "/" as its working directory and shows as
/// `agentctl-watchdog` in ps. It is not its owner's child (it double-forks): nothing waits for
/// it, and it is never one of a task's descendants.
///
/// Methods are thread-safe and never block for long (each is one datagram on a non-blocking
/// socket; a watchdog that has not read for 1 s makes it fail: healthy() turns false).
class watchdog {
public:
    /// Forks the watchdog. Call it before any thread exists (fork() copies only the calling
    /// thread: a lock held by another could never be released in the child); with more than
    /// one thread it refuses. Returns nullopt with `error` set when it cannot start.
    /// `meanwhile`, when given, runs in this process once the watchdog is forked and before
    /// its readiness is awaited: work needed anyway overlaps the watchdog's own start (it must
    /// start no thread).
    static std::optional<watchdog> start(const watchdog_options& options, std::string& error,
                                         const std::function<void()>& meanwhile = {});

    watchdog(watchdog&&) noexcept;
    watchdog& operator=(watchdog&&) noexcept;
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;
    /// Without clean_exit(): closes the socket, and the watchdog cleans up as if we had died.
    ~watchdog();

    /// Tells the watchdog about the host trees that runs on this execution context (an
    /// io_context) start from now on: the owner cgroup directory, and, for trees contained by
    /// their process group only, each leader's pid and start time until it is reaped.
    void observe(boost::asio::execution_context& ctx);

    /// An engine client whose containers labelled `owner_label` must go with us. Repeating
    /// an announcement is harmless.
    void announce_engine(const engine_client& client);
    /// The scancel to use for the jobs announced next.
    void announce_slurm(const slurm_client& client);
    /// A Slurm job we submitted (as soon as its id is known) ...
    void announce_slurm_job(std::string_view job_id);
    /// ... and its end (finished, or cancelled and confirmed gone): no longer ours to cancel.
    void release_slurm_job(std::string_view job_id);
    /// A Slurm job about to be submitted, by its job name: until its id is announced (then
    /// release the name) a dead owner's job is cancelled by name (`scancel --name`).
    void announce_slurm_name(std::string_view job_name);
    void release_slurm_name(std::string_view job_name);
    /// A line for the report file (diagnostics, tests).
    void note(std::string_view text);

    /// Everything we started is accounted for: the watchdog exits without acting. Waits at
    /// most `bound` for it to be gone. True if it confirmed.
    bool clean_exit(std::chrono::milliseconds bound = std::chrono::milliseconds(500));

    /// The watchdog's pid.
    pid_t pid() const;
    /// False once a message could not be delivered (the watchdog died, or stopped reading).
    bool healthy() const;
    /// A new descriptor, the caller's to close, that becomes readable once the watchdog has
    /// exited (a pidfd of it): before clean_exit(), that it died (SIGKILL, the OOM killer),
    /// and nothing would clean up after our death any more. -1 where the kernel has no pidfds.
    int exit_descriptor() const;

private:
    explicit watchdog(std::shared_ptr<detail::watchdog_channel> channel);
    std::shared_ptr<detail::watchdog_channel> channel_;
};

/// A cgroup directory of a dead owner, as sweep_dead_owners() found it.
struct swept_cgroup {
    std::string path;
    pid_t owner_pid = 0;
    std::uint64_t owner_start = 0;       ///< 0 for a leaf made before owner directories existed
    std::uint32_t processes_killed = 0;  ///< members found in it (and beneath it) when killed
    bool removed = false;
    std::string error;  ///< why it could not be killed or removed; empty when removed
};

/// A container of a dead owner removed (or not) through its engine. sweep_dead_owners()
/// leaves these to the container engine code, which lists and removes them (its report goes
/// into the same sweep_report, so that the caller prints one).
struct swept_container {
    std::string engine;  ///< "docker" | "podman"
    std::string name;
    std::string owner;  ///< its agentctl.owner label value
    bool removed = false;
    std::string error;
};

/// What sweep_dead_owners() (and the engine's container sweep) did.
struct sweep_report {
    std::vector<swept_cgroup> cgroups;
    std::vector<swept_container> containers;
    /// Slurm jobs of dead runs (async_cancel_slurm_leftovers): "JOBID NAME" cancelled and
    /// confirmed gone ...
    std::vector<std::string> slurm_cancelled;
    /// ... and "JOBID NAME STATE" of those that could not be shown gone, or the error.
    std::vector<std::string> slurm_left;
    /// Why no cgroup was looked at (no cgroup v2 here, /proc unreadable); empty otherwise.
    std::string unavailable;
    /// Every leftover found was removed.
    bool ok() const;
    /// Nothing was found.
    bool empty() const {
        return cgroups.empty() && containers.empty() && slurm_cancelled.empty() && slurm_left.empty();
    }
};

struct sweep_options {
    /// The cgroup directory to look in; empty: the caller's own cgroup, where it (and every
    /// agentctl started from the same place) puts its owner directory.
    std::string cgroup_dir;
    /// How long the processes of each leftover get to die after cgroup.kill.
    std::chrono::milliseconds kill_bound{2000};
};

/// A host tree a run started, as its journal recorded it.
struct started_tree {
    std::string cgroup;       ///< its cgroup v2 leaf (full path), if it had one
    pid_t leader = 0;         ///< else its process group (the leader's pid) ...
    std::uint64_t start = 0;  ///< ... and the leader's start time (clock ticks after boot)
};

/// What of those trees still runs.
struct running_leftovers {
    std::uint32_t processes = 0;       ///< live processes found, all trees together
    std::vector<std::string> cgroups;  ///< leaves with a live process
    std::vector<pid_t> groups;         ///< process groups with a live member
    bool any() const { return processes > 0; }
};

/// Which of `trees` (a dead run's, from its journal) still have live processes here: the
/// processes in each cgroup leaf and beneath it, the members of each process group that
/// started no earlier than its leader. Only reads /proc and the cgroup files; for commands
/// that look before they act. sweep_dead_owners() (`runs gc`) kills what is in cgroups.
running_leftovers find_running_leftovers(const std::vector<started_tree>& trees);

/// Finds what owners that died left in the cgroup directory: owner directories
/// `agentctl@PID-START-PIDNS` whose process is gone or is another process now (same pid, other
/// start time), and leaves `agentctl-PID-...` of older versions whose pid is gone. Kills what
/// runs in them with cgroup.kill, waits for it to die, removes them, and reports each one. A
/// live owner, an owner in another pid namespace, or one /proc hides from us is left alone.
/// Blocking (bounded by kill_bound per leftover); call it before starting runs.
sweep_report sweep_dead_owners(const sweep_options& options = {});

}  // namespace agentctl
