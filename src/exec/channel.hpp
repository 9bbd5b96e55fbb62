// A program that stays running with a byte stream each way on its stdin and stdout: the
// allocation worker's step (`srun ... agentctl worker`, docs/WORKER.md), or `agentctl worker`
// itself. Not a task: no caps, no timeout; the caller frames the bytes and decides when it
// ends. Its stderr is kept as a bounded tail for messages.
#pragma once

#include <agentctl/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl::exec {

/// What to start: exactly this, with exactly `env`, in agentctl's working directory.
struct channel_command {
    std::string executable;  ///< absolute path
    std::vector<std::string> argv;
    std::vector<std::string> env;
};

/// How the program ended.
struct channel_end {
    std::optional<int> exit_code;
    std::optional<int> signal;
};

/// One running program and its two streams. Used from one executor (thread) at a time.
class channel {
public:
    /// Starts the program now on `ex`: leader of a new session (its own process group), no
    /// other descriptor of ours, default signal dispositions; the watchdog is told of its
    /// group as of a task's. The error (spawn_error, resource_exhausted) says why.
    static expected<std::unique_ptr<channel>> start(boost::asio::any_io_executor ex,
                                                    const channel_command& command);
    /// Kills the program's group with SIGKILL if it is still there, and reaps it.
    ~channel();
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;

    /// The next bytes of its stdout (at least one); empty at the end of the stream or after
    /// a read error. One read at a time. Cancellation (any type): completes with what is
    /// there, possibly nothing.
    boost::asio::awaitable<std::string> read_some();
    /// Queues `bytes` for its stdin; written in order, never interleaved. After a write
    /// error (the program closed its stdin) everything is dropped and write_failed() is set.
    void send(std::string bytes);
    bool write_failed() const;
    /// Closes its stdin once what is queued is written.
    void close_input();
    /// SIGKILL to its process group (what it started on this host goes with it).
    void kill();
    /// Leaves the program to end by itself, unreaped, to the watchdog that was told of its
    /// group (exec_service's observer), which waits for its end after our clean exit and kills
    /// its group after a bound (docs/CRASH_SAFETY.md, docs/WORKER.md "The end of a run"). Our
    /// ends of its pipes are closed (a pending read_some() ends empty); the destructor does not
    /// kill it; once it has ended, the next channel's start (or leave) reaps it. False, and
    /// nothing changed, without such a watchdog.
    bool leave_running();
    /// Until it has exited (then reaped), at most `bound`: nothing when it still runs.
    boost::asio::awaitable<std::optional<channel_end>> wait_exit(std::chrono::milliseconds bound);
    /// The last bytes of its stderr (at most 16 KiB).
    std::string stderr_tail() const;
    int pid() const;

private:
    struct impl;
    explicit channel(std::shared_ptr<impl> i);
    std::shared_ptr<impl> impl_;
};

}  // namespace agentctl::exec
