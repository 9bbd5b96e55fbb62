// extension.process: handshake, then invoke, through a launcher.
#pragma once

#include "runner/launcher.hpp"

#include <boost/asio/awaitable.hpp>

namespace agentctl {

/// Runs one attempt of an extension.process action (see docs/DESIGN.md, "Extensions"), on
/// the coroutine's executor. The coroutine's cancellation reaches the running launch; one
/// that arrives while the handshake ends stops the attempt before invoke.
boost::asio::awaitable<task_result> run_extension(launch_context& ctx, launcher& l,
                                                  const attempt_request& request);

}  // namespace agentctl
