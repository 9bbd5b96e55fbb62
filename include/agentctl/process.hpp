// Running one host process: spawn, bounded capture, timeout, cancellation, tree kill.
//
// async_run_process() is the only way the library starts a program. It never forks (the
// child is created with clone(CLONE_VM|CLONE_VFORK)), never blocks the calling thread
// waiting for a running child, installs no signal handler and reaps only the children it
// started.
//
// What the child gets: a new session (so its own process group, pgid = pid, and no
// controlling terminal: open("/dev/tty") fails with ENXIO instead of stopping it with
// SIGTTIN), stdin /dev/null (or a pipe carrying stdin_data), stdout and stderr pipes (blocking
// on its side), no other file descriptor (every fd >= 3 is close-on-exec, even foreign ones
// of an embedding application), default dispositions for every signal, an empty signal mask,
// exactly `env`, and `cwd_fd` as its working directory. The child execs the file that the
// executable path named when the spawn opened it (execveat on an O_PATH descriptor), so a
// rename over the path during the spawn cannot substitute another program; a #! script is
// exec'd by path after checking that the path still names that file (docs/DESIGN.md).
//
// The embedding application keeps its SIGCHLD handler; it receives SIGCHLD for our children
// too and must not reap children it did not start (a wait for any pid steals their status: the
// result then says so, see error_code "exit_status_lost"). With SIGCHLD ignored (SIG_IGN or
// SA_NOCLDWAIT) the kernel would reap them before their status can be read: runs then fail
// before spawning, with error_code "sigchld_ignored".
#pragma once

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

/// How the library makes sure a process tree is gone.
enum class containment {
    cgroup,         ///< a cgroup v2 leaf per process, emptied with cgroup.kill: catches setsid escapes
    process_group,  ///< kill(-pgid) plus a walk of the live tree: a double-forked setsid escape is missed
};
std::string_view to_string(containment);  ///< "cgroup" | "process-group"

/// Which containment to use.
enum class containment_policy {
    automatic,           ///< a cgroup leaf when a writable cgroup v2 hierarchy is there, else the group
    process_group_only,  ///< never create cgroups (tests; engine clients such as `podman run`)
};

/// How the child is created and its exit observed. `automatic` uses clone3() with CLONE_PIDFD
/// (and CLONE_INTO_CGROUP) and falls back by itself where the kernel or a seccomp profile
/// refuses: glibc clone() with the child joining its cgroup, pidfd_open(), then polling. The
/// other values force those older paths so that tests cover them.
enum class exit_watch {
    automatic,
    pidfd_open,  ///< glibc clone() without CLONE_PIDFD, then pidfd_open()
    polling,     ///< glibc clone(), no pidfd: waitid(WNOHANG|WNOWAIT) every 1 ms doubling to 50 ms
};

/// The file a path named when it was resolved: device and inode (stat(2), symlinks followed).
struct file_identity {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    friend bool operator==(const file_identity&, const file_identity&) = default;
};

/// What identifies a started process for a record that outlives this one (a run journal).
struct process_started {
    int pid = 0;
    /// Its start time (clock ticks after boot, field 22 of /proc/PID/stat) is within
    /// [start_lo, start_hi]: the boot clock around the clone (no /proc read per spawn).
    std::uint64_t start_lo = 0;
    std::uint64_t start_hi = 0;
    std::string cgroup;  ///< its cgroup leaf, an absolute path; empty when its process group holds it
};

