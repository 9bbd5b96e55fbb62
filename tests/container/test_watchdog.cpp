// The watchdog against the real engines (docs/CRASH_SAFETY.md): crash_victim starts containers
// on Docker and Podman, announces the engines to its watchdog and is SIGKILLed; every
// container with its owner label must be gone within 10 s, through the engines.
#include "../support/spawn_env.hpp"
#include "harness.hpp"

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace ctr_test;
namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

namespace {

std::string required_env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == 0)
        throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
    return v;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Waits until `pid` has exited; true if it did within `bound`.
bool wait_exit(pid_t pid, std::chrono::milliseconds bound) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return true;
    pollfd p{fd, POLLIN, 0};
    bool gone = ::poll(&p, 1, static_cast<int>(bound.count())) == 1;
    ::close(fd);
    return gone;
}

// Waits (inotify, no polling) until `path` exists, or `pid` has exited, or `bound` passed.
bool wait_file(const std::string& path, pid_t pid, std::chrono::milliseconds bound) {
    int ino = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    BOOST_REQUIRE(ino >= 0);
    ::inotify_add_watch(ino, fs::path(path).parent_path().c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    auto deadline = steady::now() + bound;
    bool found = false;
    while (!(found = fs::exists(path))) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
        if (left <= 0) break;
        pollfd p[2] = {{ino, POLLIN, 0}, {pidfd, POLLIN, 0}};
        ::poll(p, 2, static_cast<int>(left));
        if (p[1].revents != 0) break;
        char buf[4096];
        while (::read(ino, buf, sizeof buf) > 0) {
        }
    }
    ::close(ino);
    ::close(pidfd);
    return found || fs::exists(path);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(watchdog_live)

BOOST_AUTO_TEST_CASE(sigkill_removes_the_containers_on_both_engines_through_the_watchdog) {
    temp_dir work;
    std::string base = work.path();
    std::string pids = base + "/pids", ready = base + "/ready", marker = base + "/marker",
                report = base + "/report";
    fs::create_directories(pids);
    fs::create_directories(ready);
    std::random_device rd;
    std::string nonce = "wd-nonce-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    // The owner label of a (fictitious) launcher: our host, the victim's identity is not
    // needed, only a value that labels these containers and nothing else.
    std::string owner = "crash-test:" + std::to_string(::getpid()) + ":1:" + std::to_string(rd());

    std::vector<std::string> argv = {required_env("AGENTCTL_CRASH_VICTIM"),
                                     "--probe",
                                     required_env("AGENTCTL_PROBE"),
                                     "--pidfile-dir",
                                     pids,
                                     "--marker",
                                     marker,
                                     "--report",
                                     report,
                                     "--trees",
                                     "1",
                                     "--owner",
                                     owner,
                                     "--container-dir",
                                     ready};
    for (const std::string engine : {"docker", "podman"}) {
        for (int i = 0; i < 2; ++i) {
            argv.insert(argv.end(), {"--container", engine, engine_path(engine), image()});
        }
    }
    std::vector<std::string> env = {"AGENTCTL_TEST_NONCE=" + nonce, "PATH=" + required_env("PATH")};
    for (auto& e : fixture_env()) env.push_back(e);
    if (const char* home = std::getenv("HOME")) env.push_back(std::string("HOME=") + home);
    pid_t victim = test_support::spawn_with_env(argv, env);

    bool up = wait_file(marker, victim, std::chrono::seconds(120));
    if (!up) {
        ::kill(victim, SIGKILL);
        ::waitpid(victim, nullptr, 0);
        for (const std::string engine : {"docker", "podman"}) {
            auto left = containers_labelled(engine, "agentctl.owner=" + owner);
            if (!left.empty())
                engine_cli(engine, [&] {
                    std::vector<std::string> rm = {"rm", "--force"};
                    rm.insert(rm.end(), left.begin(), left.end());
                    return rm;
                }());
        }
        BOOST_FAIL("crash_victim did not get its containers running within 120 s");
    }
    std::istringstream in(read_text(marker));
    std::string word;
    pid_t v = 0, watchdog = 0;
    in >> word >> v >> word >> watchdog;
    BOOST_REQUIRE(watchdog > 0);
    for (const std::string engine : {"docker", "podman"}) {
        BOOST_TEST(containers_labelled(engine, "agentctl.owner=" + owner).size() == 2u, engine);
    }

    auto t0 = steady::now();
    BOOST_REQUIRE(::kill(victim, SIGKILL) == 0);
    ::waitpid(victim, nullptr, 0);
    BOOST_TEST(wait_exit(watchdog, std::chrono::seconds(30)));
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
    BOOST_TEST(took.count() <= 10000, took.count() << " ms");
    for (const std::string engine : {"docker", "podman"}) {
        auto left = containers_labelled(engine, "agentctl.owner=" + owner);
        BOOST_TEST(left.empty(), engine << " still has " << left.size() << " containers of the dead owner");
    }
    auto text = read_text(report);
    BOOST_TEST(text.find("container-removed docker ") != std::string::npos, text);
    BOOST_TEST(text.find("container-removed podman ") != std::string::npos, text);
    BOOST_TEST(text.find("failed") == std::string::npos, text);
    BOOST_TEST_MESSAGE("real engines: SIGKILL to the watchdog done (2 docker + 2 podman containers removed): "
                       << took.count() << " ms\n"
                       << text);
}

BOOST_AUTO_TEST_SUITE_END()
