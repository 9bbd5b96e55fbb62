// What the launchers share: the last allowlist check and the working directory.
#include "runner/launcher.hpp"

#include "exec/workspace.hpp"

#include <algorithm>

namespace agentctl {

boost::asio::awaitable<std::optional<task_error>> launcher::finish() {
    co_return std::nullopt;
}

std::optional<task_error> allowlist_refusal(const launch_context& ctx, const action_spec& action) {
    std::string_view command = action.command;
    auto slash = command.rfind('/');
    std::string name(slash == std::string_view::npos ? command : command.substr(slash + 1));
    const auto& allow = ctx.compiled->policy.process_allowlist;
    if (std::find(allow.begin(), allow.end(), name) != allow.end()) return std::nullopt;
    return task_error{error_code::policy_process_not_allowed,
                      "\"" + name + "\" is not in policy.processAllowlist"};
}

expected<working_directory> open_working_directory(const launch_context& ctx,
                                                   const std::optional<std::string>& cwd, bool canonical) {
    working_directory out;
    if (!cwd || cwd->empty() || *cwd == ".") {
        out.fd = ctx.workspace.fd();
        out.path = ctx.workspace.path();
        return out;
    }
    auto opened = ctx.workspace.open_beneath(*cwd);
    if (!opened)
        return task_error{error_code::cwd_unavailable, "cwd \"" + *cwd + "\": " + opened.error().message +
                                                           " (beneath the workspace root " +
                                                           ctx.workspace.path() + ")"};
    out.fd = opened->fd();
    out.opened = std::move(*opened);
    if (!canonical) {
        out.path = out.opened->path();
        return out;
    }
    auto path = exec::path_of(out.fd);
    if (!path)
        return task_error{error_code::cwd_unavailable, "cwd \"" + *cwd + "\": its path cannot be read"};
    out.path = std::move(*path);
    return out;
}

}  // namespace agentctl
