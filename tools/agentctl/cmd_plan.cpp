// agentctl plan FILE: the compiled plan, for people or as canonical JSON.
#include "cli.hpp"

#include <unistd.h>

namespace agentctl::cli {

int run_plan(const command_line& cl) {
    // Deliberately never freed: the process exits right after printing, and tearing down a
    // large document and plan costs a tenth of the command's time.
    compiled_workflow& loaded = *new compiled_workflow(load_and_compile(cl));
    if (loaded.exit_status != 0) return loaded.exit_status;
    const plan& p = *loaded.compiled;

    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, loaded.diags);
        fd_sink(STDOUT_FILENO).write(plan_text(p));
        return exit_code::success;
    }
    print_success(
        cl, "Plan",
        [&](json_writer& w) {
            // The plan streams straight into the envelope: no second copy of a large plan.
            w.flush();
            fd_sink out(STDOUT_FILENO);
            write_plan_json(p, out);
            w.raw_value("");
        },
        loaded.diags);
    return exit_code::success;
}

}  // namespace agentctl::cli
