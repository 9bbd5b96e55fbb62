// The runner used when the application gives none: host processes, containers and Slurm jobs.
#pragma once

#include "runner/settings.hpp"

#include <agentctl/runner.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <vector>

namespace agentctl {

class event_sink;

/// The strict preflight once per run (async_prepare), then one launch per attempt (two for
/// extension.process) through the action's launcher: host/ or slurm/ for isolation: process
/// (by `settings.backend`), container/ for isolation: container. Lives as long as the run.
class builtin_runner final : public task_runner {
public:
    /// `events`: told the preflight's warnings (may be null). `watch`: told of every engine
    /// client and Slurm job used (may be null).
    builtin_runner(boost::asio::any_io_executor ex, const plan& p, runner_settings settings,
                   event_sink* events, watchdog* watch);
    ~builtin_runner() override;

    /// Containers that dead owners left on the engines this run uses, removed by the prepare.
    std::vector<swept_container> take_leftovers();

    int dispatch_ahead(int jobs) override;

    /// One attempt, for the scheduler that made this runner: what async_run() does, without
    /// its type-erased handler, its co_spawn and its dispatch, through which the result went
    /// by several moves (docs/DESIGN.md, "Where a task's time goes"). Awaited inside the
    /// attempt's coroutine, which accepts every cancellation type already: it shares that
    /// coroutine's cancellation state. It may throw: the caller completes the attempt with
    /// attempt_failed_unexpectedly() then, as async_run() does. The result goes into `out`,
    /// which outlives the attempt (docs/DESIGN.md, "What an in-flight task holds").
    boost::asio::awaitable<void> attempt(const attempt_request& request, task_result& out);
    static task_result attempt_failed_unexpectedly();

private:
    void async_prepare_impl(
        boost::asio::any_io_executor ex,
        boost::asio::any_completion_handler<void(std::optional<task_error>)> handler) override;
    void async_run_impl(const attempt_request& request,
                        boost::asio::any_completion_handler<void(task_result)> handler) override;
    void async_finish_impl(
        boost::asio::any_io_executor ex,
        boost::asio::any_completion_handler<void(std::optional<task_error>)> handler) override;

    struct state;
    std::unique_ptr<state> state_;
};

}  // namespace agentctl
