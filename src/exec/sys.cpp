#include "exec/sys.hpp"

#include <sys/ioctl.h>

#include <cstring>

namespace agentctl::exec {

bool read_whole(int fd, std::string& out) {
    out.clear();
    char buf[4096];
    for (;;) {
        ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(out.size()));
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            return true;
        } else if (errno != EINTR) {
            return false;
        }
    }
}

bool read_small_file(int dir_fd, const char* path, std::string& out) {
    unique_fd fd(::openat(dir_fd, path, O_RDONLY | O_CLOEXEC));
    return fd && read_whole(fd.get(), out);
}

int write_small_file(int dir_fd, const char* path, std::string_view data) {
    unique_fd fd(::openat(dir_fd, path, O_WRONLY | O_CLOEXEC));
    if (!fd) return errno;
    ssize_t n;
    do {
        n = ::write(fd.get(), data.data(), data.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    return static_cast<std::size_t>(n) == data.size() ? 0 : EIO;
}

int make_pipe(unique_fd& parent_end, unique_fd& child_end, bool parent_reads) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
    unique_fd r(fds[0]);
    unique_fd w(fds[1]);
    unique_fd& child = parent_reads ? w : r;
    unique_fd& parent = parent_reads ? r : w;
    if (child.get() < 3) {
        int high = ::fcntl(child.get(), F_DUPFD_CLOEXEC, 3);
        if (high < 0) return errno;
        child.reset(high);
    }
    int on = 1;
    if (::ioctl(parent.get(), FIONBIO, &on) != 0) return errno;
    parent_end = std::move(parent);
    child_end = std::move(child);
    return 0;
}

ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len) {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigset_t pending;
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    ssize_t n = ::write(fd, data, len);
    int err = errno;
    if (n < 0 && err == EPIPE && !was_pending) {
        timespec zero{};
        sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
    return n;
}

std::string errno_text(int err) {
    // strerrorname_np would not need a buffer, but the description reads better in messages.
    char buf[256];
    return ::strerror_r(err, buf, sizeof buf);
}

}  // namespace agentctl::exec
