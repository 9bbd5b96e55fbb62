#include "exec/blocking_call.hpp"

#include "exec/client.hpp"
#include "exec/sys.hpp"

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>

namespace agentctl::exec {

namespace {

constexpr std::size_t stream_cap = 64 * 1024;

int ms_left(std::chrono::steady_clock::time_point deadline) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<long long>(left.count(), 0));
}

}  // namespace

std::string blocking_result::describe() const {
    if (!started) return error;
    if (timed_out) return "timed out";
    if (signal != 0) return "killed by signal " + std::to_string(signal) + ": " + excerpt(err);
    return "exit status " + std::to_string(exit_code) + ": " + excerpt(err);
}

blocking_result run_blocking(const std::string& path, const std::vector<std::string>& argv,
                             const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
    blocking_result r;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        r.error = "cannot create a pipe: " + errno_text(errno);
        return r;
    }
    unique_fd out_r(out_pipe[0]), out_w(out_pipe[1]);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
        r.error = "cannot create a pipe: " + errno_text(errno);
        return r;
    }
    unique_fd err_r(err_pipe[0]), err_w(err_pipe[1]);

    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
    ::posix_spawn_file_actions_adddup2(&fa, err_w.get(), 2);
    ::posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    // The watchdog ignores INT, HUP, TERM...: SIG_IGN would survive the exec otherwise.
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &all);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, path.c_str(), &fa, &attr, args.data(), envp.data());
    ::posix_spawn_file_actions_destroy(&fa);
    ::posix_spawnattr_destroy(&attr);
    out_w.reset();
    err_w.reset();
    if (rc != 0) {
        r.error = "cannot run " + path + ": " + errno_text(rc);
        return r;
    }
    r.started = true;

    // Read both streams until they close or the deadline passes.
    unique_fd* fds[2] = {&out_r, &err_r};
    std::string* bufs[2] = {&r.out, &r.err};
    while (out_r || err_r) {
        pollfd p[2];
        int n = 0;
        int which[2];
        for (int i = 0; i < 2; ++i) {
            if (*fds[i]) {
                p[n] = {fds[i]->get(), POLLIN, 0};
                which[n++] = i;
            }
        }
        int left = ms_left(deadline);
        if (left == 0) {
            r.timed_out = true;
            break;
        }
        int ready = ::poll(p, static_cast<nfds_t>(n), left);
        if (ready < 0 && errno != EINTR) break;
        for (int k = 0; k < n && ready > 0; ++k) {
            if (p[k].revents == 0) continue;
            char buf[4096];
            ssize_t got = ::read(p[k].fd, buf, sizeof buf);
            if (got > 0) {
                std::string& b = *bufs[which[k]];
                b.append(buf, std::min<std::size_t>(static_cast<std::size_t>(got),
                                                    stream_cap - std::min(stream_cap, b.size())));
            } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                fds[which[k]]->reset();
            }
        }
    }
    // Then for the exit, polling: the helper has closed its output, so it is about to exit.
    int status = 0;
    while (true) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            r.error = "lost the exit status of " + path;
            r.started = false;
            return r;
        }
        if (r.timed_out || ms_left(deadline) == 0) {
            r.timed_out = true;
            ::kill(-pid, SIGKILL);
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        timespec pause{0, 2000000};
        ::nanosleep(&pause, nullptr);
    }
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    return r;
}

}  // namespace agentctl::exec
