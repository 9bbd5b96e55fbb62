// Running one host process: spawn, bounded capture, timeout, cancellation, tree kill.
//
// async_run_process() is the only way the library starts a program. It never forks (the
// child is created with clone(CLONE_VM|CLONE_VFORK)), never blocks the calling thread
// waiting for a child, installs no signal handler and reaps only the children it started.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
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

/// What to run. Every field is final: no lookup, no shell, no inherited environment.
struct process_request {
    std::string executable;          ///< absolute path, already resolved
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
};

enum class process_outcome {
    exited,                 ///< the leader exited or died of a signal on its own
    timed_out,              ///< the timeout fired; the tree was terminated
    cancelled,              ///< cancelled through the completion handler's slot
    output_limit_exceeded,  ///< a cap was passed; exactly the bytes up to the cap are kept
    spawn_failed,           ///< nothing ran (error_code/error_message say which step failed)
};
std::string_view to_string(process_outcome);

/// CPU time and peak memory of the leader (from waitid's rusage).
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
    std::uint32_t descendants_killed = 0;  ///< processes other than the leader killed at the end
    /// spawn_failed: stable code, e.g. "executable_not_found", "interpreter_not_found",
    /// "permission_denied", "cwd_unavailable", "argument_list_too_long", "resource_exhausted".
    std::string error_code;
    std::string error_message;  ///< names the failing step and path
};

namespace detail {
void async_run_process_impl(boost::asio::any_io_executor ex, process_request request,
                            boost::asio::any_completion_handler<void(process_result)> handler);
}

/// Runs one process to completion.
///
/// Completion signature: void(process_result). Errors are values in the result.
/// Cancellation (the handler's associated slot): terminal kills the tree with SIGKILL at
/// once; partial and total run the termination ladder (SIGTERM+SIGCONT, kill_grace, SIGKILL).
/// Either way the operation completes with outcome `cancelled` and the output captured so far.
/// Thread safety: call from the executor's thread; the operation runs on `ex`, which must be
/// a single-threaded io_context executor (or a strand).
template <typename Token>
auto async_run_process(boost::asio::any_io_executor ex, process_request request, Token&& token) {
    return boost::asio::async_initiate<Token, void(process_result)>(
        [](auto handler, boost::asio::any_io_executor e, process_request r) {
            detail::async_run_process_impl(std::move(e), std::move(r), std::move(handler));
        },
        token, std::move(ex), std::move(request));
}

/// Resolves `command` per SPEC 5.2: an absolute path is used as is; a bare name is looked up
/// in `search_path` (colon-separated; empty and relative entries skipped); a relative path
/// containing '/' is refused. Returns the absolute path, or nothing with `error` set.
std::optional<std::string> resolve_executable(std::string_view command, std::string_view search_path,
                                              std::string& error);

/// Opens `relative` beneath the directory `root_fd` without leaving it: no "..", no absolute
/// path, no symlink (or magic link) that resolves outside. Returns an O_PATH directory fd
/// (close-on-exec), or -1 with `error` set.
int open_beneath(int root_fd, std::string_view relative, std::string& error);

/// Replaces every occurrence of each non-empty secret in `text` with "[REDACTED]".
void redact(std::string& text, const std::vector<std::string>& secrets);

}  // namespace agentctl
