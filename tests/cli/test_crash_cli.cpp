// agentctl killed with SIGKILL, for real: what it started does not outlive it, and what a
// dead run left is removed by the next run (docs/CRASH_SAFETY.md).
#include "command.hpp"

#include "../support/private_cgroup.hpp"
#include "../support/skips.hpp"

#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace cli_test;
using namespace std::chrono_literals;

namespace {

/// Four tasks, each `sh -c "probe sleep 300 & setsid probe sleep 301 & probe sleep 302; wait"`:
/// 4 shells and 12 probes, 4 of them in sessions of their own.
std::string four_trees(const std::string& nonce) {
    std::string p = probe_bin();
    std::string script = p + " sleep 300 --nonce " + nonce + " & setsid " + p + " sleep 301 --nonce " +
                         nonce + " & " + p + " sleep 302 --nonce " + nonce + "; wait";
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: crash}\nspec:\n"
           "  policy: {processAllowlist: [sh], approval: never}\n"
           "  actions:\n    trees: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"" +
           script +
           "\"]}\n"
           "  tasks:\n    - {id: t, uses: action:trees, foreach: {items: [1, 2, 3, 4]}}\n";
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(sigkill_of_agentctl_kills_every_tree_within_two_seconds,
                        test_support::private_cgroup) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", four_trees(nonce));
    std::chrono::milliseconds gone_after{-1};
    command_options o;
    o.bound = 60s;
    o.poll = [&](pid_t agentctl) {
        if (processes_with(nonce).size() < 12) return false;  // not all up yet
        ::kill(agentctl, SIGKILL);
        auto killed = std::chrono::steady_clock::now();
        while (!processes_with(nonce).empty() && std::chrono::steady_clock::now() - killed < 5s)
            std::this_thread::sleep_for(5ms);
        gone_after =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
        return true;
    };
    auto r = agentctl({"run", "--jobs", "4", wf}, o);
    BOOST_TEST(r.signal == SIGKILL);
    BOOST_TEST_REQUIRE(gone_after.count() >= 0, "the trees never all started");
    BOOST_TEST(processes_with(nonce).empty());
    BOOST_TEST(gone_after < 2000ms,
               "the last process was gone " << gone_after.count() << " ms after the SIGKILL");
}

BOOST_FIXTURE_TEST_CASE(the_next_run_removes_what_a_dead_run_left, test_support::private_cgroup,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            agentctl_uses_cgroups))) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", four_trees(nonce));
    command_options o;
    o.bound = 60s;
    bool killed_both = false;
    o.poll = [&](pid_t agentctl) {
        if (processes_with(nonce).size() < 12) return false;
        // A kill that takes the watchdog too (a unit-wide kill): the trees stay behind.
        pid_t watchdog = watchdog_of(agentctl);
        if (watchdog <= 0) return false;
        ::kill(watchdog, SIGKILL);
        ::kill(agentctl, SIGKILL);
        killed_both = true;
        return true;
    };
    auto first = agentctl({"run", "--jobs", "4", wf}, o);
    BOOST_TEST_REQUIRE(killed_both, "agentctl's watchdog was not found");
    BOOST_TEST(first.signal == SIGKILL);
    // What the cgroups hold (the setsid escapees too) is still running...
    BOOST_TEST(wait_for_processes(nonce, 12, 2s));
    // ...until the next run starts: it removes them before anything else, and says so.
    std::string quick =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: next}\nspec:\n"
        "  policy: {processAllowlist: [\"true\"], approval: never}\n"
        "  actions:\n    ok: {kind: builtin.shell.exec, command: /bin/true}\n"
        "  tasks:\n    - {id: ok, uses: action:ok}\n";
    auto next = agentctl({"run", dir.write("next.yaml", quick)});
    BOOST_TEST(next.exit_code == 0, next.err);
    BOOST_TEST(next.err.find("removed what a dead run left: cgroup") != std::string::npos, next.err);
    BOOST_TEST(next.err.find(std::to_string(16) + " processes killed") != std::string::npos, next.err);
    BOOST_TEST(processes_with(nonce).empty());
}
