// agentctl check FILE: parse, validate and compile; no effects.
#include "cli.hpp"

#include <unistd.h>

namespace agentctl::cli {

int run_check(const command_line& cl) {
    // Deliberately never freed: the process exits right after printing, and tearing down a
    // large document and plan costs a tenth of the command's time.
    compiled_workflow& loaded = *new compiled_workflow(load_and_compile(cl));
    if (loaded.exit_status != 0) return loaded.exit_status;
    const plan& p = *loaded.compiled;

    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, loaded.diags);
        std::string line = "valid: " + p.workflow_name + " (" + std::to_string(p.tasks.size()) +
                           (p.tasks.size() == 1 ? " task)\n" : " tasks)\n");
        if (!cl.quiet) fd_sink(STDOUT_FILENO).write(line);
        return exit_code::success;
    }
    print_success(
        cl, "CheckResult",
        [&](json_writer& w) {
            w.begin_object();
            w.member("valid", true);
            w.member("workflow", p.workflow_name);
            w.member("workflowDigest", p.workflow_digest);
            w.member("planDigest", p.plan_digest);
            w.member("tasks", static_cast<std::uint64_t>(p.tasks.size()));
            w.end_object();
        },
        loaded.diags);
    return exit_code::success;
}

}  // namespace agentctl::cli
