#include "exec/state_files.hpp"

#include "exec/host.hpp"

#include "exec/tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace agentctl::exec {

std::optional<std::string> passwd_home() {
    long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buf(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
    struct passwd pw;
    struct passwd* found = nullptr;
    for (;;) {
        int rc = ::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found);
        if (rc == ERANGE && buf.size() < (1u << 20)) {
            buf.resize(buf.size() * 2);
            continue;
        }
        if (rc != 0 || !found || !found->pw_dir || !*found->pw_dir) return std::nullopt;
        return std::string(found->pw_dir);
    }
}

int make_directories(const std::string& path, mode_t mode, std::string& failed_at) {
    if (path.empty() || path.front() != '/') {
        failed_at = path;
        return EINVAL;
    }
    std::size_t pos = 1;
    for (;;) {
        std::size_t slash = path.find('/', pos);
        std::string prefix = path.substr(0, slash);
        if (!prefix.empty() && prefix.back() != '/') {  // "//" in the path: nothing to create
            // Existing components are only checked, so a read-only or foreign parent does not
            // matter as long as the folder is there.
            struct stat st;
            if (::stat(prefix.c_str(), &st) != 0) {
                if (errno != ENOENT || (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST)) {
                    failed_at = prefix;
                    return errno;
                }
            } else if (!S_ISDIR(st.st_mode)) {
                failed_at = prefix;
                return ENOTDIR;
            }
        }
        if (slash == std::string::npos) return 0;
        pos = slash + 1;
    }
}

path_info probe_path(const std::string& path) {
    path_info info;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        info.error = errno;
        return info;
    }
    info.is_directory = S_ISDIR(st.st_mode);
    info.is_regular = S_ISREG(st.st_mode);
    info.size = static_cast<std::uint64_t>(st.st_size);
    info.device = static_cast<std::uint64_t>(st.st_dev);
    info.inode = static_cast<std::uint64_t>(st.st_ino);
    info.modified_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    info.changed_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
    return info;
}

path_info settled_probe(const std::string& path) {
    path_info first = probe_path(path);
    if (first.error != 0) return first;
    // Linux stamps ctime from CLOCK_REALTIME_COARSE (fs/inode.c, current_time()).
    struct timespec tick {};
    ::clock_getres(CLOCK_REALTIME_COARSE, &tick);
    for (int i = 0; i < 20; ++i) {
        struct timespec now {};
        ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
        if (static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec > first.changed_ns) break;
        ::nanosleep(&tick, nullptr);
    }
    path_info again = probe_path(path);
    if (again.error == 0 && (again.changed_ns != first.changed_ns || again.size != first.size ||
                             again.inode != first.inode || again.modified_ns != first.modified_ns))
        again.error = EAGAIN;
    return again;
}

int directory_writable(const std::string& path) {
    return ::access(path.c_str(), W_OK) == 0 ? 0 : errno;
}

