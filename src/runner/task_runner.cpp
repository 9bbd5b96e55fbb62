// The defaults of the public task_runner: a runner that needs no preparation and leaves nothing.
#include <agentctl/runner.hpp>

#include "runner/completion.hpp"

namespace asio = boost::asio;

namespace agentctl {

void task_runner::async_prepare_impl(asio::any_io_executor ex,
                                     asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

int task_runner::dispatch_ahead(int) {
    return 0;
}

void task_runner::async_finish_impl(asio::any_io_executor ex,
                                    asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

}  // namespace agentctl
