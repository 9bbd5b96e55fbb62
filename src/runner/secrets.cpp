#include "runner/secrets.hpp"

#include <agentctl/json.hpp>
#include <agentctl/process.hpp>

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace asio = boost::asio;

namespace agentctl {
namespace {

std::string strip_one_line_ending(std::string s) {
    if (!s.empty() && s.back() == '\n') {
        s.pop_back();
        if (!s.empty() && s.back() == '\r') s.pop_back();
    }
    return s;
}

void wipe(std::string& s) {
    std::fill(s.begin(), s.end(), '\0');
}

void wipe(boost::json::string& s) {
    std::fill(s.begin(), s.end(), '\0');
}

std::string program_name(std::string_view path) {
    auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string source_text(const env_entry& e) {
    switch (e.source.kind) {
        case env_source::kind_t::env:
            return "{env: " + e.source.text + "}";
        case env_source::kind_t::file:
            return "{file: " + e.source.text + "}";
        case env_source::kind_t::process:
            return "{process: " + e.source.process.command + "}";
        case env_source::kind_t::value:
            return "{value}";
    }
    return "";
}

expected<exec::directory> open_root(const environment_context& ctx, const std::string& root) {
    if (!root.empty() && root.front() == '/') return exec::directory::open(root);
    return ctx.workspace->open_beneath(root);
}

// Why a `{process}` helper gave no value, from its result.
std::string helper_failure(const process_result& r) {
    switch (r.outcome) {
        case process_outcome::spawn_failed:
            return r.error_message;
        case process_outcome::timed_out:
            return "the helper timed out";
        case process_outcome::cancelled:
            return "the helper was cancelled";
        case process_outcome::output_limit_exceeded:
            return "the helper's " + r.limit_stream + " exceeded " + std::to_string(r.limit_bytes) + " bytes";
        case process_outcome::exited:
            return r.signal ? "the helper was killed by signal " + std::to_string(*r.signal)
                            : "the helper exited with status " + std::to_string(r.exit_code.value_or(-1));
    }
    return "the helper failed";
}

}  // namespace

namespace {

// Why a secret file gave no value.
task_error unavailable(std::string why) {
    return task_error{error_code::secret_unavailable, std::move(why)};
}

expected<std::string> read_secret_file_in_roots(const environment_context& ctx, std::string_view path,
                                                bool content) {
    const auto& roots = ctx.policy->secret_file_roots;
    if (roots.empty()) return unavailable("policy.secretFileRoots is empty");
    const std::string shown(path);
    for (const auto& root : roots) {
        auto below = exec::relative_below(path, root);
        if (!below) continue;
        auto dir = open_root(ctx, root);
        if (!dir)
            return unavailable("cannot open " + shown + ": its root " + root + " is not available (" +
                               dir.error().message + ")");
        exec::file_read read = exec::read_file_beneath(*dir, *below, limits::max_secret_file_bytes, content);
        switch (read.problem) {
            case exec::read_problem::none:
                break;
            case exec::read_problem::missing:
            case exec::read_problem::unreadable:
                return unavailable("cannot open " + shown + ": " + read.detail);
            case exec::read_problem::escapes:
                return unavailable(shown + " resolves outside every policy.secretFileRoots entry");
            case exec::read_problem::not_regular:
                return unavailable(shown + " is not a regular file");
            case exec::read_problem::too_large:
                return unavailable(shown + " is larger than " +
                                   std::to_string(limits::max_secret_file_bytes) + " bytes");
        }
        if (!content) return std::string();
        std::string value = strip_one_line_ending(std::move(read.data));
        if (value.empty()) return unavailable(shown + " is empty");
        if (!is_valid_utf8(value)) {
            wipe(value);
            return unavailable(shown + " is not valid UTF-8");
        }
        return value;
    }
    return unavailable(shown + " resolves outside every policy.secretFileRoots entry");
}

}  // namespace

expected<std::string> read_secret_file(const environment_context& ctx, std::string_view path, bool content) {
    auto value = read_secret_file_in_roots(ctx, path, content);
    // A relative path is read beneath the workspace root: say which one it was.
    if (!value && !path.empty() && path.front() != '/' && ctx.workspace)
        return unavailable(value.error().message + " (relative to the workspace root " +
                           ctx.workspace->path() + ")");
    return value;
}

asio::awaitable<resolved_environment> resolve_environment(const std::vector<env_entry>& entries,
                                                          const environment_context& ctx) {
    resolved_environment result;
    auto add = [&](const env_entry& e, const std::string& value, bool secret) {
        result.entries.push_back(e.name + "=" + value);
        if (secret && !value.empty()) result.secrets.push_back(value);
        if (secret && !value.empty() && value.size() < limits::min_redactable_secret_bytes)
            result.short_secrets.push_back(e.name + " from " + source_text(e) + " (" +
                                           std::to_string(value.size()) +
                                           (value.size() == 1 ? " byte)" : " bytes)"));
    };
    auto fail = [&](const env_entry& e, error_code code, const std::string& why) {
        result.error =
            task_error{code, "environment variable " + e.name + " from " + source_text(e) + ": " + why};
        return std::move(result);
    };
    for (const env_entry& e : entries) {
        switch (e.source.kind) {
            case env_source::kind_t::value:
                add(e, e.source.text, /*secret=*/false);
                break;
            case env_source::kind_t::env: {
                auto v = ctx.host_env ? ctx.host_env(e.source.text) : std::nullopt;
                if (!v)
                    co_return fail(e, error_code::secret_unavailable,
                                   "environment variable " + e.source.text + " is not set");
                add(e, *v, e.source.is_secret());  // `{env: NAME, secret: false}`: a plain host variable
                break;
            }
            case env_source::kind_t::file: {
                auto v = read_secret_file(ctx, e.source.text);
                if (!v) co_return fail(e, v.error().code, v.error().message);
                add(e, *v, true);
                break;
            }
            case env_source::kind_t::process: {
                const secret_process_spec& spec = e.source.process;
                const auto& allow = ctx.policy->secret_process_allowlist;
                if (std::find(allow.begin(), allow.end(), program_name(spec.command)) == allow.end())
                    co_return fail(
                        e, error_code::policy_secret_process_not_allowed,
                        "\"" + program_name(spec.command) + "\" is not in policy.secretProcessAllowlist");
                auto exe = resolve_executable(spec.command, ctx.search_path);
                if (!exe) co_return fail(e, error_code::secret_unavailable, exe.error().message);
                process_request req;
                req.executable = *exe;
                req.argv.push_back(spec.command);
                req.argv.insert(req.argv.end(), spec.args.begin(), spec.args.end());
                req.cwd_fd = ctx.workspace->fd();
                req.cwd_display = ctx.workspace->path();
                req.stdout_limit = spec.output_limit_bytes;
                req.stderr_limit = 16 * 1024;
                req.combined_limit = spec.output_limit_bytes + req.stderr_limit;
                req.timeout = std::chrono::seconds(spec.timeout_seconds);
                req.containment = ctx.containment;
                auto ex = co_await asio::this_coro::executor;
                process_result r = co_await async_run_process(ex, std::move(req), asio::use_awaitable);
                // The helper's stdout is the secret: never let it reach a message, and wipe it on failure.
                if (r.outcome != process_outcome::exited || r.exit_code != 0) {
                    wipe(r.stdout_bytes);
                    co_return fail(e,
                                   r.outcome == process_outcome::cancelled ? error_code::cancelled
                                                                           : error_code::secret_unavailable,
                                   helper_failure(r));
                }
                std::string value =
                    strip_one_line_ending(std::string(r.stdout_bytes.data(), r.stdout_bytes.size()));
                wipe(r.stdout_bytes);  // the copy above is the secret now
                if (value.empty())
                    co_return fail(e, error_code::secret_unavailable, "the helper printed nothing");
                if (!is_valid_utf8(value)) {
                    wipe(value);
                    co_return fail(e, error_code::secret_unavailable,
                                   "the helper's output is not valid UTF-8");
                }
                add(e, value, true);
                break;
            }
        }
    }
    co_return result;
}

}  // namespace agentctl
