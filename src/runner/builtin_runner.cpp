// The built-in runner: the strict preflight once per run, then one launch per attempt (two
// for extension.process) through the host or the container launcher.
#include "runner/builtin_runner.hpp"

#include "runner/container/client.hpp"
#include "runner/extension.hpp"
#include "runner/launcher.hpp"
#include "engine/post_result.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <memory>

namespace asio = boost::asio;

namespace agentctl {

void task_runner::async_prepare(asio::any_io_executor ex,
                                asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

void task_runner::async_finish(asio::any_io_executor ex,
                               asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

namespace {

/// Hands a coroutine's value to `handler` on its executor; an exception becomes `on_error`.
template <typename Value, typename Handler, typename OnError>
auto deliver(asio::any_io_executor ex, Handler handler, OnError on_error) {
    return [ex, h = std::move(handler), on_error](std::exception_ptr e, Value v) mutable {
        if (e) v = on_error();
        auto hex = asio::get_associated_executor(h, ex);
        asio::dispatch(hex, [h = std::move(h), v = std::move(v)]() mutable { std::move(h)(std::move(v)); });
    };
}

// Every cancellation type reaches the launches (graceful or at once); an awaited operation
// reports it as a value, never as an exception.
asio::awaitable<void> accept_all_cancellation() {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    co_await asio::this_coro::throw_if_cancelled(false);
}

class builtin_runner final : public task_runner {
public:
    builtin_runner(asio::any_io_executor ex, const plan& p, const run_options& options, std::string run_id) {
        ctx_.ex = std::move(ex);
        ctx_.compiled = &p;
        ctx_.options = &options;
        ctx_.run_id = std::move(run_id);
        ctx_.actions.resize(p.actions.size());
        host_ = options.backend == backend_kind::slurm ? make_slurm_launcher(ctx_) : make_host_launcher(ctx_);
        container_ = make_container_launcher(ctx_);
    }

    void async_prepare(asio::any_io_executor,
                       asio::any_completion_handler<void(std::optional<task_error>)> handler) override {
        auto slot = asio::get_associated_cancellation_slot(handler);
        asio::co_spawn(ctx_.ex, prepare(),
                       asio::bind_cancellation_slot(
                           slot, deliver<std::optional<task_error>>(ctx_.ex, std::move(handler), [] {
                               return std::optional<task_error>(task_error{
                                   error_code::internal_error, "the preflight failed unexpectedly"});
                           })));
    }

    void async_run(const attempt_request& request,
                   asio::any_completion_handler<void(task_result)> handler) override {
        auto slot = asio::get_associated_cancellation_slot(handler);
        asio::co_spawn(
            ctx_.ex, attempt(request),
            asio::bind_cancellation_slot(
                slot, deliver<task_result>(ctx_.ex, std::move(handler), [] {
                    task_result r;
                    r.state = task_state::failed;
                    r.error = task_error{error_code::internal_error, "the attempt failed unexpectedly"};
                    return r;
                })));
    }

    // The run's leftover containers and Slurm jobs are swept before the run reports.
    void async_finish(asio::any_io_executor,
                      asio::any_completion_handler<void(std::optional<task_error>)> handler) override {
        asio::co_spawn(ctx_.ex, finish(), deliver<std::optional<task_error>>(ctx_.ex, std::move(handler), [] {
                           return std::optional<task_error>(task_error{
                               error_code::internal_error, "the run's cleanup failed unexpectedly"});
                       }));
    }

private:
    asio::awaitable<std::optional<task_error>> prepare() {
        co_await accept_all_cancellation();
        preflight_settings settings;
        settings.mode = preflight_mode::strict;
        settings.base_dir = ctx_.options->base_dir;
        settings.search_path = ctx_.options->search_path;
        settings.host_env = ctx_.options->host_env;
        settings.containment = ctx_.options->containment;
        settings.backend = ctx_.options->backend;
        settings.slurm = ctx_.options->slurm;
        preflight_result r = co_await run_preflight(*ctx_.compiled, settings);
        if (r.workspace) ctx_.workspace = std::move(*r.workspace);
        ctx_.actions = std::move(r.actions);
        ctx_.slurm = std::move(r.slurm);
        // Said before the first task starts (the events carry no task).
        if (ctx_.options->events)
            for (const auto& w : r.warnings) {
                run_event e;
                e.kind = run_event::kind_t::warning;
                e.warning = &w;
                ctx_.options->events->on_event(e);
            }
        if (r.error) co_return std::move(r.error);
        co_await remove_dead_owners_containers();
        co_return std::nullopt;
    }

    // What crashed runners left on the engines this run uses goes before anything starts.
    asio::awaitable<void> remove_dead_owners_containers() {
        std::vector<std::string> seen;
        for (const auto& a : ctx_.actions) {
            if (!a.container || std::find(seen.begin(), seen.end(), a.container->engine.path) != seen.end()) continue;
            seen.push_back(a.container->engine.path);
            auto env = container::client_environment(ctx_.options->host_env);
            auto removed = co_await container::remove_dead_owners_containers(a.container->engine, std::move(env));
            if (ctx_.options->leftovers)
                for (auto& c : removed.containers)
                    ctx_.options->leftovers->containers.push_back(std::move(c));
        }
    }

    // `request` outlives the attempt: the scheduler keeps it until the handler runs.
    asio::awaitable<task_result> attempt(const attempt_request& request) {
        co_await accept_all_cancellation();
        const action_spec& action = request.action();
        launcher& l = action.isolation == isolation_mode::container ? *container_ : *host_;
        if (action.kind == action_kind::extension_process) co_return co_await run_extension(ctx_, l, request);
        launch_request launch;
        launch.attempt = &request;
        launch_result r = co_await asio::async_initiate<decltype(asio::use_awaitable), void(launch_result)>(
            [&l](auto handler, const launch_request* lr) { l.async_launch(*lr, std::move(handler)); },
            asio::use_awaitable, &launch);
        const plan_task& task = request.task();
        co_return to_task_result(std::move(r), ctx_.environment_of(task.action_index), task.timeout_ms,
                                 /*streams_once=*/true);
    }

    // Every launcher finishes, whatever the others said; the first error fails the run.
    asio::awaitable<std::optional<task_error>> finish() {
        std::optional<task_error> first;
        // A named array: GCC 12 trips over a braced list's backing array inside a coroutine.
        std::array<launcher*, 2> launchers{host_.get(), container_.get()};
        for (launcher* l : launchers) {
            auto error =
                co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::optional<task_error>)>(
                    [l](auto handler) { l->async_finish(std::move(handler)); }, asio::use_awaitable);
            if (error && !first) first = std::move(error);
        }
        co_return first;
    }

    launch_context ctx_;
    std::unique_ptr<launcher> host_;
    std::unique_ptr<launcher> container_;
};

}  // namespace

std::unique_ptr<task_runner> make_builtin_runner(asio::any_io_executor ex, const plan& p,
                                                 const run_options& options, std::string run_id) {
    return std::make_unique<builtin_runner>(std::move(ex), p, options, std::move(run_id));
}

}  // namespace agentctl
