// The built-in runner: one host process per attempt (isolation: process). Container and
// extension actions are routed to their own runners.
#include "engine/builtin_runner.hpp"

#include "engine/post_result.hpp"
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

namespace {

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string basename_of(std::string_view path) {
    auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

class builtin_runner final : public task_runner {
public:
    builtin_runner(asio::any_io_executor ex, const plan& p, const run_options& options)
        : ex_(std::move(ex)), plan_(p), options_(options), environments_(p.actions.size()) {}

    ~builtin_runner() override {
        if (workspace_fd_ >= 0) ::close(workspace_fd_);
    }

    void async_prepare(asio::any_io_executor,
                       asio::any_completion_handler<void(std::optional<task_error>)> handler) override {
        if (auto error = open_workspace()) return complete(std::move(handler), std::move(error));
        // Resolve every used action's environment once, before anything runs, so a missing
        // secret stops the run before the first effect.
        for (const auto& proc : plan_.processes) pending_.push_back(proc.action_index);
        // swap, not move-assign: Boost 1.81's any_completion_handler move assignment recurses forever.
        prepare_handler_.swap(handler);
        prepare_next();
    }

    void async_run(const attempt_request& request, asio::any_completion_handler<void(task_result)> handler) override {
        const action_spec& action = request.action();
        task_result failed;
        failed.state = task_state::spawn_failed;
        failed.isolation = std::string(to_string(action.isolation));
        if (action.isolation == isolation_mode::container) {
            failed.state = task_state::failed;
            failed.error = task_error{"isolation_unavailable",
                                      "requested process isolation is unavailable: container mode is not "
                                      "supported by this build; the task was not run on the host"};
            return complete(std::move(handler), std::move(failed));
        }
        if (action.kind == action_kind::extension_process) {
            failed.state = task_state::failed;
            failed.error = task_error{"unsupported_action", "extension.process is not supported by this build"};
            return complete(std::move(handler), std::move(failed));
        }

        const resolved_environment& env = environments_[request.task().action_index];
        process_request req;
        if (auto error = build_request(request, env, req)) {
            failed.error = std::move(error);
            failed.command = req.executable;
            return complete(std::move(handler), std::move(failed));
        }
        int cwd_fd = req.cwd_fd;
        std::string executable = req.executable;
        auto slot = asio::get_associated_cancellation_slot(handler);
        async_run_process(
            ex_, std::move(req),
            asio::bind_cancellation_slot(
                slot, [this, cwd_fd, executable, &env, timeout = request.task().timeout_ms,
                       h = std::move(handler)](process_result r) mutable {
                    if (cwd_fd >= 0 && cwd_fd != workspace_fd_) ::close(cwd_fd);
                    std::move(h)(to_task_result(std::move(r), env, executable, timeout));
                }));
    }

private:
    template <typename Handler, typename Value>
    void complete(Handler handler, Value value) {
        post_result(ex_, std::move(handler), std::move(value));
    }

    std::optional<task_error> open_workspace() {
        std::string root = plan_.policy.workspace_root;
        std::string full = (!root.empty() && root[0] == '/') ? root : options_.base_dir + "/" + root;
        char buf[PATH_MAX];
        if (!::realpath(full.c_str(), buf))
            return task_error{"workspace_unavailable",
                              "workspace root " + full + " is not available: " + std::strerror(errno)};
        workspace_path_ = buf;
        workspace_fd_ = ::open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (workspace_fd_ < 0)
            return task_error{"workspace_unavailable",
                              "workspace root " + workspace_path_ + " cannot be opened: " + std::strerror(errno)};
        return std::nullopt;
    }

    environment_context env_context() const {
        environment_context ctx;
        ctx.policy = &plan_.policy;
        ctx.workspace_fd = workspace_fd_;
        ctx.workspace_path = workspace_path_;
        ctx.search_path = options_.search_path;
        ctx.host_env = options_.host_env;
        ctx.containment = options_.containment;
        return ctx;
    }

    void prepare_next() {
        if (pending_.empty()) return complete(std::move(prepare_handler_), std::optional<task_error>{});
        std::uint32_t action_index = pending_.front();
        pending_.pop_front();
        auto slot = asio::get_associated_cancellation_slot(prepare_handler_);
        async_resolve_environment(
            ex_, plan_.actions[action_index].env, env_context(),
            asio::bind_cancellation_slot(slot, [this, action_index](resolved_environment env) {
                environments_[action_index] = std::move(env);
                const auto& e = environments_[action_index];
                if (!e.error_code.empty()) {
                    task_error error{e.error_code, "action \"" + plan_.actions[action_index].name + "\": " +
                                                       e.error_message};
                    return complete(std::move(prepare_handler_), std::optional<task_error>(std::move(error)));
                }
                prepare_next();
            }));
    }

    // Steps 1-4 of SPEC section 5, failing closed before anything is spawned.
    std::optional<task_error> build_request(const attempt_request& request, const resolved_environment& env,
                                            process_request& req) {
        const action_spec& action = request.action();
        const plan_task& task = request.task();
        const auto& allow = plan_.policy.process_allowlist;
        if (std::find(allow.begin(), allow.end(), basename_of(action.command)) == allow.end())
            return task_error{"policy_process_not_allowed",
                              "\"" + basename_of(action.command) + "\" is not in policy.processAllowlist"};

        auto& cached = executables_[task.action_index];
        if (cached.empty()) {
            std::string error;
            auto resolved = resolve_executable(action.command, options_.search_path, error);
            if (!resolved) return task_error{"executable_not_found", error};
            cached = *resolved;
        }
        req.executable = cached;

        if (request.cwd && !request.cwd->empty() && *request.cwd != ".") {
            std::string error;
            int fd = open_beneath(workspace_fd_, *request.cwd, error);
            if (fd < 0) return task_error{"cwd_unavailable", "cwd \"" + *request.cwd + "\": " + error};
            req.cwd_fd = fd;
            req.cwd_display = workspace_path_ + "/" + *request.cwd;
        } else {
            req.cwd_fd = workspace_fd_;
            req.cwd_display = workspace_path_;
        }

        req.argv.reserve(request.args.size() + 1);
        req.argv.push_back(action.command);
        req.argv.insert(req.argv.end(), request.args.begin(), request.args.end());
        req.env = env.entries;
        req.stdout_limit = task.limits.stdout_bytes;
        req.stderr_limit = task.limits.stderr_bytes;
        req.combined_limit = task.limits.combined_bytes;
        req.timeout = std::chrono::milliseconds(task.timeout_ms);
        req.kill_grace = std::chrono::seconds(plan_.kill_grace_seconds);
        req.drain_grace = options_.drain_grace;
        req.containment = options_.containment;
        return std::nullopt;
    }

    task_result to_task_result(process_result r, const resolved_environment& env, const std::string& executable,
                               std::int64_t timeout_ms) {
        task_result t;
        t.isolation = "process";
        t.command = executable;
        t.exit_code = r.exit_code;
        t.signal = r.signal;
        t.usage = r.usage;
        t.containment = std::string(to_string(r.used));
        t.descendants_killed = r.descendants_killed;
        t.output_bytes = r.stdout_bytes.size() + r.stderr_bytes.size();
        t.duration_ms = static_cast<std::uint64_t>(r.duration.count() / 1000);
        redact(r.stdout_bytes, env.secrets);
        redact(r.stderr_bytes, env.secrets);
        t.stdout_text = to_utf8_lossy(r.stdout_bytes, t.stdout_lossy);
        t.stderr_text = to_utf8_lossy(r.stderr_bytes, t.stderr_lossy);
        switch (r.outcome) {
        case process_outcome::exited:
            if (r.exit_code == 0) {
                t.state = task_state::succeeded;
            } else {
                t.state = task_state::failed;
                t.error = r.signal ? task_error{"signaled", "killed by " + signal_name(*r.signal) +
                                                                (r.core_dumped ? " (core dumped)" : "")}
                                   : task_error{"exit_nonzero", "exited with status " + std::to_string(*r.exit_code)};
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
            t.limit_stream = r.limit_stream;
            t.limit_bytes = r.limit_bytes;
            t.error = task_error{"output_limit_exceeded", r.limit_stream + " exceeded its limit of " +
                                                              std::to_string(r.limit_bytes) +
                                                              " bytes; the process tree was killed"};
            break;
        case process_outcome::spawn_failed: {
            t.state = task_state::spawn_failed;
            std::string message = r.error_message;
            redact(message, env.secrets);
            t.error = task_error{r.error_code.empty() ? "spawn_failed" : r.error_code, message};
            break;
        }
        }
        json::object out;
        out["status"] = t.state == task_state::succeeded ? "changed" : "failed";
        out["changed"] = t.state == task_state::succeeded;
        if (t.exit_code) out["exitCode"] = *t.exit_code;
        else out["exitCode"] = nullptr;
        if (t.signal) out["signal"] = signal_name(*t.signal);
        out["stdout"] = t.stdout_text;
        out["stderr"] = t.stderr_text;
        t.output = std::move(out);
        return t;
    }

    asio::any_io_executor ex_;
    const plan& plan_;
    const run_options& options_;
    int workspace_fd_ = -1;
    std::string workspace_path_;
    std::vector<resolved_environment> environments_;  // per action
    std::map<std::uint32_t, std::string> executables_;  // per action: resolved once
    std::deque<std::uint32_t> pending_;
    asio::any_completion_handler<void(std::optional<task_error>)> prepare_handler_;
};

}  // namespace

std::unique_ptr<task_runner> make_builtin_runner(asio::any_io_executor ex, const plan& p, const run_options& options) {
    return std::make_unique<builtin_runner>(std::move(ex), p, options);
}

}  // namespace agentctl
