// agentctl version
#include "cli.hpp"

#include <agentctl/version.hpp>

#include <boost/version.hpp>

#include <unistd.h>

namespace agentctl::cli {

int run_version(const command_line& cl) {
    if (cl.output == output_format::human) {
        fd_sink(STDOUT_FILENO).write("agentctl " + std::string(version()) + "\n");
        return exit_code::success;
    }
    print_success(
        cl, "Version",
        [](json_writer& w) {
            w.begin_object();
            w.member("version", version());
            w.member("apiVersion", cli_api_version);
            w.member("planFormatVersion", plan_format_version);
            w.member("boost", BOOST_LIB_VERSION);
            w.end_object();
        },
        {});
    return exit_code::success;
}

}  // namespace agentctl::cli
