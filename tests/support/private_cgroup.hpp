// A test case's own cgroup. agentctl sweeps what dead runs left from the cgroup it runs in
// (docs/CRASH_SAFETY.md), so any agentctl started meanwhile in the test's cgroup, by another
// suite that meson runs in parallel (cli-parallel, exec...), could sweep what a case left
// for its own next run, or leave its own leftovers to it. A case that asserts on a sweep
// runs in a cgroup of its own: the test process moves into a fresh child of its cgroup for
// the case, so everything it starts (agentctl, its watchdog, their trees) is there too, and
// the sweeps of runs elsewhere never look inside (they read only their own cgroup's entries).
#pragma once

#include <string>

namespace test_support {

/// A Boost.Test fixture. Setup: this process moves into a fresh cgroup beneath its own. When
/// this host has no writable cgroup v2 it stays where it is (agentctl uses no cgroups then,
/// so it sweeps none); any other failure is an error. Teardown: this process moves back, and
/// what is left in the case's cgroup is killed and removed with it.
class private_cgroup {
public:
    private_cgroup();
    ~private_cgroup();
    private_cgroup(const private_cgroup&) = delete;
    private_cgroup& operator=(const private_cgroup&) = delete;

    /// The case's cgroup directory; empty when this host has no writable cgroup v2.
    const std::string& cgroup() const { return path_; }

private:
    std::string home_;  ///< the cgroup this process came from
    std::string path_;
};

}  // namespace test_support
