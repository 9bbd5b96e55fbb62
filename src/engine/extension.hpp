// extension.process: handshake, then invoke, through a launcher.
#pragma once

#include "engine/launch.hpp"

namespace agentctl {

/// Runs one attempt of an extension.process action (see docs/DESIGN.md, "Extensions").
/// Completion signature: void(task_result); cancellation as for launcher::async_launch.
void async_run_extension(run_context& ctx, launcher& l, const attempt_request& request,
                         boost::asio::any_completion_handler<void(task_result)> handler);

}  // namespace agentctl
