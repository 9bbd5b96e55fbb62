// A reader of agentctl's own output that falls behind, or goes away, never stretches a
// timeout or leaves anything running (docs/CLI.md, "Slow readers").
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace cli_test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

/// One task that sleeps (tagged with `nonce`) with a 2 s timeout, declared first so it starts
/// first, and `floods` tasks that each print 20 kB.
std::string slow_workflow(const std::string& nonce, int floods) {
    std::string items;
    for (int i = 0; i < floods; ++i) items += (i ? ", " : "") + std::to_string(i);
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: slow-reader}\nspec:\n"
           "  policy: {processAllowlist: [probe], approval: never}\n"
           "  inputs: {n: [" +
           items +
           "]}\n"
           "  actions:\n"
           "    sleep: {kind: builtin.shell.exec, command: " +
           probe_bin() + ", args: [sleep, \"300\", --nonce, " + nonce +
           "], timeoutSeconds: 2}\n"
           "    flood: {kind: builtin.shell.exec, command: " +
           probe_bin() +
           ", args: [flood, --bytes, \"20000\"]}\n"
           "  tasks:\n"
           "    - {id: sleeper, uses: action:sleep, failure: continue}\n"
           "    - {id: chatty, uses: action:flood, foreach: {items: \"${{ inputs.n }}\"}}\n";
}

/// agentctl with stdout on a pipe the test reads only when it wants to, stderr in a file.
struct spawned {
    pid_t pid = -1;
    int out = -1;  ///< read end of agentctl's stdout
    std::string err_path;
};

