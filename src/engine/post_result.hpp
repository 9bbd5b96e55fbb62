// Completing a type-erased handler on its own executor: later, never inline from the
// initiating call (post_result), or from a completion already past it (dispatch_result).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <utility>

namespace agentctl {

/// Posts to `io`, then dispatches `handler(value)` on the handler's associated executor.
/// (Asio 1.81 cannot post straight to an any_completion_executor.)
template <typename Handler, typename Value>
void post_result(const boost::asio::any_io_executor& io, Handler handler, Value value) {
    boost::asio::post(io, [io, h = std::move(handler), v = std::move(value)]() mutable {
        auto ex = boost::asio::get_associated_executor(h, io);
        boost::asio::dispatch(ex,
                              [h = std::move(h), v = std::move(v)]() mutable { std::move(h)(std::move(v)); });
    });
}

/// Dispatches `handler(value)` on the handler's associated executor: for a completion that
/// already runs apart from the initiating call, such as co_spawn's.
template <typename Handler, typename Value>
void dispatch_result(Handler handler, Value value) {
    auto ex = boost::asio::get_associated_executor(handler);
    boost::asio::dispatch(
        ex, [h = std::move(handler), v = std::move(value)]() mutable { std::move(h)(std::move(v)); });
}

}  // namespace agentctl
