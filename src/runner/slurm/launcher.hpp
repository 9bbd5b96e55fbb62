// isolation: process on the Slurm backend.
#pragma once

#include "runner/launcher.hpp"
#include "runner/slurm/client.hpp"

#include <memory>

namespace agentctl {

/// One srun job per launch, with `tools` found and checked by the strict preflight.
std::unique_ptr<launcher> make_slurm_launcher(launch_context& ctx, slurm::tools tools);

}  // namespace agentctl
