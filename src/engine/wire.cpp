// The wire format: envelopes, events, reports (docs/CLI.md, "Machine output").
#include <agentctl/wire.hpp>

#include <agentctl/version.hpp>

#include <boost/version.hpp>

namespace agentctl {

std::string_view to_string(run_state s) {
    switch (s) {
        case run_state::succeeded:
            return "succeeded";
        case run_state::failed:
            return "failed";
        case run_state::cancelled:
            return "cancelled";
    }
    return "failed";
}

std::string_view to_string(task_state s) {
    switch (s) {
        case task_state::succeeded:
            return "succeeded";
        case task_state::failed:
            return "failed";
        case task_state::timed_out:
            return "timed_out";
        case task_state::cancelled:
            return "cancelled";
        case task_state::output_limit_exceeded:
            return "output_limit_exceeded";
        case task_state::spawn_failed:
            return "spawn_failed";
        case task_state::skipped:
            return "skipped";
    }
    return "failed";
}

int run_report::exit_code() const {
    if (state == run_state::succeeded) return static_cast<int>(exit_status::success);
    if (state == run_state::cancelled) return static_cast<int>(exit_status::cancelled);
    if (error && is_policy(error->code)) return static_cast<int>(exit_status::policy);
    return static_cast<int>(exit_status::run_failed);
}

namespace {

// `"backend": "slurm", "slurm": {jobId?, node?, state?}`; nothing for the local backend, so
// that local results keep their shape.
void write_backend(json_writer& w, const task_result& r) {
    w.member("backend", r.backend);
    if (r.backend != "slurm") return;
    w.key("slurm");
    w.begin_object();
    if (r.slurm_job_id) w.member("jobId", *r.slurm_job_id);
    if (!r.slurm_node.empty()) w.member("node", r.slurm_node);
    if (!r.slurm_state.empty()) w.member("state", r.slurm_state);
    w.end_object();
}

void write_error(json_writer& w, const task_error& e) {
    w.begin_object();
    w.member("code", to_string(e.code));
    w.member("message", e.message);
    w.end_object();
}

}  // namespace

void write_success_envelope(json_sink& out, std::string_view kind,
                            const std::function<void(json_writer&)>& write_data, const diagnostics& diags) {
    json_writer w(out);
    w.begin_object();
    w.member("apiVersion", cli_api_version);
    w.member("kind", kind);
    w.member("ok", true);
    w.key("data");
    write_data(w);
    w.key("diagnostics");
    write_diagnostics(w, diags);
    w.end_object();
    w.flush();
    out.write("\n");
}

void write_error_envelope(json_sink& out, std::string_view message, exit_status status,
                          const diagnostics& diags) {
    {
        json_writer w(out);
        w.begin_object();
        w.member("apiVersion", cli_api_version);
        w.member("kind", "Error");
        w.member("ok", false);
        w.key("error");
        w.begin_object();
        w.member("message", message);
        w.member("exitCode", static_cast<int>(status));
        w.end_object();
        w.key("diagnostics");
        write_diagnostics(w, diags);
        w.end_object();
    }
    out.write("\n");
}

void write_run_outcome(json_sink& out, const plan& p, const run_report& report, const diagnostics& diags) {
    json_writer w(out);
    w.begin_object();
    w.member("apiVersion", cli_api_version);
    w.member("kind", "RunOutcome");
    w.member("ok", report.state == run_state::succeeded);
    w.key("data");
    write_run_report(w, p, report);
    w.key("diagnostics");
    write_diagnostics(w, diags);
    w.end_object();
    w.flush();
    out.write("\n");
}

void write_event(json_writer& w, const plan& p, const run_event& e) {
    w.begin_object();
    w.member("event", e.kind == run_event::kind_t::task_started ? "taskStarted" : "taskFinished");
    w.member("task", p.tasks[e.task_index].id);
    w.member("attempt", static_cast<std::uint64_t>(e.attempt));
    w.member("elapsedMs", static_cast<std::uint64_t>(
                              std::chrono::duration_cast<std::chrono::milliseconds>(e.elapsed).count()));
    if (e.result) {
        w.key("result");
        write_task_result(w, *e.result);
    }
    w.end_object();
}

void write_task_result(json_writer& w, const task_result& r) {
    w.begin_object();
    w.member("state", to_string(r.state));
    w.member("attempts", static_cast<std::uint64_t>(r.attempts));
    if (r.exit_code) w.member("exitCode", *r.exit_code);
    if (r.signal) w.member("signal", *r.signal);
    w.member("durationMs", r.duration_ms);
    if (!r.command.empty()) w.member("command", r.command);
    if (!r.isolation.empty()) w.member("isolation", r.isolation);
    if (!r.engine.empty()) w.member("engine", r.engine);
    if (!r.backend.empty() && r.backend != "local") write_backend(w, r);
    if (!r.containment.empty()) {
        w.member("containment", r.containment);
        w.member("descendantsKilled", static_cast<std::uint64_t>(r.descendants_killed));
    }
    if (!r.isolation.empty()) {
        w.member("stdout", stdout_of(r));
        w.member("stderr", stderr_of(r));
        if (r.stdout_lossy) w.member("stdoutLossy", true);
        if (r.stderr_lossy) w.member("stderrLossy", true);
        w.key("usage");
        w.begin_object();
        w.member("userMs", r.usage.user_us / 1000);
        w.member("systemMs", r.usage.system_us / 1000);
        w.member("maxRssKiB", r.usage.max_rss_kib);
        w.end_object();
    }
    if (!r.limit_stream.empty()) {
        w.member("limitStream", r.limit_stream);
        w.member("limitBytes", r.limit_bytes);
    }
    if (r.error) {
        w.key("error");
        write_error(w, *r.error);
    }
    w.member("output", r.output);
    w.end_object();
}

void write_run_report(json_writer& w, const plan& p, const run_report& report) {
    w.begin_object();
    w.member("runId", report.run_id);
    w.member("state", to_string(report.state));
    w.member("durationMs", static_cast<std::uint64_t>(report.duration.count()));
    if (report.error) {
        w.key("error");
        write_error(w, *report.error);
    }
    w.key("tasks");
    w.begin_object();
    for (std::size_t i = 0; i < p.tasks.size() && i < report.tasks.size(); ++i) {
        w.key(p.tasks[i].id);
        write_task_result(w, report.tasks[i]);
    }
    w.end_object();
    w.member("output", report.output);
    w.end_object();
}

void write_doctor_report(json_writer& w, const doctor_report& report) {
    w.begin_object();
    w.member("ready", report.ready);
    w.member("workspace", report.workspace);
    w.key("checks");
    w.begin_array();
    for (const auto& c : report.checks) {
        w.begin_object();
        w.member("action", c.action);
        w.member("check", c.check);
        w.member("subject", c.subject);
        w.member("status", c.status);
        w.member("detail", c.detail);
        w.member("blocking", c.blocking);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

void write_check_result(json_writer& w, const plan& p) {
    w.begin_object();
    w.member("valid", true);
    w.member("workflow", p.workflow_name);
    w.member("workflowDigest", p.workflow_digest);
    w.member("planDigest", p.plan_digest);
    w.member("tasks", static_cast<std::uint64_t>(p.tasks.size()));
    w.end_object();
}

void write_version(json_writer& w) {
    w.begin_object();
    w.member("version", version());
    w.member("apiVersion", cli_api_version);
    w.member("planFormatVersion", plan_format_version);
    w.member("boost", BOOST_LIB_VERSION);
    w.end_object();
}

}  // namespace agentctl
