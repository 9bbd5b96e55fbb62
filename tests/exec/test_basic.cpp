// Exit statuses, capture, and what the child inherits (docs/TESTING.md).
#include "harness.hpp"

#include "exec/service.hpp"
#include "exec/spawn.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace exec_test;
using agentctl::process_outcome;

namespace {

std::string hex(const std::string& s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

std::vector<std::string> lines(std::string_view s) {
    std::vector<std::string> out;
    std::size_t begin = 0;
    while (begin < s.size()) {
        auto end = s.find('\n', begin);
        if (end == std::string_view::npos) end = s.size();
        out.emplace_back(s.substr(begin, end - begin));
        begin = end + 1;
    }
    return out;
}

std::string fd_target(int fd) {
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(basic, process_fixture)

BOOST_AUTO_TEST_CASE(exit_codes_pass_through) {
    for (int code : {0, 1, 17, 125, 126, 127, 137, 255}) {
        auto r = run_one(probe_request(nonce, {"exit", std::to_string(code)}));
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_TEST(r.exit_code.value_or(-1) == code);
        BOOST_TEST(!r.signal.has_value());
        BOOST_TEST(r.error_message.empty());
    }
}

// T-SIG-03 and T-SIG-09: death by a signal is reported as the signal, never as 128+N, and
// exit 137 is not SIGKILL.
BOOST_AUTO_TEST_CASE(signal_deaths_are_signals) {
    for (auto [name, sig] : {std::pair{"INT", SIGINT},
                             {"TERM", SIGTERM},
                             {"HUP", SIGHUP},
                             {"ABRT", SIGABRT},
                             {"SEGV", SIGSEGV},
                             {"KILL", SIGKILL}}) {
        auto r = run_one(probe_request(nonce, {"signal-self", name}));
        BOOST_TEST(r.outcome == process_outcome::exited);
        BOOST_TEST(r.signal.value_or(-1) == sig, name);
        BOOST_TEST(!r.exit_code.has_value());
    }
    auto voluntary = run_one(probe_request(nonce, {"exit", "137"}));
    BOOST_TEST(voluntary.exit_code.value_or(-1) == 137);
    BOOST_TEST(!voluntary.signal.has_value());
}

BOOST_AUTO_TEST_CASE(stdout_and_stderr_are_captured_apart) {
    auto out =
        run_one(probe_request(nonce, {"flood", "--fd", "1", "--bytes", "100", "--pattern", "no-newline"}));
    BOOST_TEST(out.stdout_bytes == std::string(100, 'x'));
    BOOST_TEST(out.stderr_bytes.empty());
    auto err =
        run_one(probe_request(nonce, {"flood", "--fd", "2", "--bytes", "7", "--pattern", "no-newline"}));
    BOOST_TEST(err.stdout_bytes.empty());
    BOOST_TEST(err.stderr_bytes == "xxxxxxx");
    BOOST_TEST(err.outcome == process_outcome::exited);
    BOOST_TEST(err.usage.max_rss_kib > 0u);
    BOOST_TEST(err.duration.count() > 0);
}

// T-IN-04: every element arrives byte-exact and separate; no shell anywhere.
BOOST_AUTO_TEST_CASE(argv_is_passed_verbatim) {
    std::vector<std::string> tricky = {"a b",  "'q'", "\"dq\"",      "$(touch /tmp/x)",
                                       "`id`", "a;b", "line\nbreak", "*",
                                       "-rf",  "",    "\xff\xfe",    std::string(10000, 'z')};
    std::vector<std::string> args = {"report-argv"};
    args.insert(args.end(), tricky.begin(), tricky.end());
    auto r = run_one(probe_request(nonce, args));
    auto got = lines(r.stdout_bytes);
    BOOST_REQUIRE(got.size() == tricky.size() + 4);  // argv[0], mode, tricky..., --nonce, nonce
    BOOST_TEST(got[0] == hex(probe_path()));
    for (std::size_t i = 0; i < tricky.size(); ++i) BOOST_TEST(got[i + 2] == hex(tricky[i]));
}

// T-ENV-05: exactly the given environment, nothing inherited.
BOOST_AUTO_TEST_CASE(environment_is_exactly_the_request) {
    ::setenv("AGENTCTL_TEST_LEAK", "leaked", 1);
    auto req = probe_request(nonce, {"report-env"});
    req.env = {"A=1", "B=x=y", "C=multi\nline", "EMPTY="};
    auto r = run_one(req);
    BOOST_TEST(r.stdout_bytes == "A=1\nB=x=y\nC=multi\nline\nEMPTY=\n");
    auto none = run_one(probe_request(nonce, {"report-env"}));
    BOOST_TEST(none.stdout_bytes.empty());
    ::unsetenv("AGENTCTL_TEST_LEAK");
}

// T-CON-05: the child holds 0, 1, 2 only, even when the host holds foreign non-CLOEXEC fds.
BOOST_AUTO_TEST_CASE(child_holds_only_fds_0_1_2) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);  // deliberately without SOCK_CLOEXEC
    int efd = ::eventfd(0, 0);
    int dup = ::fcntl(1, F_DUPFD, 100);  // non-CLOEXEC, high
    BOOST_REQUIRE(listener >= 0);
    BOOST_REQUIRE(efd >= 0);
    BOOST_REQUIRE(dup >= 0);
    auto r = run_one(probe_request(nonce, {"report-fds"}));
    BOOST_TEST(r.stdout_bytes == "0 1 2\n");
    ::close(listener);
    ::close(efd);
    ::close(dup);
}

// T-CON-06: concurrent spawns never hand one child another's pipes. 64 runs on two
// io_contexts, each served by its own thread (two spawn pumps at once). Once every child runs
// (its marker exists), each one's /proc/<pid>/fd is read from outside: exactly 0, 1 and 2; 0
// is /dev/null; 1 and 2 are pipes that no other child holds.
BOOST_AUTO_TEST_CASE(concurrent_spawns_do_not_inherit_each_others_pipes) {
    constexpr int per_context = 32;
    temp_dir dir;
    boost::asio::io_context contexts[2];
    std::vector<boost::asio::cancellation_signal> signals(2 * per_context);
    std::atomic<int> cancelled{0};
    for (int c = 0; c < 2; ++c) {
        for (int i = 0; i < per_context; ++i) {
            int k = c * per_context + i;
            auto req = probe_request(
                nonce, {"trap-term", "exit", "0", "--marker", dir.path + "/m" + std::to_string(k)});
            req.timeout = 120s;
            agentctl::async_run_process(
                contexts[c].get_executor(), req,
                boost::asio::bind_cancellation_slot(signals[k].slot(), [&](agentctl::process_result r) {
                    if (r.outcome == process_outcome::cancelled) ++cancelled;
                }));
        }
    }
    std::vector<std::thread> threads;
    for (auto& io : contexts) threads.emplace_back([&io] { io.run_for(120s); });
    auto all_running = [&] {
        for (int k = 0; k < 2 * per_context; ++k)
            if (::access((dir.path + "/m" + std::to_string(k)).c_str(), F_OK) != 0) return false;
        return true;
    };
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!all_running() && std::chrono::steady_clock::now() < deadline) ::usleep(10000);
    bool ready = all_running();
    BOOST_TEST(ready, "not every child wrote its marker within 60 s");

