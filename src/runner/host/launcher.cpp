// isolation: process. The steps of docs/CONTRACT.md, "Host processes", failing closed before
// anything is spawned.
#include "runner/host/launcher.hpp"

#include <agentctl/process.hpp>

#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace agentctl {
namespace {

class host_launcher final : public launcher {
public:
    explicit host_launcher(launch_context& ctx) : launcher(ctx) {}

    asio::awaitable<void> launch(const launch_request& request, launch_result& out) override {
        out.isolation = "process";
        // The cwd fd stays open until the process has exited; the workspace's own is the context's.
        std::optional<working_directory> cwd;
        auto running = start(request, out, cwd);
        if (!running) co_return;  // refused before the spawn: `out` says why
        out.process = co_await std::move(*running);
        out.containment = std::string(to_string(out.process.used));
    }

private:
    // The request built and handed to the executor, which spawns once the result is awaited;
    // nothing when a step refuses (`out` says why). Not in launch(): the request would take
    // room in its frame while the process runs (docs/DESIGN.md, "What an in-flight task holds").
    std::optional<asio::awaitable<process_result>> start(const launch_request& launch, launch_result& out,
                                                         std::optional<working_directory>& cwd) {
        process_request req;
        if (auto error = build(launch, req, cwd)) {
            out.error = std::move(error);
            out.command = req.executable;
            out.process.outcome = process_outcome::spawn_failed;
            return std::nullopt;
        }
        out.command = req.executable;
        out.output_passed = req.pass_output;
        return async_run_process(ctx_.ex, std::move(req), asio::use_awaitable);
    }

    std::optional<task_error> build(const launch_request& launch, process_request& req,
                                    std::optional<working_directory>& cwd) {
        const attempt_request& request = *launch.attempt;
        const action_spec& action = request.action();
        const plan_task& task = request.task();
        const runner_settings& settings = ctx_.settings;
        const prepared_action& prepared = ctx_.actions[task.action_index];

        // 1. The allowlist, checked again right before the effect.
        if (auto refused = allowlist_refusal(ctx_, action)) return refused;

        // 2. The executable, resolved by the preflight.
        if (prepared.executable.empty())
            return task_error{error_code::executable_not_found, prepared.executable_error};
        req.executable = prepared.executable;

        // 3. cwd beneath the workspace root, opened now: the child fchdir()s to this fd.
        auto opened = open_working_directory(ctx_, request.cwd, /*canonical=*/false);
        if (!opened) return opened.error();
        cwd = std::move(*opened);
        req.cwd_fd = cwd->fd;
        req.cwd_display = std::move(cwd->path);  // only the descriptor is needed afterwards

        // 4. Exactly the declared environment. 5. Spawn settings.
        req.argv.reserve(request.args.size() + launch.extra_args.size() + 1);
        req.argv.push_back(action.command);
        req.argv.insert(req.argv.end(), request.args.begin(), request.args.end());
        req.argv.insert(req.argv.end(), launch.extra_args.begin(), launch.extra_args.end());
        req.env = prepared.environment.entries;
        req.stdin_data = launch.stdin_data;
        req.stdout_limit = task.limits.stdout_bytes;
        req.stderr_limit = task.limits.stderr_bytes;
        req.combined_limit = task.limits.combined_bytes;
        req.timeout = std::chrono::milliseconds(task.timeout_ms);
        req.kill_grace = std::chrono::seconds(ctx_.compiled->kill_grace_seconds);
        req.drain_grace = settings.drain_grace;
        // Only a shell action's streams are the user's; an extension's stdout is its protocol.
        req.pass_output = settings.pass_output && launch.phase == "shell";
        req.containment = settings.containment;
        // The request outlives the launch: its callback is referred to, not copied (a copy of
        // a std::function in another one's capture is an allocation per task).
        if (request.on_started)
            req.on_started = [&report = request.on_started](const process_started& p) {
                attempt_started a;
                a.pid = p.pid;
                a.start_lo = p.start_lo;
                a.start_hi = p.start_hi;
                a.cgroup = p.cgroup;
                report(a);
            };
        return std::nullopt;
    }
};

}  // namespace

std::unique_ptr<launcher> make_host_launcher(launch_context& ctx) {
    return std::make_unique<host_launcher>(ctx);
}

}  // namespace agentctl
