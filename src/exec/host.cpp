#include "exec/host.hpp"

#include "exec/sys.hpp"
#include "exec/tree.hpp"
#include "json/sha256.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <random>

namespace agentctl::exec {

std::string host_name() {
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

long own_pid() {
    return static_cast<long>(::getpid());
}

std::optional<std::string> process_start_time(long pid) {
    if (pid <= 0) return std::nullopt;  // never kill(0) or kill(-1) below
    // The one /proc/PID/stat parser (tree.cpp): the command in parentheses may hold anything.
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    proc_stat st;
    if (!proc || !read_proc_stat(proc.get(), static_cast<pid_t>(pid), st)) {
        // Not in /proc: gone, or hidden from us (hidepid); kill(pid, 0) tells which.
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return std::nullopt;
        return std::string();
    }
    return st.start ? std::to_string(st.start) : std::string();
}

std::optional<std::string> environment_variable(std::string_view name) {
    const char* v = std::getenv(std::string(name).c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
}

std::string random_hex(int digits) {
    std::random_device rd;
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    std::uint64_t bits = 0;
    for (int i = 0; i < digits; ++i) {
        if (i % 16 == 0) bits = (std::uint64_t(rd()) << 32) | rd();
        out.push_back(hex[(bits >> (4 * (i % 16))) & 15]);
    }
    return out;
}

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

expected<std::string> canonical_path(const std::string& path) {
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf))
        return task_error{error_code::workspace_unavailable, errno_text(errno)};
    return std::string(buf);
}

namespace {

expected<std::string> digest_of_own_executable() {
    unique_fd exe(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
    if (!exe)
        return task_error{error_code::internal_error, "cannot open /proc/self/exe: " + errno_text(errno)};
    sha256 h;
    // Mapped rather than read: the binary is in the page cache (it is running), and copying its
    // ~7 MB out was a third of the worker's CPU between its start and its welcome, which is on
    // every allocation run's critical path (docs/SLURM.md, section 13).
    struct stat st {};
    if (::fstat(exe.get(), &st) == 0 && st.st_size > 0) {
        auto size = static_cast<std::size_t>(st.st_size);
        void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, exe.get(), 0);
        if (map != MAP_FAILED) {
            h.update(std::string_view(static_cast<const char*>(map), size));
            ::munmap(map, size);
            auto bytes = h.finish();
            return std::string(bytes.begin(), bytes.end());
        }
    }
    std::string piece(1024 * 1024, '\0');
    for (;;) {
        ssize_t n = ::read(exe.get(), piece.data(), piece.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return task_error{error_code::internal_error, "cannot read /proc/self/exe: " + errno_text(errno)};
        if (n == 0) break;
        h.update(std::string_view(piece.data(), static_cast<std::size_t>(n)));
    }
    auto bytes = h.finish();
    return std::string(bytes.begin(), bytes.end());
}

}  // namespace

const expected<std::string>& build_digest() {
    static const expected<std::string> digest = digest_of_own_executable();
    return digest;
}

namespace {
// Each task in flight holds two pipe read ends, a pidfd and, with cgroup containment, its
// leaf's directory, cgroup.events and (once killed) cgroup.procs; briefly a cwd. The spare
// leaves made ahead (at most 32, one fd each) and the spawn window (5) fit in the reserve.
constexpr rlim_t fds_per_task = 8;
constexpr rlim_t fds_reserved = 64;
}  // namespace

fd_budget fit_jobs_to_fd_limit(int jobs) {
    fd_budget out;
    out.jobs = jobs;
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return out;
    rlim_t need = fds_reserved + fds_per_task * static_cast<rlim_t>(jobs);
    out.needed = need;
    out.hard_limit = lim.rlim_max;
    if (lim.rlim_cur >= need) return out;
    rlim_t target = std::min(need, lim.rlim_max);
    if (target > lim.rlim_cur) {
        rlimit raised = lim;
        raised.rlim_cur = target;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_cur = target;
    }
    if (lim.rlim_cur >= need) return out;
    out.jobs = static_cast<int>(
        std::max<rlim_t>(1, (lim.rlim_cur - std::min(lim.rlim_cur, fds_reserved)) / fds_per_task));
    return out;
}

}  // namespace agentctl::exec
