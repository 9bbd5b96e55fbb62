// isolation: process. The steps of docs/CONTRACT.md, "Host processes", failing closed before
// anything is spawned.
#include "runner/launcher.hpp"
#include "engine/post_result.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

#include <algorithm>
#include <memory>

namespace asio = boost::asio;

namespace agentctl {

void launcher::async_finish(asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ctx_.ex, std::move(handler), std::optional<task_error>{});
}

namespace {

class host_launcher final : public launcher {
public:
    explicit host_launcher(launch_context& ctx) : launcher(ctx) {}

    void async_launch(const launch_request& request,
                      asio::any_completion_handler<void(launch_result)> handler) override {
        launch_result failed;
        failed.isolation = "process";
        process_request req;
        // The cwd fd must stay open until the run completes; the workspace's own is the context's.
        auto cwd = std::make_shared<std::optional<exec::directory>>();
        if (auto error = build(request, req, *cwd)) {
            failed.error = std::move(error);
            failed.command = req.executable;
            failed.process.outcome = process_outcome::spawn_failed;
            return post_result(ctx_.ex, std::move(handler), std::move(failed));
        }
        std::string executable = req.executable;
        auto slot = asio::get_associated_cancellation_slot(handler);
        async_run_process(ctx_.ex, std::move(req),
                          asio::bind_cancellation_slot(
                              slot, [cwd, executable, h = std::move(handler)](process_result r) mutable {
                                  cwd->reset();
                                  launch_result out;
                                  out.isolation = "process";
                                  out.command = executable;
                                  out.containment = std::string(to_string(r.used));
                                  out.process = std::move(r);
                                  std::move(h)(std::move(out));
                              }));
    }

private:
    std::optional<task_error> build(const launch_request& launch, process_request& req,
                                    std::optional<exec::directory>& cwd) {
        const attempt_request& request = *launch.attempt;
        const action_spec& action = request.action();
        const plan_task& task = request.task();
        const run_options& options = *ctx_.options;
        const prepared_action& prepared = ctx_.actions[task.action_index];

        // 1. The allowlist, checked again right before the effect.
        if (auto refused = allowlist_refusal(ctx_, action)) return refused;

        // 2. The executable, resolved by the preflight.
        if (prepared.executable.empty())
            return task_error{error_code::executable_not_found, prepared.executable_error};
        req.executable = prepared.executable;

        // 3. cwd beneath the workspace root, opened now: the child fchdir()s to this fd.
        if (request.cwd && !request.cwd->empty() && *request.cwd != ".") {
            std::string error;
            cwd = ctx_.workspace.open_beneath(*request.cwd, error);
            if (!cwd)
                return task_error{error_code::cwd_unavailable, "cwd \"" + *request.cwd + "\": " + error +
                                                                   " (beneath the workspace root " +
                                                                   ctx_.workspace.path() + ")"};
            req.cwd_fd = cwd->fd();
            req.cwd_display = cwd->path();
        } else {
            req.cwd_fd = ctx_.workspace.fd();
            req.cwd_display = ctx_.workspace.path();
        }

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
        req.drain_grace = options.drain_grace;
        req.containment = options.containment;
        if (request.on_started)
            req.on_started = [report = request.on_started](const process_started& p) {
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
