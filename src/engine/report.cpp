// The RunOutcome data object and task results as JSON.
#include <agentctl/engine.hpp>

namespace agentctl {

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
        w.begin_object();
        w.member("code", r.error->code);
        w.member("message", r.error->message);
        w.end_object();
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
        w.begin_object();
        w.member("code", report.error->code);
        w.member("message", report.error->message);
        w.end_object();
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

}  // namespace agentctl
