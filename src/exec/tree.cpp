#include "exec/tree.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace agentctl::exec {

namespace {

bool parse_stat(std::string_view text, proc_stat& out) {
    // "pid (comm) S ppid pgrp session ..."; comm may hold spaces and parentheses.
    auto close = text.rfind(')');
    if (close == std::string_view::npos) return false;
    text.remove_prefix(close + 1);
    std::uint64_t values[20] = {};
    int field = 0;
    while (field < 20 && !text.empty()) {
        while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
        auto end = text.find(' ');
        auto token = text.substr(0, end);
        if (field == 0) {
            out.state = token.empty() ? '?' : token.front();
        } else {
            // Signed fields (tty, nice, ...) are not needed; parse failures leave 0.
            std::from_chars(token.data(), token.data() + token.size(), values[field]);
        }
        ++field;
        if (end == std::string_view::npos) break;
        text.remove_prefix(end);
    }
    if (field < 20) return false;
    out.ppid = static_cast<pid_t>(values[1]);
    out.pgrp = static_cast<pid_t>(values[2]);
    out.start = values[19];
    return true;
}

bool is_dead(char state) {
    return state == 'Z' || state == 'X' || state == 'x';
}

}  // namespace

bool read_proc_stat(int proc_fd, pid_t pid, proc_stat& out) {
    char path[32];
    auto [end, ec] = std::to_chars(path, path + sizeof path - 6, pid);
    if (ec != std::errc{}) return false;
    std::memcpy(end, "/stat", 6);
    unique_fd fd(::openat(proc_fd, path, O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    char buf[2048];
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) return false;
    out.pid = pid;
    return parse_stat(std::string_view(buf, static_cast<std::size_t>(n)), out);
}

proc_table scan_proc(int proc_fd) {
    proc_table table;
    table.taken = std::chrono::steady_clock::now();
    for_each_entry(proc_fd, [&](int, const dirent& entry) {
        pid_t pid = 0;
        auto name = std::string_view(entry.d_name);
        auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
        if (ec != std::errc{} || ptr != name.data() + name.size()) return;
        proc_stat st;
        if (read_proc_stat(proc_fd, pid, st)) table.procs.push_back(st);
    });
    std::sort(table.procs.begin(), table.procs.end(),
              [](const proc_stat& a, const proc_stat& b) { return a.ppid < b.ppid; });
    return table;
}

std::vector<proc_stat> tree_members(const proc_table& table, pid_t leader) {
    std::vector<proc_stat> out;
    auto add = [&out](const proc_stat& p) {
        if (is_dead(p.state)) return;
        bool known = std::any_of(out.begin(), out.end(), [&](const proc_stat& m) { return m.pid == p.pid; });
        if (!known) out.push_back(p);
    };
    std::vector<pid_t> parents{leader};
    for (std::size_t next = 0; next < parents.size(); ++next) {
        auto by_ppid = [](const proc_stat& p, pid_t v) { return p.ppid < v; };
        for (auto it = std::lower_bound(table.procs.begin(), table.procs.end(), parents[next], by_ppid);
             it != table.procs.end() && it->ppid == parents[next]; ++it) {
            add(*it);
            parents.push_back(it->pid);
        }
    }
    for (const auto& p : table.procs) {
        if (p.pgrp == leader && p.pid != leader) add(p);
    }
    return out;
}

bool children_files_exist(int proc_fd) {
    char path[48];
    std::snprintf(path, sizeof path, "self/task/%d/children", static_cast<int>(::gettid()));
    return ::faccessat(proc_fd, path, R_OK, 0) == 0;
}

std::vector<proc_stat> walk_children(int proc_fd, pid_t leader) {
    std::vector<proc_stat> out;
    std::vector<pid_t> parents{leader};
    for (std::size_t next = 0; next < parents.size(); ++next) {
        char path[48];
        std::snprintf(path, sizeof path, "%d/task", parents[next]);
        int task_fd = ::openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (task_fd < 0) continue;  // gone meanwhile
        DIR* tasks = ::fdopendir(task_fd);
        if (tasks == nullptr) {
            ::close(task_fd);
            continue;
        }
        while (dirent* entry = ::readdir(tasks)) {
            if (entry->d_name[0] == '.') continue;
            std::string children;
            std::string file = std::string(entry->d_name) + "/children";
            if (!read_small_file(::dirfd(tasks), file.c_str(), children)) continue;
            const char* p = children.data();
            const char* end = p + children.size();
            while (p < end) {
                pid_t pid = 0;
                auto [after, ec] = std::from_chars(p, end, pid);
                proc_stat st;
                if (ec == std::errc{} && read_proc_stat(proc_fd, pid, st) && !is_dead(st.state)) {
                    out.push_back(st);
                    parents.push_back(pid);
                }
                p = ec == std::errc{} ? after : after + 1;
                while (p < end && *p == ' ') ++p;
            }
        }
        ::closedir(tasks);
    }
    return out;
}

std::vector<proc_stat> stat_all(int proc_fd, const std::vector<pid_t>& pids, pid_t leader) {
    std::vector<proc_stat> out;
    for (pid_t pid : pids) {
        proc_stat st;
        if (pid != leader && read_proc_stat(proc_fd, pid, st) && !is_dead(st.state)) out.push_back(st);
    }
    return out;
}

bool signal_verified(int proc_fd, const proc_stat& p, int sig) {
    unique_fd pidfd(sys_pidfd_open(p.pid));
    if (!pidfd) return false;
    // The pidfd pins the process it was opened on; if that is the one we listed, signal it.
    proc_stat now;
    if (!read_proc_stat(proc_fd, p.pid, now) || now.start != p.start) return false;
    return sys_pidfd_send_signal(pidfd.get(), sig) == 0;
}

namespace {

std::optional<bool> parse_populated(std::string_view text) {
    auto at = text.find("populated ");
    if (at == std::string_view::npos || at + 10 >= text.size()) return std::nullopt;
    return text[at + 10] == '1';
}

}  // namespace

std::optional<bool> cgroup_populated(int leaf_dir) {
    std::string text;
    if (!read_small_file(leaf_dir, "cgroup.events", text)) return std::nullopt;
    return parse_populated(text);
}

namespace {

std::vector<pid_t> parse_pids(const std::string& text) {
    std::vector<pid_t> out;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
        pid_t pid = 0;
        auto [next, ec] = std::from_chars(p, end, pid);
        if (ec == std::errc{}) out.push_back(pid);
        p = next;
        while (p < end && (*p < '0' || *p > '9')) ++p;
    }
    return out;
}

}  // namespace

