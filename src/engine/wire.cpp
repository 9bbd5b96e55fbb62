// The wire format: envelopes, events, reports (docs/CLI.md, "Machine output").
#include <agentctl/wire.hpp>

#include <agentctl/doctor.hpp>
#include <agentctl/engine.hpp>
#include <agentctl/events.hpp>
#include <agentctl/journal.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/version.hpp>
#include <agentctl/watchdog.hpp>

#include "engine/outcome.hpp"

#include <boost/json/object.hpp>
#include <boost/version.hpp>

#include <cstring>
#include <memory>
#include <unordered_map>

namespace json = boost::json;

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
    if (error && is_persistence(error->code)) return static_cast<int>(exit_status::persistence);
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
    if (!r.slurm_worker.empty()) w.member("worker", r.slurm_worker);
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

void write_sweep_report(json_writer& w, const sweep_report& r) {
    w.begin_object();
    w.key("cgroups");
    w.begin_array();
    for (const auto& c : r.cgroups) {
        w.begin_object();
        w.member("path", c.path);
        w.member("ownerPid", static_cast<std::int64_t>(c.owner_pid));
        w.member("processesKilled", static_cast<std::uint64_t>(c.processes_killed));
        w.member("removed", c.removed);
        if (!c.error.empty()) w.member("error", c.error);
        w.end_object();
    }
    w.end_array();
    w.key("containers");
    w.begin_array();
    for (const auto& c : r.containers) {
        w.begin_object();
        w.member("engine", c.engine);
        w.member("name", c.name);
        w.member("removed", c.removed);
        if (!c.error.empty()) w.member("error", c.error);
        w.end_object();
    }
    w.end_array();
    if (!r.slurm_cancelled.empty() || !r.slurm_left.empty()) {
        w.key("slurmJobs");
        w.begin_object();
        w.key("cancelled");
        w.begin_array();
        for (const auto& j : r.slurm_cancelled) w.string(j);
        w.end_array();
        w.key("left");
        w.begin_array();
        for (const auto& j : r.slurm_left) w.string(j);
        w.end_array();
        w.end_object();
    }
    w.end_object();
}

void write_run_outcome(json_sink& out, const plan& p, const run_report& report, const diagnostics& diags,
                       const sweep_report* leftovers, result_source* results, stream_form streams) {
    json_writer w(out);
    w.begin_object();
    w.member("apiVersion", cli_api_version);
    w.member("kind", "RunOutcome");
    w.member("ok", report.state == run_state::succeeded);
    w.key("data");
    write_run_report(w, p, report, leftovers, results, streams);
    w.key("diagnostics");
    write_diagnostics(w, diags);
    w.end_object();
    w.flush();
    out.write("\n");
}

void write_event(json_writer& w, const plan& p, const run_event& e) {
    w.begin_object();
    w.member("event", e.kind == run_event::kind_t::task_started     ? "taskStarted"
                      : e.kind == run_event::kind_t::attempt_failed ? "attemptFailed"
                                                                    : "taskFinished");
    w.member("taskId", p.task_id(e.task_index));
    w.member("attempt", static_cast<std::uint64_t>(e.attempt));
    w.member("elapsedMs", static_cast<std::uint64_t>(
                              std::chrono::duration_cast<std::chrono::milliseconds>(e.elapsed).count()));
    if (e.kind == run_event::kind_t::attempt_failed)
        w.member("retryInMs", static_cast<std::uint64_t>(e.retry_in_ms));
    if (e.result) {
        w.key("result");
        write_task_result(w, p, e.task_index, *e.result);
    }
    w.end_object();
}

void journal_results::each(std::uint32_t first, std::uint32_t end, bool with_streams,
                           const std::function<bool(std::uint32_t, task_result&)>& fn) {
    auto e = db_.for_each_result(run_id_, with_streams, first, end,
                                 [&](journal_task_result& r) { return fn(r.task_index, r.result); });
    if (e && !error) error = std::move(e);
}

