// Process trees, timeouts and the termination ladder (docs/TESTING.md lists the cases).
//
// Upper bounds on wall time prove that a run did not wait for something slow (a 300 s sleep, a
// 100 s grace): they are set far below that and far above what a loaded machine adds, so they
// hold under load and still fail if the wait happens.
#include "harness.hpp"

#include "../support/skips.hpp"

#include "exec/tree.hpp"

#include <agentctl/watchdog.hpp>

#include <boost/asio/thread_pool.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>

using namespace exec_test;
using agentctl::containment;
using agentctl::containment_policy;
using agentctl::process_outcome;

namespace {

containment expected_mechanism(containment_policy policy) {
    return policy == containment_policy::automatic && host_has_cgroup_v2() ? containment::cgroup
                                                                           : containment::process_group;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(tree, process_fixture)

BOOST_AUTO_TEST_CASE(automatic_containment_uses_cgroup_v2_where_available) {
    auto r = run_one(probe_request(nonce, {"exit", "0"}));
    BOOST_TEST(r.used == expected_mechanism(containment_policy::automatic));
    if (!host_has_cgroup_v2())
        test_support::cannot_check("no writable cgroup v2 here: cgroup containment is not exercised");
    auto req = probe_request(nonce, {"exit", "0"});
    req.containment = containment_policy::process_group_only;
    BOOST_TEST(run_one(req).used == containment::process_group);
}

// Leaves are pooled per io_context; one that was emptied with cgroup.kill must not be reused
// (Linux SIGKILLs whatever is later born into it with CLONE_INTO_CGROUP).
BOOST_AUTO_TEST_CASE(runs_after_a_kill_are_not_killed) {
    spawn_thread spawner;
    boost::asio::io_context io;
    spawner.attach(io);
    std::vector<agentctl::process_result> results;
    std::function<void(int)> next = [&](int i) {
        auto req = i % 2 == 0 ? probe_request(nonce, {"sleep", "10"}) : probe_request(nonce, {"exit", "7"});
        req.timeout = i % 2 == 0 ? 50ms : 10s;
        agentctl::async_run_process(io.get_executor(), req, [&, i](agentctl::process_result r) {
            results.push_back(std::move(r));
            if (i < 9) next(i + 1);
        });
    };
    next(0);
    io.run_for(20s);
    BOOST_REQUIRE(results.size() == 10u);
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (i % 2 == 0) {
            BOOST_TEST(results[i].outcome == process_outcome::timed_out);
        } else {
            BOOST_TEST(results[i].exit_code.value_or(-1) == 7, "run " << i);
        }
    }
}

namespace {

std::vector<pid_t> leaf_members(const std::string& leaf) {
    std::vector<pid_t> out;
    std::ifstream in(leaf + "/cgroup.procs");
    for (pid_t p; in >> p;) out.push_back(p);
    return out;
}

}  // namespace

// A pooled leaf is reused only empty: the next run's leaf holds its leader alone, and the
// result's usage is its own (the leader's rusage from waitid; nothing is read from the
// cgroup). With and without a housekeeping executor (docs/DESIGN.md, "Executor").
BOOST_FIXTURE_TEST_CASE(a_reused_leaf_carries_nothing_of_the_previous_run, isolated_process_fixture,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            host_has_cgroup_v2))) {
    for (bool housekept : {false, true}) {
        boost::asio::thread_pool housekeeping(1);
        boost::asio::io_context io;
        if (housekept) agentctl::use_housekeeping_executor(io, housekeeping.get_executor());
        std::vector<agentctl::process_started> started;
        std::vector<std::vector<pid_t>> members;
        auto record = [&](const agentctl::process_started& s) {
            started.push_back(s);
            members.push_back(leaf_members(s.cgroup));
        };
        // The first burns CPU until its timeout kills it through its pidfd (alone in its leaf,
        // so the leaf goes back to the pool); the second sleeps 1 s (alive when it is looked at).
        auto burn = command_request({"/bin/sh", "-c", "while :; do :; done", nonce});
        burn.timeout = 500ms;
        burn.on_started = record;
        auto quick = probe_request(nonce, {"sleep", "1"});
        quick.on_started = record;
        std::vector<agentctl::process_result> results;
        agentctl::async_run_process(io.get_executor(), burn, [&](agentctl::process_result r) {
            results.push_back(std::move(r));
            agentctl::async_run_process(io.get_executor(), quick, [&](agentctl::process_result r2) {
                results.push_back(std::move(r2));
            });
        });
        io.run_for(20s);
        BOOST_REQUIRE(results.size() == 2u);
        BOOST_REQUIRE(started.size() == 2u);
        BOOST_TEST(results[0].outcome == process_outcome::timed_out);
        BOOST_TEST(results[0].used == containment::cgroup);
        BOOST_TEST(results[1].exit_code.value_or(-1) == 0);
        // Without a housekeeper the pool holds that one leaf: the second run gets it.
        if (!housekept) BOOST_TEST(started[1].cgroup == started[0].cgroup);
        BOOST_TEST(members[1] == std::vector<pid_t>{started[1].pid}, "housekept " << housekept);
        // The burner's CPU (whatever a loaded machine gave it) is not in the sleeper's usage.
        auto cpu = [](const agentctl::process_result& r) { return r.usage.user_us + r.usage.system_us; };
        BOOST_TEST(cpu(results[0]) >= 10000u);
        BOOST_TEST(cpu(results[1]) < cpu(results[0]), "housekept " << housekept);
    }
}

