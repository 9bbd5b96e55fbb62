// agentctl version
#include "cli.hpp"

#include <agentctl/version.hpp>
#include <agentctl/wire.hpp>

#include <unistd.h>

namespace agentctl::cli {

int run_version(const command_line& cl) {
    if (cl.output == output_format::human) {
        fd_sink(STDOUT_FILENO).write("agentctl " + std::string(version()) + "\n");
        return status(exit_status::success);
    }
    print_success("Version", write_version, {});
    return status(exit_status::success);
}

}  // namespace agentctl::cli
