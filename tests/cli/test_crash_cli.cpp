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
#include <functional>
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

/// A poll callback for command_options: once the 12 probes of four_trees() run and agentctl's
/// watchdog is found, `act(agentctl, watchdog)`, once. `killed` says whether it happened.
std::function<bool(pid_t)> once_trees_run(const std::string& nonce, bool& killed,
                                          std::function<void(pid_t, pid_t)> act) {
    return [&nonce, &killed, act = std::move(act)](pid_t agentctl) {
        if (processes_with(nonce).size() < 12) return false;
        pid_t watchdog = watchdog_of(agentctl);
        if (watchdog <= 0) return false;
        act(agentctl, watchdog);
        killed = true;
        return true;
    };
}

/// Both die as one (a unit-wide kill): agentctl is stopped first, since it would stop the run
/// the moment it saw its watchdog die. The trees stay behind.
void kill_both(pid_t agentctl, pid_t watchdog) {
    ::kill(agentctl, SIGSTOP);
    ::kill(watchdog, SIGKILL);
    ::kill(agentctl, SIGKILL);
}

/// Ends what a failing test left of a nonce's trees.
void kill_leftovers(const std::string& nonce) {
    for (pid_t pid : processes_with(nonce)) ::kill(pid, SIGKILL);
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
    o.poll = once_trees_run(nonce, killed_both, kill_both);
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

// Under -q the next run says what a dead run of its own journal left, not what runs it does not
// know left (another journal's, or --no-journal's): those are removed all the same.
BOOST_FIXTURE_TEST_CASE(quiet_says_only_what_the_journals_own_dead_runs_left, test_support::private_cgroup,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            agentctl_uses_cgroups))) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", four_trees(nonce));
    auto next = dir.write("next.yaml",
                          "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: next}\nspec:\n"
                          "  policy: {processAllowlist: [\"true\"], approval: never}\n"
                          "  actions:\n    ok: {kind: builtin.shell.exec, command: /bin/true}\n"
                          "  tasks:\n    - {id: ok, uses: action:ok}\n");
    std::string mine = dir.path() + "/mine.db", other = dir.path() + "/other.db";
    auto crash = [&] {
        command_options o;
        o.bound = 60s;
        bool killed_both = false;
        o.poll = once_trees_run(nonce, killed_both, kill_both);
        auto first = agentctl({"run", "--jobs", "4", wf, "--db", mine}, o);
        BOOST_TEST_REQUIRE(killed_both, "agentctl's watchdog was not found");
        BOOST_TEST_REQUIRE(wait_for_processes(nonce, 12, 2s));
    };
    crash();
    auto unknown = agentctl({"-q", "run", next, "--db", other});
    BOOST_TEST(unknown.exit_code == 0, unknown.err);
    BOOST_TEST(unknown.err.find("what a dead run left") == std::string::npos, unknown.err);
    BOOST_TEST(processes_with(nonce).empty(), "the quiet run did not remove them");
    crash();
    auto known = agentctl({"-q", "run", next, "--db", mine});
    BOOST_TEST(known.exit_code == 0, known.err);
    BOOST_TEST(known.err.find("removed what a dead run left: cgroup") != std::string::npos, known.err);
    BOOST_TEST(processes_with(nonce).empty());
}

// The watchdog SIGKILLed while a run goes on: agentctl notices at once (a pidfd of its
// watchdog), says so, and stops the run as a cancellation does, so that nothing is left to a
// crash that nobody would clean up after.
BOOST_FIXTURE_TEST_CASE(a_dead_watchdog_stops_the_run_and_is_named, test_support::private_cgroup) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", four_trees(nonce));
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + dir.path() + "/state"};
    o.bound = 30s;
    pid_t watchdog = -1;
    bool killed = false;
    o.poll = once_trees_run(nonce, killed, [&](pid_t, pid_t w) { ::kill(watchdog = w, SIGKILL); });
    auto r = agentctl({"run", "--jobs", "4", wf}, o);
    BOOST_TEST_REQUIRE(killed, "agentctl's watchdog was not found");
    BOOST_TEST(!r.timed_out, "the run went on without its watchdog");
    BOOST_TEST(r.exit_code == 130, r.err);
    std::string named = "the watchdog (pid " + std::to_string(watchdog) + ") died";
    BOOST_TEST(r.err.find(named) != std::string::npos, r.err);
    BOOST_TEST(r.err.find("the run was cancelled (the watchdog") != std::string::npos, r.err);
    BOOST_TEST(processes_with(nonce).empty());
    kill_leftovers(nonce);
}

// agentctl and its watchdog killed together: the trees run on. Every command that looks at
// that run (runs show, resume --dry-run, resume) says so and how to stop them, and the way it
// names (runs gc) works.
BOOST_FIXTURE_TEST_CASE(a_dead_runs_live_processes_are_reported_with_how_to_stop_them,
                        test_support::private_cgroup,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            agentctl_uses_cgroups))) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", four_trees(nonce));
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + dir.path() + "/state"};
    o.bound = 60s;
    bool killed_both = false;
    o.poll = once_trees_run(nonce, killed_both, kill_both);
    auto first = agentctl({"run", "--jobs", "4", wf}, o);
    o.poll = nullptr;  // the commands that follow are left alone
    BOOST_TEST_REQUIRE(killed_both, "agentctl's watchdog was not found");
    BOOST_TEST_REQUIRE(first.signal == SIGKILL);
    BOOST_TEST_REQUIRE(wait_for_processes(nonce, 12, 2s));
    auto list = agentctl({"--output", "json", "runs", "list", "--limit", "1"}, o);
    BOOST_TEST_REQUIRE(list.exit_code == 0, list.err);
    auto at = list.out.find("\"runId\":\"");
    BOOST_TEST_REQUIRE(at != std::string::npos, list.out);
    std::string id = list.out.substr(at + 9, list.out.find('"', at + 9) - at - 9);

    const std::string said = "processes it started are still running";
    auto show = agentctl({"runs", "show", id}, o);
    BOOST_TEST(show.exit_code == 0, show.err);
    BOOST_TEST(show.err.find(said) != std::string::npos, show.err);
    BOOST_TEST(show.err.find("`agentctl runs gc` kills") != std::string::npos, show.err);
    auto json = agentctl({"--output", "json", "runs", "show", id}, o);
    BOOST_TEST(json.out.find("\"code\":\"dead_run_still_running\"") != std::string::npos, json.out);
    auto dry = agentctl({"resume", "--dry-run", id}, o);
    BOOST_TEST(dry.exit_code == 3, dry.err);
    BOOST_TEST(dry.err.find(said) != std::string::npos, dry.err);
    auto refused = agentctl({"resume", id}, o);
    BOOST_TEST(refused.exit_code == 3, "exit " << refused.exit_code << ", signal " << refused.signal << ", "
                                               << refused.wall.count() << " ms: " << refused.err);
    BOOST_TEST(refused.err.find(said) != std::string::npos, refused.err);
    BOOST_TEST(processes_with(nonce).size() >= 12u, "looking must not touch them");

    auto gc = agentctl({"runs", "gc"}, o);
    BOOST_TEST(gc.err.find("16 processes killed") != std::string::npos, gc.err);
    BOOST_TEST(processes_with(nonce).empty());
    auto after = agentctl({"runs", "show", id}, o);
    BOOST_TEST(after.err.find(said) == std::string::npos, after.err);
    kill_leftovers(nonce);
}
