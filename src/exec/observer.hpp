// What an exec_service tells someone outside the process about the trees it starts, so that
// they can be killed should this process die without cleaning up (the watchdog). Private to
// src/exec; see docs/CRASH_SAFETY.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace agentctl::exec {

class tree_observer {
public:
    virtual ~tree_observer() = default;
    /// The owner cgroup directory that holds every cgroup leaf of this process was created.
    virtual void owner_cgroup_created(const std::string& path) noexcept = 0;
    /// A leader contained by its process group only (no cgroup leaf) was spawned. Its start
    /// time (clock ticks after boot, as /proc/PID/stat says) is within [start_lo, start_hi]:
    /// the boot clock read just before and just after the clone, which costs nothing where
    /// reading the child's /proc/PID/stat cost ~30 us per spawn. A recycled pid cannot fall
    /// in that window: the pid is only freed when we reap the leader, after group_reaped().
    virtual void group_started(pid_t leader, std::uint64_t start_lo, std::uint64_t start_hi) noexcept = 0;
    /// That leader was reaped, its tree killed: its pid may belong to someone else from now on.
    virtual void group_reaped(pid_t leader) noexcept = 0;
    /// Whether a leader left unreaped at this process's clean exit is waited for and, after a
    /// bound, killed (the watchdog: docs/CRASH_SAFETY.md); a channel may then leave its
    /// program's last milliseconds to it (channel::leave_running).
    virtual bool sees_to_leftovers() const noexcept { return false; }
};

}  // namespace agentctl::exec