    std::map<std::string, int> holders;  // pipe inode -> how many fds of all children hold it
    auto children = processes_with(nonce);
    if (ready) BOOST_TEST(children.size() == static_cast<std::size_t>(2 * per_context));
    for (pid_t pid : children) {
        std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
        std::map<int, std::string> fds;
        std::error_code ec;
        for (auto& entry : std::filesystem::directory_iterator(fd_dir, ec)) {
            std::error_code link_ec;
            auto target = std::filesystem::read_symlink(entry.path(), link_ec).string();
            fds[std::stoi(entry.path().filename().string())] = target;
        }
        BOOST_TEST(fds.size() == 3u, "pid " << pid << " holds " << fds.size() << " fds");
        BOOST_TEST(fds[0] == "/dev/null", "pid " << pid << " fd 0 is " << fds[0]);
        for (int fd : {1, 2}) {
            BOOST_TEST(fds[fd].starts_with("pipe:["), "pid " << pid << " fd " << fd << " is " << fds[fd]);
            ++holders[fds[fd]];
        }
    }
    for (const auto& [pipe, count] : holders)
        BOOST_TEST(count == 1, pipe << " is held by " << count << " fds");

    for (int c = 0; c < 2; ++c) {
        boost::asio::post(contexts[c], [&, c] {
            for (int i = 0; i < per_context; ++i)
                signals[c * per_context + i].emit(boost::asio::cancellation_type::terminal);
        });
    }
    for (auto& t : threads) t.join();
    BOOST_TEST(cancelled.load() == 2 * per_context);
}

