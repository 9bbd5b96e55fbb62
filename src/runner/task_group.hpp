// Owned children (the shape of Beast's task_group, server-flex-awaitable): each child
// coroutine runs with a cancellation slot of its own; emit() reaches every child still
// running; wait() returns once a child has finished (its result queued for take()) or wake()
// was called. Nothing is detached: the owner awaits every child before it goes.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

namespace agentctl {

template <typename Result>
class task_group {
public:
    /// A child that has finished: its id, and its result or what it threw.
    struct finished {
        std::uint32_t id = 0;
        Result result;
        std::exception_ptr error;
    };

    explicit task_group(boost::asio::any_io_executor ex) : ex_(ex), wake_(ex) {}

    /// Starts `child` as child `id` (one child per id at a time). `owner` is kept alive until
    /// the child has finished: whatever the child refers to.
    void spawn(std::uint32_t id, boost::asio::awaitable<Result> child, std::shared_ptr<void> owner) {
        auto& signal =
            *signals_.emplace(id, std::make_unique<boost::asio::cancellation_signal>()).first->second;
        boost::asio::co_spawn(
            ex_, std::move(child),
            boost::asio::bind_cancellation_slot(
                signal.slot(), [this, id, owner = std::move(owner)](std::exception_ptr e, Result r) {
                    done_.emplace_back(id, std::move(r), e);
                    wake();
                }));
    }

    /// Cancels every running child with `type`.
    void emit(boost::asio::cancellation_type type) {
        for (auto& [id, signal] : signals_) signal->emit(type);
    }

    /// Cancels child `id` alone with `type`, if it is running.
    void emit_one(std::uint32_t id, boost::asio::cancellation_type type) {
        if (auto it = signals_.find(id); it != signals_.end()) it->second->emit(type);
    }

    /// Children started and not yet taken.
    std::size_t size() const { return signals_.size(); }
    bool has_finished() const { return !done_.empty(); }

    /// The next finished child; its slot goes with it.
    finished take() {
        finished f = std::move(done_.front());
        pop_finished();
        return f;
    }

    /// The next finished child, its slot gone already (it counts no more in size()), left in
    /// place until pop_finished(): a large Result is not moved out to be read.
    finished& next_finished() {
        signals_.erase(done_.front().id);
        return done_.front();
    }
    void pop_finished() {
        signals_.erase(done_.front().id);
        done_.pop_front();
    }

    /// Until a child finishes or wake() is called, at most `bound` (none: no bound). Returns at
    /// once when a finished child is waiting.
    boost::asio::awaitable<void> wait(
        std::optional<std::chrono::steady_clock::duration> bound = std::nullopt) {
        if (has_finished()) co_return;
        if (bound)
            wake_.expires_after(*bound);
        else
            wake_.expires_at(std::chrono::steady_clock::time_point::max());
        co_await wake_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    }

    /// Ends a wait(): something else changed (a cancellation of the run, a journal failure).
    void wake() { wake_.cancel(); }

private:
    boost::asio::any_io_executor ex_;
    boost::asio::steady_timer wake_;
    std::unordered_map<std::uint32_t, std::unique_ptr<boost::asio::cancellation_signal>> signals_;
    std::deque<finished> done_;
};

}  // namespace agentctl
