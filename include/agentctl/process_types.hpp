// What running one host process takes and gives, and the plain functions around it (command
// lookup, opening beneath a directory, redaction): no Asio. process.hpp runs a process.
#pragma once

#include <agentctl/error.hpp>

#include <boost/json/string.hpp>

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
    std::string executable;  ///< absolute path, already resolved
    /// When set, `executable` must still name this file when the process is spawned (as
    /// resolve_executable() recorded it); if it names another one (replaced, renamed over,
    /// deleted), the spawn fails with executable_changed and nothing runs. Either way the
    /// child execs the file opened at the spawn, not whatever the path names a moment later.
    std::optional<file_identity> executable_identity;
    std::vector<std::string> argv;          ///< argv[0] included; each element is passed as is
    std::vector<std::string> env;           ///< "NAME=value": the child's whole environment
    int cwd_fd = -1;                        ///< directory fd the child fchdir()s to; -1 keeps agentctl's cwd.
                                            ///< Borrowed: must stay open until the operation completes.
    std::string cwd_display;                ///< the cwd for messages
    std::optional<std::string> stdin_data;  ///< nullopt: stdin is /dev/null; else written then closed
    /// The child's stdout and stderr are this process's own (descriptors 1 and 2), passed as they
    /// are: nothing is read or captured, the three output limits do not apply, the result's
    /// streams stay empty, and the leader's exit ends the run at once (no pipe to drain). What
    /// `agentctl parallel -u` does (docs/PARALLEL.md, "Output").
    bool pass_output = false;
    std::uint64_t stdout_limit = 1024 * 1024;        ///< >= 1
    std::uint64_t stderr_limit = 1024 * 1024;        ///< >= 1
    std::uint64_t combined_limit = 2 * 1024 * 1024;  ///< >= 1
    std::chrono::milliseconds timeout{120000};       ///< > 0
    std::chrono::milliseconds kill_grace{0};  ///< 0: SIGKILL at once; else SIGTERM+SIGCONT, wait, SIGKILL
    std::chrono::milliseconds drain_grace{
        250};  ///< after the leader exits, how long pipes held by descendants are read
    containment_policy containment = containment_policy::automatic;
    exit_watch watch = exit_watch::automatic;
    /// Called once, on the run's executor, when the process was created (not when none was).
    /// A child born in a cgroup leaf is not waited for until its exec (docs/DESIGN.md,
    /// "Spawn"): one that then cannot exec still ends as spawn_failed, after this call.
    /// Empty: nothing is called.
    std::function<void(const process_started&)> on_started;
};

enum class process_outcome {
    exited,                 ///< the leader exited or died of a signal on its own
    timed_out,              ///< the timeout fired; the tree was terminated
    cancelled,              ///< cancelled through the completion handler's slot
    output_limit_exceeded,  ///< a cap was passed; exactly the bytes up to the cap are kept
    spawn_failed,           ///< nothing ran (error and error_message say which step failed)
};
std::string_view to_string(process_outcome);

/// CPU time and peak memory of the leader (from waitid's rusage). max_rss_kib is an upper
/// bound: the kernel starts a CLONE_VM child's high-water mark at its parent's RSS.
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
    /// Raw bytes, at most stdout_limit; empty with pass_output. A JSON string because the
    /// captured bytes end up as the task's `output.stdout`: the pipe is read straight into it
    /// (grown without zero-filling) and it is moved there, never copied (docs/CAPTURE.md).
    boost::json::string stdout_bytes;
    boost::json::string stderr_bytes;  ///< raw bytes, at most stderr_limit; as stdout_bytes
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
    /// spawn_failed: why nothing ran: invalid_request (NUL byte, relative executable, limit < 1,
    /// timeout <= 0: nothing was attempted), executable_not_found, interpreter_not_found (a #!
    /// interpreter or ELF loader is missing), executable_changed (the path no longer names the
    /// file resolved or opened for it), permission_denied, is_a_directory, exec_format_error,
    /// text_file_busy, cwd_unavailable, argument_list_too_long, resource_exhausted (EMFILE,
    /// EAGAIN, ENOMEM), sigchld_ignored, spawn_error (anything else). Otherwise
    /// exit_status_lost when another waiter in this process reaped the leader (neither
    /// exit_code nor signal is set then); empty in every other case.
    std::optional<agentctl::error_code> error;
    /// Why the run did not simply exit: names the failing step and path, the limit passed, or
    /// the timeout. Empty for `exited`.
    std::string error_message;
};

/// Resolves `command` (docs/CONTRACT.md, "Host processes", step 2): an absolute path is used
/// as is; a bare name is looked up in `search_path` (colon-separated; empty and relative
/// entries skipped); a relative path containing '/' is refused. Returns the absolute path,
/// or the error: executable_not_found with where it looked, invalid_request for an empty
/// command, a NUL byte or a relative path. With `identity`, also records which file the path
/// names now (left unset if it cannot be stat'ed): pass it as
/// process_request::executable_identity to run that file or nothing.
expected<std::string> resolve_executable(std::string_view command, std::string_view search_path,
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
