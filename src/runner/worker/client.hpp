// The driver's end of one worker connection (docs/WORKER.md): starts the worker's program
// (`srun ... agentctl worker` on a node, or `agentctl worker` here), does the handshake, sends
// runs and cancels, and sorts the frames that come back by tag. One reader and one heartbeat
// ticker per connection, owned by it and awaited by close().
#pragma once

#include "exec/channel.hpp"
#include "worker_protocol/messages.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/string.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace agentctl::worker {

/// One run's frames as they arrive. Owned by the launch; registered with the client until its
/// result arrives, the connection is lost, or the launch forgets it.
struct pending_run {
    std::optional<worker_protocol::started_note> started;
    boost::json::string out, err;  ///< become the result's captured streams (moved)
    std::optional<worker_protocol::run_result> result;
    std::function<void()> notify;  ///< after every frame of this run, and when the connection is lost
};

class client : public std::enable_shared_from_this<client> {
public:
    /// `slots`: tasks at once on this worker; 0: the CPUs it reports in its welcome.
    client(boost::asio::any_io_executor ex, std::string label, std::uint32_t slots = 0);

    /// Starts `command`, sends `hello` and waits for the welcome at most `bound`. Nothing when
    /// connected; else why not (the program's stderr tail included), and the program is gone.
    boost::asio::awaitable<std::optional<std::string>> connect(exec::channel_command command,
                                                               worker_protocol::hello hello,
                                                               std::chrono::milliseconds bound);
    /// connect() in two steps: the program started now (nothing, or why not), then the
    /// handshake, so that the caller can prepare its hello while the program starts.
    std::optional<std::string> start(const exec::channel_command& command);
    boost::asio::awaitable<std::optional<std::string>> handshake(worker_protocol::hello hello,
                                                                 std::chrono::milliseconds bound);
    /// handshake() in two steps, so that several workers' hellos go out before any welcome is
    /// awaited: the hello sent now (nothing, or why not: the program is then gone), then the
    /// welcome awaited at most `bound`.
    std::optional<std::string> send_hello(worker_protocol::hello hello);
    boost::asio::awaitable<std::optional<std::string>> await_welcome(std::chrono::milliseconds bound);

    const std::string& label() const { return label_; }
    const worker_protocol::welcome& welcome() const { return welcome_; }
    /// Connected and not lost.
    bool usable() const { return connected_ && !lost_; }
    bool lost() const { return lost_; }
    /// Why the connection was lost.
    const std::string& lost_reason() const { return lost_reason_; }
    /// Runs it may be sent now: its slots, or its limit and the runs sent ahead of it, less
    /// the runs sent and not answered.
    std::uint32_t free_slots() const;
    /// The tasks it may run at once: the slots it was made with, else the CPUs it reported.
    std::uint32_t slots() const { return slots_ ? slots_ : welcome_.cpus; }
    /// Tells the worker to run at most `limit` tasks at once (a `slots` message) and lets
    /// `ahead` more runs wait in its queue (docs/WORKER.md, "Pipelining").
    void set_limit(std::uint32_t limit, std::uint32_t ahead);

    /// Sends a run; its frames go to `p` (which must stay registered until its result, the
    /// loss of the connection or forget()).
    void start_run(const worker_protocol::run_request& request, pending_run& p);
    void cancel(std::uint64_t tag, worker_protocol::cancel_kind kind);
    /// The launch no longer waits for `tag` (its slot stays taken until the result arrives).
    void forget(std::uint64_t tag);

    /// Ends the connection: the program is killed, every pending run is told.
    void lose(const std::string& why);

    /// Closes the worker's stdin (it exits once its tasks are done, killing any still running)
    /// and waits until it has exited, at most `bound`, then kills it. Awaits the reader and the
    /// ticker. Call once, before the client is dropped. With `leave_step_end`, returns at the
    /// worker's `bye` (every task of it reaped) and leaves its program's last milliseconds (srun
    /// and the step's end) to the watchdog, where the executor has one (docs/WORKER.md, "The
    /// end of a run").
    boost::asio::awaitable<void> close(std::chrono::milliseconds bound, bool leave_step_end = false);
    /// close()'s first step alone, so that several workers end side by side: their stdin
    /// closed now, their end awaited by close().
    void close_input();

private:
    boost::asio::awaitable<void> reader();
    boost::asio::awaitable<void> ticker();
    void handle(const worker_protocol::frame& f);
    void protocol_failure(const worker_protocol::protocol_error& e);
    void send(std::string frame);
    void arm_nudge();
    void spawn_owned(boost::asio::awaitable<void> body);
    void wake() { wake_.cancel(); }

    boost::asio::any_io_executor ex_;
    std::string label_;
    std::uint32_t slots_ = 0;
    std::uint32_t limit_ = 0;  ///< from set_limit; 0: none sent, its slots bound what is sent
    std::uint32_t ahead_ = 0;
    std::unique_ptr<exec::channel> channel_;
    std::string digest_;
    worker_protocol::frame_decoder decoder_;
    worker_protocol::welcome welcome_;
    std::optional<std::string> refused_;
    bool connected_ = false;
    bool lost_ = false;
    bool closing_ = false;
    bool said_bye_ = false;  ///< the worker's last frame: nothing of it runs, it exits
    std::string lost_reason_;
    std::unordered_map<std::uint64_t, pending_run*> waiting_;  ///< runs whose launch waits
    std::unordered_set<std::uint64_t> running_;                ///< tags sent and not answered yet
    int owned_ = 0;                                            ///< reader and ticker still running
    worker_protocol::heartbeats<std::chrono::steady_clock::time_point, std::chrono::milliseconds> heartbeats_;
    pending_run orphan_;                    ///< where the frames of a forgotten run go
    boost::asio::steady_timer wake_;        ///< connect() and close() wait on it
    boost::asio::steady_timer tick_timer_;  ///< the ticker's
    boost::asio::steady_timer nudge_timer_;  ///< arm_nudge()'s
    bool nudge_armed_ = false;
};

}  // namespace agentctl::worker