std::string read_prefix(const std::string& path, std::size_t n) {
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string out;
    if (!fd) return out;
    out.resize(n);
    std::size_t got = 0;
    while (got < n) {
        ssize_t r = ::read(fd.get(), out.data() + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
}

int open_directory(int parent_fd, const std::string& name, bool create, unique_fd& out) {
    if (create && ::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) return errno;
    out.reset(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return out ? 0 : errno;
}

void cache_dropper::written(int dir_fd, int fd, const std::string& name, std::uint64_t size) {
    ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    pending_.push_back({name, size});
    pending_bytes_ += size;
    while (pending_.size() > 1 && pending_bytes_ - pending_.front().size >= kept_bytes_) {
        // Written back by now unless the disk is slow: those clean pages go; the others stay.
        // Opened again by name, so that no descriptor is held between files.
        unique_fd old(::openat(dir_fd, pending_.front().name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
        if (old) ::posix_fadvise(old.get(), 0, 0, POSIX_FADV_DONTNEED);
        pending_bytes_ -= pending_.front().size;
        pending_.pop_front();
    }
}

namespace {

int write_all(int fd, const char* p, std::size_t left) {
    while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    return 0;
}

// Direct I/O wants the memory, the length and the file offset aligned; 4 KiB suits every
// block size Linux file systems use.
constexpr std::size_t direct_align = 4096;
constexpr std::size_t direct_chunk = 1u << 20;

// Writes the whole blocks of `data` past the page cache (O_DIRECT) through an aligned buffer of
// this thread, then the tail through the cache. Returns 0, an errno value, or -1 when the file
// system takes no direct I/O (tmpfs, some FUSE): the caller then writes the file as usual.
// The aligned buffer of direct_chunk bytes each thread doing direct I/O keeps (null when
// memory is short): memory that stays in use, where the page cache would take new pages.
char* direct_buffer() {
    struct aligned_free {
        void operator()(char* p) const { std::free(p); }
    };
    thread_local std::unique_ptr<char, aligned_free> buffer(
        static_cast<char*>(std::aligned_alloc(direct_align, direct_chunk)));
    return buffer.get();
}

int write_direct(int fd, std::string_view data) {
    char* const buffer = direct_buffer();
    if (!buffer) return -1;
    const std::size_t whole = data.size() / direct_align * direct_align;
    std::size_t done = 0;
    while (done < whole) {
        std::size_t n = std::min(direct_chunk, whole - done);
        std::memcpy(buffer, data.data() + done, n);
        ssize_t w = ::write(fd, buffer, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno == EINVAL && done == 0 ? -1 : errno;
        // A short direct write leaves an unaligned offset: finish through the cache.
        done += static_cast<std::size_t>(w);
        if (static_cast<std::size_t>(w) != n) break;
    }
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) return errno;
    return write_all(fd, data.data() + done, data.size() - done);
}

}  // namespace

int write_file(int dir_fd, const std::string& name, std::string_view data, bool sync,
               cache_dropper* dropper) {
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;
    if (dropper && data.size() >= direct_chunk) {
        // Stream files of a MiB or more are written past the page cache (docs/CAPTURE.md,
        // "The page cache"): they cost no new cache pages, and their copy is into a buffer
        // that stays hot.
        unique_fd fd(::openat(dir_fd, name.c_str(), flags | O_DIRECT, 0600));
        if (fd) {
            int rc = write_direct(fd.get(), data);
            if (rc == 0) {
                if (sync && ::fdatasync(fd.get()) != 0) return errno;
                return ::close(fd.release()) == 0 ? 0 : errno;
            }
            if (rc > 0) return rc;
        } else if (errno != EINVAL) {
            return errno;
        }
    }
    unique_fd fd(::openat(dir_fd, name.c_str(), flags, 0600));
    if (!fd) return errno;
    if (int rc = write_all(fd.get(), data.data(), data.size()); rc != 0) return rc;
    if (sync && ::fdatasync(fd.get()) != 0) return errno;
    if (dropper) dropper->written(dir_fd, fd.get(), name, data.size());
    // close() reports deferred write errors on some file systems (NFS): check it.
    if (::close(fd.release()) != 0) return errno;
    return 0;
}

int replace_file(const std::string& path, std::string_view data) {
    std::string temporary = path + ".tmp-" + std::to_string(::getpid());
    if (int err = write_file(AT_FDCWD, temporary, data, false); err != 0) {
        ::unlink(temporary.c_str());
        return err;
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(temporary.c_str());
        return err;
    }
    return 0;
}

int publish_file(const std::string& from, const std::string& to) {
    if (::link(from.c_str(), to.c_str()) == 0) return 0;
    int err = errno;
    if (err != EPERM && err != EOPNOTSUPP) return err;  // EPERM: no hard links here (vfat, ...)
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    return errno;
}

namespace {

constexpr std::size_t read_piece = 64 * 1024;  // what read_file hands on at a time, at most

// Reads the whole 4 KiB blocks of a file of `size` bytes past the page cache into the thread's
// aligned buffer, a MiB at a time, and hands them to `chunk`; the tail is left for a read
// through the cache (it was written that way, and a direct read of it would first write it
// back). Returns 0 (the offset is then where the cached read goes on), an errno value, or -1
// when the file system takes no direct I/O and nothing was read.
int read_direct(int fd, std::uint64_t size, const std::function<void(std::string_view)>& chunk) {
    char* const buffer = direct_buffer();
    const int flags = ::fcntl(fd, F_GETFL);
    if (!buffer || flags < 0 || ::fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) return -1;
    const std::uint64_t whole = size / direct_align * direct_align;
    std::uint64_t done = 0;
    while (done < whole) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(direct_chunk, whole - done));
        ssize_t n = ::read(fd, buffer, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && done == 0) {
            // Refused at the first read: back to cached reads of the whole file.
            return ::fcntl(fd, F_SETFL, flags) == 0 ? -1 : errno;
        }
        if (n < 0) return errno;
        if (n == 0) break;  // the file got shorter: the length check of the caller says so
        done += static_cast<std::uint64_t>(n);
        // Handed on in pieces of 64 KiB, as read_file promises: what the caller does to each
        // (CRC, then a copy) finds it in cache.
        for (std::size_t at = 0; at < static_cast<std::size_t>(n); at += read_piece)
            chunk(std::string_view(buffer + at, std::min(read_piece, static_cast<std::size_t>(n) - at)));
        if (static_cast<std::size_t>(n) != want) break;  // an unaligned offset: on through the cache
    }
    return ::fcntl(fd, F_SETFL, flags) == 0 ? 0 : errno;
}

}  // namespace

int read_file(int dir_fd, const std::string& name, const std::function<void(std::string_view)>& chunk) {
    unique_fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return errno;
    // Files of a MiB or more are stream files written by direct I/O (write_file): read back the
    // same way, straight from the disk into a buffer that stays hot, instead of into new page
    // cache pages (docs/CAPTURE.md, "Reading streams back").
    struct stat st;
    if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uint64_t>(st.st_size) >= direct_chunk) {
        if (int rc = read_direct(fd.get(), static_cast<std::uint64_t>(st.st_size), chunk); rc > 0) return rc;
    }
    auto buf = std::make_unique_for_overwrite<char[]>(read_piece);  // not zero-filled: read() fills it
    for (;;) {
        ssize_t n = ::read(fd.get(), buf.get(), read_piece);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return 0;
        chunk(std::string_view(buf.get(), static_cast<std::size_t>(n)));
    }
}

std::optional<std::uint64_t> file_size(int dir_fd, const std::string& name, int& error) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        error = errno;
        return std::nullopt;
    }
    error = 0;
    return static_cast<std::uint64_t>(st.st_size);
}

