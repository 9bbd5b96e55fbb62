// The built-in runner: the strict preflight once per run, then one launch per attempt (two
// for extension.process) through the host, the Slurm or the container launcher.
#include "runner/builtin_runner.hpp"

#include "runner/completion.hpp"
#include "runner/container/launcher.hpp"
#include "runner/extension.hpp"
#include "runner/file_actions.hpp"
#include "runner/host/launcher.hpp"
#include "runner/preflight.hpp"
#include "runner/slurm/launcher.hpp"
#include "runner/task_group.hpp"

#include <agentctl/events.hpp>

#include <boost/json/object.hpp>

#include <array>

namespace asio = boost::asio;

namespace agentctl {

namespace {

// A process task under `run --check`: the reference's prediction, nothing run.
task_result requires_execution() {
    task_result r;
    r.state = task_state::succeeded;
    r.output = boost::json::object{
        {"status", "requires_execution"}, {"changed", false}, {"predictability", "requires_execution"}};
    return r;
}

task_result backend_not_checked() {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{error_code::backend_unavailable,
                         "the backend was not checked before the run; nothing was run"};
    return r;
}

}  // namespace

struct builtin_runner::state {
    explicit state(asio::any_io_executor ex) : children(ex) { ctx.ex = std::move(ex); }

    launch_context ctx;
    event_sink* events = nullptr;
    std::vector<swept_container> leftovers;
    // Made by a preflight that passed: host or Slurm (isolation: process), and container.
    std::unique_ptr<launcher> process;
    std::unique_ptr<launcher> container;
    // Allocation workers started during the preflight, until the preflight's end takes them:
    // their start() is the child early_workers of `children`.
    std::unique_ptr<starting_workers> starting;
    // The coroutines the runner starts itself, each awaited before the run ends (finish()).
    static constexpr std::uint32_t early_workers = 0;
    task_group<std::optional<task_error>> children;
    artifact_ledger artifacts;

    asio::awaitable<std::optional<task_error>> prepare() {
        co_await accept_all_cancellation();
        preflight_settings settings{ctx.settings, preflight_mode::strict, {}, {}};
        // Inside an allocation the worker steps start as soon as the Slurm commands are found,
        // while the preflight goes on (`scontrol ping` included): an srun step takes tens of
        // milliseconds (docs/WORKER.md, "Starting early"). A preflight that fails leaves them to
        // finish(), which stops them; a controller that does not answer stops them at once.
        settings.on_slurm_tools_found = [this](const slurm::tools& tools) {
            starting = allocation_workers_to_start(ctx, tools);
            if (starting) children.spawn(early_workers, starting->start(), nullptr);
            return starting != nullptr;
        };
        settings.on_slurm_controller_down = [this] {
            if (starting) starting->abandon("the controller did not answer scontrol ping");
        };
        preflight_result r = co_await run_preflight(*ctx.compiled, settings);
        if (r.workspace) ctx.workspace = std::move(*r.workspace);
        ctx.actions = std::move(r.actions);
        // Said before the first task starts (the events carry no task).
        if (events)
            for (const auto& w : r.warnings) {
                run_event e;
                e.kind = run_event::kind_t::warning;
                e.warning = &w;
                events->on_event(e);
            }
        if (r.error) co_return std::move(r.error);
        // What crashed runners left on the engines this run uses goes before anything starts.
        leftovers = co_await container::remove_dead_owners(r.containers, ctx.settings.host_env);
        // Without its tools the Slurm backend was not checked (the run was cancelled during the
        // checks): nothing starts then.
        if (ctx.settings.backend != backend_kind::slurm) {
            process = make_host_launcher(ctx);
        } else if (r.slurm && starting) {
            // Started during the preflight, for exactly the case in which start_slurm_launcher
            // would start workers: no task starts until every one said welcome.
            auto workers = std::move(starting);
            // On an error every worker started was stopped.
            if (auto failed = co_await early_workers_started()) co_return failed;
            process = workers->take();
        } else if (r.slurm) {
            auto made = co_await start_slurm_launcher(ctx, std::move(*r.slurm));
            if (!made) co_return made.error();
            process = std::move(*made);
        }
        container = make_container_launcher(ctx, std::move(r.containers));
        co_return std::nullopt;
    }

    // Until the early workers' start has ended: nothing when every worker said welcome.
    asio::awaitable<std::optional<task_error>> early_workers_started() {
        while (!children.has_finished()) co_await children.wait();
        auto done = children.take();
        if (done.error)
            co_return task_error{error_code::internal_error, "the workers' start failed unexpectedly"};
        co_return std::move(done.result);
    }