spawned spawn_agentctl(const std::vector<std::string>& args, const std::string& err_path,
                       int stdout_fd = -1) {
    spawned s;
    s.err_path = err_path;
    int p[2] = {-1, -1};
    if (stdout_fd < 0) BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    BOOST_REQUIRE(err >= 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, stdout_fd >= 0 ? stdout_fd : p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<std::string> argv = {agentctl_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::string path = "PATH=/usr/bin:/bin";
    std::string state = "AGENTCTL_STATE_DIR=" + test_state_dir();  // not the user's journal
    char* envp[] = {path.data(), state.data(), nullptr};
    int rc = posix_spawn(&s.pid, cargv[0], &fa, &attr, cargv.data(), envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(err);
    if (stdout_fd < 0) {
        ::close(p[1]);
        s.out = p[0];
    }
    BOOST_REQUIRE(rc == 0);
    return s;
}

std::string read_all(int fd) {
    std::string all;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0)
            all.append(buf, static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
            break;
    }
    return all;
}

/// Waits for the child; kills its group after `bound`. The exit status, or -1.
int wait_exit(pid_t pid, std::chrono::seconds bound) {
    auto until = std::chrono::steady_clock::now() + bound;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
            ::kill(-pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(20ms);  // polling a child's exit, not synchronising with it
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string file_text(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string s = read_all(fd);
    ::close(fd);
    return s;
}

/// The sleeper's durationMs from a RunOutcome envelope (the last line of `out`).
std::uint64_t sleeper_duration(const std::string& out) {
    auto end = out.find_last_not_of('\n');
    auto start = out.rfind('\n', end);
    std::string last = out.substr(start == std::string::npos ? 0 : start + 1);
    json::value v = json::parse(last);
    const auto& sleeper = v.at("data").at("tasks").at("sleeper");
    BOOST_TEST(sleeper.at("state").as_string() == "timed_out");
    return static_cast<std::uint64_t>(sleeper.at("durationMs").to_number<std::int64_t>());
}

/// Polls until nothing tagged `nonce` is left or `bound` passes: the time it took.
std::chrono::milliseconds gone_after(const std::string& nonce, std::chrono::steady_clock::time_point since,
                                     std::chrono::seconds bound) {
    while (!processes_with(nonce).empty() && std::chrono::steady_clock::now() - since < bound)
        std::this_thread::sleep_for(20ms);
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_reader_that_pauses_does_not_stretch_a_timeout_jsonl) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", slow_workflow(nonce, 400));
    auto begun = std::chrono::steady_clock::now();
    spawned s = spawn_agentctl({"--output", "jsonl", "run", "--jobs", "16", wf}, dir.path() + "/err");
    // The reader pauses for 6 s (the scenario itself, not a synchronisation); the sleeper's
    // 2 s timeout falls inside that pause.
    auto killed_after = gone_after(nonce, begun, 6s);
    std::this_thread::sleep_for(6s - std::min<std::chrono::milliseconds>(killed_after, 6s));
    std::string out = read_all(s.out);
    ::close(s.out);
    int status = wait_exit(s.pid, 60s);
    BOOST_TEST(status == 4, file_text(s.err_path));  // the sleeper failed: timed out
    BOOST_TEST(killed_after < 4000ms,
               "the sleeper's tree was gone only after " << killed_after.count() << " ms");
    auto ms = sleeper_duration(out);
    BOOST_TEST(ms >= 2000u);
    BOOST_TEST(ms <= 2500u, "durationMs " << ms << " for a 2 s timeout");
    // Nothing was dropped: every task's events arrived.
    std::size_t finished = 0;
    for (std::size_t at = out.find("\"taskFinished\""); at != std::string::npos;
         at = out.find("\"taskFinished\"", at + 1))
        ++finished;
    BOOST_TEST(finished == 402u);  // 400 children, their aggregate, the sleeper
    BOOST_TEST(processes_with(nonce).empty());
}

BOOST_AUTO_TEST_CASE(a_reader_that_pauses_does_not_stretch_a_timeout_json) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", slow_workflow(nonce, 400));
    spawned s = spawn_agentctl({"--output", "json", "run", "--jobs", "16", wf}, dir.path() + "/err");
    std::this_thread::sleep_for(6s);
    std::string out = read_all(s.out);
    ::close(s.out);
    BOOST_TEST(wait_exit(s.pid, 60s) == 4, file_text(s.err_path));
    auto ms = sleeper_duration(out);
    BOOST_TEST(ms >= 2000u);
    BOOST_TEST(ms <= 2500u, "durationMs " << ms << " for a 2 s timeout");
}

BOOST_AUTO_TEST_CASE(a_paused_terminal_does_not_stretch_a_timeout) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", slow_workflow(nonce, 400));
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    BOOST_REQUIRE(master >= 0);
    BOOST_REQUIRE(::grantpt(master) == 0 && ::unlockpt(master) == 0);
    int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    BOOST_REQUIRE(slave >= 0);
    auto begun = std::chrono::steady_clock::now();
    // Human output with -v (a line per task) to a terminal nobody reads: stdout and stderr.
    spawned s = spawn_agentctl({"run", "-v", "--jobs", "16", wf}, dir.path() + "/err", slave);
    ::close(slave);
    auto killed_after = gone_after(nonce, begun, 8s);
    BOOST_TEST(killed_after < 4000ms,
               "the sleeper's tree was gone only after " << killed_after.count() << " ms");
    std::this_thread::sleep_for(6s - std::min<std::chrono::milliseconds>(killed_after, 6s));
    // Now read the terminal until agentctl is done.
    std::string seen;
    int status = -2;
    auto until = std::chrono::steady_clock::now() + 60s;
    while (status == -2 && std::chrono::steady_clock::now() < until) {
        pollfd pfd{master, POLLIN, 0};
        if (::poll(&pfd, 1, 50) > 0) {
            char buf[65536];
            ssize_t n = ::read(master, buf, sizeof buf);
            if (n > 0) seen.append(buf, static_cast<std::size_t>(n));
        }
        int st = 0;
        if (::waitpid(s.pid, &st, WNOHANG) == s.pid) status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    if (status == -2) {
        ::kill(-s.pid, SIGKILL);
        ::waitpid(s.pid, nullptr, 0);
    }
    ::close(master);
    BOOST_TEST(status == 4, seen);
    BOOST_TEST(seen.find("sleeper") != std::string::npos);
    BOOST_TEST(processes_with(nonce).empty());
}

BOOST_AUTO_TEST_CASE(a_reader_that_goes_away_cancels_the_run_and_leaves_nothing) {
    temp_dir dir;
    std::string nonce = make_nonce();
    // Every task sleeps: only the reader's departure can end this run early.
    std::string wf =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: head}\nspec:\n"
        "  policy: {processAllowlist: [probe], approval: never}\n"
        "  actions:\n    sleep: {kind: builtin.shell.exec, command: " +
        probe_bin() + ", args: [sleep, \"300\", --nonce, " + nonce +
        "]}\n"
        "  tasks:\n    - {id: s, uses: action:sleep, foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8]}}\n";
    auto path = dir.write("wf.yaml", wf);
    spawned s = spawn_agentctl({"--output", "jsonl", "run", "--jobs", "8", path}, dir.path() + "/err");
    // `| head -1`: one line, then the reader is gone.
    std::string line;
    char c;
    while (::read(s.out, &c, 1) == 1 && c != '\n') line.push_back(c);
    BOOST_TEST(line.find("taskStarted") != std::string::npos, line);
    auto until = std::chrono::steady_clock::now() + 30s;
    while (processes_with(nonce).size() < 8 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(20ms);
    BOOST_TEST_REQUIRE(processes_with(nonce).size() == 8u);
    ::close(s.out);
    int status = wait_exit(s.pid, 30s);
    std::string err = file_text(s.err_path);
    BOOST_TEST(status == 130, err);
    BOOST_TEST(err.find("EPIPE") != std::string::npos, err);
    BOOST_TEST(processes_with(nonce).empty());
}