// With a housekeeping executor, leaves made ahead, pooled, retired after cgroup.kill or
// surplus are all gone when the io_context is, and so is the owner directory.
BOOST_FIXTURE_TEST_CASE(housekept_leaves_are_all_removed, isolated_process_fixture,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            host_has_cgroup_v2))) {
    temp_dir pids;
    std::string leaf;
    int timed_out = 0;
    {
        boost::asio::thread_pool housekeeping(1);
        boost::asio::io_context io;
        agentctl::use_housekeeping_executor(io, housekeeping.get_executor());
        for (int i = 0; i < 40; ++i) {
            // Lone sleepers (killed through the pidfd: leaf pooled) and trees with a grandchild
            // (killed with cgroup.kill: leaf retired, removed by the housekeeper).
            auto req =
                i % 2 == 0
                    ? probe_request(nonce, {"sleep", "10"})
                    : probe_request(nonce, {"fork-hold", "--leader", "sleep", "--pidfile-dir", pids.path});
            req.timeout = 200ms;
            req.on_started = [&leaf](const agentctl::process_started& s) { leaf = s.cgroup; };
            agentctl::async_run_process(io.get_executor(), req, [&](agentctl::process_result r) {
                if (r.outcome == process_outcome::timed_out) ++timed_out;
            });
        }
        io.run_for(60s);
    }
    BOOST_TEST(timed_out == 40);
    BOOST_REQUIRE(!leaf.empty());
    std::string owner = leaf.substr(0, leaf.rfind('/'));
    BOOST_TEST(::access(owner.c_str(), F_OK) != 0, owner << " is still there");
    for (auto& p : read_pidfiles(pids.path)) BOOST_TEST(!alive(p));
}

