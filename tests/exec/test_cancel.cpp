// Cancellation at every phase, the embedding application's signals, the exit-watch fallbacks,
// strands on several threads, a spawn executor, and destroying the io_context mid-run
// (docs/TESTING.md). Upper
// bounds on wall time are far below the wait they rule out (a 100 s grace, a 300 s sleep).
#include "harness.hpp"

#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

using namespace exec_test;
using agentctl::containment_policy;
using agentctl::process_outcome;
using boost::asio::cancellation_type;

BOOST_FIXTURE_TEST_SUITE(cancel, process_fixture)

// T-CAN-04, before the spawn: nothing is spawned, the result comes at once, exactly once.
BOOST_AUTO_TEST_CASE(cancel_before_spawn_spawns_nothing) {
    temp_dir dir;
    for (auto type : {cancellation_type::terminal, cancellation_type::partial, cancellation_type::total}) {
        runner r;
        auto held = r.hold_spawns();  // with a spawner thread: it spawns nothing meanwhile
        auto marker = dir.path + "/spawned";
        r.start(probe_request(nonce, {"write-file", marker, "1"}));
        r.cancel(type);  // the spawn is queued, not yet made: this is the same turn
        r.cancel(type);
        r.run(5s);
        BOOST_TEST(r.result().outcome == process_outcome::cancelled);
        BOOST_TEST(r.result().error_message == "cancelled before the process was spawned");
        BOOST_TEST(::access(marker.c_str(), F_OK) != 0);
    }
}

// T-ASIO-04: cancelled right after the spawn, many times: signaled(KILL) and cancelled, never
// a lost status.
BOOST_AUTO_TEST_CASE(cancel_right_after_spawn) {
    for (int i = 0; i < 300; ++i) {
        runner r;
        auto req = probe_request(nonce, {"sleep", "10"});
        // Posted once the run says it started: right after the spawn, whichever thread spawned.
        req.on_started = [&r](const agentctl::process_started&) {
            boost::asio::post(r.io, [&r] { r.cancel(cancellation_type::terminal); });
        };
        r.start(std::move(req));
        r.run(5s);
        const auto& res = r.result();
        BOOST_TEST(res.outcome == process_outcome::cancelled);
        BOOST_TEST(res.signal.value_or(-1) == SIGKILL);
        BOOST_TEST(res.duration.count() > 0);
    }
}

// T-CAN-04, during an output flood: the output so far is returned.
BOOST_AUTO_TEST_CASE(cancel_during_flood_keeps_output) {
    for (auto type : {cancellation_type::terminal, cancellation_type::total}) {
        temp_dir dir;
        runner r;
        auto req = probe_request(nonce, {"flood", "--fd", "both", "--marker", dir.path + "/flooding"});
        req.stdout_limit = 64 * 1024 * 1024;
        req.stderr_limit = 64 * 1024 * 1024;
        req.combined_limit = 128 * 1024 * 1024;
        r.start(req);
        file_watch w(r.io, dir.path + "/flooding", [&] { r.cancel(type); });
        r.run(10s);
        const auto& res = r.result();
        BOOST_TEST(res.outcome == process_outcome::cancelled);
        BOOST_TEST(res.stderr_bytes.size() >= 65536u);  // the first chunk was written before the marker
        BOOST_TEST(res.signal.has_value());
    }
}

