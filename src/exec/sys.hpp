// Thin wrappers over the Linux system calls the executor needs and glibc 2.36 does not wrap
// (or wraps in a way that hides errno or rusage). Private to src/exec.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

namespace agentctl::exec {

inline int sys_pidfd_open(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

inline int sys_pidfd_send_signal(int pidfd, int sig) {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

/// waitid(2) as the kernel has it: idtype P_PID/P_PIDFD, with the rusage glibc drops.
inline int sys_waitid(int idtype, int id, siginfo_t* info, int options, struct rusage* usage) {
    return static_cast<int>(::syscall(SYS_waitid, idtype, id, info, options, usage));
}

/// A file descriptor that closes itself.
class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) : fd_(fd) {}
    unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        if (this != &o) reset(o.release());
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

/// The whole of an open file from its start (pread: a kernfs or procfs file's read at offset 0
/// restarts its iterator, so an fd kept open reads its current contents each time). False on
/// error.
bool read_whole(int fd, std::string& out);
/// Reads a small file (procfs, cgroupfs) relative to `dir_fd` into `out`. False on error.
bool read_small_file(int dir_fd, const char* path, std::string& out);

/// Writes `data` to `path` relative to `dir_fd` in one write(2). Returns 0 or an errno value.
int write_small_file(int dir_fd, const char* path, std::string_view data);

/// Calls `fn(dir, entry)` for each entry of the directory `dir_fd` (read through a descriptor
/// of its own: `dir_fd` is left as it is; `dir` is that descriptor, for openat of an entry).
/// Nothing when the directory cannot be read.
template <typename Fn>
void for_each_entry(int dir_fd, Fn fn) {
    int own = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (own < 0) return;
    DIR* dir = ::fdopendir(own);
    if (dir == nullptr) {
        ::close(own);
        return;
    }
    while (dirent* entry = ::readdir(dir)) fn(::dirfd(dir), *entry);
    ::closedir(dir);
}

/// strerror() that does not depend on the locale or on global state.
std::string errno_text(int err);

/// A pipe for a child: its end is >= 3 (so the child's dup2 onto 0..2 never clobbers another
/// of its fds), ours is non-blocking; both close-on-exec from birth. `parent_reads`: the child
/// writes. Returns 0 or an errno value.
int make_pipe(unique_fd& parent_end, unique_fd& child_end, bool parent_reads);

/// write(2) to a pipe whose reader may be gone, without a SIGPIPE reaching the application
/// (the signal is thread-directed: blocked around the call, and the one we caused consumed).
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len);

}  // namespace agentctl::exec
