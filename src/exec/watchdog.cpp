// The watchdog: a forked process that kills what its owner started once the owner is gone.
// Decisions and measurements: docs/CRASH_SAFETY.md.
#include <agentctl/watchdog.hpp>

#include "exec/blocking_call.hpp"
#include "exec/observer.hpp"
#include "exec/owner.hpp"
#include "exec/service.hpp"
#include "exec/sys.hpp"
#include "exec/tree.hpp"
#include "exec/watchdog_wire.hpp"

#include <boost/asio/execution_context.hpp>

#include <dirent.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace agentctl {

using exec::unique_fd;
namespace wire = exec::wire;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t max_datagram = 256 * 1024;
constexpr long batch_pause_ns = 5'000'000;
// How long a process group left unreaped at a clean exit may take to end before it is killed:
// an allocation worker's srun normally ends ~30 ms after its worker's bye (hundreds under load);
// killed, its step is gone ~2.4 s later, within the 5 s of docs/WORKER.md.
constexpr auto linger_bound = std::chrono::milliseconds(2000);

template <typename T>
bool parse_number(std::string_view s, T& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

long long ms_since(steady::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

int thread_count() {
    std::string status;
    if (!exec::read_small_file(AT_FDCWD, "/proc/self/status", status)) return -1;
    auto at = status.find("\nThreads:");
    if (at == std::string::npos) return -1;
    return std::atoi(status.c_str() + at + 9);
}

// ---------------------------------------------------------------------------------------------
// The watchdog process.

struct watchdog_config {
    watchdog_options options;
    pid_t owner_pid = 0;
    std::string default_cgroup;  ///< where the owner's exec_services put their leaves, if any
};

struct engine_entry {
    std::string name, path, owner;
    std::vector<std::string> env;
    bool operator<(const engine_entry& o) const {
        return std::tie(name, path, owner, env) < std::tie(o.name, o.path, o.owner, o.env);
    }
};

class watchdog_process {
public:
    watchdog_process(int sock, int owner_pidfd, watchdog_config cfg)
        : sock_(sock), owner_pidfd_(owner_pidfd), cfg_(std::move(cfg)) {
        if (!cfg_.default_cgroup.empty()) cgroups_.insert(cfg_.default_cgroup);
    }

    [[noreturn]] void run() {
        std::string hello = wire::encode({wire::hello, std::to_string(::getpid())});
        ::send(sock_.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
        std::vector<char> buf(max_datagram);
        bool owner_gone = false;
        while (!owner_gone) {
            pollfd p[2] = {{sock_.get(), POLLIN, 0}, {owner_pidfd_.get(), POLLIN, 0}};
            int n = ::poll(p, owner_pidfd_ ? 2 : 1, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                break;  // cannot wait any more: act now rather than never
            }
            if (p[0].revents != 0 && !drain(buf)) owner_gone = true;
            if (clean_) finish_clean();
            if (owner_pidfd_ && p[1].revents != 0) owner_gone = true;
            if (!owner_gone) {
                // Let a busy owner's messages pile up for a moment: while we are not polling,
                // its sends wake nobody (a wake-up per datagram cost the sender ~30 us per
                // spawn). Our owner's end is then seen up to this much later.
                timespec pause{0, batch_pause_ns};
                ::nanosleep(&pause, nullptr);
            }
        }
        // Messages sent just before the end are still queued: read them first.
        drain(buf);
        if (clean_) finish_clean();
        act();
    }

private:
    // Reads every queued datagram. False at end-of-file (every copy of the owner's end closed).
    bool drain(std::vector<char>& buf) {
        while (!clean_) {
            ssize_t n = ::recv(sock_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
            if (n > 0) {
                apply(wire::decode(std::string_view(buf.data(), static_cast<std::size_t>(n))));
                continue;
            }
            if (n == 0) return false;
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        return true;
    }

    void apply(const std::vector<std::string_view>& f) {
        const auto& type = f[0];
        if (type == wire::clean_exit) {
            clean_ = true;
        } else if (type == wire::cgroup && f.size() == 2) {
            cgroups_.insert(std::string(f[1]));
        } else if (type == wire::group_start && f.size() == 4) {
            pid_t pid = 0;
            start_window w;
            if (parse_number(f[1], pid) && parse_number(f[2], w.lo) && parse_number(f[3], w.hi) && pid > 0) {
                groups_[pid] = w;
            }
        } else if (type == wire::group_end && f.size() == 2) {
            pid_t pid = 0;
            if (parse_number(f[1], pid)) groups_.erase(pid);
        } else if (type == wire::engine && f.size() >= 4) {
            engine_entry e{std::string(f[1]), std::string(f[2]), std::string(f[3]), {}};
            for (std::size_t i = 4; i < f.size(); ++i) e.env.emplace_back(f[i]);
            engines_.insert(std::move(e));
        } else if (type == wire::slurm && f.size() >= 2) {
            scancel_ = std::string(f[1]);
            scancel_env_.assign(f.begin() + 2, f.end());
        } else if (type == wire::job_start && f.size() == 2) {
            if (std::find(jobs_.begin(), jobs_.end(), f[1]) == jobs_.end()) jobs_.emplace_back(f[1]);
        } else if (type == wire::job_end && f.size() == 2) {
            std::erase(jobs_, f[1]);
        } else if (type == wire::name_start && f.size() == 2) {
            if (std::find(names_.begin(), names_.end(), f[1]) == names_.end()) names_.emplace_back(f[1]);
        } else if (type == wire::name_end && f.size() == 2) {
            std::erase(names_, f[1]);
        } else if (type == wire::note && f.size() == 2) {
            report("note " + std::string(f[1]));
        }
    }

    void report(const std::string& line) {
        if (cfg_.options.report_path.empty()) return;
        if (!report_fd_) {
            report_fd_.reset(
                ::open(cfg_.options.report_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
            if (!report_fd_) return;
        }
        std::string text = line + "\n";
        [[maybe_unused]] auto n = ::write(report_fd_.get(), text.data(), text.size());
    }

    // A clean exit. A process group its owner left unreaped on purpose (an allocation worker's
    // srun, whose worker said every task of it was reaped: docs/WORKER.md, "The end of a run")
    // is seen to its end: the owner is told we are done at once (our end of the socket closes),
    // then we wait for the group's leader to exit, at most linger_bound, and kill the group if it
    // has not. Groups that are not there any more, or whose pid is someone else's, are skipped.
    [[noreturn]] void finish_clean() {
        std::vector<unique_fd> lingering;
        unique_fd proc(groups_.empty() ? -1 : ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        for (const auto& [leader, window] : groups_) {
            if (!proc) break;
            unique_fd fd(exec::sys_pidfd_open(leader));
            exec::proc_stat now;
            if (!fd || !exec::read_proc_stat(proc.get(), leader, now) || now.start < window.lo ||
                now.start > window.hi)
                continue;
            lingering.push_back(std::move(fd));
        }
        if (lingering.empty()) {
            report("clean-exit");
            ::_exit(0);
        }
        ::alarm(static_cast<unsigned>(std::max<long long>(cfg_.options.lifetime_bound.count(), 1)));
        sock_.reset();  // the owner's clean_exit() returns now
        auto t0 = steady::now();
        auto deadline = t0 + linger_bound;
        while (!lingering.empty() && steady::now() < deadline) {
            // A pidfd is readable once its process has exited.
            std::erase_if(lingering, [](const unique_fd& fd) {
                pollfd p{fd.get(), POLLIN, 0};
                return ::poll(&p, 1, 0) == 1;
            });
            if (lingering.empty()) break;
            pollfd p{lingering.front().get(), POLLIN, 0};
            ::poll(&p, 1, 5);
        }
        if (lingering.empty()) {
            report("clean-exit lingered " + std::to_string(ms_since(t0)));
            ::_exit(0);
        }
        report("clean-exit linger-bound " + std::to_string(lingering.size()));
        std::vector<unique_fd> dying;
        kill_groups(dying);
        ::_exit(0);
    }

    [[noreturn]] void act() {
        // Whatever happens below, the watchdog does not outlive its job for long.
        ::alarm(static_cast<unsigned>(std::max<long long>(cfg_.options.lifetime_bound.count(), 1)));
        auto t0 = steady::now();
        report("owner-gone");
        kill_hosts();
        report("host-done " + std::to_string(ms_since(t0)));
        remove_containers();
        cancel_jobs();
        report("done " + std::to_string(ms_since(t0)));
        ::_exit(0);
    }

    // Process groups first (one kill each, nothing to wait for yet), then each cgroup (kill,
    // wait, remove), then the wait for the groups' members.
    void kill_hosts() {
        auto deadline = steady::now() + cfg_.options.host_kill_bound;
        std::vector<unique_fd> dying;
        if (!groups_.empty()) kill_groups(dying);
        for (const auto& path : cgroups_) {
            auto slash = path.rfind('/');
            if (slash == std::string::npos || slash == 0) continue;
            unique_fd base(::open(path.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (!base) continue;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
            auto t = exec::teardown_cgroup(base.get(), path.substr(slash + 1),
                                           static_cast<int>(std::max<long long>(left.count(), 100)), true);
            if (t.killed) report("cgroup-killed " + path + " " + std::to_string(t.processes));
            if (t.removed) {
                report("cgroup-removed " + path);
            } else {
                report("failed cgroup " + path + ": " + t.error);
            }
        }
        // A pidfd is readable once its process has exited.
        while (!dying.empty() && steady::now() < deadline) {
            std::erase_if(dying, [](const unique_fd& fd) {
                pollfd p{fd.get(), POLLIN, 0};
                return ::poll(&p, 1, 0) == 1;
            });
            if (dying.empty()) break;
            pollfd p{dying.front().get(), POLLIN, 0};
            ::poll(&p, 1, 5);
        }
        if (!dying.empty())
            report("failed groups: " + std::to_string(dying.size()) + " processes still running");
    }

    void kill_groups(std::vector<unique_fd>& dying) {
        unique_fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!proc) return;
        auto table = exec::scan_proc(proc.get());
        auto kill_verified = [&](const exec::proc_stat& p) {
            unique_fd fd(exec::sys_pidfd_open(p.pid));
            exec::proc_stat now;
            // The pidfd pins the process; if it is the one listed, kill it and wait for it.
            if (!fd || !exec::read_proc_stat(proc.get(), p.pid, now) || now.start != p.start) return;
            if (exec::sys_pidfd_send_signal(fd.get(), SIGKILL) == 0) dying.push_back(std::move(fd));
        };
        for (const auto& [leader, window] : groups_) {
            exec::proc_stat now;
            bool present = exec::read_proc_stat(proc.get(), leader, now);
            // Started outside the window: the pid is someone else's now.
            if (present && (now.start < window.lo || now.start > window.hi)) continue;
            // List first: killing the leader orphans its children.
            auto members = exec::tree_members(table, leader);
            unsigned n = static_cast<unsigned>(members.size());
            if (present) {
                // The leader (running, or a zombie not reaped yet) keeps the group id ours.
                ::kill(-leader, SIGKILL);
                exec::proc_stat self = now;
                kill_verified(self);
                ++n;
            }
            // Members that left the group (setsid) but whose parent is in the tree; and, with
            // the leader reaped, the group's remaining members: the group id cannot be reused
            // while they exist.
            for (const auto& m : members) kill_verified(m);
            report("group-killed " + std::to_string(leader) + " " + std::to_string(n));
        }
    }

    void remove_containers() {
        auto timeout = cfg_.options.call_timeout;
        for (const auto& e : engines_) {
            std::vector<std::string> list = {e.path,    "ps",       "--all",
                                             "--quiet", "--filter", "label=agentctl.owner=" + e.owner};
            std::set<std::string> removed;
            for (int round = 0; round < 3; ++round) {
                auto listed = exec::run_blocking(e.path, list, e.env, timeout);
                if (!listed.ok()) {
                    report("failed container-list " + e.name + " " + e.owner + ": " + listed.describe());
                    break;
                }
                auto ids = lines(listed.out);
                if (round > 0) {
                    for (const auto& id : removed) {
                        if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
                            report("container-removed " + e.name + " " + id);
                        }
                    }
                }
                if (ids.empty()) break;
                if (round == 2) {
                    for (const auto& id : ids)
                        report("failed container " + e.name + " " + id + " still listed");
                    break;
                }
                std::vector<std::string> rm = {e.path, "rm", "--force"};
                if (e.name == "podman") rm.push_back("--time=0");
                rm.insert(rm.end(), ids.begin(), ids.end());
                auto r = exec::run_blocking(e.path, rm, e.env, timeout);
                if (!r.ok()) report("failed container-remove " + e.name + ": " + r.describe());
                removed.insert(ids.begin(), ids.end());
            }
        }
    }

    void cancel_jobs() {
        cancel_job_ids();
        cancel_job_names();
    }

    // Jobs submitted whose id was not learnt yet: by name, one scancel each (scancel reads
    // `a,b` as one name). The srun clients are dead by now.
    void cancel_job_names() {
        if (names_.empty()) return;
        if (scancel_.empty()) {
            report("failed scancel: no scancel announced for " + std::to_string(names_.size()) + " job names");
            return;
        }
        std::size_t failed = 0;
        for (const auto& name : names_) {
            auto r = exec::run_blocking(scancel_, {scancel_, "--name=" + name}, scancel_env_, cfg_.options.call_timeout);
            if (!r.ok()) {
                ++failed;
                report("failed scancel --name=" + name + ": " + r.describe());
            }
        }
        report("slurm-cancelled-names " + std::to_string(names_.size() - failed));
    }

    void cancel_job_ids() {
        if (jobs_.empty()) return;
        std::string ids;
        for (const auto& j : jobs_) ids += (ids.empty() ? "" : " ") + j;
        if (scancel_.empty()) {
            report("failed scancel: no scancel announced for jobs " + ids);
            return;
        }
        std::vector<std::string> argv = {scancel_};
        argv.insert(argv.end(), jobs_.begin(), jobs_.end());
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto r = exec::run_blocking(scancel_, argv, scancel_env_, cfg_.options.call_timeout);
            if (r.ok()) {
                report("slurm-cancelled " + ids);
                return;
            }
            if (attempt == 1) report("failed scancel " + ids + ": " + r.describe());
        }
    }

    static std::vector<std::string> lines(std::string_view text) {
        std::vector<std::string> out;
        while (!text.empty()) {
            auto nl = text.find('\n');
            auto line = text.substr(0, nl);
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
            if (!line.empty()) out.emplace_back(line);
            text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        }
        return out;
    }

    unique_fd sock_;
    unique_fd owner_pidfd_;
    watchdog_config cfg_;
    unique_fd report_fd_;
    bool clean_ = false;
    std::set<std::string> cgroups_;
    struct start_window {
        std::uint64_t lo = 0, hi = 0;
    };
    std::map<pid_t, start_window> groups_;
    std::set<engine_entry> engines_;
    std::string scancel_;
    std::vector<std::string> scancel_env_;
    std::vector<std::string> jobs_;
    std::vector<std::string> names_;
};

// Shows the process as "agentctl-watchdog" in ps and /proc/PID/cmdline: the forked copy must
// not carry its owner's arguments (a `pgrep -f` or a test's nonce scan would match it).
void rename_process() {
    ::prctl(PR_SET_NAME, "agentctl-watchd", 0, 0, 0);
    std::string stat;
    if (!exec::read_small_file(AT_FDCWD, "/proc/self/stat", stat)) return;
    auto close = stat.rfind(')');
    if (close == std::string::npos) return;
    // Fields 48 and 49 (arg_start, arg_end) are the 46th and 47th after the command.
    std::string_view rest(stat);
    rest.remove_prefix(close + 2);
    std::uint64_t field[48] = {};
    for (int i = 0; i < 47 && !rest.empty(); ++i) {
        auto sp = rest.find(' ');
        auto token = rest.substr(0, sp);
        if (i >= 45) std::from_chars(token.data(), token.data() + token.size(), field[i]);
        if (sp == std::string_view::npos) break;
        rest.remove_prefix(sp + 1);
    }
    auto* start = reinterpret_cast<char*>(field[45]);
    std::uint64_t len = field[46] > field[45] ? field[46] - field[45] : 0;
    if (start == nullptr || len == 0 || len > 1 << 20) return;
    static constexpr char name[] = "agentctl-watchdog";
    std::memset(start, 0, len);
    std::memcpy(start, name, std::min<std::uint64_t>(len - 1, sizeof name - 1));
}

// In the grandchild: a session of its own, signals, file descriptors, then the loop.
[[noreturn]] void become_watchdog(int sock, int owner_pidfd, watchdog_config cfg) {
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        ::signal(sig, SIG_DFL);
    }
    for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2}) {
        ::signal(sig, SIG_IGN);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);

    // Keep the socket (as 3) and the pidfd (as 4), nothing else of the owner's.
    int s = ::fcntl(sock, F_DUPFD_CLOEXEC, 10);
    int p = owner_pidfd >= 0 ? ::fcntl(owner_pidfd, F_DUPFD_CLOEXEC, 10) : -1;
    if (s < 0) ::_exit(1);
    ::dup3(s, 3, O_CLOEXEC);
    int first_closed = 4;
    if (p >= 0) {
        ::dup3(p, 4, O_CLOEXEC);
        first_closed = 5;
    }
    ::close_range(static_cast<unsigned>(first_closed), ~0U, 0);
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
        for (int fd = 0; fd < 3; ++fd) ::dup2(null_fd, fd);
        if (null_fd > 2) ::close(null_fd);
    }
    if (::chdir("/") != 0) {
        // Nothing depends on the working directory; it only must not pin the owner's.
    }
    rename_process();
    watchdog_process w(3, p >= 0 ? 4 : -1, std::move(cfg));
    w.run();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The owner's side.

namespace detail {

class watchdog_channel final : public exec::tree_observer {
public:
    watchdog_channel(int fd, pid_t pid, int pidfd) : fd_(fd), pid_(pid), pidfd_(pidfd) {}

    void send(const std::vector<std::string_view>& fields) noexcept {
        try {
            std::string datagram = wire::encode(fields);
            std::lock_guard lock(mutex_);
            if (!fd_) return;
            for (int attempt = 0; attempt < 2; ++attempt) {
                ssize_t n = ::send(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n == static_cast<ssize_t>(datagram.size())) return;
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && attempt == 0) {
                    // The watchdog reads all the time; give it a moment, not forever.
                    pollfd p{fd_.get(), POLLOUT, 0};
                    ::poll(&p, 1, 1000);
                    continue;
                }
                break;
            }
            healthy_.store(false, std::memory_order_relaxed);
        } catch (...) {
            healthy_.store(false, std::memory_order_relaxed);
        }
    }

    void owner_cgroup_created(const std::string& path) noexcept override { send({wire::cgroup, path}); }
    void group_started(pid_t leader, std::uint64_t start_lo, std::uint64_t start_hi) noexcept override {
        char pid_text[16], lo_text[24], hi_text[24];
        auto p = std::to_chars(pid_text, pid_text + sizeof pid_text, leader).ptr;
        auto lo = std::to_chars(lo_text, lo_text + sizeof lo_text, start_lo).ptr;
        auto hi = std::to_chars(hi_text, hi_text + sizeof hi_text, start_hi).ptr;
        send({wire::group_start, std::string_view(pid_text, static_cast<std::size_t>(p - pid_text)),
              std::string_view(lo_text, static_cast<std::size_t>(lo - lo_text)),
              std::string_view(hi_text, static_cast<std::size_t>(hi - hi_text))});
    }
    bool sees_to_leftovers() const noexcept override { return healthy_.load(std::memory_order_relaxed); }
    void group_reaped(pid_t leader) noexcept override {
        char pid_text[16];
        auto p = std::to_chars(pid_text, pid_text + sizeof pid_text, leader).ptr;
        send({wire::group_end, std::string_view(pid_text, static_cast<std::size_t>(p - pid_text))});
    }

    bool clean_exit(std::chrono::milliseconds bound) {
        send({wire::clean_exit});
        std::lock_guard lock(mutex_);
        if (!fd_) return false;
        bool confirmed = false;
        if (healthy_.load(std::memory_order_relaxed)) {
            // The watchdog exits at once; its end of the socket closes with it.
            auto deadline = steady::now() + bound;
            while (true) {
                auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
                pollfd p{fd_.get(), POLLIN, 0};
                int n = ::poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                char c;
                ssize_t got = ::recv(fd_.get(), &c, 1, MSG_DONTWAIT);
                if (got == 0) {
                    confirmed = true;
                    break;
                }
                if (got < 0 && errno != EAGAIN && errno != EINTR) break;
            }
        }
        fd_.reset();
        return confirmed;
    }

    void close() {
        std::lock_guard lock(mutex_);
        fd_.reset();
    }

    pid_t pid() const { return pid_; }
    bool healthy() const { return healthy_.load(std::memory_order_relaxed); }
    int exit_descriptor() const {
        return pidfd_ ? ::fcntl(pidfd_.get(), F_DUPFD_CLOEXEC, 3) : (errno = ENOSYS, -1);
    }

private:
    std::mutex mutex_;
    unique_fd fd_;
    pid_t pid_;
    unique_fd pidfd_;  ///< of the watchdog; empty where the kernel has no pidfds
    std::atomic<bool> healthy_{true};
};

}  // namespace detail

std::optional<watchdog> watchdog::start(const watchdog_options& options, std::string& error,
                                        const std::function<void()>& meanwhile) {
    if (int threads = thread_count(); threads != 1) {
        error = threads < 0 ? "cannot read /proc/self/status"
                            : "the watchdog must be started before any thread (this process has " +
                                  std::to_string(threads) + ")";
        return std::nullopt;
    }
    watchdog_config cfg;
    cfg.options = options;
    cfg.owner_pid = ::getpid();
    if (auto self = exec::self_owner()) {
        std::string why;
        if (auto base = exec::discover_cgroup_parent(why)) {
            cfg.default_cgroup = base->path + "/" + exec::owner_cgroup_name(*self);
        }
    }
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        error = "cannot create the watchdog's socket: " + exec::errno_text(errno);
        return std::nullopt;
    }
    unique_fd ours(sv[0]), theirs(sv[1]);
    int big = 1 << 20;
    ::setsockopt(ours.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    // Where the kernel has pidfds, the watchdog also sees our end when a child forked without
    // exec (and so still holding our socket) outlives us.
    unique_fd self_pidfd(exec::sys_pidfd_open(::getpid()));

    pid_t middle = ::fork();
    if (middle < 0) {
        error = "cannot fork the watchdog: " + exec::errno_text(errno);
        return std::nullopt;
    }
    if (middle == 0) {
        // A session of its own, then fork again: the watchdog is not our child, so nothing
        // of ours waits for it, and it can never acquire a controlling terminal.
        ::setsid();
        pid_t wd = ::fork();
        if (wd != 0) ::_exit(wd < 0 ? 1 : 0);
        become_watchdog(theirs.get(), self_pidfd.get(), std::move(cfg));
    }
    theirs.reset();
    self_pidfd.reset();
    if (meanwhile) meanwhile();
    int status = 0;
    while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    // Ready once it says hello.
    pollfd p{ours.get(), POLLIN, 0};
    int ready = 0;
    do {
        ready = ::poll(&p, 1, 5000);
    } while (ready < 0 && errno == EINTR);
    char buf[64];
    ssize_t n = ready == 1 ? ::recv(ours.get(), buf, sizeof buf, MSG_DONTWAIT) : -1;
    pid_t wd_pid = 0;
    auto fields = n > 0 ? wire::decode(std::string_view(buf, static_cast<std::size_t>(n)))
                        : std::vector<std::string_view>{};
    if (fields.size() != 2 || fields[0] != wire::hello || !parse_number(fields[1], wd_pid)) {
        error = ready == 1 ? "the watchdog did not start" : "the watchdog did not answer within 5 s";
        return std::nullopt;
    }
    // A pidfd of the watchdog tells us at once if it dies (exit_descriptor()). It names the
    // watchdog only if the watchdog still holds its end of the socket once the pidfd is open
    // (else the pid may already be another process's).
    unique_fd wd_pidfd(exec::sys_pidfd_open(wd_pid));
    pollfd hangup{ours.get(), POLLIN | POLLRDHUP, 0};
    if (wd_pidfd && ::poll(&hangup, 1, 0) != 0) {
        error = "the watchdog exited as it started";
        return std::nullopt;
    }
    return watchdog(std::make_shared<detail::watchdog_channel>(ours.release(), wd_pid, wd_pidfd.release()));
}

watchdog::watchdog(std::shared_ptr<detail::watchdog_channel> channel) : channel_(std::move(channel)) {}
watchdog::watchdog(watchdog&&) noexcept = default;
watchdog& watchdog::operator=(watchdog&& o) noexcept {
    if (this != &o) {
        if (channel_) channel_->close();
        channel_ = std::move(o.channel_);
    }
    return *this;
}

watchdog::~watchdog() {
    // exec_services may still hold the channel as their observer: close it here regardless.
    if (channel_) channel_->close();
}

void watchdog::observe(boost::asio::execution_context& ctx) {
    boost::asio::use_service<exec::exec_service>(ctx).set_observer(channel_);
}

void watchdog::announce_engine(const engine_client& client) {
    std::vector<std::string_view> f = {wire::engine, client.name, client.path, client.owner_label};
    for (const auto& e : client.env) f.emplace_back(e);
    channel_->send(f);
}

void watchdog::announce_slurm(const slurm_client& client) {
    std::vector<std::string_view> f = {wire::slurm, client.scancel_path};
    for (const auto& e : client.env) f.emplace_back(e);
    channel_->send(f);
}

void watchdog::announce_slurm_job(std::string_view job_id) {
    channel_->send({wire::job_start, job_id});
}

void watchdog::release_slurm_job(std::string_view job_id) {
    channel_->send({wire::job_end, job_id});
}

void watchdog::announce_slurm_name(std::string_view job_name) {
    channel_->send({wire::name_start, job_name});
}

void watchdog::release_slurm_name(std::string_view job_name) {
    channel_->send({wire::name_end, job_name});
}

void watchdog::note(std::string_view text) {
    std::string line(text);
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::replace(line.begin(), line.end(), '\0', ' ');
    channel_->send({wire::note, line});
}

bool watchdog::clean_exit(std::chrono::milliseconds bound) {
    return channel_->clean_exit(bound);
}

pid_t watchdog::pid() const {
    return channel_->pid();
}

bool watchdog::healthy() const {
    return channel_->healthy();
}

int watchdog::exit_descriptor() const {
    return channel_->exit_descriptor();
}

}  // namespace agentctl