// T-CAN-04, during the kill ladder: a terminal cancellation cuts the grace short; a partial
// one is a no-op; the first cause (the timeout) stays.
BOOST_AUTO_TEST_CASE(cancel_during_ladder) {
    temp_dir dir;
    runner r;
    auto marker = dir.path + "/ready";
    auto req = probe_request(nonce, {"trap-term", "ignore", "--marker", marker});
    req.timeout = 300ms;
    req.kill_grace = 100s;
    r.start(req);
    boost::asio::steady_timer during_grace(r.io);
    file_watch w(r.io, marker, [&] {
        // The timeout fires 300 ms after the spawn; cancel 400 ms after the marker.
        during_grace.expires_after(700ms);
        during_grace.async_wait([&](boost::system::error_code) {
            r.cancel(cancellation_type::partial);
            r.cancel(cancellation_type::terminal);
            r.cancel(cancellation_type::terminal);
        });
    });
    r.run(60s);
    BOOST_TEST(r.result().outcome == process_outcome::timed_out);
    BOOST_TEST(r.result().signal.value_or(-1) == SIGKILL);
    BOOST_TEST(r.wall() < 30s);  // not the 100 s grace
}

// T-SIG-01 through cancellation: partial runs the ladder (TERM ignored, SIGKILL after grace).
BOOST_AUTO_TEST_CASE(partial_cancel_runs_the_ladder) {
    for (auto policy : both_policies) {
        temp_dir dir;
        runner r;
        auto marker = dir.path + "/ready";
        auto req = probe_request(nonce, {"trap-term", "ignore", "--marker", marker});
        req.kill_grace = 400ms;
        req.containment = policy;
        r.start(req);
        std::chrono::steady_clock::time_point cancelled_at;
        file_watch w(r.io, marker, [&] {
            cancelled_at = std::chrono::steady_clock::now();
            r.cancel(cancellation_type::partial);
        });
        r.run(60s);
        auto after = std::chrono::steady_clock::now() - cancelled_at;
        BOOST_TEST(r.result().outcome == process_outcome::cancelled);
        BOOST_TEST(r.result().signal.value_or(-1) == SIGKILL);
        BOOST_TEST(after >= 400ms);  // the grace
        BOOST_TEST(after < 20s);     // the child would wait 300 s
    }
}

// T-CAN-04, after the leader exited but before the result: the drain is cut short and the
// result stands.
BOOST_AUTO_TEST_CASE(cancel_during_drain_keeps_exit) {
    for (auto policy : both_policies) {
        temp_dir pids;
        temp_dir dir;
        runner r;
        auto marker = dir.path + "/ready";
        auto req = probe_request(
            nonce, {"fork-hold", "--hold", "stdout", "--pidfile-dir", pids.path, "--marker", marker});
        req.drain_grace = 120s;
        req.containment = policy;
        r.start(req);
        std::unique_ptr<exit_watch_pid> leader_gone;
        file_watch w(r.io, marker, [&] {
            // Both pidfiles exist now; the leader is the one whose parent is us. It is not
            // reaped before the drain ends, so its pid is still its own.
            agentctl::exec::unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            for (auto& p : read_pidfiles(pids.path)) {
                agentctl::exec::proc_stat st;
                if (!agentctl::exec::read_proc_stat(proc.get(), p.pid, st) || st.ppid != ::getpid()) continue;
                leader_gone = std::make_unique<exit_watch_pid>(r.io, p.pid, [&] {
                    // One more turn: the run has handled the same readiness by then.
                    boost::asio::post(r.io, [&] { r.cancel(cancellation_type::partial); });
                });
            }
        });
        r.run(60s);
        BOOST_TEST(leader_gone != nullptr);
        BOOST_TEST(r.result().outcome == process_outcome::exited);
        BOOST_TEST(r.result().exit_code.value_or(-1) == 0);
        BOOST_TEST(r.wall() < 30s);  // not the 120 s drain grace
        BOOST_TEST(r.result().descendants_killed == 1u);
        for (auto& p : read_pidfiles(pids.path)) BOOST_TEST(!alive(p));
    }
}

