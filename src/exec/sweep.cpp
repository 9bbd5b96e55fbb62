#include "exec/sweep.hpp"

#include "exec/sys.hpp"

#include <agentctl/watchdog.hpp>

#include <dirent.h>

#include <algorithm>

namespace agentctl {

namespace exec {

std::vector<swept_dir> sweep_owner_dirs(int base_dir, bool kill, int bound_ms, std::uint64_t our_pidns,
                                        const process_prober& probe) {
    std::vector<swept_dir> found;
    for_each_entry(base_dir, [&](int, const dirent& entry) {
        if (entry.d_type != DT_DIR) return;
        std::string_view name(entry.d_name);
        swept_dir d;
        if (auto owner = parse_owner_cgroup_name(name)) {
            if (judge_owner(*owner, our_pidns, probe) != owner_state::dead) return;
            d.owner = *owner;
        } else if (auto pid = parse_legacy_leaf_name(name)) {
            if (judge_legacy_owner(*pid, probe) != owner_state::dead) return;
            d.legacy = true;
            d.owner.pid = *pid;
        } else {
            return;
        }
        d.name = std::string(name);
        found.push_back(std::move(d));
    });
    std::sort(found.begin(), found.end(),
              [](const swept_dir& a, const swept_dir& b) { return a.name < b.name; });
    for (auto& d : found) d.teardown = teardown_cgroup(base_dir, d.name, bound_ms, kill);
    if (!kill) std::erase_if(found, [](const swept_dir& d) { return !d.teardown.removed; });
    return found;
}

}  // namespace exec

bool sweep_report::ok() const {
    return std::all_of(cgroups.begin(), cgroups.end(), [](const swept_cgroup& c) { return c.removed; }) &&
           std::all_of(containers.begin(), containers.end(),
                       [](const swept_container& c) { return c.removed; }) &&
           slurm_left.empty();
}

sweep_report sweep_dead_owners(const sweep_options& options) {
    sweep_report report;
    std::uint64_t pidns = exec::self_pidns();
    if (pidns == 0) {
        report.unavailable = "cannot read /proc/self/ns/pid";
        return report;
    }
    exec::cgroup_parent base;
    if (options.cgroup_dir.empty()) {
        std::string why;
        auto own = exec::discover_cgroup_parent(why);
        if (!own) {
            report.unavailable = why;
            return report;
        }
        base = std::move(*own);
    } else {
        base.path = options.cgroup_dir;
        base.dir.reset(::open(base.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!base.dir) {
            report.unavailable = "cannot open " + base.path + ": " + exec::errno_text(errno);
            return report;
        }
    }
    auto bound = static_cast<int>(std::clamp<long long>(options.kill_bound.count(), 0, 600000));
    for (auto& d : exec::sweep_owner_dirs(base.dir.get(), true, bound, pidns, exec::probe_process)) {
        swept_cgroup c;
        c.path = base.path + "/" + d.name;
        c.owner_pid = d.owner.pid;
        c.owner_start = d.owner.start;
        c.processes_killed = d.teardown.killed ? d.teardown.processes : 0;
        c.removed = d.teardown.removed;
        c.error = d.teardown.error;
        report.cgroups.push_back(std::move(c));
    }
    return report;
}

}  // namespace agentctl