std::optional<bool> leaf_populated(cgroup_leaf& leaf) {
    if (!leaf.events) leaf.events.reset(::openat(leaf.dir.get(), "cgroup.events", O_RDONLY | O_CLOEXEC));
    if (!leaf.events) return cgroup_populated(leaf.dir.get());
    // One read: "populated" is the file's first line.
    char buf[256];
    ssize_t n;
    do {
        n = ::pread(leaf.events.get(), buf, sizeof buf, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return std::nullopt;
    return parse_populated(std::string_view(buf, static_cast<std::size_t>(n)));
}

std::vector<pid_t> cgroup_procs(int leaf_dir) {
    std::string text;
    if (!read_small_file(leaf_dir, "cgroup.procs", text)) return {};
    return parse_pids(text);
}

std::vector<pid_t> leaf_procs(cgroup_leaf& leaf) {
    if (!leaf.procs) leaf.procs.reset(::openat(leaf.dir.get(), "cgroup.procs", O_RDONLY | O_CLOEXEC));
    if (!leaf.procs) return cgroup_procs(leaf.dir.get());
    std::string text;
    if (!read_whole(leaf.procs.get(), text)) return {};
    return parse_pids(text);
}

int cgroup_kill(int leaf_dir) {
    return write_small_file(leaf_dir, "cgroup.kill", "1");
}

bool wait_cgroup_empty_blocking(int leaf_dir, int bound_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    unique_fd events(::openat(leaf_dir, "cgroup.events", O_RDONLY | O_CLOEXEC));
    if (!events) return false;
    while (true) {
        // Reading through the polled fd re-arms its POLLPRI notification.
        char buf[256];
        ssize_t n = ::pread(events.get(), buf, sizeof buf, 0);
        if (n < 0) return false;
        auto populated = parse_populated(std::string_view(buf, static_cast<std::size_t>(n)));
        if (!populated || !*populated) return true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{events.get(), POLLPRI, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

namespace {

// Mount points in mountinfo escape space, tab, newline and backslash as \ooo.
std::string unescape_mountinfo(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        bool octal = s[i] == '\\' && i + 3 < s.size();
        for (std::size_t k = 1; octal && k <= 3; ++k) octal = s[i + k] >= '0' && s[i + k] <= '7';
        if (octal) {
            out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
            i += 3;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    while (true) {
        auto at = s.find(sep);
        out.push_back(s.substr(0, at));
        if (at == std::string_view::npos) return out;
        s.remove_prefix(at + 1);
    }
}

}  // namespace

std::optional<cgroup_parent> discover_cgroup_parent(std::string& why) {
    std::string text;
    if (!read_small_file(AT_FDCWD, "/proc/self/cgroup", text)) {
        why = "cannot read /proc/self/cgroup";
        return std::nullopt;
    }
    std::string own;
    bool found = false;
    for (auto line : split(text, '\n')) {
        if (line.substr(0, 3) == "0::") {
            own = std::string(line.substr(3));
            found = true;
        }
    }
    if (!found) {
        why = "no cgroup v2 membership in /proc/self/cgroup";
        return std::nullopt;
    }
    if (!read_small_file(AT_FDCWD, "/proc/self/mountinfo", text)) {
        why = "cannot read /proc/self/mountinfo";
        return std::nullopt;
    }
    std::string dir_path;
    for (auto line : split(text, '\n')) {
        auto dash = line.find(" - ");
        if (dash == std::string_view::npos) continue;
        auto tail = split(line.substr(dash + 3), ' ');
        if (tail.empty() || tail[0] != "cgroup2") continue;
        auto head = split(line.substr(0, dash), ' ');
        if (head.size() < 5) continue;
        std::string root = unescape_mountinfo(head[3]);
        std::string mount_point = unescape_mountinfo(head[4]);
        if (root == "/") {
            dir_path = mount_point + (own == "/" ? "" : own);
        } else if (own == root || own.starts_with(root + "/")) {
            dir_path = mount_point + own.substr(root.size());
        } else {
            continue;
        }
        break;
    }
    if (dir_path.empty()) {
        why = "no cgroup2 mount shows our cgroup " + own;
        return std::nullopt;
    }
    cgroup_parent parent;
    parent.path = dir_path;
    parent.dir.reset(::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent.dir) {
        why = "cannot open " + dir_path + ": " + errno_text(errno);
        return std::nullopt;
    }
    return parent;
}

int open_cgroup_dir(const cgroup_parent& base, const std::string& name, bool create, cgroup_parent& out) {
    if (create && ::mkdirat(base.dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    out.dir.reset(::openat(base.dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!out.dir) return errno;
    out.path = base.path + "/" + name;
    if (::faccessat(out.dir.get(), "cgroup.kill", W_OK, 0) != 0) {
        int err = errno;
        out.dir.reset();
        return err;
    }
    return 0;
}

int make_cgroup_leaf(const cgroup_parent& parent, const std::string& name, cgroup_leaf& out) {
    if (::mkdirat(parent.dir.get(), name.c_str(), 0755) != 0) return errno;
    out.name = name;
    out.dir.reset(::openat(parent.dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int err = out.dir ? 0 : errno;
    if (err == 0 && ::faccessat(out.dir.get(), "cgroup.kill", W_OK, 0) != 0) err = errno;
    if (err != 0) {
        out.dir.reset();
        ::unlinkat(parent.dir.get(), name.c_str(), AT_REMOVEDIR);
    }
    return err;
}

int remove_cgroup_leaf(const cgroup_parent& parent, const std::string& name) {
    return ::unlinkat(parent.dir.get(), name.c_str(), AT_REMOVEDIR) == 0 ? 0 : errno;
}

std::uint32_t cgroup_tree_procs(int dir) {
    std::uint32_t n = static_cast<std::uint32_t>(cgroup_procs(dir).size());
    for_each_entry(dir, [&n](int d, const dirent& e) {
        if (e.d_type != DT_DIR || e.d_name[0] == '.') return;
        unique_fd sub(::openat(d, e.d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (sub) n += cgroup_tree_procs(sub.get());
    });
    return n;
}

namespace {

// rmdir of an emptied cgroup can fail with EBUSY for a moment while the last exits are
// accounted; retried with 1 ms pauses until `deadline`.
int remove_dir_retrying(int parent_fd, const char* name, std::chrono::steady_clock::time_point deadline) {
    while (true) {
        if (::unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return 0;
        int err = errno;
        if (err != EBUSY || std::chrono::steady_clock::now() >= deadline) return err;
        timespec pause{0, 1000000};
        ::nanosleep(&pause, nullptr);
    }
}

// Removes every directory beneath `dir`, deepest first. Returns 0 or the first errno.
int remove_below(int dir, std::chrono::steady_clock::time_point deadline, std::string& failed) {
    int dup_fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return errno == ENOENT ? 0 : errno;
    DIR* d = ::fdopendir(dup_fd);
    if (d == nullptr) {
        int err = errno;
        ::close(dup_fd);
        return err;
    }
    std::vector<std::string> subdirs;
    while (dirent* e = ::readdir(d)) {
        if (e->d_type == DT_DIR && e->d_name[0] != '.') subdirs.emplace_back(e->d_name);
    }
    int result = 0;
    for (auto& name : subdirs) {
        unique_fd sub(::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        int err = sub ? remove_below(sub.get(), deadline, failed) : 0;
        if (err == 0) err = remove_dir_retrying(::dirfd(d), name.c_str(), deadline);
        if (err != 0 && result == 0) {
            result = err;
            if (failed.empty()) failed = name;
        }
    }
    ::closedir(d);
    return result;
}

}  // namespace

cgroup_teardown teardown_cgroup(int base_dir, const std::string& name, int bound_ms, bool kill) {
    cgroup_teardown out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    unique_fd dir(::openat(base_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) {
        if (errno == ENOENT) {
            out.removed = true;
        } else {
            out.error = "cannot open " + name + ": " + errno_text(errno);
        }
        return out;
    }
    out.processes = cgroup_tree_procs(dir.get());
    auto populated = cgroup_populated(dir.get());
    if (!populated) {
        out.error = "cannot read " + name + "/cgroup.events";
        return out;
    }
    if (*populated) {
        if (!kill) {
            out.error = name + " is populated";
            return out;
        }
        if (int err = cgroup_kill(dir.get())) {
            out.error = "cannot write " + name + "/cgroup.kill: " + errno_text(err);
            return out;
        }
        out.killed = true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (!wait_cgroup_empty_blocking(dir.get(), static_cast<int>(std::max<long>(left.count(), 0)))) {
            int wait_err = errno;
            // Another sweeper (the next run, our owner's watchdog) may have removed it
            // meanwhile: then cgroup.events cannot be read any more, and that is success.
            if (::faccessat(base_dir, name.c_str(), F_OK, 0) != 0 && errno == ENOENT) {
                out.removed = true;
                return out;
            }
            out.error =
                std::chrono::steady_clock::now() >= deadline
                    ? name + " still has processes " + std::to_string(bound_ms) + " ms after cgroup.kill"
                    : "cannot watch " + name + "/cgroup.events: " + errno_text(wait_err);
            return out;
        }
    }
    std::string failed;
    if (int err = remove_below(dir.get(), deadline, failed)) {
        out.error = "cannot remove " + name + "/" + failed + ": " + errno_text(err);
        return out;
    }
    dir.reset();
    if (int err = remove_dir_retrying(base_dir, name.c_str(), deadline)) {
        out.error = "cannot remove " + name + ": " + errno_text(err);
        return out;
    }
    out.removed = true;
    return out;
}

}  // namespace agentctl::exec
