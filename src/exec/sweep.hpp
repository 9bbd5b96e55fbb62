// Finding and removing the cgroup directories of owners that died. Private to src/exec; the
// public entry point is agentctl::sweep_dead_owners() (include/agentctl/watchdog.hpp).
#pragma once

#include "exec/owner.hpp"
#include "exec/tree.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace agentctl::exec {

/// One leftover directory found in a cgroup.
struct swept_dir {
    std::string name;
    bool legacy = false;  ///< agentctl-PID-TAG-N, made before owner directories
    owner_id owner;       ///< legacy: the pid only
    cgroup_teardown teardown;
};

/// Looks at the entries of the cgroup `base_dir` for owner directories and legacy leaves whose
/// owner is dead (judge_owner, judge_legacy_owner) and tears each down (teardown_cgroup). With
/// `kill` false only empty ones are removed, and populated ones are not reported.
std::vector<swept_dir> sweep_owner_dirs(int base_dir, bool kill, int bound_ms, std::uint64_t our_pidns,
                                        const process_prober& probe);

}  // namespace agentctl::exec
