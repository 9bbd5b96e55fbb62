// Making folders and replacing a file beneath a directory fd (docs/DESIGN.md, "Files").
#include "exec/workspace.hpp"

#include "exec/host.hpp"
#include "exec/paths.hpp"
#include "exec/sys.hpp"

#include <sys/stat.h>

namespace agentctl::exec {
namespace {

task_error file_error(std::string message) {
    return task_error{error_code::file_error, std::move(message)};
}

// Directory `prefix` beneath `root_fd`, its last component `part` in `parent_fd`: openat2
// keeps the whole lookup beneath the root (a symlink may lead elsewhere inside it); where the
// kernel has no openat2, `part` is opened in its parent without following a symlink.
int open_component(int root_fd, int parent_fd, const std::string& prefix, const std::string& part, int& err) {
    int fd = openat2_beneath(root_fd, prefix.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, err);
    if (fd >= 0 || err != ENOSYS) return fd;
    fd = ::openat(parent_fd, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) err = errno;
    return fd;
}

task_error open_failure(const directory& root, const std::string& prefix, int err) {
    if (err == EXDEV || err == ELOOP)
        return task_error{error_code::path_not_allowed,
                          "folder " + prefix + " leads out of " + root.path() + " (through a symlink)"};
    if (err == ENOTDIR) return file_error("folder " + prefix + " is not a folder (or is a symlink)");
    return file_error("folder " + prefix + " cannot be opened: " + errno_text(err));
}

}  // namespace

expected<directory> make_directories_beneath(const directory& root, std::string_view relative) {
    if (relative.find('\0') != std::string_view::npos || (!relative.empty() && relative.front() == '/'))
        return task_error{error_code::path_not_allowed,
                          "folder " + std::string(relative) + " is not relative"};
    unique_fd current(::openat(root.fd(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!current) return file_error(root.path() + " cannot be opened: " + errno_text(errno));
    std::string prefix;
    std::string_view rest = relative;
    for (std::string_view component = next_component(rest); !component.empty();
         component = next_component(rest)) {
        std::string part(component);
        if (part == "..")
            return task_error{error_code::path_not_allowed,
                              "folder " + std::string(relative) + " contains '..'"};
        prefix += (prefix.empty() ? "" : "/") + part;
        int err = 0;
        int fd = open_component(root.fd(), current.get(), prefix, part, err);
        if (fd < 0 && err == ENOENT) {
            // Made in the folder opened last: mkdirat never follows a symlink in `part`.
            if (::mkdirat(current.get(), part.c_str(), 0777) != 0 && errno != EEXIST)
                return file_error("folder " + prefix + " cannot be made: " + errno_text(errno));
            fd = open_component(root.fd(), current.get(), prefix, part, err);
        }
        if (fd < 0) return open_failure(root, prefix, err);
        current.reset(fd);
    }
    return directory(current.release(), prefix.empty() ? root.path() : root.path() + "/" + prefix);
}

std::optional<task_error> replace_file(const directory& dir, std::string_view name,
                                       std::string_view content) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
        name.find('\0') != std::string_view::npos)
        return file_error("\"" + std::string(name) + "\" is not a file name");
    const std::string target(name);
    struct stat st {};
    bool replaces = ::fstatat(dir.fd(), target.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    const std::string temp = "." + target + ".agentctl-" + random_hex(12) + ".tmp";
    unique_fd fd(
        ::openat(dir.fd(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (!fd) return file_error("a temporary file cannot be made in " + dir.path() + ": " + errno_text(errno));
    auto abandon = [&](const char* step, int err) {
        ::unlinkat(dir.fd(), temp.c_str(), 0);
        return file_error(std::string(step) + " " + dir.path() + "/" + target + " failed (" +
                          errno_text(err) + "); the file is as it was");
    };
    if (replaces && ::fchmod(fd.get(), st.st_mode & 07777) != 0) return abandon("keeping the mode of", errno);
    std::size_t done = 0;
    while (done < content.size()) {
        ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return abandon("writing", errno);
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) return abandon("syncing", errno);
    if (::close(fd.release()) != 0) return abandon("closing", errno);
    if (::renameat(dir.fd(), temp.c_str(), dir.fd(), target.c_str()) != 0) return abandon("replacing", errno);
    // The new name is durable once its folder is.
    unique_fd folder(::openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!folder || ::fsync(folder.get()) != 0)
        return file_error(dir.path() + "/" + target + " was replaced, but its folder could not be synced (" +
                          errno_text(errno) + "): the change may not survive a crash");
    return std::nullopt;
}

}  // namespace agentctl::exec