// Leaves left behind by a process that died without destroying its io_context are removed
// by the next one that uses cgroups; a leaf whose owner lives is left alone.
BOOST_FIXTURE_TEST_CASE(stale_leaves_of_dead_owners_are_removed, isolated_process_fixture,
                        *boost::unit_test::precondition(test_support::needs("a writable cgroup v2 hierarchy",
                                                                            host_has_cgroup_v2))) {
    std::string why;
    auto parent = agentctl::exec::discover_cgroup_parent(why);
    BOOST_REQUIRE(parent.has_value());
    pid_t dead = ::fork();
    if (dead == 0) ::_exit(0);
    BOOST_REQUIRE(dead > 0);
    BOOST_REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    std::string stale = "agentctl-" + std::to_string(dead) + "-1-0";
    std::string live = "agentctl-1-1-0";  // pid 1 always exists
    BOOST_REQUIRE(::mkdirat(parent->dir.get(), stale.c_str(), 0755) == 0);
    BOOST_REQUIRE(::mkdirat(parent->dir.get(), live.c_str(), 0755) == 0);
    run_one(probe_request(nonce, {"exit", "0"}));
    BOOST_TEST(::faccessat(parent->dir.get(), stale.c_str(), F_OK, 0) != 0);
    BOOST_TEST(::faccessat(parent->dir.get(), live.c_str(), F_OK, 0) == 0);
    ::unlinkat(parent->dir.get(), live.c_str(), AT_REMOVEDIR);
    ::unlinkat(parent->dir.get(), stale.c_str(), AT_REMOVEDIR);
}

// T-TREE-01: a grandchild in the same group dies with the leader on timeout.
BOOST_AUTO_TEST_CASE(timeout_kills_grandchild_in_group) {
    for (auto policy : both_policies) {
        temp_dir pids;
        auto req = probe_request(nonce, {"fork-hold", "--leader", "sleep", "--pidfile-dir", pids.path});
        req.timeout = 300ms;
        req.containment = policy;
        milliseconds wall{};
        auto r = run_one(req, 60s, &wall);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
        BOOST_TEST(r.used == expected_mechanism(policy));
        BOOST_TEST(r.descendants_killed == 1u);
        auto recorded = read_pidfiles(pids.path);
        BOOST_TEST(recorded.size() == 2u);  // the tree was complete when it was killed
        for (auto& p : recorded) BOOST_TEST(!alive(p));
        BOOST_TEST(wall < 20s);  // not the grandchild's 300 s
    }
}

// T-TREE-02 (a): a descendant that called setsid() while its parent lives is found through
// the tree and killed, under both mechanisms.
BOOST_AUTO_TEST_CASE(timeout_kills_setsid_child_of_live_leader) {
    for (auto policy : both_policies) {
        temp_dir pids;
        auto req =
            probe_request(nonce, {"fork-hold", "--setsid", "--leader", "sleep", "--pidfile-dir", pids.path});
        req.timeout = 300ms;
        req.containment = policy;
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.descendants_killed == 1u);
        auto recorded = read_pidfiles(pids.path);
        BOOST_TEST(recorded.size() == 2u);
        for (auto& p : recorded) BOOST_TEST(!alive(p));
    }
}

// T-TREE-02 (b): double fork + setsid, the intermediate exits, so the holder is reparented
// away from the tree. A cgroup catches it; the process group cannot: that is the documented
// limitation of process-group containment, asserted here rather than passed over.
BOOST_AUTO_TEST_CASE(double_forked_setsid_escape_per_mechanism) {
    for (std::string hold : {"none", "stdout"}) {
        for (auto policy : both_policies) {
            temp_dir pids;
            auto req = probe_request(nonce, {"fork-hold", "--double-fork", "--setsid", "--hold", hold,
                                             "--pidfile-dir", pids.path});
            req.containment = policy;
            req.drain_grace = 200ms;
            milliseconds wall{};
            auto r = run_one(req, 60s, &wall);
            BOOST_TEST(r.outcome == process_outcome::exited);
            BOOST_TEST(r.exit_code.value_or(-1) == 0);
            BOOST_TEST(wall < 20s);  // bounded even though the escapee may hold stdout for 300 s
            auto recorded = read_pidfiles(pids.path);
            BOOST_REQUIRE(recorded.size() == 2u);
            std::vector<pid_record> survivors;
            for (auto& p : recorded) {
                if (alive(p)) survivors.push_back(p);
            }
            if (expected_mechanism(policy) == containment::cgroup) {
                BOOST_TEST(r.used == containment::cgroup);
                BOOST_TEST(r.descendants_killed == 1u);
                BOOST_TEST(survivors.empty());
            } else {
                BOOST_TEST(r.used == containment::process_group);
                BOOST_TEST(r.descendants_killed == 0u);  // never claims what it did not do
                BOOST_TEST(survivors.size() == 1u,
                           "process-group containment cannot see a reparented setsid escapee");
            }
            for (auto& p : survivors) kill_and_wait(p);
        }
    }
}

