// agentctl doctor FILE: can every process action run here? Runs nothing (see doctor.hpp).
#include "cli.hpp"

#include <agentctl/doctor.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/io_context.hpp>

#include <unistd.h>

namespace agentctl::cli {

std::optional<int> parse_doctor(command_line& cl, const arguments& a) {
    if (auto refused = parse_workflow_file(cl, a)) return refused;
    return parse_backend(cl, a);
}

int run_doctor(const command_line& cl, watchdog*) {
    session s = open_and_report(cl);
    if (!s.ok()) return status(s.status);
    const plan& p = *s.compiled;

    auto base = resolve_base_dir(cl.request());
    if (!base) return print_failure(cl, base.error().message, exit_status::usage);
    host_environment host = process_environment();
    doctor_options options;
    options.base_dir = *base;
    options.search_path = host.search_path;
    options.host_env = host.lookup;
    options.backend = cl.backend;
    options.slurm = cl.slurm;

    boost::asio::io_context io(1);
    std::optional<doctor_report> report;
    async_doctor(io.get_executor(), p, std::move(options), [&](doctor_report r) { report = std::move(r); });
    io.run();

    // Not ready is the reference's exit 6.
    exit_status result = report->ready ? exit_status::success : exit_status::not_ready;
    if (cl.output != output_format::human) {
        print_success(
            "DoctorResult", [&](json_writer& w) { write_doctor_report(w, *report); }, s.diags);
        return status(result);
    }
    print_diagnostics_human(cl, s.diags);
    bool color = use_color(cl, STDOUT_FILENO);
    std::string out;
    for (const auto& c : report->checks) {
        if (cl.quiet && !c.failed()) continue;
        std::string mark = c.failed()
                               ? (c.blocking ? paint(color, "1;31", "✗") : paint(color, "33", "-"))
                               : (c.status == "present" ? paint(color, "32", "✓") : paint(color, "33", "?"));
        out += mark + " " + c.check + ": " + c.status + " — " + c.detail + "\n";
    }
    if (!cl.quiet)
        for (const auto& c : report->unverified)
            out += paint(color, "33", "?") + " " + c.check + ": " + c.status + " — " + c.detail + "\n";
    out += report->ready
               ? paint(color, "1;32", "ready") + ": every process action of " + p.workflow_name +
                     " has what it needs here\n"
               : paint(color, "1;31", "not ready") + ": " + p.workflow_name + " cannot run here as it is\n";
    if (!cl.quiet) out += "execution readiness unverified (" + std::string(doctor_scope) + ")\n";
    fd_sink(STDOUT_FILENO).write(out);
    return status(result);
}

}  // namespace agentctl::cli
