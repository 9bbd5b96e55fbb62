// The built-in runner: one launch per attempt (two for extension.process) through the host or
// the container launcher; redaction and the task result are built here.
#include "engine/builtin_runner.hpp"

#include "engine/post_result.hpp"
#include "engine/extension.hpp"
#include "engine/launch.hpp"
#include "engine/secrets.hpp"

#include <agentctl/json.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/object.hpp>

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl {

void task_runner::async_prepare(asio::any_io_executor ex,
                                asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

void task_runner::async_finish(asio::any_io_executor ex,
                               asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ex, std::move(handler), std::optional<task_error>{});
}

void launcher::async_finish(asio::any_completion_handler<void(std::optional<task_error>)> handler) {
    post_result(ctx_.ex, std::move(handler), std::optional<task_error>{});
}

namespace {

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

task_result to_task_result(launch_result r, const resolved_environment& env, std::int64_t timeout_ms,
                           bool streams_once) {
    task_result t;
    process_result& p = r.process;
    t.isolation = r.isolation;
    t.engine = r.engine;
    t.command = r.command;
    t.containment = r.containment;
    t.exit_code = p.exit_code;
    t.signal = p.signal;
    t.usage = p.usage;
    t.descendants_killed = p.descendants_killed;
    t.output_bytes = p.stdout_bytes.size() + p.stderr_bytes.size();
    t.duration_ms = static_cast<std::uint64_t>(p.duration.count() / 1000);
    redact(p.stdout_bytes, env.secrets);
    redact(p.stderr_bytes, env.secrets);
    make_utf8_lossy(p.stdout_bytes, t.stdout_lossy);
    make_utf8_lossy(p.stderr_bytes, t.stderr_lossy);
    t.stdout_text = std::move(p.stdout_bytes);
    t.stderr_text = std::move(p.stderr_bytes);
    switch (p.outcome) {
    case process_outcome::exited:
        if (p.exit_code == 0) {
            t.state = task_state::succeeded;
        } else {
            t.state = task_state::failed;
            t.error = p.signal ? task_error{"signaled", "killed by " + signal_name(*p.signal) +
                                                            (p.core_dumped ? " (core dumped)" : "")}
                               : task_error{"exit_nonzero", "exited with status " + std::to_string(*p.exit_code)};
            if (r.oom_killed) t.error = task_error{"oom_killed", "killed by the container's memory limit"};
        }
        break;
    case process_outcome::timed_out:
        t.state = task_state::timed_out;
        t.error = task_error{"timeout", "timed out after " + seconds_text(timeout_ms) + " and was terminated"};
        break;
    case process_outcome::cancelled:
        t.state = task_state::cancelled;
        t.error = task_error{"cancelled", "cancelled; the process tree was terminated"};
        break;
    case process_outcome::output_limit_exceeded:
        t.state = task_state::output_limit_exceeded;
        t.limit_stream = p.limit_stream;
        t.limit_bytes = p.limit_bytes;
        t.error = task_error{"output_limit_exceeded", p.limit_stream + " exceeded its limit of " +
                                                          std::to_string(p.limit_bytes) +
                                                          " bytes; the process tree was killed"};
        break;
    case process_outcome::spawn_failed:
        t.state = task_state::spawn_failed;
        t.error = task_error{p.error_code.empty() ? "spawn_failed" : p.error_code, p.error_message};
        break;
    }
    if (r.error) {
        // Nothing ran (retryable as a spawn error) unless the reason is one a retry cannot
        // fix: policy, or isolation that is not available here.
        bool nothing_ran = p.outcome == process_outcome::spawn_failed;
        bool permanent = r.error->code == "isolation_unavailable" || is_policy_code(r.error->code);
        if (!nothing_ran || permanent) t.state = task_state::failed;
        t.error = r.error;
    }
    if (t.error) redact(t.error->message, env.secrets);

    json::object out;
    out["status"] = t.state == task_state::succeeded ? "changed" : "failed";
    out["changed"] = t.state == task_state::succeeded;
    if (t.exit_code) out["exitCode"] = *t.exit_code;
    else out["exitCode"] = nullptr;
    if (t.signal) out["signal"] = signal_name(*t.signal);
    out["stdout"] = t.stdout_text;
    out["stderr"] = t.stderr_text;
    t.output = std::move(out);
    if (streams_once) {  // a 1 MiB stdout costs 1 MiB, not 2, for the rest of the run
        std::string().swap(t.stdout_text);
        std::string().swap(t.stderr_text);
        t.streams_in_output = true;
    }
    return t;
}

namespace {

class builtin_runner final : public task_runner {
public:
    builtin_runner(asio::any_io_executor ex, const plan& p, const run_options& options, std::string run_id) {
        ctx_.ex = std::move(ex);
        ctx_.compiled = &p;
        ctx_.options = &options;
        ctx_.run_id = std::move(run_id);
        ctx_.environments.resize(p.actions.size());
        host_ = make_host_launcher(ctx_);
        container_ = make_container_launcher(ctx_);
    }

    ~builtin_runner() override {
        if (ctx_.workspace_fd >= 0) ::close(ctx_.workspace_fd);
    }

    void async_prepare(asio::any_io_executor,
                       asio::any_completion_handler<void(std::optional<task_error>)> handler) override {
        if (auto error = open_workspace()) return post_result(ctx_.ex, std::move(handler), std::move(error));
        // Resolve every used action's environment once, before anything runs, so a missing
        // secret stops the run before the first effect.
        for (const auto& proc : ctx_.compiled->processes) pending_.push_back(proc.action_index);
        // swap, not move-assign: Boost 1.81's any_completion_handler move assignment recurses forever.
        prepare_handler_.swap(handler);
        prepare_next();
    }

    void async_run(const attempt_request& request, asio::any_completion_handler<void(task_result)> handler) override {
        const action_spec& action = request.action();
        launcher& l = action.isolation == isolation_mode::container ? *container_ : *host_;
        if (action.kind == action_kind::extension_process)
            return async_run_extension(ctx_, l, request, std::move(handler));

        launch_request launch;
        launch.attempt = &request;
        auto slot = asio::get_associated_cancellation_slot(handler);
        std::uint32_t action_index = request.task().action_index;
        std::int64_t timeout_ms = request.task().timeout_ms;
        l.async_launch(launch, asio::bind_cancellation_slot(
                                   slot, [this, action_index, timeout_ms, h = std::move(handler)](launch_result r) mutable {
                                       std::move(h)(to_task_result(std::move(r), ctx_.environments[action_index],
                                                                   timeout_ms, /*streams_once=*/true));
                                   }));
    }

    // The run's leftover containers are swept before the run reports.
    void async_finish(asio::any_io_executor,
                      asio::any_completion_handler<void(std::optional<task_error>)> handler) override {
        container_->async_finish(std::move(handler));
    }

private:
    std::optional<task_error> open_workspace() {
        std::string root = ctx_.compiled->policy.workspace_root;
        std::string full = (!root.empty() && root[0] == '/') ? root : ctx_.options->base_dir + "/" + root;
        char buf[PATH_MAX];
        if (!::realpath(full.c_str(), buf))
            return task_error{"workspace_unavailable",
                              "workspace root " + full + " is not available: " + std::strerror(errno)};
        ctx_.workspace_path = buf;
        ctx_.workspace_fd = ::open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ctx_.workspace_fd < 0)
            return task_error{"workspace_unavailable",
                              "workspace root " + ctx_.workspace_path + " cannot be opened: " + std::strerror(errno)};
        return std::nullopt;
    }

    environment_context env_context() const {
        environment_context env;
        env.policy = &ctx_.compiled->policy;
        env.workspace_fd = ctx_.workspace_fd;
        env.workspace_path = ctx_.workspace_path;
        env.search_path = ctx_.options->search_path;
        env.host_env = ctx_.options->host_env;
        env.containment = ctx_.options->containment;
        return env;
    }

    void prepare_next() {
        if (pending_.empty()) return prepare_launchers();
        std::uint32_t action_index = pending_.front();
        pending_.pop_front();
        auto slot = asio::get_associated_cancellation_slot(prepare_handler_);
        async_resolve_environment(
            ctx_.ex, ctx_.compiled->actions[action_index].env, env_context(),
            asio::bind_cancellation_slot(slot, [this, action_index](resolved_environment env) {
                ctx_.environments[action_index] = std::move(env);
                const auto& e = ctx_.environments[action_index];
                if (!e.error_code.empty()) {
                    task_error error{e.error_code, "action \"" + ctx_.compiled->actions[action_index].name +
                                                       "\": " + e.error_message};
                    return post_result(ctx_.ex, std::move(prepare_handler_), std::optional<task_error>(std::move(error)));
                }
                prepare_next();
            }));
    }

    // Engines and images are checked once, before the first effect (fail closed).
    void prepare_launchers() {
        bool any_container = false;
        for (const auto& proc : ctx_.compiled->processes)
            any_container |= ctx_.compiled->actions[proc.action_index].isolation == isolation_mode::container;
        if (!any_container) return post_result(ctx_.ex, std::move(prepare_handler_), std::optional<task_error>{});
        auto slot = asio::get_associated_cancellation_slot(prepare_handler_);
        container_->async_prepare(asio::bind_cancellation_slot(slot, [this](std::optional<task_error> error) {
            auto h = std::move(prepare_handler_);
            std::move(h)(std::move(error));
        }));
    }

    run_context ctx_;
    std::unique_ptr<launcher> host_;
    std::unique_ptr<launcher> container_;
    std::deque<std::uint32_t> pending_;
    asio::any_completion_handler<void(std::optional<task_error>)> prepare_handler_;
};

}  // namespace

std::unique_ptr<task_runner> make_builtin_runner(asio::any_io_executor ex, const plan& p, const run_options& options,
                                                 std::string run_id) {
    return std::make_unique<builtin_runner>(std::move(ex), p, options, std::move(run_id));
}

}  // namespace agentctl
