// agentctl version
#include "cli.hpp"

#include <agentctl/version.hpp>
#include <agentctl/wire.hpp>

#include <unistd.h>

namespace agentctl::cli {

std::optional<int> parse_version(command_line& cl, const arguments& a) {
    if (!a.operands.empty()) return usage_error(cl, "version takes no arguments");
    return std::nullopt;
}

int run_version(const command_line& cl, watchdog*) {
    if (cl.output == output_format::human) {
        fd_sink(STDOUT_FILENO).write("agentctl " + std::string(version()) + "\n");
        return status(exit_status::success);
    }
    print_success("Version", write_version, {});
    return status(exit_status::success);
}

}  // namespace agentctl::cli
