// isolation: process, on allocation workers (docs/WORKER.md): one `agentctl worker` per site,
// started before the first task, each launch one `run` on the worker with the most free slots.
#pragma once

#include "exec/channel.hpp"
#include "runner/launcher.hpp"

#include <agentctl/error.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

/// Where one worker runs, and the program that starts it there.
struct worker_site {
    std::string label;        ///< a node name, for messages and the report
    std::uint32_t slots = 0;  ///< tasks at once on it; 0: the CPUs its worker reports
    /// The program for the worker's `generation`-th start on this site (1, then 2, ... after
    /// a lost worker is replaced), or why there is none.
    std::function<expected<exec::channel_command>(std::uint32_t generation)> command;
    /// At the end of the run, once its worker said `bye`, the program's last milliseconds (srun
    /// and the step's end) may be left to the watchdog instead of awaited (docs/WORKER.md, "The
    /// end of a run"). Not where the allocation is cancelled right after the workers end.
    bool leave_step_end = false;
};

/// Starts a worker on every site and waits until each said welcome with this build's digest.
/// The error (backend_unavailable) names the site and what it said; then every worker
/// started is stopped and nothing ran. `backend` is what launch results say ("slurm").
boost::asio::awaitable<expected<std::unique_ptr<launcher>>> start_worker_launcher(
    launch_context& ctx, std::vector<worker_site> sites, std::string backend);

/// start_worker_launcher in two steps, so that the workers' start (an srun step takes tens of
/// milliseconds) overlaps the rest of the preflight (docs/WORKER.md, "Starting early"). The
/// caller runs start() as a child of a task_group it owns and awaits it, like every other
/// coroutine (docs/DESIGN.md, "Async style").
class starting_workers {
public:
    virtual ~starting_workers() = default;
    /// Until every worker said welcome: nothing, or start_worker_launcher's error (every worker
    /// started is then stopped). Run once; this object outlives it.
    virtual boost::asio::awaitable<std::optional<task_error>> start() = 0;
    /// Ends start() at once, as a failure: the worker being started is killed (its srun, with
    /// no step yet when the controller is down) and no further one starts. `why` is its loss.
    virtual void abandon(const std::string& why) = 0;
    /// Once start() ended without an error: the launcher. A run that ends before its first
    /// task calls its finish(), which stops every worker (nothing was sent to them but the
    /// hello).
    virtual std::unique_ptr<launcher> take() = 0;
};

/// The workers of start_worker_launcher, not started yet: start() starts them on ctx's executor.
std::unique_ptr<starting_workers> workers_to_start(launch_context& ctx, std::vector<worker_site> sites,
                                                   std::string backend);

}  // namespace agentctl
