// Finding and signalling the members of a process tree, and cgroup v2 leaves.
#pragma once

#include "exec/sys.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace agentctl::exec {

/// The fields of /proc/<pid>/stat the tree logic needs. (pid, start) names a process uniquely.
struct proc_stat {
    pid_t pid = 0;
    pid_t ppid = 0;
    pid_t pgrp = 0;
    char state = '?';
    std::uint64_t start = 0;  ///< start time in clock ticks after boot (field 22)
};

/// Reads /proc/<pid>/stat relative to an open /proc directory fd.
bool read_proc_stat(int proc_fd, pid_t pid, proc_stat& out);

/// Every process on the machine, from one pass over /proc, sorted by parent pid.
struct proc_table {
    std::vector<proc_stat> procs;
    std::chrono::steady_clock::time_point taken;
};
proc_table scan_proc(int proc_fd);

/// Live (non-zombie) members of `leader`'s tree in `table`, the leader excluded: descendants
/// through parent links, and members of its process group (pgid == leader) even when
/// reparented. A descendant that left the group and whose parent exited is reparented away
/// and cannot be found.
std::vector<proc_stat> tree_members(const proc_table& table, pid_t leader);

/// Whether /proc/<pid>/task/<tid>/children exists (kernels built with CONFIG_PROC_CHILDREN).
bool children_files_exist(int proc_fd);

/// Live descendants of `leader` through those children files: proportional to the tree, not
/// to the machine.
std::vector<proc_stat> walk_children(int proc_fd, pid_t leader);

/// Stats of `pids` (e.g. a cgroup's members), the leader and zombies excluded.
std::vector<proc_stat> stat_all(int proc_fd, const std::vector<pid_t>& pids, pid_t leader);

/// Sends `sig` through a pidfd, but only if `p` is still the same process (same start time),
/// so that a recycled pid is never signalled. True if the signal was sent.
bool signal_verified(int proc_fd, const proc_stat& p, int sig);

/// A cgroup v2 leaf directory created by us. Once read, its cgroup.events (at every
/// completion) and cgroup.procs (at a kill) stay open with it, pooled with it: a pread at
/// offset 0 restarts a kernfs file, so neither is opened again per task. A spare leaf not yet
/// used holds its directory only.
struct cgroup_leaf {
    unique_fd dir;
    unique_fd events;  ///< cgroup.events, opened by the first leaf_populated()
    unique_fd procs;   ///< cgroup.procs, opened by the first leaf_procs()
    std::string name;  ///< relative to the parent cgroup
};

/// `populated` from cgroup.events; nullopt if it cannot be read.
std::optional<bool> cgroup_populated(int leaf_dir);
/// The same through the leaf's cgroup.events, opened at the first call and kept.
std::optional<bool> leaf_populated(cgroup_leaf& leaf);

/// Members listed in cgroup.procs.
std::vector<pid_t> cgroup_procs(int leaf_dir);
/// The same through the leaf's cgroup.procs, opened at the first call and kept.
std::vector<pid_t> leaf_procs(cgroup_leaf& leaf);

/// Writes "1" to cgroup.kill. Returns 0 or an errno value.
int cgroup_kill(int leaf_dir);

/// Blocks, at most `bound_ms`, until the leaf is empty (cgroup.events signals POLLPRI on each
/// change). Only for shutdown, when nothing asynchronous can run any more.
bool wait_cgroup_empty_blocking(int leaf_dir, int bound_ms);

/// Processes in a cgroup and every cgroup beneath it (their cgroup.procs summed).
std::uint32_t cgroup_tree_procs(int dir);

/// What teardown_cgroup did.
struct cgroup_teardown {
    std::uint32_t processes = 0;  ///< members found before the kill, in all its descendants
    bool killed = false;          ///< cgroup.kill was written
    bool removed = false;         ///< the directory and every directory beneath it are gone
    std::string error;            ///< what failed, for a report; empty when removed
};

/// Blocking, for the dead-owner sweep and the watchdog only. SIGKILLs everything in the
/// cgroup `name` beneath `base_dir` and in its descendants (cgroup.kill is recursive, and
/// catches processes forked meanwhile), waits at most `bound_ms` until it is empty, then
/// removes the directories beneath it deepest first, and itself. With `kill` false, a
/// populated tree is left as it is. A directory already gone counts as removed.
cgroup_teardown teardown_cgroup(int base_dir, const std::string& name, int bound_ms, bool kill);

/// Where our cgroup v2 leaves go: the cgroup agentctl itself runs in, on the cgroup2 mount.
struct cgroup_parent {
    unique_fd dir;
    std::string path;
};

/// Finds our own cgroup on a writable cgroup2 mount and checks that a leaf can be created
/// there with a cgroup.kill file (Linux >= 5.14). On failure says why in `why`.
std::optional<cgroup_parent> discover_cgroup_parent(std::string& why);

/// Opens the directory `name` beneath `base` (creating it if `create`; an existing one is
/// fine) and checks that it has a writable cgroup.kill. Returns 0 or an errno value.
int open_cgroup_dir(const cgroup_parent& base, const std::string& name, bool create, cgroup_parent& out);

/// Creates a leaf named `name` beneath `parent`. Returns 0 or an errno value.
int make_cgroup_leaf(const cgroup_parent& parent, const std::string& name, cgroup_leaf& out);

/// Removes an empty leaf. Returns 0 or an errno value.
int remove_cgroup_leaf(const cgroup_parent& parent, const std::string& name);

}  // namespace agentctl::exec
