// isolation: container. Engine and image preflight before any effect, one engine client
// (`docker run` / `podman run`) per launch, termination and cleanup through the engine, and a
// sweep of the run's containers when it ends. Decisions: docs/DESIGN.md, "Containers".
#include "runner/container/launcher.hpp"

#include "exec/client.hpp"
#include "exec/host.hpp"
#include "exec/redactor.hpp"
#include "runner/container/client.hpp"
#include "runner/launch_control.hpp"
#include "spec/engine_variables.hpp"

#include <agentctl/watchdog.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl {
namespace {

using container::engine;

std::string alnum(std::string_view s, std::size_t max) {
    std::string out;
    for (char c : s) {
        if (out.size() == max) break;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) out.push_back(c);
    }
    return out;
}

// host:pid:start-time, so that a sweep can tell a dead owner from a live one (pid reuse).
std::string owner_identity() {
    return exec::host_name() + ":" + std::to_string(exec::own_pid()) + ":" +
           exec::process_start_time(exec::own_pid()).value_or("");
}

class container_launcher final : public launcher {
public:
    container_launcher(launch_context& ctx, std::vector<std::optional<container::choice>> choices)
        : launcher(ctx),
          choices_(std::move(choices)),
          instance_(exec::random_hex(8)),
          owner_(container::label_safe(owner_identity() + ":" + instance_)) {}

    asio::awaitable<void> launch(const launch_request& request, launch_result& out) override {
        auto ctl = co_await launch_control::create();
        out = co_await run(request, *ctl);
    }

    // The run is over: remove anything still labelled with this run and owner (a container an
    // engine created after its client was killed, or one --rm could not remove) and check that
    // nothing is left; then, on the same engines, the leftovers of crashed runners.
    asio::awaitable<std::optional<task_error>> finish() override {
        using namespace asio::experimental::awaitable_operators;
        std::string problems;
        auto mine = container::parse_owner_label(owner_);
        for (auto& es : engines_) {
            if (!es.used) continue;
            auto env = engine_env();
            std::vector<std::string> ours =
                container::run_list_argv(container::label_safe(ctx_.settings.run_id), owner_);
            // Ours (filtered by the engine, so bounded however busy the host is) and every
            // owned one (for dead owners' leftovers), side by side: the run ends sooner.
            auto [own, owned] = co_await (container::call(es.eng, ours, env) &&
                                          container::call(es.eng, container::owned_list_argv(es.eng), env));
            std::vector<std::string> left;
            if (!listed(own, es.eng, problems, left)) continue;
            // Dead owners' leftovers are best effort (the next run tries again), and only when
            // our own start time is known, so that we can judge others'.
            std::vector<std::string> remove = left;
            if (mine && owned.outcome == process_outcome::exited && owned.exit_code == 0) {
                auto dead = container::dead_owner_containers(owned.stdout_bytes, mine->host,
                                                             exec::process_start_time);
                remove.insert(remove.end(), dead.begin(), dead.end());
            }
            if (!remove.empty())
                co_await container::call(es.eng, container::remove_argv(es.eng, remove), env);
            if (left.empty()) continue;
            process_result again = co_await container::call(es.eng, ours, env);
            if (!listed(again, es.eng, problems, left) || left.empty()) continue;
            problems += (problems.empty() ? "" : "; ") + es.eng.name + " still has";
            for (const auto& n : left) problems += " " + n;
        }
        if (problems.empty()) co_return std::nullopt;
        co_return task_error{error_code::container_cleanup_failed,
                             "containers of this run could not be removed: " + problems};
    }

private:
    /// An engine this run uses.
    struct engine_state {
        engine eng;
        bool used = false;  ///< a container may have been created through it
    };

    std::size_t engine_index(const engine& e) {
        for (std::size_t i = 0; i < engines_.size(); ++i)
            if (engines_[i].eng.path == e.path) return i;
        engines_.push_back(engine_state{e, false});
        return engines_.size() - 1;
    }

    std::vector<std::string> engine_env() const {
        return container::client_environment(ctx_.settings.host_env);
    }

