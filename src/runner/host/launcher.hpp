// isolation: process on this machine.
#pragma once

#include "runner/launcher.hpp"

#include <memory>

namespace agentctl {

/// One host process per launch, the steps of docs/CONTRACT.md, "Host processes".
std::unique_ptr<launcher> make_host_launcher(launch_context& ctx);

}  // namespace agentctl
