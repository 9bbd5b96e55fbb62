// Resolving an action's environment: `{env}`, `{file}`, `{process}` and `{value}` sources.
#pragma once

#include <agentctl/process.hpp>
#include <agentctl/spec.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

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
    std::string error_code;            ///< non-empty: resolution failed, nothing may run
    std::string error_message;         ///< names the variable and the source, never a value
};

/// What resolution may use.
struct environment_context {
    const policy_spec* policy = nullptr;
    int workspace_fd = -1;          ///< O_PATH fd of the canonical workspace root
    std::string workspace_path;     ///< its canonical path
    std::string search_path;        ///< for `{process}` helper commands
    std::function<std::optional<std::string>(std::string_view)> host_env;
    containment_policy containment = containment_policy::automatic;
};

/// Resolves `entries`. `{process}` helpers run through async_run_process: direct argv,
/// cleared environment, cwd = workspace root, their own timeout and output limit.
/// Completion signature: void(resolved_environment). Cancellation is forwarded to a
/// running helper.
void async_resolve_environment(boost::asio::any_io_executor ex, const std::vector<env_entry>& entries,
                               const environment_context& ctx,
                               boost::asio::any_completion_handler<void(resolved_environment)> handler);

/// Reads a `{file}` secret: a regular file under one of the policy's secretFileRoots
/// (after resolving symlinks), at most 64 KiB, UTF-8, non-empty; one trailing "\n" or
/// "\r\n" is stripped. Returns the value, or nothing with `error` set.
std::optional<std::string> read_secret_file(const environment_context& ctx, std::string_view path, std::string& error);

}  // namespace agentctl