/// What to run. Every field is final: no lookup, no shell, no inherited environment.
struct process_request {
    std::string executable;          ///< absolute path, already resolved
    /// When set, `executable` must still name this file when the process is spawned (as
    /// resolve_executable() recorded it); if it names another one (replaced, renamed over,
    /// deleted), the spawn fails with "executable_changed" and nothing runs. Either way the
    /// child execs the file opened at the spawn, not whatever the path names a moment later.
    std::optional<file_identity> executable_identity;
    std::vector<std::string> argv;   ///< argv[0] included; each element is passed as is
    std::vector<std::string> env;    ///< "NAME=value": the child's whole environment
    int cwd_fd = -1;                 ///< directory fd the child fchdir()s to; -1 keeps agentctl's cwd.
                                     ///< Borrowed: must stay open until the operation completes.
    std::string cwd_display;         ///< the cwd for messages
    std::optional<std::string> stdin_data;  ///< nullopt: stdin is /dev/null; else written then closed
    std::uint64_t stdout_limit = 1024 * 1024;    ///< >= 1
    std::uint64_t stderr_limit = 1024 * 1024;    ///< >= 1
    std::uint64_t combined_limit = 2 * 1024 * 1024;  ///< >= 1
    std::chrono::milliseconds timeout{120000};   ///< > 0
    std::chrono::milliseconds kill_grace{0};     ///< 0: SIGKILL at once; else SIGTERM+SIGCONT, wait, SIGKILL
    std::chrono::milliseconds drain_grace{250};  ///< after the leader exits, how long pipes held by descendants are read
    containment_policy containment = containment_policy::automatic;
    exit_watch watch = exit_watch::automatic;
    /// Called once, on the run's executor, when the process was spawned (not for a spawn
    /// failure). Empty: nothing is called.
    std::function<void(const process_started&)> on_started;
};

enum class process_outcome {
    exited,                 ///< the leader exited or died of a signal on its own
    timed_out,              ///< the timeout fired; the tree was terminated
    cancelled,              ///< cancelled through the completion handler's slot
    output_limit_exceeded,  ///< a cap was passed; exactly the bytes up to the cap are kept
    spawn_failed,           ///< nothing ran (error_code/error_message say which step failed)
};
std::string_view to_string(process_outcome);

/// CPU time and peak memory of the leader (from waitid's rusage). max_rss_kib is an upper
/// bound: the kernel starts a vfork child's high-water mark at its parent's RSS.
struct resource_usage {
    std::uint64_t user_us = 0;
    std::uint64_t system_us = 0;
    std::uint64_t max_rss_kib = 0;
};

struct process_result {
    process_outcome outcome = process_outcome::spawn_failed;
    std::optional<int> exit_code;  ///< the leader exited normally (even with 137: that is not a signal)
    std::optional<int> signal;     ///< the leader died of this signal
    bool core_dumped = false;
    std::string stdout_bytes;  ///< raw bytes, at most stdout_limit
    std::string stderr_bytes;  ///< raw bytes, at most stderr_limit
    std::string limit_stream;  ///< output_limit_exceeded: "stdout", "stderr" or "combined output"
    std::uint64_t limit_bytes = 0;
    std::chrono::microseconds duration{0};  ///< spawn to completion
    resource_usage usage;
    containment used = containment::process_group;
    /// Processes other than the leader that were signalled to end the tree, counted once each;
    /// never more than were found. Exact with cgroup containment (the leaf's members). With
    /// the process group, the members found in /proc when the tree is killed while the leader
    /// runs, or when something still holds the pipes after it exited; a background member
    /// that closed its output is killed by kill(-pgid) then, but not counted.
    std::uint32_t descendants_killed = 0;
    /// spawn_failed: a stable code: "invalid_request" (NUL byte, relative executable, limit < 1,
    /// timeout <= 0: nothing was attempted), "executable_not_found", "interpreter_not_found"
    /// (a #! interpreter or ELF loader is missing), "executable_changed" (the path no longer
    /// names the file resolved or opened for it), "permission_denied", "is_a_directory",
    /// "exec_format_error", "text_file_busy", "cwd_unavailable", "argument_list_too_long",
    /// "resource_exhausted" (EMFILE, EAGAIN, ENOMEM), "sigchld_ignored", "spawn_error" (anything
    /// else). Otherwise "exit_status_lost" when another waiter in this process reaped the leader
    /// (neither exit_code nor signal is set then); empty in every other case.
    std::string error_code;
    /// Why the run did not simply exit: names the failing step and path, the limit passed, or
    /// the timeout. Empty for `exited`.
    std::string error_message;
};