// T-TREE-03: the leader exits at once, a background grandchild holds stdout and stderr. The
// run returns within drain_grace with exited(0) and the output written before; the
// grandchild is killed.
BOOST_AUTO_TEST_CASE(leader_exit_with_backgrounded_pipe_holder) {
    std::vector<std::string> shells = {"/bin/sh"};
    if (::access("/bin/bash", X_OK) == 0) shells.push_back("/bin/bash");
    for (auto& shell : shells) {
        for (auto policy : both_policies) {
            auto req = command_request(
                {shell, "-c", "echo before; " + probe_path() + " sleep 300 --nonce " + nonce + " & exit 0"});
            req.containment = policy;
            req.drain_grace = 250ms;
            milliseconds wall{};
            auto r = run_one(req, 60s, &wall);
            BOOST_TEST(r.outcome == process_outcome::exited, shell);
            BOOST_TEST(r.exit_code.value_or(-1) == 0);
            BOOST_TEST(r.stdout_bytes == "before\n");
            BOOST_TEST(r.descendants_killed == 1u);
            BOOST_TEST(wall >= 250ms);                       // it did wait for the pipes ...
            BOOST_TEST(wall < 20s);                          // ... but not for the grandchild's 300 s
            BOOST_TEST(processes_with(nonce).size() <= 1u);  // dying, at most; the fixture waits
        }
    }
}

// The same with the background process redirected away from the pipes: EOF comes at once, and
// what is left of the tree is still killed at completion.
BOOST_AUTO_TEST_CASE(leader_exit_with_silent_background_child) {
    for (auto policy : both_policies) {
        auto req = command_request(
            {"/bin/sh", "-c", probe_path() + " sleep 300 --nonce " + nonce + " >/dev/null 2>&1 & exit 0"});
        req.containment = policy;
        req.drain_grace = 120s;
        milliseconds wall{};
        auto r = run_one(req, 180s, &wall);
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_TEST(wall < 30s);  // EOF at once: not the 120 s drain grace
        if (expected_mechanism(policy) == containment::cgroup) BOOST_TEST(r.descendants_killed == 1u);
    }
}

// T-TREE-04: the grandchild keeps writing after the leader exited.
BOOST_AUTO_TEST_CASE(writer_after_leader_exit_is_bounded) {
    for (auto policy : both_policies) {
        temp_dir pids;
        auto req = probe_request(nonce, {"fork-hold", "--hold", "stdout", "--write-interval-ms", "10",
                                         "--pidfile-dir", pids.path});
        req.containment = policy;
        req.drain_grace = 300ms;
        milliseconds wall{};
        auto r = run_one(req, 60s, &wall);
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_TEST(r.descendants_killed == 1u);
        BOOST_TEST(r.stdout_bytes.starts_with("line 0\n"));
        BOOST_TEST(wall < 20s);  // the writer would go on for 300 s
        for (auto& p : read_pidfiles(pids.path)) BOOST_TEST(!alive(p));
    }
}

// T-TREE-07: dash does not exec its last command here, so there are two processes.
BOOST_AUTO_TEST_CASE(shell_and_its_child_die_on_timeout) {
    for (auto policy : both_policies) {
        auto req =
            command_request({"/bin/sh", "-c", probe_path() + " sleep 300 --nonce " + nonce + "; exit 3"});
        req.timeout = 300ms;
        req.containment = policy;
        auto r = run_one(req);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
    }
}