// T-ASIO-03: the host application keeps its SIGCHLD handler and its own children.
//   1. A handler that reaps only the application's own child: its status reaches it, and ours
//      are all correct.
//   2. A greedy handler (waitpid(-1)) steals the status of our children too: runs still end
//      promptly and say "exit_status_lost" instead of inventing a status. It runs at once on
//      SIGCHLD while we reap only after the tree is gone, so it does steal.
//   3. SIGCHLD ignored would let the kernel reap our children: runs fail before spawning.
// The test's own disposition is restored however the case ends (a failed requirement too).
namespace {

struct sigchld_restore {
    sigchld_restore() { ::sigaction(SIGCHLD, nullptr, &old); }
    ~sigchld_restore() { ::sigaction(SIGCHLD, &old, nullptr); }
    struct sigaction old {};
};

}  // namespace

BOOST_AUTO_TEST_CASE(host_sigchld_handling) {
    static std::atomic<pid_t> foreign{0};
    static std::atomic<int> foreign_status{-1};
    static std::atomic<int> reaped_by_app{0};
    sigchld_restore restore;
    auto run_batch = [&](auto check) {
        boost::asio::io_context io;
        int done = 0;
        for (int i = 0; i < 100; ++i) {
            agentctl::async_run_process(io.get_executor(),
                                        probe_request(nonce, {"exit", std::to_string(i % 50)}),
                                        [&, i](agentctl::process_result r) {
                                            check(r, i % 50);
                                            ++done;
                                        });
        }
        io.run_for(30s);
        BOOST_TEST(done == 100);
    };
    auto spawn_foreign = [] {
        pid_t pid = 0;
        char arg0[] = "/bin/true";
        char* argv[] = {arg0, nullptr};
        char* envp[] = {nullptr};
        BOOST_REQUIRE(::posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, envp) == 0);
        return pid;
    };

    struct sigaction own {};
    own.sa_handler = [](int) {
        int status = 0;
        pid_t p = foreign.load();
        if (p > 0 && ::waitpid(p, &status, WNOHANG) == p) foreign_status = status;
    };
    ::sigaction(SIGCHLD, &own, nullptr);
    foreign = spawn_foreign();
    run_batch([](const agentctl::process_result& r, int code) {
        BOOST_TEST(r.exit_code.value_or(-1) == code);
        BOOST_TEST(code_of(r).empty());
    });
    int status = 0;
    if (foreign_status.load() == -1 && ::waitpid(foreign.load(), &status, 0) == foreign.load())
        foreign_status = status;
    BOOST_TEST(foreign_status.load() == 0);

    struct sigaction greedy {};
    greedy.sa_handler = [](int) {
        while (::waitpid(-1, nullptr, WNOHANG) > 0) ++reaped_by_app;
    };
    ::sigaction(SIGCHLD, &greedy, nullptr);
    int lost = 0;
    int intact = 0;
    run_batch([&](const agentctl::process_result& r, int code) {
        BOOST_TEST(r.outcome == process_outcome::exited);
        if (code_of(r) == "exit_status_lost") {
            ++lost;
            BOOST_TEST(!r.exit_code.has_value());
            BOOST_TEST(!r.signal.has_value());
            BOOST_TEST(!r.error_message.empty());
        } else {
            ++intact;
            BOOST_TEST(code_of(r).empty());
            BOOST_TEST(r.exit_code.value_or(-1) == code);
        }
    });
    BOOST_TEST_MESSAGE("a greedy SIGCHLD handler stole " << lost << " of 100 exit statuses");
    BOOST_TEST(lost + intact == 100);
    BOOST_TEST(lost >= 1, "the greedy handler stole no status: exit_status_lost was not exercised");
    BOOST_TEST(reaped_by_app.load() >= lost);  // every lost status was reaped by the handler

    for (int flags : {0, SA_NOCLDWAIT}) {
        struct sigaction ignore {};
        ignore.sa_handler = flags ? SIG_DFL : SIG_IGN;
        ignore.sa_flags = flags;
        ::sigaction(SIGCHLD, &ignore, nullptr);
        run_batch([](const agentctl::process_result& r, int) {
            BOOST_TEST(r.outcome == process_outcome::spawn_failed);
            BOOST_TEST(code_of(r) == "sigchld_ignored");
        });
    }
}