// The spawn scratch (docs/DESIGN.md, "Spawn scratch"): a spawn's path, argv and environment are
// copied into one buffer, null-terminated lists included, and the next spawn reuses that buffer
// where it fits instead of allocating: pages the kernel has already read.
BOOST_AUTO_TEST_CASE(a_spawn_stages_its_strings_in_one_reused_buffer) {
    namespace exec = agentctl::exec;
    boost::asio::io_context io;
    auto& svc = boost::asio::use_service<exec::exec_service>(io);
    const std::string path = "/usr/bin/env";
    const std::vector<std::string> argv{"env", "", "a b"}, env{"A=1", "LONG=" + std::string(300, 'x')};
    const char* first = svc.stage(path, argv, env);
    BOOST_TEST(std::string(first) == path);
    BOOST_TEST(static_cast<const void*>(first) != static_cast<const void*>(path.c_str()));  // a copy
    char* const* a = svc.staged_argv();
    char* const* e = svc.staged_envp();
    for (std::size_t i = 0; i < argv.size(); ++i) BOOST_TEST(std::string(a[i]) == argv[i]);
    BOOST_TEST(a[argv.size()] == nullptr);
    for (std::size_t i = 0; i < env.size(); ++i) BOOST_TEST(std::string(e[i]) == env[i]);
    BOOST_TEST(e[env.size()] == nullptr);
    BOOST_TEST(e == a + argv.size() + 1);

    const char* second = svc.stage("/bin/sh", {"sh", "-c", "true"}, {});
    BOOST_TEST(static_cast<const void*>(second) == static_cast<const void*>(first));  // the same buffer
    BOOST_TEST(std::string(second) == "/bin/sh");
    BOOST_TEST(std::string(svc.staged_argv()[2]) == "true");
    BOOST_TEST(svc.staged_argv()[3] == nullptr);
    BOOST_TEST(svc.staged_envp()[0] == nullptr);
}

// The spawn window (docs/DESIGN.md, "The child's descriptor table"): what it is given stays in
// its slots, low in the table, until its owner releases it; another owner's release changes
// nothing; then the slots are /dev/null again and our copy of a pipe end is gone.
BOOST_AUTO_TEST_CASE(the_spawn_window_holds_what_it_is_given_until_released) {
    namespace exec = agentctl::exec;
    boost::asio::io_context io;
    auto& svc = boost::asio::use_service<exec::exec_service>(io);
    int p[2];
    BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    exec::unique_fd read_end(p[0]), write_end(p[1]);
    int owner = 0, stranger = 0;
    exec::exec_service::window_fds slots{};
    int end = svc.fill_window(&owner, {-1, write_end.get(), -1, -1, -1}, slots);
    BOOST_TEST(end > 3);
    // At the low end of the table: the lowest free descriptors when it was made.
    int lowest_slot = end;
    for (int i = 0; i < exec::exec_service::window_slots; ++i)
        lowest_slot = std::min(lowest_slot, svc.window_slot(i));
    for (int fd = 0; fd < lowest_slot; ++fd)
        BOOST_TEST(::fcntl(fd, F_GETFD) != -1, "descriptor " << fd << " is free");
    BOOST_TEST(slots[0] == -1);
    BOOST_TEST(slots[1] >= 3);
    BOOST_TEST(slots[1] < end);
    BOOST_TEST(slots[1] == svc.window_slot(1));
    BOOST_TEST(fd_target(slots[1]) == fd_target(write_end.get()));
    for (int i : {0, 2, 3, 4}) BOOST_TEST(fd_target(svc.window_slot(i)) == "/dev/null");

    write_end.reset();
    svc.release_window(&stranger);
    BOOST_TEST(fd_target(slots[1]).starts_with("pipe:["));
    svc.release_window(&owner);
    BOOST_TEST(fd_target(slots[1]) == "/dev/null");
    char c;
    BOOST_TEST(::read(read_end.get(), &c, 1) == 0);  // no writer is left: end of file
}