namespace detail {
void async_run_process_impl(boost::asio::any_io_executor ex, process_request request,
                            boost::asio::any_completion_handler<void(process_result)> handler);
}

/// Runs one process to completion.
///
/// Completion signature: void(process_result). Errors are values in the result. The handler
/// is invoked exactly once, through its associated executor, never from inside this call.
/// Spawns are queued per execution context and made a few per reactor turn, so that timers
/// and cancellations of other runs are serviced between them; the timeout starts at the spawn.
///
/// Termination (timeout, cancellation, output cap): the whole tree is signalled — with a cgroup
/// leaf through cgroup.kill, otherwise kill(-pgid) plus pidfd signals to descendants that left
/// the group while their parent lived. With kill_grace > 0 the ladder is SIGTERM+SIGCONT, then
/// SIGKILL after kill_grace; it ends as soon as the leader exits. An output cap passed kills at
/// once. Once the leader has exited, the pipes are read for at most drain_grace, then whatever
/// is left of the tree is killed, the leader is reaped and the operation completes: completion
/// never waits on a descendant. Output captured before a timeout or cancellation is returned.
///
/// Cancellation (the handler's associated slot; emit it from the executor's thread): terminal
/// kills the tree with SIGKILL at once; partial and total run the ladder. The operation then
/// completes with outcome `cancelled` and the output captured so far. Before the spawn,
/// cancellation completes at once and nothing is spawned. After the leader has exited on its
/// own, cancellation only cuts the drain short: the outcome stays `exited`. Repeated
/// cancellation is harmless.
///
/// Thread safety: call from the executor's thread; the operation runs on `ex`, an io_context
/// executor or a strand of one. Runs on different strands of one context may proceed in
/// parallel. Destroying the io_context with runs in flight kills and reaps their trees.
template <typename Token>
auto async_run_process(boost::asio::any_io_executor ex, process_request request, Token&& token) {
    return boost::asio::async_initiate<Token, void(process_result)>(
        [](auto handler, boost::asio::any_io_executor e, process_request r) {
            detail::async_run_process_impl(std::move(e), std::move(r), std::move(handler));
        },
        token, std::move(ex), std::move(request));
}

/// Resolves `command` (docs/CONTRACT.md, "Host processes", step 2): an absolute path is used
/// as is; a bare name is looked up in `search_path` (colon-separated; empty and relative
/// entries skipped); a relative path containing '/' is refused. Returns the absolute path,
/// or nothing with `error` set. With `identity`, also records which file the path names now
/// (left unset if it cannot be stat'ed): pass it as process_request::executable_identity to
/// run that file or nothing.
std::optional<std::string> resolve_executable(std::string_view command, std::string_view search_path,
                                              std::string& error,
                                              std::optional<file_identity>* identity = nullptr);

/// Opens `relative` beneath the directory `root_fd` without leaving it: no ".." component, no
/// absolute path, no symlink (or magic link) that resolves outside ("" opens the root itself).
/// Uses openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS); where the kernel lacks it (< 5.6), a
/// component-wise openat(O_NOFOLLOW) that refuses every symlink. Returns an O_PATH directory
/// fd (close-on-exec), or -1 with `error` set. The child fchdir()s to that fd, so a directory
/// swapped for a symlink after this call cannot redirect it.
int open_beneath(int root_fd, std::string_view relative, std::string& error);

/// Replaces every occurrence of each non-empty secret in `text` with "[REDACTED]". Overlapping
/// or adjacent occurrences (of one or several secrets) become a single "[REDACTED]", so no part
/// of a secret is left next to the marker.
void redact(std::string& text, const std::vector<std::string>& secrets);

}  // namespace agentctl
