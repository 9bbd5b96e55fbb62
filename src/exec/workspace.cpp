// Opening and reading beneath a directory fd (docs/DESIGN.md, "Workspace").
#include "exec/workspace.hpp"

#include "exec/paths.hpp"
#include "exec/sys.hpp"

#include <agentctl/process.hpp>

#include <sys/stat.h>

#include <climits>
#include <utility>

namespace agentctl::exec {

std::optional<std::string> path_of(int fd) {
    char buf[PATH_MAX];
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return std::nullopt;
    return std::string(buf, static_cast<std::size_t>(n));
}

directory::directory(directory&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

directory& directory::operator=(directory&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
        path_ = std::move(o.path_);
    }
    return *this;
}

directory::~directory() {
    if (fd_ >= 0) ::close(fd_);
}

expected<directory> directory::open(const std::string& path) {
    // Open first, then ask the kernel what was opened: no gap between resolving and opening.
    unique_fd fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return task_error{error_code::workspace_unavailable, errno_text(errno)};
    auto canonical = path_of(fd.get());
    if (!canonical) return task_error{error_code::workspace_unavailable, "its path cannot be read back"};
    return directory(fd.release(), std::move(*canonical));
}

expected<directory> directory::open_beneath(std::string_view relative) const {
    std::string error;
    int fd = agentctl::open_beneath(fd_, relative, error);
    if (fd < 0) return task_error{error_code::cwd_unavailable, std::move(error)};
    std::string shown = path_;
    if (!relative.empty() && relative != ".") shown += "/" + std::string(relative);
    return directory(fd, std::move(shown));
}

namespace {

read_problem classify(int err) {
    switch (err) {
        case ENOENT:
        case ENOTDIR:
            return read_problem::missing;
        case EXDEV:
        case ELOOP:
            return read_problem::escapes;
        case EISDIR:
            return read_problem::not_regular;
        default:
            return read_problem::unreadable;
    }
}

// openat2 where the kernel has it; elsewhere the parent is opened component by component
// (refusing every symlink) and the file itself with O_NOFOLLOW.
int open_file_beneath(int dir_fd, std::string_view relative, int& err) {
    std::string path(relative);
    int fd = openat2_beneath(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, err);
    if (fd >= 0 || err != ENOSYS) return fd;
    auto slash = relative.rfind('/');
    std::string parent_error;
    unique_fd parent(slash == std::string_view::npos
                         ? ::openat(dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                         : agentctl::open_beneath(dir_fd, relative.substr(0, slash), parent_error));
    if (!parent) {
        err = ELOOP;
        return -1;
    }
    std::string last(slash == std::string_view::npos ? relative : relative.substr(slash + 1));
    fd = ::openat(parent.get(), last.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) err = errno;
    return fd;
}

}  // namespace

file_read read_file_beneath(const directory& dir, std::string_view relative, std::size_t max_bytes,
                            bool content) {
    file_read out;
    if (relative.empty() || relative.front() == '/' || relative.find('\0') != std::string_view::npos) {
        out.problem = read_problem::escapes;
        return out;
    }
    int err = 0;
    unique_fd fd(open_file_beneath(dir.fd(), relative, err));
    if (!fd) {
        out.problem = classify(err);
        out.detail = errno_text(err);
        return out;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        out.problem = read_problem::not_regular;
        return out;
    }
    if (!content) return out;
    out.data.assign(max_bytes + 1, '\0');
    std::size_t got = 0;
    while (got < out.data.size()) {
        ssize_t n = ::read(fd.get(), out.data.data() + got, out.data.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            out.problem = read_problem::unreadable;
            out.detail = errno_text(errno);
            break;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    out.data.resize(got);
    if (out.problem == read_problem::none && got > max_bytes) out.problem = read_problem::too_large;
    if (out.problem != read_problem::none) {
        std::fill(out.data.begin(), out.data.end(), '\0');  // never keep a partial secret around
        out.data.clear();
    }
    return out;
}

std::optional<std::string> relative_below(std::string_view path, std::string_view root) {
    bool path_absolute = !path.empty() && path.front() == '/';
    bool root_absolute = !root.empty() && root.front() == '/';
    if (path_absolute != root_absolute) return std::nullopt;
    while (true) {
        std::string_view r = next_component(root);
        if (r.empty()) break;
        if (next_component(path) != r) return std::nullopt;
    }
    std::string rest;
    for (std::string_view part = next_component(path); !part.empty(); part = next_component(path))
        rest += (rest.empty() ? "" : "/") + std::string(part);
    if (rest.empty()) return std::nullopt;
    return rest;
}

}  // namespace agentctl::exec