    asio::awaitable<launch_result> run(const launch_request& request, launch_control& c) {
        const attempt_request& attempt = *request.attempt;
        const action_spec& action = attempt.action();
        const plan_task& task = attempt.task();
        launch_result out;
        out.isolation = "container";
        out.containment = "engine";
        out.process.outcome = process_outcome::spawn_failed;
        auto fail = [&](error_code code, std::string message) {
            out.error = task_error{std::move(code), std::move(message)};
            return out;
        };

        const auto& choice = choices_[task.action_index];
        if (!choice)
            co_return fail(
                error_code::isolation_unavailable,
                "requested process isolation is unavailable: no container engine was checked for action \"" +
                    action.name + "\" before the run; nothing was run");
        engine eng = choice->engine;
        std::size_t ei = engine_index(eng);
        out.engine = eng.name;
        out.command = eng.path;

        // Fail closed before anything is created.
        if (auto refused = allowlist_refusal(ctx_, action)) co_return fail(refused->code, refused->message);
        auto cwd = open_working_directory(ctx_, attempt.cwd);  // open until the client has exited
        if (!cwd) co_return fail(cwd.error().code, cwd.error().message);
        const std::string& host_dir = cwd->path;
        if (!container::mount_source_field(host_dir))
            co_return fail(error_code::cwd_unavailable,
                           "the working directory " + host_dir +
                               " holds a control character, which the container engines cannot "
                               "take in a bind mount; rename it");

        const auto& env = ctx_.environment_of(task.action_index).entries;
        container::invocation settings;
        for (const auto& entry : env) {
            std::string name = entry.substr(0, entry.find('='));
            if (std::find(engine_client_variables.begin(), engine_client_variables.end(), name) !=
                engine_client_variables.end())
                co_return fail(
                    error_code::engine_variable_not_allowed,
                    name + " controls the container engine and cannot be set by a container action");
            settings.env_names.push_back(std::move(name));
        }
        settings.name = "agentctl-" + alnum(request.phase, 16) + "-" + alnum(ctx_.settings.run_id, 32) + "-" +
                        instance_ + "-" + std::to_string(++counter_);
        settings.labels = {"agentctl.run=" + container::label_safe(ctx_.settings.run_id),
                           "agentctl.owner=" + owner_,
                           "agentctl.task=" + container::label_safe(attempt.task_id)};
        settings.image_id = choice->image_id;
        settings.workspace = host_dir;
        settings.interactive = request.stdin_data.has_value();
        std::vector<std::string> args = attempt.args;
        args.insert(args.end(), request.extra_args.begin(), request.extra_args.end());

        if (c.stopping()) {  // cancelled before anything started
            out.process.outcome = process_outcome::cancelled;
            out.process.error_message = "cancelled before the container was created";
            co_return out;
        }

        process_request req;
        req.executable = eng.path;
        req.argv.push_back(eng.path);
        for (auto& a : container::run_argv(eng, action, settings, args)) req.argv.push_back(std::move(a));
        req.env = container::client_environment(ctx_.settings.host_env, env);
        req.cwd_fd = cwd->fd;
        req.cwd_display = host_dir;
        req.stdin_data = request.stdin_data;
        req.stdout_limit = task.limits.stdout_bytes;
        req.stderr_limit = task.limits.stderr_bytes;
        req.combined_limit = task.limits.combined_bytes;
        // A backstop only: the task's timeout is ours (below), so that the container is ended
        // through the engine while its client still runs.
        auto grace = std::chrono::seconds(ctx_.compiled->kill_grace_seconds);
        req.timeout = std::chrono::milliseconds(task.timeout_ms) + grace + 60s;
        req.drain_grace = ctx_.settings.drain_grace;
        req.containment = containment_policy::process_group_only;

        if (attempt.on_started) {  // the container's name is its handle, known before it exists
            attempt_started started;
            started.container = settings.name;
            started.container_engine = eng.name;
            attempt.on_started(started);
        }
        if (!engines_[ei].used && ctx_.watch)  // its containers die with us (crash safety)
            ctx_.watch->announce_engine({eng.name, eng.path, engine_env(), owner_});
        engines_[ei].used = true;
        auto started = std::chrono::system_clock::now();
        co_await c.run_client(std::move(req), std::chrono::milliseconds(task.timeout_ms));

        std::optional<std::string> cleanup_error;
        std::string after;
        if (!c.client()) {
            after = c.stopped_by();
            co_await terminate(c, ei, settings.name, grace);
            cleanup_error = co_await remove_now(ei, settings.name);
            out.process = std::move(*c.client());
            out.process.outcome = c.timed_out() ? process_outcome::timed_out : process_outcome::cancelled;
        } else {
            out.process = std::move(*c.client());
            switch (out.process.outcome) {
                case process_outcome::exited:
                    co_await settle(out, ei, settings.name, action, started,
                                    secret_matcher(ctx_.environment_of(task.action_index).secrets));
                    break;
                case process_outcome::spawn_failed:
                    out.error = task_error{error_code::isolation_unavailable,
                                           eng.name + " could not be started: " + out.process.error_message +
                                               "; nothing was run"};
                    break;
                default:  // output limit (or the backstop): the client was killed, the container may run
                    after = out.process.outcome == process_outcome::output_limit_exceeded ? "an output limit"
                                                                                          : "the timeout";
                    cleanup_error = co_await remove_now(ei, settings.name);
                    break;
            }
        }
        if (cleanup_error)
            out.error = task_error{
                error_code::container_cleanup_failed,
                "failed to clean up container " + settings.name + " after " + after + ": " + *cleanup_error};
        co_return out;
    }