// T-ASIO-05: the fallbacks, pidfd_open() and polling, do the same job.
BOOST_AUTO_TEST_CASE(exit_watch_fallbacks_work) {
    for (auto watch : {agentctl::exit_watch::pidfd_open, agentctl::exit_watch::polling}) {
        auto req = probe_request(nonce, {"exit", "42"});
        req.watch = watch;
        BOOST_TEST(run_one(req).exit_code.value_or(-1) == 42);

        auto out = probe_request(nonce, {"flood", "--bytes", "300000"});
        out.watch = watch;
        BOOST_TEST(run_one(out).stdout_bytes.size() == 300000u);

        for (auto policy : both_policies) {
            temp_dir pids;
            auto tree = probe_request(
                nonce, {"fork-hold", "--setsid", "--leader", "sleep", "--pidfile-dir", pids.path});
            tree.watch = watch;
            tree.timeout = 300ms;
            tree.containment = policy;
            auto r = run_one(tree);
            BOOST_TEST(r.outcome == process_outcome::timed_out);
            BOOST_TEST(r.signal.value_or(-1) == SIGKILL);
            BOOST_TEST(r.descendants_killed == 1u);
            // On this older path the child joins its cgroup by writing to cgroup.procs.
            bool cgroup = policy == containment_policy::automatic && host_has_cgroup_v2();
            BOOST_TEST(
                (r.used == (cgroup ? agentctl::containment::cgroup : agentctl::containment::process_group)));
            for (auto& p : read_pidfiles(pids.path)) BOOST_TEST(!alive(p));
        }

        runner c;
        auto cancelled = probe_request(nonce, {"sleep", "10"});
        cancelled.watch = watch;
        c.start(cancelled);
        boost::asio::post(c.io, [&c] { c.cancel(cancellation_type::terminal); });
        c.run(5s);
        BOOST_TEST(c.result().outcome == process_outcome::cancelled);
    }
}

// T-CAN-04 "during spawn", and runs on strands of a context served by two threads:
// cancellations land at random phases, each result is delivered exactly once, on its strand.
BOOST_AUTO_TEST_CASE(strands_on_two_threads_with_random_cancellation) {
    constexpr std::size_t runs = 200;
    spawn_thread spawner;
    boost::asio::io_context io(2);
    spawner.attach(io);
    std::vector<boost::asio::strand<boost::asio::io_context::executor_type>> strands;
    std::vector<boost::asio::cancellation_signal> signals(runs);
    std::vector<std::unique_ptr<boost::asio::steady_timer>> timers;
    std::atomic<int> completions{0};
    std::atomic<int> wrong_strand{0};
    std::atomic<int> wrong_outcome{0};
    std::mt19937 rng(12345);
    for (std::size_t i = 0; i < runs; ++i) {
        strands.push_back(boost::asio::make_strand(io));
        timers.push_back(std::make_unique<boost::asio::steady_timer>(strands.back()));
    }
    for (std::size_t i = 0; i < runs; ++i) {
        auto strand = strands[i];
        auto delay = std::chrono::microseconds(rng() % 20000);
        boost::asio::post(strand, [&, i, strand, delay] {
            auto req = probe_request(nonce, {i % 3 == 0 ? "exit" : "sleep", i % 3 == 0 ? "0" : "10"});
            agentctl::async_run_process(
                strand, req,
                boost::asio::bind_cancellation_slot(
                    signals[i].slot(), [&, strand](agentctl::process_result r) {
                        if (!strand.running_in_this_thread()) ++wrong_strand;
                        if (r.outcome != process_outcome::cancelled && r.outcome != process_outcome::exited) {
                            ++wrong_outcome;
                        }
                        ++completions;
                    }));
            timers[i]->expires_after(delay);
            timers[i]->async_wait([&, i](boost::system::error_code) {
                signals[i].emit(i % 2 ? cancellation_type::terminal : cancellation_type::partial);
            });
        });
    }
    std::thread second([&] { io.run_for(30s); });
    io.run_for(30s);
    second.join();
    BOOST_TEST(completions.load() == static_cast<int>(runs));
    BOOST_TEST(wrong_strand.load() == 0);
    BOOST_TEST(wrong_outcome.load() == 0);
}

