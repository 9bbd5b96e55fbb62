// agentctl doctor FILE: can every process action run here? Runs nothing (see doctor.hpp).
#include "cli.hpp"

#include <agentctl/doctor.hpp>

#include <boost/asio/io_context.hpp>

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace agentctl::cli {

int run_doctor(const command_line& cl) {
    compiled_workflow loaded = load_and_compile(cl);
    if (loaded.exit_status != 0) return loaded.exit_status;
    const plan& p = *loaded.compiled;

    std::string dir = cl.workspace ? *cl.workspace : cl.file;
    if (!cl.workspace) {
        auto slash = dir.rfind('/');
        dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : dir.substr(0, slash));
    }
    char buf[PATH_MAX];
    if (!::realpath(dir.c_str(), buf))
        return print_failure(cl, "cannot resolve " + dir + ": " + std::strerror(errno), exit_code::usage);

    doctor_options options;
    options.base_dir = buf;
    const char* path = std::getenv("PATH");
    options.search_path = path ? path : "/usr/local/bin:/usr/bin:/bin";
    options.host_env = [](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
    boost::asio::io_context io(1);
    std::optional<doctor_report> report;
    async_doctor(io.get_executor(), p, std::move(options), [&](doctor_report r) { report = std::move(r); });
    io.run();

    int status = report->ready ? exit_code::success : exit_code::run_failed;
    if (cl.output != output_format::human) {
        print_success(cl, "DoctorResult", [&](json_writer& w) { write_doctor_report(w, *report); }, loaded.diags);
        return status;
    }
    print_diagnostics_human(cl, loaded.diags);
    bool color = use_color(cl, STDOUT_FILENO);
    auto paint = [&](const char* code, std::string_view text) {
        return color ? std::string("\x1b[") + code + "m" + std::string(text) + "\x1b[0m" : std::string(text);
    };
    std::string out;
    for (const auto& c : report->checks) {
        if (cl.quiet && !c.failed()) continue;
        std::string mark = c.failed() ? (c.blocking ? paint("1;31", "✗") : paint("33", "-"))
                                      : (c.status == "ok" ? paint("32", "✓") : paint("33", "?"));
        out += mark + " " + (c.action.empty() ? std::string("workflow") : c.action) + "  " + c.check + " " +
               c.subject + ": " + c.status + " — " + c.detail + "\n";
    }
    out += report->ready ? paint("1;32", "ready") + ": every process action of " + p.workflow_name + " can run here\n"
                         : paint("1;31", "not ready") + ": " + p.workflow_name + " cannot run here as it is\n";
    fd_sink(STDOUT_FILENO).write(out);
    return status;
}

}  // namespace agentctl::cli
