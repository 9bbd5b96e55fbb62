// isolation: process on the Slurm backend.
#pragma once

#include "runner/launcher.hpp"
#include "runner/slurm/allocation.hpp"
#include "runner/slurm/client.hpp"
#include "runner/worker/launcher.hpp"

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

/// Inside an allocation, in worker dispatch (and without --slurm-nodes): its worker steps, for
/// the caller to start while the preflight goes on (docs/WORKER.md, "Starting early"); they
/// are then the launcher start_slurm_launcher would have started. Null in every other case,
/// and when the allocation cannot be read (start_slurm_launcher says why).
std::unique_ptr<starting_workers> allocation_workers_to_start(launch_context& ctx, const slurm::tools& tools);

/// Starts one worker step per node of `allocation` (a job of this cluster that agentctl may
/// start steps in) and waits for each welcome; backend_unavailable when one cannot start.
/// `leave_step_end`: worker_site::leave_step_end of each (false where the allocation is
/// cancelled right after the workers end).
boost::asio::awaitable<expected<std::unique_ptr<launcher>>> start_allocation_workers(
    launch_context& ctx, const slurm::tools& tools, const slurm::allocation& allocation, bool leave_step_end);

/// --slurm-nodes (docs/WORKER.md, "Asking for nodes"): asks for the nodes (salloc --no-shell,
/// waiting in the queue until granted or cancelled), tells the watchdog to cancel the
/// allocation if agentctl dies, and starts its workers. The launcher releases the allocation
/// in finish() (scancel, confirmed gone). Any failure releases it at once and is
/// backend_unavailable: nothing was run.
boost::asio::awaitable<expected<std::unique_ptr<launcher>>> start_requested_allocation(launch_context& ctx,
                                                                                       slurm::tools tools);

/// This process as the owner its job names carry.
slurm::job_owner this_job_owner();

}  // namespace agentctl
