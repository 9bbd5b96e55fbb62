#include "exec/owner.hpp"

#include "exec/sys.hpp"
#include "exec/tree.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <charconv>
#include <climits>
#include <ctime>

namespace agentctl::exec {

namespace {

constexpr std::string_view owner_prefix = "agentctl@";
constexpr std::string_view legacy_prefix = "agentctl-";

// Reads a decimal number at the front of `s` and removes it; false unless at least one digit.
template <typename T>
bool take_number(std::string_view& s, T& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc{} || end == s.data()) return false;
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    return true;
}

bool take_char(std::string_view& s, char c) {
    if (s.empty() || s.front() != c) return false;
    s.remove_prefix(1);
    return true;
}

}  // namespace

std::uint64_t boot_ticks_now() {
    // The kernel prints nsec_to_clock_t(start_boottime): nanoseconds divided down to USER_HZ.
    static const long hz = ::sysconf(_SC_CLK_TCK);
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    auto ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
    return ns / (1000000000u / static_cast<std::uint64_t>(hz > 0 ? hz : 100));
}

std::uint64_t self_pidns() {
    struct stat st {};
    if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
    return static_cast<std::uint64_t>(st.st_ino);
}

std::optional<owner_id> self_owner() {
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    proc_stat st;
    if (!proc || !read_proc_stat(proc.get(), ::getpid(), st) || st.start == 0) return std::nullopt;
    owner_id o{::getpid(), st.start, self_pidns()};
    if (o.pidns == 0) return std::nullopt;
    return o;
}

std::string owner_cgroup_name(const owner_id& o) {
    return std::string(owner_prefix) + std::to_string(o.pid) + "-" + std::to_string(o.start) + "-" +
           std::to_string(o.pidns);
}

std::optional<owner_id> parse_owner_cgroup_name(std::string_view name) {
    if (!name.starts_with(owner_prefix)) return std::nullopt;
    name.remove_prefix(owner_prefix.size());
    owner_id o;
    long long pid = 0;
    if (!take_number(name, pid) || !take_char(name, '-') || !take_number(name, o.start) ||
        !take_char(name, '-') || !take_number(name, o.pidns) || !name.empty()) {
        return std::nullopt;
    }
    if (pid <= 0 || pid > INT_MAX || o.start == 0 || o.pidns == 0) return std::nullopt;
    o.pid = static_cast<pid_t>(pid);
    return o;
}

std::optional<pid_t> parse_legacy_leaf_name(std::string_view name) {
    // agentctl-PID-TAG-N (TAG hexadecimal, N decimal), as made before owner directories.
    if (!name.starts_with(legacy_prefix)) return std::nullopt;
    name.remove_prefix(legacy_prefix.size());
    long long pid = 0;
    if (!take_number(name, pid) || !take_char(name, '-') || pid <= 0 || pid > INT_MAX) return std::nullopt;
    auto dash = name.find('-');
    if (dash == 0 || dash == std::string_view::npos) return std::nullopt;
    for (char c : name.substr(0, dash)) {
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (!hex) return std::nullopt;
    }
    name.remove_prefix(dash + 1);
    unsigned n = 0;
    if (!take_number(name, n) || !name.empty()) return std::nullopt;
    return static_cast<pid_t>(pid);
}

process_probe probe_process(pid_t pid) {
    process_probe out;
    if (pid <= 0) return out;  // never kill(0) or kill(-1) below
    unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    proc_stat st;
    if (proc && read_proc_stat(proc.get(), pid, st)) {
        // A zombie has exited: what it owned is as orphaned as if it were gone.
        if (st.state == 'Z' || st.state == 'X') return out;
        out.what = process_probe::state::present;
        out.start = st.start;
        return out;
    }
    // Not readable in /proc: gone, or hidden from us (hidepid); kill(pid, 0) tells which.
    if (::kill(pid, 0) == 0 || errno == EPERM) out.what = process_probe::state::unreadable;
    return out;
}

owner_state judge_owner(const owner_id& owner, std::uint64_t our_pidns, const process_prober& probe) {
    if (our_pidns == 0 || owner.pidns != our_pidns) return owner_state::unknown;
    auto now = probe(owner.pid);
    switch (now.what) {
        case process_probe::state::absent:
            return owner_state::dead;
        case process_probe::state::unreadable:
            return owner_state::unknown;
        case process_probe::state::present:
            break;
    }
    return now.start == owner.start ? owner_state::alive : owner_state::dead;
}

owner_state judge_legacy_owner(pid_t pid, const process_prober& probe) {
    // Without a start time a live pid may be the owner or a stranger: leave it alone.
    return probe(pid).what == process_probe::state::absent ? owner_state::dead : owner_state::unknown;
}

}  // namespace agentctl::exec
