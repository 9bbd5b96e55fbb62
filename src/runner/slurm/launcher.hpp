// isolation: process on the Slurm backend.
#pragma once

#include "runner/launcher.hpp"
#include "runner/slurm/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>

namespace agentctl {

/// One srun job per launch, with `tools` found and checked by the strict preflight.
std::unique_ptr<launcher> make_slurm_launcher(launch_context& ctx, slurm::tools tools);

/// The Slurm backend's launcher for this run, by --slurm-dispatch and the allocation agentctl
/// runs in (docs/WORKER.md, "Choosing the mode"): one job per launch, or one worker step per
/// node of the allocation, started now (every worker says welcome before any task runs). The
/// error (backend_unavailable) says why nothing can run.
boost::asio::awaitable<expected<std::unique_ptr<launcher>>> start_slurm_launcher(launch_context& ctx,
                                                                                 slurm::tools tools);

}  // namespace agentctl
