// Creating the child: clone(CLONE_VM|CLONE_VFORK) on a reused stack, a child that only makes
// system calls, and the classification of what went wrong when it could not exec.
#pragma once

#include <agentctl/error.hpp>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace agentctl::exec {

/// The step of the child's setup that failed. `identity`: a script's path no longer names the
/// file that was opened for it (see child_plan::exe_fd).
enum class spawn_step { none, session, cgroup, stdio, cwd, close_fds, signals, exec, identity, fd_table };

/// Everything the child needs, prepared by the parent. The child reads it and, on failure,
/// writes `failed_step`/`failed_errno` (CLONE_VM: it is the parent's memory).
struct child_plan {
    const char* path = nullptr;
    /// The file `path` named when the parent opened it (O_PATH); -1: exec by path. The child
    /// execs this very file (execveat), so a swap of `path` meanwhile changes nothing. A #!
    /// script cannot be run that way (its interpreter is handed the script by path, and a
    /// close-on-exec fd has none): the child then execs `path`, after checking that it still
    /// names this file.
    int exe_fd = -1;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    /// Become fds 0, 1, 2: each >= 3 so dup2 never clobbers one, or equal to its target (the
    /// parent's own descriptor, passed as it is: process_request::pass_output).
    int stdio[3] = {-1, -1, -1};
    int cwd_fd = -1;              ///< fchdir() target; -1 keeps the parent's cwd
    int cgroup_procs_fd = -1;     ///< glibc clone() path: "0" is written here to join the leaf
    /// > 0: the child is cloned sharing our descriptor table (CLONE_FILES) and, first thing,
    /// takes its own copy of the descriptors below this one only (close_range with
    /// CLOSE_RANGE_UNSHARE); every descriptor this plan names must be below it (exec_service's
    /// spawn window).
    int unshare_below = 0;
    volatile int failed_step = 0;
    volatile int failed_errno = 0;
};

/// How to create the child.
struct clone_how {
    bool clone3 = true;      ///< clone3(); else glibc clone() (kernels < 5.3, seccomp refusing clone3)
    bool want_pidfd = true;  ///< CLONE_PIDFD
    int cgroup_fd = -1;      ///< clone3 only: born in this cgroup (CLONE_INTO_CGROUP); -1: none
    /// clone3 only, with `stack_in_use` given: false returns as soon as the child exists,
    /// without waiting (CLONE_VFORK) until it has exec'd. The stack, the plan and everything
    /// it points to must then stay untouched until the kernel zeroes *stack_in_use (set to 1
    /// here) at the child's execve or exit; a failure is read from the plan once it exited.
    bool wait_for_exec = true;
    pid_t* stack_in_use = nullptr;
};

struct clone_result {
    pid_t pid = -1;
    int pidfd = -1;  ///< from CLONE_PIDFD when asked for
    int error = 0;   ///< the clone call itself failed with this errno
};

/// Whether this build can call clone3() with CLONE_VM (it needs a few lines of assembly to
/// run the child on its own stack; x86-64 only for now).
bool clone3_built();

/// The signals (bit sig-1) whose disposition is SIG_IGN or a handler in the calling process,
/// read from /proc/self/status; every bit when /proc cannot tell. The child calls it to reset
/// only those before execve (docs/DESIGN.md, "Spawn").
std::uint64_t signals_not_at_default();

/// Runs the child on `stack`: one stack per spawning thread is enough, as CLONE_VFORK suspends
/// us until the child has exec'd or exited, or, without it, the next spawn waits until the
/// kernel has cleared clone_how::stack_in_use. All signals are blocked around the clone so
/// that no handler of the embedding application ever runs in the child.
///
/// CLONE_INTO_CGROUP is preferred over the child writing to cgroup.procs: the write takes the
/// cgroup threadgroup rwsem for writing, which waits for RCU grace periods (measured: 1 spawn
/// in 1 000 blocked ~19 ms, and 20 % fewer spawns per second).
clone_result clone_child(child_plan& plan, char* stack, std::size_t stack_size, const clone_how& how);

/// A spawn failure: its code and a message naming the step and the path.
using spawn_failure = task_error;

/// Classifies a failure the child reported. Inspects the executable (exists? a directory? a
/// script whose interpreter is missing?) to say which file is at fault.
spawn_failure describe_child_failure(spawn_step step, int err, const std::string& path,
                                     const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env, const std::string& cwd_display);

/// Classifies a failure of the parent's own preparation (pipes, clone).
spawn_failure describe_parent_failure(const char* what, int err);

}  // namespace agentctl::exec
