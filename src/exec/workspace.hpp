// The workspace root held open, and everything opened, read, checked or written beneath it.
//
// One containment implementation for every path a run uses: working directories, secret
// files and their roots are opened with openat2(RESOLVE_BENEATH) relative to a directory fd
// (docs/DESIGN.md, "Workspace"), so there is no gap between checking a path and opening it.
#pragma once

#include <agentctl/error.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::exec {

/// An open directory: the workspace root, or a secret file root.
/// Owns its descriptor; the engine holds these without seeing a system call.
class directory {
public:
    directory() = default;
    directory(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    directory(directory&& o) noexcept;
    directory& operator=(directory&& o) noexcept;
    directory(const directory&) = delete;
    directory& operator=(const directory&) = delete;
    ~directory();

    /// Opens `path` (absolute or relative to the process's cwd), following symlinks: the
    /// caller names a root it trusts. The recorded path is the canonical one. The error
    /// (workspace_unavailable) says why, without the path.
    static expected<directory> open(const std::string& path);

    /// Opens directory `relative` beneath this one (no "..", no absolute path, no symlink that
    /// leaves it). "" and "." are this directory itself. The error (cwd_unavailable) says why.
    expected<directory> open_beneath(std::string_view relative) const;

    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::string path_;
};

/// Why a file could not be read beneath a directory.
enum class read_problem { none, missing, escapes, not_regular, too_large, unreadable };

struct file_read {
    read_problem problem = read_problem::none;
    std::string data;    ///< the content when problem is none
    std::string detail;  ///< for messages (an errno text); never the content
};

/// Reads regular file `relative` beneath `dir` (resolved like open_beneath; the last component
/// may not be a symlink that leaves `dir`), at most `max_bytes`: one byte more is too_large.
/// With `content == false` only checks that it could be read (opens it, reads nothing).
file_read read_file_beneath(const directory& dir, std::string_view relative, std::size_t max_bytes,
                            bool content = true);

/// Opens directory `relative` beneath `root` (relative, no "..", no symlink that leaves
/// `root`; "" is `root` itself), first making each component that does not exist (mode 0777
/// less the umask). The error (file_error; path_not_allowed for a way out of `root`) names
/// the component. (file_write.cpp, as replace_file.)
expected<directory> make_directories_beneath(const directory& root, std::string_view relative);

/// Replaces file `name` (one component) in `dir` with `content`, all or nothing: a temporary
/// file beside it (`.NAME.agentctl-RANDOM.tmp`, created exclusively, with the replaced file's
/// permission bits, else 0666 less the umask) is written and fsynced, renamed over `name`,
/// and `dir` is fsynced. On failure the temporary file is removed and `name` is as it was.
/// The error (file_error) says which step failed.
std::optional<task_error> replace_file(const directory& dir, std::string_view name, std::string_view content);

/// The canonical path of an open fd (/proc/self/fd), for what a container engine binds.
std::optional<std::string> path_of(int fd);

/// `path` lexically below `root` (both absolute, or both relative; "." components ignored):
/// the rest of `path` after `root`, or nothing when it is not strictly below.
std::optional<std::string> relative_below(std::string_view path, std::string_view root);

}  // namespace agentctl::exec