// The spawns use the window, and a run's exit gives it back: while the child runs, the stdout
// slot holds our copy of its pipe; once it has exited on its own, that copy must go at once,
// or the end of its output would wait out the drain grace (60 s here, the bound 20 s).
BOOST_AUTO_TEST_CASE(a_run_passes_its_pipes_through_the_window_and_gives_them_back) {
    for (auto policy : both_policies) {
        temp_dir dir;
        runner r;
        auto& svc = boost::asio::use_service<agentctl::exec::exec_service>(r.io);
        std::string marker = dir.path + "/ready";
        auto req = probe_request(nonce, {"trap-term", "exit", "0", "--marker", marker});
        req.containment = policy;
        req.drain_grace = 60s;
        r.start(req);
        std::string during;
        file_watch w(r.io, marker, [&] {
            during = fd_target(svc.window_slot(1));
            for (pid_t pid : processes_with(nonce)) ::kill(pid, SIGTERM);  // it exits 0 by itself
        });
        r.run(20s);
        BOOST_TEST(during.starts_with("pipe:["), during);
        BOOST_TEST(fd_target(svc.window_slot(1)) == "/dev/null");
        BOOST_TEST(r.result().outcome == process_outcome::exited);
        BOOST_TEST(r.result().exit_code.value_or(-1) == 0);
    }
}

// T-SIG-08: default dispositions and an empty mask although the host ignores and blocks.
BOOST_AUTO_TEST_CASE(signals_are_reset_for_the_child) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    struct sigaction old_pipe {
    }, old_term{}, old_usr2{};
    ::sigaction(SIGPIPE, &ign, &old_pipe);
    ::sigaction(SIGTERM, &ign, &old_term);
    struct sigaction old_rt {};
    ::sigaction(SIGRTMIN + 10, &ign, &old_rt);  // above bit 32 of the masks
    struct sigaction handled {};
    handled.sa_handler = [](int) {};
    ::sigaction(SIGUSR2, &handled, &old_usr2);
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGINT);
    ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);

    auto r = run_one(probe_request(nonce, {"report-signals"}));

    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigaction(SIGUSR2, &old_usr2, nullptr);
    ::sigaction(SIGRTMIN + 10, &old_rt, nullptr);
    BOOST_TEST(r.stdout_bytes ==
               "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n");
}

// The child resets only the signals /proc says are not at their default: that set must be
// exactly what sigaction reports (a parse that fell back to "every signal" would still reset
// correctly, but slowly: this case is what says the fast path is taken).
BOOST_AUTO_TEST_CASE(signals_not_at_default_matches_sigaction) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    struct sigaction handled {};
    handled.sa_handler = [](int) {};
    struct sigaction old_rt {}, old_usr2{};
    ::sigaction(SIGRTMIN + 10, &ign, &old_rt);
    ::sigaction(SIGUSR2, &handled, &old_usr2);
    std::uint64_t expected = 0;
    for (int sig = 1; sig < 65; ++sig) {
        // The raw call: glibc refuses its own two internal signals, which may have handlers.
        struct {
            void* handler;
            unsigned long flags;
            void* restorer;
            std::uint64_t mask;
        } now{};
        if (::syscall(SYS_rt_sigaction, sig, nullptr, &now, 8) != 0) continue;
        if (now.handler != reinterpret_cast<void*>(SIG_DFL)) expected |= std::uint64_t{1} << (sig - 1);
    }
    auto got = agentctl::exec::signals_not_at_default();
    ::sigaction(SIGRTMIN + 10, &old_rt, nullptr);
    ::sigaction(SIGUSR2, &old_usr2, nullptr);
    BOOST_TEST(got != ~std::uint64_t{0});
    BOOST_TEST(got == expected);
    BOOST_TEST((got >> (SIGRTMIN + 10 - 1) & 1) == 1u);
    BOOST_TEST((got >> (SIGUSR2 - 1) & 1) == 1u);
}

