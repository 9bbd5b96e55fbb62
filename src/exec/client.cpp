#include "exec/client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace agentctl::exec {

asio::awaitable<process_result> call_client(client_call call, bool cancellable) {
    process_request req;
    req.executable = call.executable;
    req.argv.reserve(call.args.size() + 1);
    req.argv.push_back(std::move(call.executable));
    for (auto& a : call.args) req.argv.push_back(std::move(a));
    req.env = std::move(call.env);
    req.stdout_limit = call.output_limit;
    req.stderr_limit = call.output_limit;
    req.combined_limit = 2 * call.output_limit;
    req.timeout = call.timeout;
    req.containment = containment_policy::process_group_only;
    auto ex = co_await asio::this_coro::executor;
    if (cancellable) co_return co_await async_run_process(ex, std::move(req), asio::use_awaitable);
    // An unconnected slot: the coroutine's cancellation does not reach this call.
    co_return co_await async_run_process(
        ex, std::move(req), asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

}  // namespace agentctl::exec
