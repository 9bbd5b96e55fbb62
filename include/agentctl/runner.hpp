// The interface between the scheduler and whatever runs one task attempt.
//
// The engine renders a task, then hands one attempt to a task_runner. The built-in runner
// (src/runner) spawns a host process, a container or a Slurm job; tests use a fake. Results
// are data: a task that exits non-zero is a result, not an error.
#pragma once

#include <agentctl/attempt.hpp>
#include <agentctl/error.hpp>
#include <agentctl/task_result.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <optional>

namespace agentctl {

/// Runs attempts. Implementations are used from one executor (one thread) at a time.
///
/// The public functions take any completion token (a callback, `use_awaitable`, ...); each
/// hands a type-erased handler to a private virtual that implementations override (Asio's
/// type_erasure/line_reader.hpp shape): compiled once, callable with every token.
class task_runner {
public:
    virtual ~task_runner() = default;

    /// Called once before the first attempt of a run: checks and resolves what every attempt
    /// will need (workspace, secrets, container engines and images). A failure stops the run
    /// before any task starts. Completion signature: void(std::optional<task_error>).
    /// Cancellation through the token's slot stops the checks. The default completes with no
    /// error. `ex` is the run's executor.
    template <typename Token>
    auto async_prepare(boost::asio::any_io_executor ex, Token&& token) {
        return boost::asio::async_initiate<Token, void(std::optional<task_error>)>(initiate_prepare{}, token,
                                                                                   this, std::move(ex));
    }

    /// Runs one attempt; `request` must outlive the operation. Completion signature:
    /// void(task_result). Cancellation through the token's slot: terminal kills at once;
    /// partial/total terminate gracefully; either way the result is `cancelled` with the
    /// output captured so far.
    template <typename Token>
    auto async_run(const attempt_request& request, Token&& token) {
        return boost::asio::async_initiate<Token, void(task_result)>(initiate_run{}, token, this, &request);
    }

    /// Called once when a run ends, after its last attempt completed (also when prepare
    /// failed or the run was cancelled): finishes what attempts left for later, such as
    /// stopped containers awaiting removal, and checks that nothing the run created is left.
    /// Completion signature: void(std::optional<task_error>); an error fails the run. Not
    /// cancellable. The default completes with no error. `ex` is the run's executor.
    template <typename Token>
    auto async_finish(boost::asio::any_io_executor ex, Token&& token) {
        return boost::asio::async_initiate<Token, void(std::optional<task_error>)>(initiate_finish{}, token,
                                                                                   this, std::move(ex));
    }

    /// Called once after a successful prepare with the run's job count: how many attempts
    /// beyond `jobs` the scheduler may hand over at once, because the runner itself keeps at
    /// most `jobs` of them running and holds the others queued until one ends (allocation
    /// workers, docs/WORKER.md, "Pipelining"). An attempt reports its start (on_started)
    /// only when it leaves that queue. The default, 0, is what every local backend needs.
    virtual int dispatch_ahead(int jobs);

private:
    // What implementations override. The handler is called exactly once, never from inside
    // the call.
    virtual void async_prepare_impl(
        boost::asio::any_io_executor ex,
        boost::asio::any_completion_handler<void(std::optional<task_error>)> handler);
    virtual void async_run_impl(const attempt_request& request,
                                boost::asio::any_completion_handler<void(task_result)> handler) = 0;
    virtual void async_finish_impl(
        boost::asio::any_io_executor ex,
        boost::asio::any_completion_handler<void(std::optional<task_error>)> handler);

    struct initiate_prepare {
        template <typename Handler>
        void operator()(Handler&& handler, task_runner* self, boost::asio::any_io_executor ex) const {
            self->async_prepare_impl(std::move(ex), std::forward<Handler>(handler));
        }
    };
    struct initiate_run {
        template <typename Handler>
        void operator()(Handler&& handler, task_runner* self, const attempt_request* request) const {
            self->async_run_impl(*request, std::forward<Handler>(handler));
        }
    };
    struct initiate_finish {
        template <typename Handler>
        void operator()(Handler&& handler, task_runner* self, boost::asio::any_io_executor ex) const {
            self->async_finish_impl(std::move(ex), std::forward<Handler>(handler));
        }
    };
};

}  // namespace agentctl