std::vector<std::string> list_directory(int dir_fd) {
    std::vector<std::string> names;
    int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return names;
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        return names;
    }
    while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return names;
}

int remove_tree(int dir_fd, const std::string& name) {
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0) return 0;
    if (errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return errno;
    unique_fd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!sub) return errno == ENOENT ? 0 : errno;
    for (const auto& entry : list_directory(sub.get()))
        if (int rc = remove_tree(sub.get(), entry); rc != 0) return rc;
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
    return 0;
}

int sync_directory(int dir_fd) {
    return ::fsync(dir_fd) == 0 ? 0 : errno;
}

pid_t current_pid() {
    return ::getpid();
}

namespace {

std::optional<proc_stat> stat_of(pid_t pid) {
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!proc) return std::nullopt;
    proc_stat st;
    if (!read_proc_stat(proc.get(), pid, st)) return std::nullopt;
    return st;
}

}  // namespace

std::optional<std::uint64_t> process_start_time(pid_t pid) {
    auto st = stat_of(pid);
    if (!st) return std::nullopt;
    return st->start;
}

bool process_alive(pid_t pid, std::uint64_t start_time) {
    if (pid <= 0) return false;
    auto st = stat_of(pid);
    if (!st) return false;
    if (st->state == 'Z' || st->state == 'X' || st->state == 'x') return false;
    return st->start == start_time;
}

cpu_idle_meter::cpu_idle_meter() : fd_(::open("/proc/stat", O_RDONLY | O_CLOEXEC)) {}

double cpu_idle_meter::sample() {
    if (!fd_) return -1;
    char buf[256];  // the first line: "cpu  user nice system idle iowait irq softirq steal ..."
    ssize_t n = ::pread(fd_.get(), buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    if (std::strncmp(buf, "cpu ", 4) != 0) return -1;
    std::uint64_t field[8] = {};
    char* at = buf + 4;
    for (auto& f : field) {
        char* end = nullptr;
        f = std::strtoull(at, &end, 10);
        if (end == at) return -1;
        at = end;
    }
    std::uint64_t idle = field[3] + field[4], total = 0;
    for (auto f : field) total += f;  // guest time is inside user time already
    bool known = total_ != 0 && total > total_ && idle >= idle_ && idle - idle_ <= total - total_;
    double share = known ? static_cast<double>(idle - idle_) / static_cast<double>(total - total_) : -1;
    idle_ = idle;
    total_ = total;
    return share;
}

std::string boot_id() {
    std::string text;
    if (!read_small_file(AT_FDCWD, "/proc/sys/kernel/random/boot_id", text)) return {};
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

}  // namespace agentctl::exec