    // Ends a container whose client still runs, through the engine: SIGTERM first when the
    // plan grants a grace, then `rm --force` until the client exits (a container still being
    // created appears meanwhile and is removed too); the client is killed only if that fails.
    asio::awaitable<void> terminate(launch_control& c, std::size_t ei, const std::string& name,
                                    std::chrono::seconds grace) {
        engine eng = engines_[ei].eng;
        auto env = engine_env();
        if (grace.count() > 0 && !c.terminal()) {
            std::vector<std::string> kill = {"kill", "--signal=SIGTERM", name};
            co_await container::call(eng, std::move(kill), env);
            auto until = std::chrono::steady_clock::now() + grace;
            while (!c.client() && !c.terminal() && std::chrono::steady_clock::now() < until)
                co_await c.wait(until - std::chrono::steady_clock::now());
        }
        auto until = std::chrono::steady_clock::now() + container::call_timeout;
        while (!c.client() && std::chrono::steady_clock::now() < until) {
            std::vector<std::string> rm = container::remove_argv(eng, {name});
            co_await container::call(eng, std::move(rm), env);
            if (!c.client()) co_await c.wait(1s);
        }
        if (!c.client()) {
            c.kill_client();
            while (!c.client()) co_await c.wait();
        }
    }

    // Removes a container now and checks that it is gone. Returns what went wrong, if anything.
    asio::awaitable<std::optional<std::string>> remove_now(std::size_t ei, const std::string& name) {
        engine eng = engines_[ei].eng;
        auto env = engine_env();
        std::string last;
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::vector<std::string> rm_args = container::remove_argv(eng, {name});
            process_result rm = co_await container::call(eng, std::move(rm_args), env);
            bool removed = rm.outcome == process_outcome::exited &&
                           (rm.exit_code == 0 || container::says_no_such_container(rm.stderr_bytes));
            if (!removed)
                last =
                    eng.name + " rm: " + container::describe(rm) + ": " + container::excerpt(rm.stderr_bytes);
            std::vector<std::string> inspect = {"container", "inspect", "--format", "{{.State.Status}}",
                                                name};
            process_result check = co_await container::call(eng, std::move(inspect), env);
            if (check.outcome == process_outcome::exited && check.exit_code != 0 &&
                container::says_no_such_container(check.stderr_bytes))
                co_return std::nullopt;
            if (check.outcome == process_outcome::exited && check.exit_code == 0)
                last = (last.empty() ? "" : last + "; ") + "the container still exists (" +
                       container::excerpt(check.stdout_bytes) + ")";
            else
                last = (last.empty() ? "" : last + "; ") + "its removal could not be verified (" +
                       container::describe(check) + ": " + container::excerpt(check.stderr_bytes) + ")";
        }
        co_return last;
    }

    // The client exited by itself (and --rm removed the container). Exit 0 is the
    // container's. Any other status may be the engine's own (125, 126, 127) or hide an
    // out-of-memory kill: the engine's event log for this container tells.
    // `secrets`: the client's stderr carries the program's; an excerpt of it is redacted first.
    asio::awaitable<void> settle(launch_result& out, std::size_t ei, const std::string& name,
                                 const action_spec& action, std::chrono::system_clock::time_point started,
                                 secret_matcher secrets) {
        process_result& p = out.process;
        if (p.exit_code == 0) co_return;
        engine eng = engines_[ei].eng;
        std::string status_text = p.exit_code ? "status " + std::to_string(*p.exit_code)
                                              : "signal " + std::to_string(p.signal.value_or(0));
        container::container_events ev = co_await container::events_of(eng, name, started, engine_env());
        if (ev.known && ev.exit_code == 137 && !ev.oom) {
            // Docker logs `oom` as it handles the cgroup's notice, which under load can come
            // after `die` and after the client returned: ask once more, a little later.
            // Not cut short by a cancellation: the container has ended already.
            asio::steady_timer pause(ctx_.ex, std::chrono::milliseconds(300));
            co_await pause.async_wait(
                asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable)));
            ev = co_await container::events_of(eng, name, started, engine_env());
        }
        if (ev.known && !ev.started && !ev.exit_code) {
            // Never started: the engine failed, or the command could not be run in the image.
            int client_status = p.exit_code.value_or(-1);
            p.outcome = process_outcome::spawn_failed;
            p.exit_code.reset();
            p.signal.reset();
            std::string detail = exec::excerpt(p.stderr_bytes, secrets);
            if (client_status == 127)
                out.error =
                    task_error{error_code::executable_not_found,
                               "the command " + action.command + " was not found in the image: " + detail};
            else if (client_status == 126)
                out.error =
                    task_error{error_code::permission_denied,
                               "the command " + action.command + " cannot be run in the image: " + detail};
            else
                out.error = task_error{error_code::container_engine_error,
                                       eng.name + " run exited with " + status_text +
                                           " before the container started: " + detail};
            co_return;
        }
        if (ev.known && ev.exit_code) {
            p.exit_code = *ev.exit_code;
            p.signal.reset();
            // Started, but the init could not run the command: as if it never started.
            auto init_failure = container::init_exec_failure_of(*p.exit_code, p.stderr_bytes);
            if (init_failure != container::init_exec_failure::none) {
                p.outcome = process_outcome::spawn_failed;
                p.exit_code.reset();
                std::string detail = exec::excerpt(p.stderr_bytes, secrets);
                out.error = init_failure == container::init_exec_failure::not_found
                                ? task_error{error_code::executable_not_found,
                                             "the command " + action.command + " was not found in the image: " + detail}
                                : task_error{error_code::permission_denied,
                                             "the command " + action.command + " cannot be run in the image: " + detail};
                co_return;
            }
            out.oom_killed = ev.oom;
            if (!ev.oom && p.exit_code == 137)
                out.error = task_error{error_code::exit_nonzero,
                                       "exited with status 137 (SIGKILL; the memory limit of " +
                                           std::to_string(action.container->memory_limit_bytes) +
                                           " bytes is a likely cause, but " + eng.name +
                                           " did not report an out-of-memory kill)"};
            co_return;
        }
        if (!ev.known) {
            // No event log to ask (Podman with events_logger = "none"): say what we cannot tell.
            bool ambiguous = p.exit_code && *p.exit_code >= 125 && *p.exit_code <= 127;
            if (ambiguous)
                out.error =
                    task_error{error_code::exit_nonzero,
                               "exited with status " + std::to_string(*p.exit_code) + " (" + eng.name +
                                   " keeps no event log to tell the command's status "
                                   "from its own failure: " +
                                   exec::excerpt(p.stderr_bytes, secrets) + ")"};
            co_return;
        }
        // Started, but the client ended before the container did: an engine failure. End the
        // container now.
        out.error =
            task_error{error_code::container_engine_error,
                       eng.name + " run exited with " + status_text +
                           " while the container was running: " + exec::excerpt(p.stderr_bytes, secrets)};
        if (auto error = co_await remove_now(ei, name))
            out.error = task_error{error_code::container_cleanup_failed,
                                   "failed to clean up container " + name + " after an engine failure (" +
                                       out.error->message + "): " + *error};
    }

    // The names a `ps --format {{.Names}}` printed, or false with the failure in `problems`.
    static bool listed(const process_result& r, const engine& eng, std::string& problems,
                       std::vector<std::string>& names) {
        names.clear();
        if (r.outcome != process_outcome::exited || r.exit_code != 0) {
            problems += (problems.empty() ? "" : "; ") + eng.name + " could not list the run's containers (" +
                        container::describe(r) + ": " + container::excerpt(r.stderr_bytes) + ")";
            return false;
        }
        names = container::names_in(r.stdout_bytes);
        return true;
    }

    std::vector<std::optional<container::choice>> choices_;
    std::string instance_;
    std::string owner_;
    std::uint64_t counter_ = 0;
    std::vector<engine_state> engines_;
};

}  // namespace

std::unique_ptr<launcher> make_container_launcher(launch_context& ctx,
                                                  std::vector<std::optional<container::choice>> choices) {
    return std::make_unique<container_launcher>(ctx, std::move(choices));
}

}  // namespace agentctl