// T-SIG-01: a child that ignores SIGTERM is SIGKILLed after the grace.
BOOST_AUTO_TEST_CASE(term_ignoring_child_is_killed_after_grace) {
    for (auto policy : both_policies) {
        temp_dir dir;
        auto marker = dir.path + "/ready";
        auto req = probe_request(nonce, {"trap-term", "ignore", "--marker", marker});
        req.timeout = 500ms;
        req.kill_grace = 400ms;
        req.containment = policy;
        milliseconds wall{};
        auto r = run_one(req, 60s, &wall);
        BOOST_TEST(::access(marker.c_str(), F_OK) == 0);  // the handler was in place before the TERM
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
        BOOST_TEST(wall >= 900ms);  // timeout + grace
        BOOST_TEST(wall < 20s);     // the child would wait 300 s
    }
}

// T-SIG-02: a child that exits 17 on SIGTERM ends the ladder at once, not after the grace.
BOOST_AUTO_TEST_CASE(term_handling_child_returns_without_waiting_grace) {
    for (auto policy : both_policies) {
        temp_dir dir;
        auto marker = dir.path + "/ready";
        auto req = probe_request(nonce, {"trap-term", "exit", "17", "--marker", marker});
        req.timeout = 500ms;
        req.kill_grace = 100s;
        req.containment = policy;
        milliseconds wall{};
        auto r = run_one(req, 120s, &wall);
        BOOST_TEST(::access(marker.c_str(), F_OK) == 0);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.exit_code.value_or(-1) == 17);
        BOOST_TEST(!r.signal.has_value());
        BOOST_TEST(wall < 30s);  // not the 100 s grace
    }
}

// T-SIG-04: a stopped child still ends with SIGTERM: the ladder sends SIGCONT with it.
BOOST_AUTO_TEST_CASE(stopped_child_ends_on_term) {
    for (auto policy : both_policies) {
        auto req = probe_request(nonce, {"stop-self"});
        req.timeout = 300ms;
        req.kill_grace = 100s;
        req.containment = policy;
        milliseconds wall{};
        auto r = run_one(req, 120s, &wall);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.signal.value_or(-1) == SIGTERM);
        BOOST_TEST(wall < 30s);  // not the 100 s grace
    }
}

// The ladder reaches every member: a TERM-trapping leader and a grandchild that ignores TERM
// (SIGKILL after the grace), in both mechanisms.
BOOST_AUTO_TEST_CASE(ladder_kills_whole_tree) {
    for (auto policy : both_policies) {
        temp_dir pids;
        auto req =
            probe_request(nonce, {"fork-hold", "--setsid", "--leader", "sleep", "--pidfile-dir", pids.path});
        req.timeout = 300ms;
        req.kill_grace = 100s;
        req.containment = policy;
        milliseconds wall{};
        auto r = run_one(req, 120s, &wall);
        BOOST_TEST(r.outcome == process_outcome::timed_out);
        BOOST_TEST(r.signal.value_or(-1) == SIGTERM);  // the leader does not trap TERM
        BOOST_TEST(r.descendants_killed == 1u);
        // The leader died of TERM; its setsid child, TERMed too, died with it: no wait for the
        // 100 s grace and its SIGKILL.
        BOOST_TEST(wall < 30s);
        for (auto& p : read_pidfiles(pids.path)) BOOST_TEST(!alive(p));
    }
}

// T-OUT-09: a trickle is cut by the timeout; what came before is kept.
BOOST_AUTO_TEST_CASE(trickle_output_before_timeout_is_kept) {
    auto req = probe_request(
        nonce, {"flood", "--bytes", "100", "--chunk", "1", "--interval-ms", "20", "--pattern", "no-newline"});
    req.timeout = 400ms;
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::timed_out);
    BOOST_TEST(r.stdout_bytes.size() >= 3u);
    BOOST_TEST(r.stdout_bytes.size() < 100u);
    BOOST_TEST(r.stdout_bytes == std::string(r.stdout_bytes.size(), 'x'));
}