// T-IO-01, T-IO-02, T-IO-03, T-IO-04: stdin is /dev/null, no terminal (a new session: opening
// /dev/tty fails with ENXIO), blocking stdout/stderr.
BOOST_AUTO_TEST_CASE(stdio_is_null_pipes_and_no_terminal) {
    auto in = run_one(probe_request(nonce, {"read-stdin"}));
    BOOST_TEST(in.stdout_bytes == "0\n");
    BOOST_TEST(in.exit_code.value_or(-1) == 0);
    auto tty = run_one(probe_request(nonce, {"report-tty"}));
    BOOST_TEST(tty.stdout_bytes == "isatty 0 0 0\ntty errno " + std::to_string(ENXIO) + "\n");
    auto flags = run_one(probe_request(nonce, {"report-fdflags"}));
    BOOST_TEST(flags.stdout_bytes == "0 block\n1 block\n2 block\n");
    auto ids = run_one(probe_request(nonce, {"report-ids"}));
    // A new session and process group, both named after the child's pid.
    int pid = 0, ppid = 0, pgid = 0, sid = 0;
    BOOST_REQUIRE(std::sscanf(ids.stdout_bytes.c_str(), "pid %d ppid %d pgid %d sid %d", &pid, &ppid, &pgid,
                              &sid) == 4);
    BOOST_TEST(pgid == pid);
    BOOST_TEST(sid == pid);
    BOOST_TEST(ppid == ::getpid());
}

// stdin_data larger than a pipe is delivered whole; a child that does not read it neither
// blocks the run nor raises SIGPIPE in the host.
BOOST_AUTO_TEST_CASE(stdin_data_is_written_and_closed) {
    std::string data(3 * 1024 * 1024 + 17, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
    auto echo = probe_request(nonce, {"read-stdin", "--echo"});
    echo.stdin_data = data;
    echo.stdout_limit = 4 * 1024 * 1024;
    echo.combined_limit = 8 * 1024 * 1024;
    auto r = run_one(echo);
    BOOST_TEST(r.outcome == process_outcome::exited);
    BOOST_TEST((r.stdout_bytes == data));

    auto ignore = probe_request(nonce, {"exit", "0"});
    ignore.stdin_data = data;
    auto r2 = run_one(ignore);  // SIGPIPE is at its default here: it would end the test binary
    BOOST_TEST(r2.outcome == process_outcome::exited);
    BOOST_TEST(r2.exit_code.value_or(-1) == 0);

    auto small = probe_request(nonce, {"read-stdin"});
    small.stdin_data = "hello";
    BOOST_TEST(run_one(small).stdout_bytes == "5\n");
}

// T-TIME-03: a huge timeout neither overflows into "expired" nor misbehaves.
BOOST_AUTO_TEST_CASE(huge_timeout_does_not_fire) {
    auto req = probe_request(nonce, {"exit", "3"});
    req.timeout = std::chrono::milliseconds::max();
    req.kill_grace = std::chrono::milliseconds::max();
    auto r = run_one(req);
    BOOST_TEST(r.outcome == process_outcome::exited);
    BOOST_TEST(r.exit_code.value_or(-1) == 3);
}

BOOST_AUTO_TEST_CASE(to_string_names) {
    BOOST_TEST(agentctl::to_string(agentctl::containment::cgroup) == "cgroup");
    BOOST_TEST(agentctl::to_string(agentctl::containment::process_group) == "process-group");
    BOOST_TEST(agentctl::to_string(process_outcome::exited) == "exited");
    BOOST_TEST(agentctl::to_string(process_outcome::timed_out) == "timed_out");
    BOOST_TEST(agentctl::to_string(process_outcome::cancelled) == "cancelled");
    BOOST_TEST(agentctl::to_string(process_outcome::output_limit_exceeded) == "output_limit_exceeded");
    BOOST_TEST(agentctl::to_string(process_outcome::spawn_failed) == "spawn_failed");
}

BOOST_AUTO_TEST_SUITE_END()
