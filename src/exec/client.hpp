// Bounded calls of helper clients: container engine clients today, Slurm's commands next.
// A client call is not a task: fixed small bounds, its own process group (never a cgroup
// leaf: Podman's conmon leaves the client's tree and must survive it), no retry.
#pragma once

#include <agentctl/process.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {
class secret_matcher;
}

namespace agentctl::exec {

/// One call: `executable args...` with exactly `env`.
struct client_call {
    std::string executable;  ///< absolute path
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::chrono::milliseconds timeout{10000};
    std::uint64_t output_limit = 64 * 1024;  ///< per stream
};

/// How a finished call went, for messages: "exit status 1", "no answer within 10 s", "more
/// than 64 KiB of output", ... `timeout` and `output_limit` are the bounds it was given.
std::string describe_call(const process_result& r, std::chrono::milliseconds timeout,
                          std::uint64_t output_limit);

/// Text (a client's stderr) as one line for messages: newlines folded, at most 512 bytes then
/// "…", "no diagnostic output" when empty.
std::string excerpt(std::string_view text);

/// excerpt() of what a task's program wrote (a container's stderr through its engine client),
/// which may hold secrets: redacted first, as a capture that may have been cut, so that
/// neither that cut nor the excerpt's own (nor its folded newlines) keeps any part of one.
std::string excerpt(std::string_view text, const secret_matcher& secrets);

/// Runs the call on the coroutine's executor. Not cancellable unless `cancellable` (then
/// through the coroutine's cancellation state): cleanup calls must run to completion.
boost::asio::awaitable<process_result> call_client(client_call call, bool cancellable = false);

}  // namespace agentctl::exec
