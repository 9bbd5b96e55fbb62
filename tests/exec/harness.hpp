// Test harness for the executor: real processes (the probe), one io_context per run with a
// hard bound (a hang is a failure), and the oracles every test ends with.
#pragma once

#include "../support/private_cgroup.hpp"

#include <agentctl/process.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/thread_pool.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {
// For Boost.Test messages.
inline std::ostream& operator<<(std::ostream& os, process_outcome o) {
    return os << to_string(o);
}
inline std::ostream& operator<<(std::ostream& os, containment c) {
    return os << to_string(c);
}
}  // namespace agentctl

namespace exec_test {
/// The result's error code as JSON spells it ("" when it has none): what tests compare.
inline std::string_view code_of(const agentctl::process_result& r) {
    return r.error ? to_string(*r.error) : std::string_view();
}
}  // namespace exec_test

namespace exec_test {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

/// Path of the probe helper ($AGENTCTL_PROBE).
const std::string& probe_path();

/// A request that runs the probe with `args` and "--nonce <nonce>"; empty environment.
agentctl::process_request probe_request(const std::string& nonce, std::vector<std::string> args);

/// A request that runs `argv[0]` (absolute) with the given argv.
agentctl::process_request command_request(std::vector<std::string> argv);

/// With AGENTCTL_TEST_SPAWNER set (the `exec-spawner` registrations), the runs of the io_contexts
/// it is attached to are spawned on a thread of its own (agentctl::use_spawn_executor), so that
/// the same cases cover both ways of spawning; without it, nothing. Declared before the
/// io_context, so that it outlives it.
class spawn_thread {
public:
    spawn_thread();
    void attach(boost::asio::io_context& io);
    bool active() const { return pool_.has_value(); }
    /// Nothing is spawned until the returned object is destroyed (which must happen before this
    /// one is): for cases about what happens before a spawn. Without a spawner, nothing.
    std::shared_ptr<void> hold();

private:
    std::optional<boost::asio::thread_pool> pool_;
};

/// One run on its own io_context, cancellable through `signal`.
class runner {
    spawn_thread spawner_;  // before io: outlives it

public:
    runner() { spawner_.attach(io); }
    /// spawn_thread::hold() of this runner's spawner.
    std::shared_ptr<void> hold_spawns() { return spawner_.hold(); }
    /// Initiates the run (nothing happens until run()).
    void start(agentctl::process_request request);
    /// Runs the io_context until it is out of work; fails the test if that takes longer than
    /// `bound` (the io_context is then destroyed, which kills the tree).
    void run(milliseconds bound = 20s);
    /// Time from start() to the completion handler.
    milliseconds wall() const { return std::chrono::duration_cast<milliseconds>(done_at_ - started_at_); }
    const agentctl::process_result& result() const;
    void cancel(boost::asio::cancellation_type type) { signal.emit(type); }

    boost::asio::io_context io;
    boost::asio::cancellation_signal signal;
    int completions = 0;

private:
    std::optional<agentctl::process_result> result_;
    std::chrono::steady_clock::time_point started_at_;
    std::chrono::steady_clock::time_point done_at_;
};

/// start() + run() in one call.
agentctl::process_result run_one(agentctl::process_request request, milliseconds bound = 20s,
                                 milliseconds* wall = nullptr);

/// Calls `fn` once `path` exists: inotify on its directory, so no polling and no sleep.
class file_watch {
public:
    file_watch(boost::asio::io_context& io, std::string path, std::function<void()> fn);
    ~file_watch();

private:
    void arm();
    bool fire_if_present();
    boost::asio::posix::stream_descriptor sd_;
    std::string path_;
    std::function<void()> fn_;
    bool fired_ = false;
};

/// Calls `fn` once the process `pid` has exited (pidfd readiness).
class exit_watch_pid {
public:
    exit_watch_pid(boost::asio::io_context& io, pid_t pid, std::function<void()> fn);

private:
    boost::asio::posix::stream_descriptor sd_;
    std::function<void()> fn_;
};

/// A temporary directory, removed with its contents.
struct temp_dir {
    temp_dir();
    ~temp_dir();
    std::string path;
};

/// "<pid> <starttime>" records written by the probe's --pidfile-dir.
struct pid_record {
    pid_t pid;
    std::uint64_t start;
};
std::vector<pid_record> read_pidfiles(const std::string& dir);
/// True if the process is running (not a zombie) and has the recorded start time.
bool alive(const pid_record& p);
/// Kills a survivor the test expected (a documented limitation), and waits until it is gone.
void kill_and_wait(const pid_record& p);

/// Pids whose /proc/<pid>/cmdline contains `nonce`.
std::vector<pid_t> processes_with(const std::string& nonce);
/// Zombie children of the test process.
int zombie_children();
/// Entries of /proc/self/fd.
int open_fd_count();
/// Cgroups of this process left behind under its cgroup: its owner directory
/// (agentctl@<pid>-*) or a leaf of the older layout (agentctl-<pid>-*).
int leftover_cgroup_leaves();
/// Whether this host lets us create cgroup v2 leaves (what `automatic` containment needs).
bool host_has_cgroup_v2();

/// Every test: a nonce for its processes, and at the end the oracles: no process carrying the
/// nonce (each is given up to 3 s to finish dying, watched through a pidfd), no zombie child,
/// fd count back to its value at the start, no leftover cgroup leaf.
struct process_fixture {
    process_fixture();
    ~process_fixture();
    std::string nonce;
    int baseline_fds;
};

/// process_fixture in a cgroup of the case's own (tests/support/private_cgroup.hpp), for the
/// cases whose oracle is a sweep of the cgroup they run in: its end-of-case checks run
/// before the cgroup goes.
struct isolated_process_fixture : test_support::private_cgroup, process_fixture {};

/// Both containment policies, for tests that must hold under each.
inline const agentctl::containment_policy both_policies[] = {
    agentctl::containment_policy::automatic, agentctl::containment_policy::process_group_only};

}  // namespace exec_test
