// One launch whose program is a client of something else (a container engine's `run`, `srun`):
// the client's end, the task's timeout and the caller's cancellation, and how the launch
// coroutine waits for any of them. The container and Slurm launchers end the program through
// its engine or controller while the client still runs, so they watch all three at once.
#pragma once

#include <agentctl/process_types.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace agentctl {

class launch_control : public std::enable_shared_from_this<launch_control> {
public:
    using clock = std::chrono::steady_clock;

    /// For the calling launch coroutine: its executor and its cancellation state.
    static boost::asio::awaitable<std::shared_ptr<launch_control>> create();

    launch_control(boost::asio::any_io_executor ex, boost::asio::cancellation_state cancel);

    /// Runs the client with a cancellation of its own (the caller's does not reach it: the
    /// launch ends the program through the engine first, and kills the client only after)
    /// and the task's `timeout` from now; returns once the client has ended, the timeout has
    /// passed or the caller has cancelled, whichever comes first.
    boost::asio::awaitable<void> run_client(process_request request, std::chrono::milliseconds timeout);
    /// Kills the client at once.
    void kill_client() { client_cancel_.emit(boost::asio::cancellation_type::terminal); }

    /// The client's result once it has ended, and when.
    std::optional<process_result>& client() { return client_; }
    clock::time_point client_done_at() const { return client_done_at_; }
    bool timed_out() const { return timed_out_; }
    bool cancelled() const { return cancel_.cancelled() != boost::asio::cancellation_type::none; }
    bool terminal() const {
        return (cancel_.cancelled() & boost::asio::cancellation_type::terminal) !=
               boost::asio::cancellation_type::none;
    }
    bool stopping() const { return timed_out_ || cancelled(); }
    /// What ended a launch whose client still ran, for messages.
    const char* stopped_by() const { return timed_out_ ? "the timeout" : "cancellation"; }

    /// Until something happens (the client ends, the deadline passes, the caller cancels,
    /// notify()) or `bound` passes. Single-threaded: every event sets its flag before it
    /// wakes the waiter, and flags are read before each wait, so no wake-up is lost.
    boost::asio::awaitable<void> wait(std::optional<clock::duration> bound = std::nullopt);
    void notify() { wake_.cancel(); }

private:
    boost::asio::any_io_executor ex_;
    boost::asio::cancellation_state cancel_;
    boost::asio::steady_timer wake_;
    boost::asio::steady_timer deadline_;
    boost::asio::cancellation_signal client_cancel_;
    std::optional<process_result> client_;
    clock::time_point client_done_at_ = clock::time_point::max();
    bool timed_out_ = false;
};

}  // namespace agentctl
