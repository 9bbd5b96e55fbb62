// agentctl plan FILE: the compiled plan, for people or as canonical JSON.
#include "cli.hpp"

#include <agentctl/plan.hpp>

#include <unistd.h>

namespace agentctl::cli {

std::optional<int> parse_plan(command_line& cl, const arguments& a) {
    if (auto refused = parse_workflow_file(cl, a)) return refused;
    return parse_task_limits(cl, a);
}

int run_plan(const command_line& cl, watchdog*) {
    // Deliberately never freed: the process exits right after printing, and tearing down a
    // large document and plan costs a tenth of the command's time.
    session& s = *new session(open_and_report(cl));
    if (!s.ok()) return status(s.status);
    const plan& p = *s.compiled;

    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, s.diags);
        // The workspace as a run would use it: absolute, from --workspace or the file's folder.
        std::string workspace;
        if (auto base = resolve_base_dir(cl.request()))
            workspace = workspace_root_path(p, *base);
        else
            workspace = p.policy.workspace_root + " (" + base.error().message + ")";
        fd_sink(STDOUT_FILENO).write(plan_text(p, workspace));
        return status(exit_status::success);
    }
    print_success(
        "Plan",
        [&](json_writer& w) {
            // The plan streams straight into the envelope: no second copy of a large plan.
            w.flush();
            fd_sink out(STDOUT_FILENO);
            write_plan_json(p, out);
            w.raw_value("");
        },
        s.diags);
    return status(exit_status::success);
}

}  // namespace agentctl::cli
