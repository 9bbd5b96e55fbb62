// Resolving an action's environment: `{env}`, `{file}`, `{process}` and `{value}` sources.
#pragma once

#include "exec/workspace.hpp"

#include <agentctl/error.hpp>
#include <agentctl/process_types.hpp>
#include <agentctl/spec.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// The child's environment and the secret values that must never be shown.
struct resolved_environment {
    std::vector<std::string> entries;  ///< "NAME=value", declaration order
    std::vector<std::string> secrets;  ///< non-empty values of secret sources
    /// Secret variables whose value is shorter than limits::min_redactable_secret_bytes:
    /// "NAME from SOURCE (N bytes)", never the value.
    std::vector<std::string> short_secrets;
    /// Set when resolution failed: nothing may run. Names the variable and the source,
    /// never a value.
    std::optional<task_error> error;
};

/// What resolution may use.
struct environment_context {
    const policy_spec* policy = nullptr;
    const exec::directory* workspace = nullptr;  ///< the workspace root, held open
    std::string search_path;                     ///< for `{process}` helper commands
    std::function<std::optional<std::string>(std::string_view)> host_env;
    containment_policy containment = containment_policy::automatic;
};

/// Resolves `entries`. `{process}` helpers run through async_run_process: direct argv,
/// cleared environment, cwd = workspace root, their own timeout and output limit.
/// Cancellation (the coroutine's) is forwarded to a running helper.
boost::asio::awaitable<resolved_environment> resolve_environment(const std::vector<env_entry>& entries,
                                                                 const environment_context& ctx);

/// Reads a `{file}` secret: a regular file opened beneath the policy's secretFileRoots entry
/// it lies below (a symlink may not leave that root), at most 64 KiB, UTF-8, non-empty; one
/// trailing "\n" or "\r\n" is stripped. With `content == false` only checks that it could be
/// read (doctor). Returns the value (empty without content), or secret_unavailable with why.
expected<std::string> read_secret_file(const environment_context& ctx, std::string_view path,
                                       bool content = true);

}  // namespace agentctl
