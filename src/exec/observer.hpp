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
    /// A leader contained by its process group only (no cgroup leaf) was spawned. `start` is
    /// its start time, so that a recycled pid is never mistaken for it.
    virtual void group_started(pid_t leader, std::uint64_t start) noexcept = 0;
    /// That leader was reaped, its tree killed: its pid may belong to someone else from now on.
    virtual void group_reaped(pid_t leader) noexcept = 0;
};

}  // namespace agentctl::exec
