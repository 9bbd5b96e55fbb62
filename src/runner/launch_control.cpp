#include "runner/launch_control.hpp"

#include <agentctl/process.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace agentctl {

asio::awaitable<std::shared_ptr<launch_control>> launch_control::create() {
    auto ex = co_await asio::this_coro::executor;
    asio::cancellation_state cancel = co_await asio::this_coro::cancellation_state;
    co_return std::make_shared<launch_control>(std::move(ex), cancel);
}

launch_control::launch_control(asio::any_io_executor ex, asio::cancellation_state cancel)
    : ex_(ex), cancel_(cancel), wake_(ex), deadline_(ex) {}

asio::awaitable<void> launch_control::run_client(process_request request, std::chrono::milliseconds timeout) {
    async_run_process(
        ex_, std::move(request),
        asio::bind_cancellation_slot(client_cancel_.slot(), [self = shared_from_this()](process_result r) {
            self->client_ = std::move(r);
            self->client_done_at_ = clock::now();
            self->notify();
        }));
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec) return;
        self->timed_out_ = true;
        self->notify();
    });
    while (!client_ && !stopping()) co_await wait();
    deadline_.cancel();
}

asio::awaitable<void> launch_control::wait(std::optional<clock::duration> bound) {
    if (bound)
        wake_.expires_after(*bound);
    else
        wake_.expires_at(clock::time_point::max());
    // The coroutine's cancellation ends this wait too: the caller's cancellation is an event.
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace agentctl