// Waits on this thread, without an event loop, until `path` (in `dir`) exists: inotify, at most
// `bound`. Whether it appeared.
bool block_until_file(const std::string& dir, const std::string& path, milliseconds bound) {
    int fd = ::inotify_init1(IN_CLOEXEC);
    if (fd < 0 || ::inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
        if (fd >= 0) ::close(fd);
        return false;
    }
    auto until = std::chrono::steady_clock::now() + bound;
    bool seen = false;
    while (!(seen = std::filesystem::exists(path))) {
        auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char events[4096];
        (void)::read(fd, events, sizeof events);
    }
    ::close(fd);
    return seen;
}

// agentctl::use_spawn_executor: the spawn needs no turn of the runs' own thread. A handler
// holds that thread (the io_context's only one) until the child is running and has written its
// marker, which only a spawn on the spawner allows; then the run is cancelled and completes on
// the io_context as usual.
BOOST_AUTO_TEST_CASE(a_spawn_executor_spawns_while_the_runs_thread_is_held) {
    temp_dir dir;
    auto marker = dir.path + "/running";
    boost::asio::thread_pool spawner(1);  // before io: outlives it
    boost::asio::io_context io;
    agentctl::use_spawn_executor(io, spawner.get_executor());
    boost::asio::cancellation_signal cancel;
    // Queued first: the thread is held before the run's initiation has had any turn of it.
    bool seen = false;
    boost::asio::post(io, [&] {
        seen = block_until_file(dir.path, marker, 20s);
        cancel.emit(cancellation_type::terminal);
    });
    std::optional<agentctl::process_result> result;
    agentctl::async_run_process(
        io.get_executor(), probe_request(nonce, {"trap-term", "ignore", "--marker", marker}),
        boost::asio::bind_cancellation_slot(cancel.slot(),
                                            [&](agentctl::process_result r) { result = std::move(r); }));
    io.run_for(30s);
    BOOST_TEST(seen);
    BOOST_REQUIRE(result.has_value());
    BOOST_TEST(result->outcome == process_outcome::cancelled);
    BOOST_TEST(result->signal.value_or(-1) == SIGKILL);
}

// Destroying the io_context with runs in flight kills and reaps their trees (no zombie, no
// survivor, no leftover cgroup: the fixture checks).
BOOST_AUTO_TEST_CASE(destroying_the_context_kills_the_trees) {
    for (auto policy : both_policies) {
        temp_dir dir;
        std::vector<std::string> markers;
        {
            spawn_thread spawner;
            boost::asio::io_context io;
            spawner.attach(io);
            std::vector<std::unique_ptr<file_watch>> watches;
            int ready = 0;
            for (int i = 0; i < 5; ++i) {
                auto marker = dir.path + "/m" + std::to_string(i);
                auto req = probe_request(nonce, {"fork-hold", "--leader", "sleep", "--marker", marker});
                req.containment = policy;
                agentctl::async_run_process(io.get_executor(), req, [](agentctl::process_result) {
                    BOOST_ERROR("must not complete");
                });
                watches.push_back(std::make_unique<file_watch>(io, marker, [&] {
                    if (++ready == 5) io.stop();
                }));
            }
            io.run_for(10s);
            BOOST_TEST(ready == 5);
            BOOST_TEST(processes_with(nonce).size() == 10u);
            watches.clear();
        }
        // The destructor returned: the trees are gone already (the fixture re-checks).
        BOOST_TEST(zombie_children() == 0);
    }
}

BOOST_AUTO_TEST_SUITE_END()
