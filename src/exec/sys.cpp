#include "exec/sys.hpp"

#include <cstring>

namespace agentctl::exec {

bool read_small_file(int dir_fd, const char* path, std::string& out) {
    unique_fd fd(::openat(dir_fd, path, O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    out.clear();
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            return true;
        } else if (errno != EINTR) {
            return false;
        }
    }
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

std::string errno_text(int err) {
    // strerrorname_np would not need a buffer, but the description reads better in messages.
    char buf[256];
    return ::strerror_r(err, buf, sizeof buf);
}

}  // namespace agentctl::exec
