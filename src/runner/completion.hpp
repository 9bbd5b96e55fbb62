// Completing the type-erased handlers of the public interfaces (task_runner, async_doctor, the
// leftover sweeps) from the coroutines that implement them: one bridge, used by each.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <exception>
#include <utility>

namespace agentctl {

/// Dispatches `handler(value)` on the handler's associated executor (default `io`).
template <typename Handler, typename Value>
void dispatch_result(const boost::asio::any_io_executor& io, Handler handler, Value value) {
    auto ex = boost::asio::get_associated_executor(handler, io);
    boost::asio::dispatch(
        ex, [h = std::move(handler), v = std::move(value)]() mutable { std::move(h)(std::move(v)); });
}

/// Completes `handler(value)` later, never inline from the initiating call: posted to `io`,
/// then dispatched to the handler's executor (Asio 1.81 cannot post straight to an
/// any_completion_executor).
template <typename Handler, typename Value>
void post_result(const boost::asio::any_io_executor& io, Handler handler, Value value) {
    boost::asio::post(io, [io, h = std::move(handler), v = std::move(value)]() mutable {
        dispatch_result(io, std::move(h), std::move(v));
    });
}

/// Runs `task` on `ex` and completes `handler` with its value. When `cancellable`, the
/// handler's cancellation slot reaches the coroutine (which accepts every type:
/// accept_all_cancellation()). An exception completes it with `on_exception()`. The coroutine
/// is owned by the operation: it ends before the handler runs.
template <typename T, typename OnException>
void complete_with(boost::asio::any_io_executor ex, boost::asio::awaitable<T> task,
                   boost::asio::any_completion_handler<void(T)> handler, OnException on_exception,
                   bool cancellable = true) {
    auto slot = cancellable ? boost::asio::get_associated_cancellation_slot(handler)
                            : boost::asio::cancellation_slot();
    boost::asio::co_spawn(
        ex, std::move(task),
        boost::asio::bind_cancellation_slot(
            slot, [ex, h = std::move(handler), on_exception](std::exception_ptr e, T value) mutable {
                if (e) value = on_exception();
                dispatch_result(ex, std::move(h), std::move(value));
            }));
}

/// The first step of a coroutine that implements a cancellable operation: every cancellation
/// type reaches what it awaits (graceful or at once), and an awaited operation reports it as a
/// value, never as an exception. (A spawned coroutine starts with a filter that lets only
/// terminal cancellation through: docs/DESIGN.md, "Boost 1.81 pitfalls".)
inline boost::asio::awaitable<void> accept_all_cancellation() {
    co_await boost::asio::this_coro::reset_cancellation_state(boost::asio::enable_total_cancellation());
    co_await boost::asio::this_coro::throw_if_cancelled(false);
}

}  // namespace agentctl
