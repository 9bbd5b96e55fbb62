// posix_spawn + pipes + poll for the live Slurm tests.
#include "spawn.hpp"

#include "runner/slurm/command.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace slurm_test {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& v) {
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

void read_some(int& fd, std::string& into) {
    char buffer[65536];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
        into.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fd);
        fd = -1;
    }
}

}  // namespace

child::child(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    auto a = c_strings(argv);
    auto e = c_strings(env);
    started_ = std::chrono::steady_clock::now();
    int rc = posix_spawn(&pid_, argv.at(0).c_str(), &fa, &attr, a.data(), e.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
    if (rc != 0) {
        ::close(out_);
        ::close(err_);
        out_ = err_ = -1;
        pid_ = -1;
        throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    }
}

child::~child() {
    if (pid_ > 0 && !reaped_) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (err_ >= 0) ::close(err_);
}

bool child::running() const {
    if (pid_ <= 0 || reaped_) return false;
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == 0;
}

outcome child::wait(milliseconds bound) {
    outcome o;
    auto deadline = started_ + bound;
    int status = 0;
    bool ended = reaped_;
    while (!ended || out_ >= 0 || err_ >= 0) {
        if (!ended) {
            pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                ended = true;
                reaped_ = true;
            }
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
            o.timed_out = true;
            ::kill(-pid_, SIGKILL);
            if (!ended) {
                ::waitpid(pid_, &status, 0);
                reaped_ = ended = true;
            }
            break;
        }
        pollfd fds[2];
        int n = 0;
        if (out_ >= 0) fds[n++] = {out_, POLLIN, 0};
        if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
        // The pipes may stay open after the leader exits (a descendant holds them): keep
        // reading until EOF or the bound; with both closed, only waitpid is left.
        int timeout = ended ? 50 : 20;
        if (n == 0) {
            pause(milliseconds(timeout));
            continue;
        }
        if (::poll(fds, static_cast<nfds_t>(n), timeout) > 0) {
            for (int i = 0; i < n; ++i) {
                if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                if (fds[i].fd == out_)
                    read_some(out_, o.out);
                else
                    read_some(err_, o.err);
            }
        }
    }
    o.wall = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started_);
    if (WIFEXITED(status)) {
        o.exited = true;
        o.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        o.signal = WTERMSIG(status);
    }
    return o;
}

outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env, milliseconds bound) {
    child c(argv, env);
    return c.wait(bound);
}

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::vector<std::string> client_env(const std::vector<std::string>& extra) {
    return agentctl::slurm::client_environment(
        [](std::string_view name) -> std::optional<std::string> {
            const char* v = std::getenv(std::string(name).c_str());
            if (!v) return std::nullopt;
            return std::string(v);
        },
        extra);
}

std::string tool(const std::string& name) {
    std::string path = env_or_empty("PATH");
    std::istringstream dirs(path + ":/usr/bin:/usr/sbin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (dir.empty() || dir[0] != '/') continue;
        std::string candidate = dir + "/" + name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    throw std::runtime_error(name + " not found");
}

std::optional<std::string> cmdline_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<pid_t> all_pids() {
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(d);
    return pids;
}

std::string describe(const outcome& o) {
    std::string s = o.timed_out ? "timed out"
                    : o.exited  ? "exit " + std::to_string(o.code)
                                : "signal " + std::to_string(o.signal);
    s += " after " + std::to_string(o.wall.count()) + " ms; stdout: [" + o.out.substr(0, 300) +
         "] stderr: [" + o.err.substr(0, 600) + "]";
    return s;
}

void pause(milliseconds d) {
    std::this_thread::sleep_for(d);
}

}  // namespace slurm_test