namespace {

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void write_output(json_writer& w, const plan& p, std::uint32_t index, const json::value& output);

// One item of an aggregate's output, with the child's output as write_output() shows it.
void write_item(json_writer& w, const plan& p, const json::object& item, std::uint32_t child) {
    w.begin_object();
    for (const auto& m : item) {
        w.key(m.key());
        if (m.key() == "output")
            write_output(w, p, child, m.value());
        else
            w.value(m.value());
    }
    w.end_object();
}

// A task's output as it appears in a document: without the copies of its streams, and for an
// aggregate, its items without their children's.
void write_output(json_writer& w, const plan& p, std::uint32_t index, const json::value& output) {
    const plan_task& t = p.node(index);
    if (t.kind == plan_task::kind_t::aggregate && output.is_object()) {
        const json::object& o = output.get_object();
        w.begin_object();
        for (const auto& m : o) {
            w.key(m.key());
            if (m.key() != "items" || !m.value().is_array()) {
                w.value(m.value());
                continue;
            }
            w.begin_array();
            for (const auto& item : m.value().get_array()) {
                const json::object* io = item.if_object();
                const json::value* n = io ? io->if_contains("index") : nullptr;
                std::optional<std::uint32_t> child;
                if (n && n->is_number()) {
                    auto k = n->to_number<std::uint64_t>();
                    if (k < t.child_count) child = t.first_child + static_cast<std::uint32_t>(k);
                }
                if (!io || !child)
                    w.value(item);
                else
                    write_item(w, p, *io, *child);
            }
            w.end_array();
        }
        w.end_object();
        return;
    }
    if (output_holds_streams(p, index) && output.is_object()) {
        w.begin_object();
        for (const auto& m : output.get_object()) {
            if (m.key() == "stdout" || m.key() == "stderr") continue;
            w.key(m.key());
            w.value(m.value());
        }
        w.end_object();
        return;
    }
    w.value(output);
}

// An aggregate recorded without its items: `{"items": [...]}` read from its children's
// results, one child at a time (a child without one is listed as skipped, as it was).
void write_released_output(json_writer& w, const plan& p, std::uint32_t index, result_source& results) {
    const plan_task& t = p.node(index);
    const std::uint32_t end = t.first_child + t.child_count;
    std::uint32_t next = t.first_child;
    w.begin_object();
    w.key("items");
    w.begin_array();
    auto missing_until = [&](std::uint32_t stop) {
        for (; next < stop; ++next) write_item(w, p, aggregate_item(p, next, nullptr), next);
    };
    results.each(t.first_child, end, false, [&](std::uint32_t child, task_result& r) {
        missing_until(child);
        write_item(w, p, aggregate_item(p, child, &r), child);
        next = child + 1;
        return true;
    });
    missing_until(end);
    w.end_array();
    w.end_object();
}

// A run report names a released aggregate twice (in `tasks` and in `output`), and its items
// are its children's results, which the report's `tasks` has just read back from the journal
// (children come before their aggregate, in order). So the items are gathered as the children
// pass by and written at the aggregate; their text is kept for its second time. Each child's
// result is read back once, not three times (docs/DESIGN.md, "Where a task's time goes").
// Items that would take more than max_kept_bytes are read back as before.
class released_outputs {
public:
    static constexpr std::size_t max_kept_bytes = 16 * 1024 * 1024;

    /// Child `child` as the report's `tasks` passes it: `r` its result, streams included, or
    /// nullptr when it has none (its item lists it as skipped, as write_released_output() does).
    void gather(const plan& p, std::uint32_t child, const task_result* r) {
        const plan_task& t = p.node(child);
        if (t.kind != plan_task::kind_t::child) return;
        auto [it, first] = gathering_.try_emplace(p.expansions[t.expansion_slot].aggregate);
        gathered& g = it->second;
        if (first) g.next = t.first_child;
        if (g.abandoned) return;
        // An output that holds copies of the streams other than a shell's (which items leave
        // out) would carry them here and not when read back without them.
        if (child != g.next || (r && r->streams_in_output && !output_holds_streams(p, child))) {
            g.abandon();
            return;
        }
        if (!g.writer) {
            g.writer = std::make_unique<json_writer>(g.text);
            g.writer->begin_object();
            g.writer->key("items");
            g.writer->begin_array();
        }
        write_item(*g.writer, p, aggregate_item(p, child, r), child);
        g.writer->flush();
        ++g.next;
        if (g.text.text.size() > max_kept_bytes) g.abandon();
    }

    /// Aggregate `index` was written with its items: what was gathered for it goes.
    void forget(std::uint32_t index) { gathering_.erase(index); }

