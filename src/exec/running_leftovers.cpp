// What a dead run left running on this host, found without touching it: for commands that
// only look (resume's refusal and dry run, runs show). docs/CRASH_SAFETY.md.
#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <agentctl/watchdog.hpp>

#include <fcntl.h>

#include <algorithm>
#include <optional>

namespace agentctl {

running_leftovers find_running_leftovers(const std::vector<started_tree>& trees) {
    running_leftovers out;
    std::optional<exec::proc_table> table;  // one pass over /proc, only when a group needs it
    exec::unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (const started_tree& t : trees) {
        if (!t.cgroup.empty()) {
            exec::unique_fd dir(::open(t.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (!dir) continue;  // removed: nothing runs there
            if (std::uint32_t n = exec::cgroup_tree_procs(dir.get())) {
                out.cgroups.push_back(t.cgroup);
                out.processes += n;
            }
            continue;
        }
        if (t.leader <= 0 || !proc) continue;
        if (!table) table = exec::scan_proc(proc.get());
        // Its members started no earlier than its leader. (A later group under the same pid,
        // reused, would be counted too: rare, and this only tells what to look at.)
        std::uint32_t members = 0;
        for (const exec::proc_stat& p : table->procs)
            if (p.pgrp == t.leader && p.state != 'Z' && p.state != 'X' && p.start >= t.start) ++members;
        if (members > 0) {
            out.groups.push_back(t.leader);
            out.processes += members;
        }
    }
    std::sort(out.groups.begin(), out.groups.end());
    out.groups.erase(std::unique(out.groups.begin(), out.groups.end()), out.groups.end());
    return out;
}

}  // namespace agentctl
