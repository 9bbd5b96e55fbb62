// Bounded calls of helper clients: container engine clients today, Slurm's commands next.
// A client call is not a task: fixed small bounds, its own process group (never a cgroup
// leaf: Podman's conmon leaves the client's tree and must survive it), no retry.
#pragma once

#include <agentctl/process.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace agentctl::exec {

/// One call: `executable args...` with exactly `env`.
struct client_call {
    std::string executable;  ///< absolute path
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::chrono::milliseconds timeout{10000};
    std::uint64_t output_limit = 64 * 1024;  ///< per stream
};

/// Runs the call on the coroutine's executor. Not cancellable unless `cancellable` (then
/// through the coroutine's cancellation state): cleanup calls must run to completion.
boost::asio::awaitable<process_result> call_client(client_call call, bool cancellable = false);

}  // namespace agentctl::exec
