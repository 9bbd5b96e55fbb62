// The POSIX calls of the run journal: its state folder, the files beside its database, and
// the identity and liveness of the process that owns a run. Private to the library: the
// journal (src/journal) reaches the system only through these.
#pragma once

#include "exec/sys.hpp"

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::exec {

/// The home folder of the real user from the password database (getpwuid_r), if it has one.
std::optional<std::string> passwd_home();

/// mkdir -p: creates every missing component of the absolute `path` with `mode` (components
/// that exist are left as they are). Returns 0 or an errno value; `failed_at` names the
/// component that could not be created.
int make_directories(const std::string& path, mode_t mode, std::string& failed_at);

/// What is at a path (stat(2), following symlinks).
struct path_info {
    int error = 0;  ///< 0, or the errno of stat (ENOENT: nothing there)
    bool is_directory = false;
    bool is_regular = false;
    std::uint64_t size = 0;
    /// Which file it is and when it last changed: together they tell a file that nobody
    /// wrote since (the ctime cannot be set back through the file system; docs/JOURNAL.md,
    /// "The integrity check").
    std::uint64_t device = 0, inode = 0;
    std::int64_t modified_ns = 0, changed_ns = 0;
};
path_info probe_path(const std::string& path);

/// probe_path() once the coarse clock that stamps file changes has moved past the file's
/// ctime (waiting at most a few clock ticks): a later change then shows as a later ctime,
/// even one in the same tick as the last. EAGAIN in `error` when the file changed meanwhile.
path_info settled_probe(const std::string& path);

/// access(2) W_OK on a directory: 0, or EROFS on a read-only file system, EACCES, ...
int directory_writable(const std::string& path);

/// Up to `n` first bytes of a file (empty when it cannot be read).
std::string read_prefix(const std::string& path, std::size_t n);

/// Opens (and with `create`, first creates with mode 0700) the directory `name` beneath
/// `parent_fd` (AT_FDCWD for a path). Returns 0 or an errno value.
int open_directory(int parent_fd, const std::string& name, bool create, unique_fd& out);

/// Files written once and seldom read again (the journal's stream files) leave the page cache
/// once the disk has them, so that the next files go into those pages instead of into memory
/// the system must first find and clear (docs/CAPTURE.md, "The page cache"). Each file's
/// writeback starts as it is written; once the files written after it hold more than
/// `kept_bytes`, its clean pages are dropped, so the last `kept_bytes` stay cached for the
/// readers that come soon (the JSON report). Never waits for the disk: pages still being
/// written stay cached, as without it. Advice only: nothing fails when it does not happen.
/// Every file handed to one dropper lies in the same folder.
class cache_dropper {
public:
    explicit cache_dropper(std::uint64_t kept_bytes = 256u << 20) : kept_bytes_(kept_bytes) {}

    /// `fd`, the file `name` of the folder `dir_fd`, was just written with `size` bytes: start
    /// its writeback, and drop the pages of the oldest files beyond `kept_bytes`.
    void written(int dir_fd, int fd, const std::string& name, std::uint64_t size);

private:
    struct file {
        std::string name;
        std::uint64_t size;
    };
    std::uint64_t kept_bytes_;
    std::uint64_t pending_bytes_ = 0;
    std::deque<file> pending_;  ///< the files written last, oldest first (names, not descriptors)
};

/// Writes `data` to a new file `name` in `dir_fd` (mode 0600, replacing a file of that name),
/// with fdatasync() when `sync`, then hands it to `dropper` if there is one. With a dropper (a
/// file written once and seldom read), a file of 1 MiB or more goes past the page cache: its
/// whole 4 KiB blocks by direct I/O (O_DIRECT) through an aligned buffer of the calling thread,
/// the tail through the cache; where the file system refuses direct I/O (tmpfs), all of it
/// through the cache (docs/CAPTURE.md, "The page cache"). Returns 0 or an errno value (ENOSPC:
/// the disk is full).
int write_file(int dir_fd, const std::string& name, std::string_view data, bool sync,
               cache_dropper* dropper = nullptr);

/// Replaces the file at `path` with `data` (mode 0600) through a temporary file beside it and
/// rename(2): a reader sees the old content or the new, never part of it. 0 or an errno value.
int replace_file(const std::string& path, std::string_view data);

/// Puts the file at `from` at `to` unless something is there already: link(2), or where the
/// file system has no hard links, renameat2(RENAME_NOREPLACE). Either is atomic: `to` never
/// names a file half made, and of two callers racing for one `to` exactly one wins. Returns 0,
/// EEXIST when `to` exists, or another errno value; `from` may still exist afterwards.
int publish_file(const std::string& from, const std::string& to);

/// Reads the file `name` in `dir_fd` in chunks of at most 64 KiB. Returns 0 or an errno value.
int read_file(int dir_fd, const std::string& name, const std::function<void(std::string_view)>& chunk);

/// Size of `name` in `dir_fd`, or nullopt (errno in `error`).
std::optional<std::uint64_t> file_size(int dir_fd, const std::string& name, int& error);

/// Names in the directory `dir_fd` ("." and ".." left out).
std::vector<std::string> list_directory(int dir_fd);

/// Removes `name` in `dir_fd`: a file, or a directory with everything beneath it. Returns 0
/// (also when nothing was there) or an errno value.
int remove_tree(int dir_fd, const std::string& name);

/// fsync(2) of a directory, so that entries created in it survive a power cut.
int sync_directory(int dir_fd);

/// How much of the machine's CPU time went idle, from /proc/stat (one pread a call): the
/// journal paces its commits longer while the CPUs are busy (docs/JOURNAL.md, "Group commits").
class cpu_idle_meter {
public:
    cpu_idle_meter();
    /// The share of all CPUs' time since the previous call that was idle (idle and iowait;
    /// steal counts as busy), in [0, 1]. Negative when unknown: the first call, no clock tick
    /// between the two calls, or no /proc/stat.
    double sample();

private:
    unique_fd fd_;
    std::uint64_t idle_ = 0, total_ = 0;
};

/// This process: pid, and its start time (field 22 of /proc/self/stat, clock ticks after boot).
pid_t current_pid();
std::optional<std::uint64_t> process_start_time(pid_t pid);

/// Whether process `pid` exists, is not a zombie and started at `start_time` (field 22 of
/// /proc/<pid>/stat): a pid reused by another process is not "alive".
bool process_alive(pid_t pid, std::uint64_t start_time);

/// host_name() is in exec/host.hpp.

/// /proc/sys/kernel/random/boot_id without the newline; "" if unavailable. Pids and start
/// times are only comparable within one boot.
std::string boot_id();

}  // namespace agentctl::exec