// T-TIME-04: a 1 ms timeout racing a child that exits at once: each run is exactly one of
// {exited, timed out} with exactly one status, and nothing leaks. Every fifth child sleeps 5 s
// instead, so the deadline certainly fires while it runs: the timed-out branch is exercised
// however fast or loaded the machine is (the racing runs may land on either side).
BOOST_AUTO_TEST_CASE(tiny_timeout_race_is_clean) {
    int exited = 0;
    int timed_out = 0;
    int slow_timed_out = 0;
    constexpr int runs = 500;
    for (int i = 0; i < runs; ++i) {
        bool slow = i % 5 == 4;
        auto req = probe_request(
            nonce, slow ? std::vector<std::string>{"sleep", "5"} : std::vector<std::string>{"exit", "0"});
        req.timeout = 1ms;
        auto r = run_one(req);
        if (r.outcome == process_outcome::exited) {
            ++exited;
            BOOST_TEST(!slow, "run " << i << ": a 5 s child exited within a 1 ms timeout");
            BOOST_TEST(r.exit_code.value_or(-1) == 0);
            BOOST_TEST(!r.signal.has_value());
        } else {
            // The deadline fired while it ran; the SIGKILL may still lose the race with its
            // own exit, which is then reported as such: one status, never both.
            ++timed_out;
            slow_timed_out += slow;
            BOOST_TEST(r.outcome == process_outcome::timed_out);
            BOOST_TEST(r.signal.has_value() != r.exit_code.has_value());
            BOOST_TEST(r.signal.value_or(SIGKILL) == SIGKILL);
            BOOST_TEST(r.exit_code.value_or(0) == 0);
            // A child still sleeping when the deadline fired cannot have exited by itself.
            if (slow) BOOST_TEST(r.signal.value_or(-1) == SIGKILL, "run " << i);
        }
    }
    BOOST_TEST_MESSAGE("1 ms timeout: " << exited << " exited, " << timed_out << " timed out");
    BOOST_TEST(slow_timed_out == runs / 5);
}

// find_running_leftovers (what `runs show` says of a dead run): a process group counts while a
// member runs that started no earlier than the recorded leader; a leaf that is gone, nothing.
BOOST_AUTO_TEST_CASE(running_leftovers_of_a_process_group) {
    const std::string probe = probe_path();
    pid_t child = ::fork();
    if (child == 0) {
        ::setpgid(0, 0);
        ::execl(probe.c_str(), probe.c_str(), "sleep", "300", "--nonce", nonce.c_str(), nullptr);
        ::_exit(127);
    }
    BOOST_TEST_REQUIRE(child > 0);
    ::setpgid(child, child);  // from both sides: it holds before we look
    agentctl::exec::unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    agentctl::exec::proc_stat st;
    BOOST_TEST_REQUIRE(agentctl::exec::read_proc_stat(proc.get(), child, st));
    auto found = agentctl::find_running_leftovers({{"", child, st.start}});
    BOOST_TEST(found.processes == 1u);
    BOOST_TEST(found.groups == std::vector<pid_t>{child});
    // A leader recorded as started later was another process.
    BOOST_TEST(!agentctl::find_running_leftovers({{"", child, st.start + 1}}).any());
    BOOST_TEST(!agentctl::find_running_leftovers({{"/sys/fs/cgroup/agentctl-no-such-leaf", 0, 0}}).any());
    ::kill(child, SIGKILL);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    BOOST_TEST(!agentctl::find_running_leftovers({{"", child, st.start}}).any());
}

BOOST_AUTO_TEST_SUITE_END()
