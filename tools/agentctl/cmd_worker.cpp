// agentctl worker: serve one driver over standard input and output (docs/WORKER.md). Started by
// the Slurm backend on each node of an allocation, not by people; it takes no options.
#include "cli.hpp"

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
    return static_cast<int>(serve_worker());
}

}  // namespace agentctl::cli
