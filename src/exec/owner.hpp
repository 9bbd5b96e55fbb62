// Who owns a cgroup directory, and whether that owner is still alive. Private to src/exec;
// see docs/CRASH_SAFETY.md.
//
// Every process that uses cgroup containment puts its leaves under one directory of its own
// cgroup named after its identity, `agentctl@PID-START-PIDNS`: pid, start time (clock ticks
// after boot, field 22 of /proc/PID/stat) and the inode of its pid namespace. The start time
// tells a reused pid from the owner; the namespace keeps a process from judging an owner whose
// pid number it cannot see the same way (a run in a child pid namespace sharing our cgroup).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::exec {

/// A process, named so that a later process can tell whether it is still the same one.
struct owner_id {
    pid_t pid = 0;
    std::uint64_t start = 0;  ///< clock ticks after boot (field 22 of /proc/PID/stat)
    std::uint64_t pidns = 0;  ///< inode of /proc/PID/ns/pid
    bool operator==(const owner_id&) const = default;
};

/// This process's identity; nullopt if /proc cannot tell.
std::optional<owner_id> self_owner();

/// CLOCK_BOOTTIME in the clock ticks of /proc/PID/stat's start time (field 22).
std::uint64_t boot_ticks_now();

/// The inode of this process's pid namespace (0 if unknown).
std::uint64_t self_pidns();

/// "agentctl@PID-START-PIDNS": the directory holding an owner's cgroup leaves.
std::string owner_cgroup_name(const owner_id& o);

/// The owner named by such a directory; nullopt for any other name.
std::optional<owner_id> parse_owner_cgroup_name(std::string_view name);

/// The pid of a leaf made before owner directories existed, "agentctl-PID-TAG-N" directly in
/// the owner's cgroup; nullopt for any other name. Such a name has no start time.
std::optional<pid_t> parse_legacy_leaf_name(std::string_view name);

/// What /proc says about a pid now.
struct process_probe {
    enum class state { absent, present, unreadable } what = state::absent;
    std::uint64_t start = 0;  ///< when present
};
using process_prober = std::function<process_probe(pid_t)>;

/// Reads /proc/PID/stat (and, when it cannot be read, kill(pid, 0) to tell absent from hidden).
process_probe probe_process(pid_t pid);

enum class owner_state {
    alive,    ///< the very process (same pid, same start time) is running
    dead,     ///< no such pid, or the pid now belongs to a process started at another time
    unknown,  ///< not ours to judge (another pid namespace) or /proc hides it: leave it alone
};

/// Decides for an owner directory. `our_pidns` is the caller's pid namespace.
owner_state judge_owner(const owner_id& owner, std::uint64_t our_pidns, const process_prober& probe);

/// Decides for a legacy leaf (no start time): dead only when no process has the pid at all.
owner_state judge_legacy_owner(pid_t pid, const process_prober& probe);

}  // namespace agentctl::exec
