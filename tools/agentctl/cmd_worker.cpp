// agentctl worker: serve one driver over standard input and output (docs/WORKER.md). Started by
// the Slurm backend on each node of an allocation, not by people; it takes no options.
#include "cli.hpp"

#include <agentctl/watchdog.hpp>
#include <agentctl/worker.hpp>

#include <unistd.h>

namespace agentctl::cli {

int run_worker(const std::vector<std::string>& args) {
    if (!args.empty()) {
        std::string text =
            "agentctl worker: takes no arguments (it is started by the Slurm backend; "
            "see docs/WORKER.md)\n";
        fd_sink(STDERR_FILENO).write(text);
        return status(exit_status::usage);
    }
    // Its tasks die with it even when it is SIGKILLed (a worker lost to the driver is often
    // one that was killed): the watchdog kills what it started.
    std::string why;
    // The build digest is computed while the watchdog starts: both are on the way to the
    // welcome, which every allocation run waits for (docs/WORKER.md, "Handshake: the same
    // build on both ends").
    std::optional<watchdog> watch = watchdog::start({}, why, prepare_worker);
    if (!watch)
        fd_sink(STDERR_FILENO)
            .write("agentctl worker: the watchdog could not start (" + why +
                   "): if this worker is killed, its tasks keep running\n");
    auto status = serve_worker(watch ? &*watch : nullptr);
    if (watch) watch->clean_exit();
    return static_cast<int>(status);
}

}  // namespace agentctl::cli