    // `request` and `out` outlive the attempt: the scheduler keeps them until it ends. Not a
    // coroutine: the awaitable is the one of the branch taken, so an in-flight process holds
    // only launched()'s frame, not room for every branch's results (docs/DESIGN.md, "What an
    // in-flight task holds"). What throws here, throws where the attempt is awaited.
    asio::awaitable<void> attempt(const attempt_request& request, task_result& out) {
        const action_spec& action = request.action();
        if (action.kind == action_kind::read) {
            out = run_read(ctx, request);
            return settled();
        }
        if (action.kind == action_kind::write) {
            out = run_write(ctx, request, artifacts);
            return settled();
        }
        if (ctx.settings.check) {
            out = requires_execution();
            return settled();
        }
        launcher* l = action.isolation == isolation_mode::container ? container.get() : process.get();
        if (!l) {
            out = backend_not_checked();
            return settled();
        }
        if (action.kind == action_kind::extension_process) return extension_attempt(*l, request, out);
        return launched(*l, request, out);
    }

    static asio::awaitable<void> settled() { co_return; }

    asio::awaitable<void> launched(launcher& l, const attempt_request& request, task_result& out) {
        launch_request launch;
        launch.attempt = &request;
        launch_result r;
        co_await l.launch(launch, r);
        const plan_task& task = request.task();
        out = to_task_result(std::move(r), ctx.environment_of(task.action_index), task.timeout_ms,
                             /*streams_once=*/true);
    }

    asio::awaitable<void> extension_attempt(launcher& l, const attempt_request& request, task_result& out) {
        out = co_await run_extension(ctx, l, request);
    }

    // Through async_run(): a coroutine of its own, which must accept every cancellation type.
    asio::awaitable<task_result> spawned_attempt(const attempt_request& request) {
        co_await accept_all_cancellation();
        task_result out;
        co_await attempt(request, out);
        co_return out;
    }

    // Every launcher finishes, whatever the others said; the first error fails the run.
    asio::awaitable<std::optional<task_error>> finish() {
        std::optional<task_error> first;
        if (starting) {
            // The preflight failed, or the run was cancelled, while its workers started: they
            // received nothing but the hello; each is stopped as at the end of a run.
            auto abandoned = std::move(starting);
            if (!co_await early_workers_started()) {
                auto workers = abandoned->take();
                co_await workers->finish();
            }
        }
        // A named array: GCC 12 trips over a braced list's backing array inside a coroutine.
        std::array<launcher*, 2> launchers{process.get(), container.get()};
        for (launcher* l : launchers) {
            if (!l) continue;  // the preflight did not pass: nothing was launched
            auto error = co_await l->finish();
            if (error && !first) first = std::move(error);
        }
        co_return first;
    }
};

builtin_runner::builtin_runner(asio::any_io_executor ex, const plan& p, runner_settings settings,
                               event_sink* events, watchdog* watch)
    : state_(std::make_unique<state>(std::move(ex))) {
    state_->ctx.compiled = &p;
    state_->ctx.settings = std::move(settings);
    state_->ctx.watch = watch;
    state_->ctx.actions.resize(p.actions.size());
    state_->events = events;
    state_->ctx.events = events;
}

builtin_runner::~builtin_runner() = default;

std::vector<swept_container> builtin_runner::take_leftovers() {
    return std::move(state_->leftovers);
}

void builtin_runner::async_prepare_impl(
    asio::any_io_executor, asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    complete_with(state_->ctx.ex, state_->prepare(), std::move(handler), [] {
        return std::optional<task_error>(
            task_error{error_code::internal_error, "the preflight failed unexpectedly"});
    });
}

task_result builtin_runner::attempt_failed_unexpectedly() {
    task_result r;
    r.state = task_state::failed;
    r.error = task_error{error_code::internal_error, "the attempt failed unexpectedly"};
    return r;
}

void builtin_runner::async_run_impl(const attempt_request& request,
                                    asio::any_completion_handler<void(task_result)> handler) {
    complete_with(state_->ctx.ex, state_->spawned_attempt(request), std::move(handler),
                  attempt_failed_unexpectedly);
}

asio::awaitable<void> builtin_runner::attempt(const attempt_request& request, task_result& out) {
    return state_->attempt(request, out);
}

int builtin_runner::dispatch_ahead(int jobs) {
    return state_->process ? state_->process->dispatch_ahead(jobs) : 0;
}

// The run's leftover containers and Slurm jobs are swept before the run reports.
void builtin_runner::async_finish_impl(
    asio::any_io_executor, asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    complete_with(
        state_->ctx.ex, state_->finish(), std::move(handler),
        [] {
            return std::optional<task_error>(
                task_error{error_code::internal_error, "the run's cleanup failed unexpectedly"});
        },
        /*cancellable=*/false);
}

}  // namespace agentctl
