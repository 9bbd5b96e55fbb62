// Executable resolution, workspace-bounded directory opening, redaction, names.
#include "exec/paths.hpp"
#include "exec/redactor.hpp"

#include "exec/sys.hpp"

#include <agentctl/process.hpp>

#include <linux/openat2.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace agentctl {

std::string_view to_string(containment c) {
    switch (c) {
        case containment::cgroup:
            return "cgroup";
        case containment::process_group:
            return "process-group";
    }
    return "unknown";
}

std::string_view to_string(process_outcome o) {
    switch (o) {
        case process_outcome::exited:
            return "exited";
        case process_outcome::timed_out:
            return "timed_out";
        case process_outcome::cancelled:
            return "cancelled";
        case process_outcome::output_limit_exceeded:
            return "output_limit_exceeded";
        case process_outcome::spawn_failed:
            return "spawn_failed";
    }
    return "unknown";
}

expected<std::string> resolve_executable(std::string_view command, std::string_view search_path,
                                         std::optional<file_identity>* identity) {
    if (identity != nullptr) identity->reset();
    auto record = [identity](const struct stat& st) {
        if (identity != nullptr)
            *identity =
                file_identity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
    };
    if (command.empty()) return task_error{error_code::invalid_request, "the command is empty"};
    if (command.find('\0') != std::string_view::npos)
        return task_error{error_code::invalid_request, "the command contains a NUL byte"};
    if (command.front() == '/') {
        struct stat st {};
        if (identity != nullptr && ::stat(std::string(command).c_str(), &st) == 0) record(st);
        return std::string(command);
    }
    if (command.find('/') != std::string_view::npos)
        return task_error{error_code::invalid_request,
                          "command '" + std::string(command) +
                              "' is a relative path: use an absolute path or a bare name looked up in PATH"};
    std::string searched;
    std::string not_executable;
    while (true) {
        auto colon = search_path.find(':');
        auto dir = search_path.substr(0, colon);
        // Empty and relative entries would make the lookup depend on the current directory.
        if (!dir.empty() && dir.front() == '/' && dir.find('\0') == std::string_view::npos) {
            searched += (searched.empty() ? "" : ":") + std::string(dir);
            std::string candidate(dir);
            if (candidate.back() != '/') candidate += '/';
            candidate += command;
            struct stat st {};
            if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
                if (::faccessat(AT_FDCWD, candidate.c_str(), X_OK, AT_EACCESS) == 0) {
                    record(st);
                    return candidate;
                }
                if (not_executable.empty()) not_executable = candidate;
            }
        }
        if (colon == std::string_view::npos) break;
        search_path.remove_prefix(colon + 1);
    }
    if (searched.empty())
        return task_error{
            error_code::executable_not_found,
            "command '" + std::string(command) + "' cannot be looked up: PATH has no absolute directory"};
    std::string error = "command '" + std::string(command) + "' was not found in PATH (" + searched + ")";
    if (!not_executable.empty()) error += "; " + not_executable + " exists but is not executable";
    return task_error{error_code::executable_not_found, std::move(error)};
}

namespace {

std::string describe_open_error(std::string_view relative, int err) {
    std::string what = "working directory '" + std::string(relative) + "'";
    switch (err) {
        case ENOENT:
            return what + " does not exist";
        case ENOTDIR:
            return what + " is not a directory (or a component of it is not)";
        case EXDEV:
            return what + " resolves outside the workspace (through a symlink)";
        case ELOOP:
            return what +
                   " goes through a symlink that is not allowed (a magic link, a loop, or any symlink "
                   "where openat2 is unavailable)";
        case ENAMETOOLONG:
            return what + " is too long";
        default:
            return what + ": " + exec::errno_text(err);
    }
}

// Refuses what can be refused without touching the file system.
bool check_relative(std::string_view relative, std::string& error) {
    if (relative.find('\0') != std::string_view::npos) {
        error = "the working directory contains a NUL byte";
        return false;
    }
    if (!relative.empty() && relative.front() == '/') {
        error = "working directory '" + std::string(relative) + "' must be relative to the workspace";
        return false;
    }
    std::string_view rest = relative;
    while (true) {
        auto slash = rest.find('/');
        if (rest.substr(0, slash) == "..") {
            error = "working directory '" + std::string(relative) + "' contains '..'";
            return false;
        }
        if (slash == std::string_view::npos) return true;
        rest.remove_prefix(slash + 1);
    }
}

}  // namespace

int open_beneath(int root_fd, std::string_view relative, std::string& error) {
    if (!check_relative(relative, error)) return -1;
    std::string path = relative.empty() ? "." : std::string(relative);
    int err = 0;
    int fd = exec::openat2_beneath(root_fd, path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, err);
    if (fd >= 0) return fd;
    if (err == ENOSYS) return exec::open_beneath_components(root_fd, relative, error);
    error = describe_open_error(relative, err);
    return -1;
}

void redact(std::string& text, const std::vector<std::string>& secrets) {
    if (text.empty() || secrets.empty()) return;
    redact_capture(text, secret_matcher(secrets));
}

namespace exec {

int openat2_beneath(int dir_fd, const char* path, std::uint64_t flags, int& err) {
    open_how how{};
    how.flags = flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int attempt = 0; attempt < 16; ++attempt) {
        int fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, path, &how, sizeof how));
        if (fd >= 0) return fd;
        err = errno;
        // EAGAIN: a rename raced the lookup and the kernel asks to retry.
        if (err != EAGAIN && err != EINTR) break;
    }
    return -1;
}

std::string_view next_component(std::string_view& rest) {
    while (true) {
        while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
        auto slash = rest.find('/');
        std::string_view part = rest.substr(0, slash);
        rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash);
        if (part != ".") return part;
    }
}

int open_beneath_components(int root_fd, std::string_view relative, std::string& error) {
    if (!check_relative(relative, error)) return -1;
    unique_fd dir(::openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) {
        error = describe_open_error(relative, errno);
        return -1;
    }
    std::string_view rest = relative;
    for (std::string_view component = next_component(rest); !component.empty();
         component = next_component(rest)) {
        std::string part(component);
        struct stat st {};
        if (::fstatat(dir.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            error = describe_open_error(relative, errno);
            return -1;
        }
        if (S_ISLNK(st.st_mode)) {
            error = describe_open_error(relative, ELOOP);
            return -1;
        }
        int fd = ::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            error = describe_open_error(relative, errno);
            return -1;
        }
        dir.reset(fd);
    }
    return dir.release();
}

}  // namespace exec
}  // namespace agentctl