    /// The released aggregate `index`'s output: gathered, written before, or read back.
    void write(json_writer& w, const plan& p, std::uint32_t index, result_source& results) {
        if (auto it = kept_.find(index); it != kept_.end()) {
            w.raw_value(it->second);
            return;
        }
        std::string text;
        const plan_task& t = p.node(index);
        if (auto it = gathering_.find(index); it != gathering_.end()) {
            gathered& g = it->second;
            if (!g.abandoned && g.writer && g.next == t.first_child + t.child_count) {
                g.writer->end_array();
                g.writer->end_object();
                g.writer->flush();
                text = std::move(g.text.text);
            }
            gathering_.erase(it);
        }
        if (text.empty()) {
            string_sink read;
            {
                json_writer items(read);
                write_released_output(items, p, index, results);
            }
            text = std::move(read.text);
        }
        w.raw_value(text);
        if (text.size() <= max_kept_bytes) kept_.emplace(index, std::move(text));
    }

private:
    struct gathered {
        string_sink text;
        std::unique_ptr<json_writer> writer;  // writes into `text`
        std::uint32_t next = 0;               // the child expected next
        bool abandoned = false;
        void abandon() {
            abandoned = true;
            writer.reset();
            std::string().swap(text.text);
        }
    };
    std::unordered_map<std::uint32_t, gathered> gathering_;  // by the aggregate's plan index
    std::unordered_map<std::uint32_t, std::string> kept_;    // by the aggregate's plan index
};

// One captured stream as stream_form says.
void write_stream(json_writer& w, std::string_view name, std::string_view bytes, stream_form form) {
    if (form == stream_form::text || is_text(bytes)) {
        w.member(name, bytes);
        return;
    }
    w.key(name);
    w.null();
    w.key(std::string(name) + "Base64");
    w.base64(bytes);
}

// The results a report holds itself (a run without a journal), without their streams: what an
// aggregate recorded without its items needs of its children.
class report_results final : public result_source {
public:
    explicit report_results(const std::vector<task_result>& tasks) : tasks_(tasks) {}
    void each(std::uint32_t first, std::uint32_t end, bool with_streams,
              const std::function<bool(std::uint32_t, task_result&)>& fn) override {
        for (std::uint32_t i = first; i < end && i < tasks_.size(); ++i) {
            task_result r = with_streams ? tasks_[i] : without_streams(tasks_[i]);
            if (!fn(i, r)) return;
        }
    }

private:
    const std::vector<task_result>& tasks_;
};

// A task whose final result is neither in the report nor readable (its journal failed during
// the run): what the run's outcome still says of it.
task_result result_of_outcome(const task_outcome& o) {
    task_result r;
    r.state = o.state;
    r.attempts = o.attempts;
    r.reused = o.reused;
    r.error = task_error{error_code::journal_failed, "the task's result was not recorded in the run journal"};
    return r;
}

// write_task_result(), with the released aggregates' items of the report it is part of.
void write_task_result(json_writer& w, const plan& p, std::uint32_t index, const task_result& r,
                       result_source* results, stream_form streams, released_outputs* released) {
    w.begin_object();
    w.member("state", to_string(r.state));
    w.member("attempts", static_cast<std::uint64_t>(r.attempts));
    w.key("exitCode");
    if (r.exit_code) w.number(*r.exit_code);
    else w.null();
    w.key("signal");
    if (r.signal) w.string(signal_name(*r.signal));
    else w.null();
    w.member("durationMs", r.duration_ms);
    if (r.reused) w.member("reused", true);
    if (!r.argv.empty()) {
        w.key("argv");
        w.begin_array();
        for (const auto& a : r.argv) w.string(a);
        w.end_array();
    }
    if (p.node(index).kind == plan_task::kind_t::child) {
        w.key("vars");
        w.value(json::value(p.vars_of(index)));
    }
    if (!r.command.empty()) w.member("command", r.command);
    if (!r.isolation.empty()) w.member("isolation", r.isolation);
    if (!r.engine.empty()) w.member("engine", r.engine);
    if (!r.backend.empty() && r.backend != "local") write_backend(w, r);
    if (!r.containment.empty()) {
        w.member("containment", r.containment);
        w.member("descendantsKilled", static_cast<std::uint64_t>(r.descendants_killed));
    }
    if (!r.isolation.empty()) {
        write_stream(w, "stdout", stdout_of(r), streams);
        write_stream(w, "stderr", stderr_of(r), streams);
        if (r.stdout_lossy) w.member("stdoutLossy", true);
        if (r.stderr_lossy) w.member("stderrLossy", true);
        // Empty streams that are not silence: the output went straight to agentctl's (-u).
        if (r.output_passed_through) w.member("outputPassedThrough", true);
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
    w.key("output");
    if (r.output_released && results && p.node(index).kind == plan_task::kind_t::aggregate) {
        if (released)
            released->write(w, p, index, *results);
        else
            write_released_output(w, p, index, *results);
    } else {
        write_output(w, p, index, r.output);
        if (released) released->forget(index);
    }
    w.end_object();
}

}  // namespace

void write_task_result(json_writer& w, const plan& p, std::uint32_t index, const task_result& r,
                       result_source* results, stream_form streams) {
    write_task_result(w, p, index, r, results, streams, nullptr);
}

void write_run_report(json_writer& w, const plan& p, const run_report& report, const sweep_report* leftovers,
                      result_source* results, stream_form streams) {
    report_results held(report.tasks);
    if (!results && !report.tasks.empty()) results = &held;
    released_outputs released;
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
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(p.size(), report.outcomes.size()));
    std::uint32_t next = 0;
    auto unrecorded_until = [&](std::uint32_t stop) {
        for (; next < stop; ++next) {
            w.key(p.task_id(next));
            write_task_result(w, p, next, result_of_outcome(report.outcomes[next]), results, streams,
                              &released);
            if (results) released.gather(p, next, nullptr);
        }
    };
    if (!report.tasks.empty()) {
        for (std::uint32_t i = 0; i < n && i < report.tasks.size(); ++i) {
            w.key(p.task_id(i));
            write_task_result(w, p, i, report.tasks[i], results, streams, &released);
        }
    } else if (!results) {
        unrecorded_until(n);
    } else {
        // One result at a time, streams included, from the journal: the document streams out
        // and memory stays flat.
        results->each(0, n, true, [&](std::uint32_t i, task_result& r) {
            unrecorded_until(i);
            // The resume's own flag: a result this segment took over reads as recorded earlier.
            r.reused = report.outcomes[i].reused;
            w.key(p.task_id(i));
            write_task_result(w, p, i, r, results, streams, &released);
            released.gather(p, i, &r);
            next = i + 1;
            return true;
        });
        unrecorded_until(n);
    }
    w.end_object();
    w.key("output");
    if (p.outputs.empty() && report.output.is_object()) {
        // task id -> output: the streams are in `tasks` already.
        w.begin_object();
        for (const auto& m : report.output.get_object()) {
            w.key(m.key());
            auto i = p.find(m.key());
            if (i && m.value().is_null() && results && p.node(*i).kind == plan_task::kind_t::aggregate)
                released.write(w, p, *i, *results);  // recorded without its items
            else if (i)
                write_output(w, p, *i, m.value());
            else
                w.value(m.value());
        }
        w.end_object();
    } else {
        w.value(report.output);
    }
    if (!p.source_run_id.empty()) {
        // A compensation run (docs/CONTROL_FLOW.md): its source, and the source tasks whose
        // effect it undid, in the order it undid them.
        w.member("mode", "compensation");
        w.member("sourceRunId", p.source_run_id);
        w.key("compensatedTasks");
        w.begin_array();
        for (std::uint32_t i = 0; i < n; ++i)
            if (report.outcomes[i].state == task_state::succeeded && !p.node(i).source_task_id.empty())
                w.string(p.node(i).source_task_id);
        w.end_array();
    }
    if (report.resumed) {
        // Which tasks this resume took over, and which it ran (again).
        w.key("resume");
        w.begin_object();
        for (bool reused : {true, false}) {
            w.key(reused ? "reused" : "executed");
            w.begin_array();
            for (std::uint32_t i = 0; i < n; ++i) {
                if (p.node(i).kind == plan_task::kind_t::aggregate) continue;
                const task_outcome& o = report.outcomes[i];
                if (reused ? o.reused : o.executed) w.string(p.task_id(i));
            }
            w.end_array();
        }
        w.end_object();
    }
    if (leftovers && !leftovers->empty()) {
        w.key("leftovers");
        write_sweep_report(w, *leftovers);
    }
    w.end_object();
}

void write_doctor_report(json_writer& w, const doctor_report& report) {
    auto write_checks = [&w](std::string_view key, const std::vector<doctor_check>& checks) {
        w.key(key);
        w.begin_array();
        for (const auto& c : checks) {
            w.begin_object();
            w.member("check", c.check);
            w.member("status", c.status);
            w.member("available", !c.failed() && c.status != "unchecked");
            w.member("detail", c.detail);
            w.member("action", c.action);
            w.member("subject", c.subject);
            w.member("blocking", c.blocking);
            w.end_object();
        }
        w.end_array();
    };
    w.begin_object();
    w.member("ready", report.ready);
    w.member("workflow", report.workflow);
    w.member("planDigest", report.plan_digest);
    w.member("workspace", report.workspace);
    write_checks("checks", report.checks);
    write_checks("unverified", report.unverified);
    w.member("scope", doctor_scope);
    w.end_object();
}

void write_check_result(json_writer& w, const plan& p) {
    w.begin_object();
    w.member("valid", true);
    w.member("workflow", p.workflow_name);
    w.member("workflowDigest", p.workflow_digest);
    w.member("planDigest", p.plan_digest);
    w.member("tasks", static_cast<std::uint64_t>(p.size()));
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
