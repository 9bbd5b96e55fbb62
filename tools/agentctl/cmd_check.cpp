// agentctl check FILE: parse, validate and compile; no effects.
#include "cli.hpp"

#include <agentctl/wire.hpp>

#include <unistd.h>

namespace agentctl::cli {

std::optional<int> parse_check(command_line& cl, const arguments& a) {
    return parse_workflow_file(cl, a);
}

int run_check(const command_line& cl, watchdog*) {
    // Deliberately never freed: the process exits right after printing, and tearing down a
    // large document and plan costs a tenth of the command's time.
    session& s = *new session(open_and_report(cl));
    if (!s.ok()) return status(s.status);
    const plan& p = *s.compiled;
    s.diags.append(short_secret_warnings(s, process_environment()));

    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, s.diags);
        std::string line = "valid: " + p.workflow_name + " (" + std::to_string(p.size()) +
                           (p.size() == 1 ? " task)\n" : " tasks)\n");
        if (!cl.quiet) fd_sink(STDOUT_FILENO).write(line);
        return status(exit_status::success);
    }
    print_success(
        "CheckResult", [&](json_writer& w) { write_check_result(w, p); }, s.diags);
    return status(exit_status::success);
}

}  // namespace agentctl::cli
