// agentctl runs [list] | show RUN_ID [--task ID] [--stdout|--stderr] | gc [--keep N]: the
// journal read back (docs/CLI.md, "runs").
#include "cli.hpp"
#include "journal_cli.hpp"

#include <agentctl/session.hpp>
#include <agentctl/wire.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <cstdio>
#include <limits>

namespace json = boost::json;

namespace agentctl::cli {
namespace {

std::string terminal_text(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\t' || (c >= 0x20 && c != 0x7f)) {
            out.push_back(static_cast<char>(c));
        } else {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

std::string duration_text(std::optional<std::uint64_t> ms) {
    if (!ms) return "-";
    char buf[32];
    double s = *ms / 1000.0;
    if (s < 1)
        std::snprintf(buf, sizeof buf, "%llu ms", static_cast<unsigned long long>(*ms));
    else
        std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
    return buf;
}

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width) s.resize(width, ' ');
    return s;
}

journal_run_state shown_state(const journal_run& r) {
    if (r.state == journal_run_state::running && !owner_alive_here(r.owner))
        return journal_run_state::interrupted;
    return r.state;
}

// The stored document compiled with the stored inputs: the plan its results are indexed by.
std::optional<plan> stored_plan(const journal_run& run, std::string& why) {
    session_request request;
    request.file = run.workflow_path;
    request.source = run.workflow_source;
    boost::system::error_code ec;
    json::value inputs = json::parse(run.inputs_json, ec);
    if (!ec && inputs.is_object())
        for (const auto& m : inputs.get_object())
            request.inputs.push_back(std::string(m.key()) + "=" + json::serialize(m.value()));
    session s = open_session(request);
    if (!s.ok()) {
        why = "the stored workflow of run " + run.run_id + " no longer compiles (" + s.failure + ")";
        return std::nullopt;
    }
    return std::move(s.compiled);
}

void write_raw_or_null(json_writer& w, std::string_view key, const std::string& text) {
    w.key(key);
    if (text.empty())
        w.null();
    else
        w.raw_value(text);
}

void write_owner(json_writer& w, const journal_owner& o) {
    w.key("owner");
    w.begin_object();
    w.member("host", o.host);
    w.member("pid", o.pid);
    w.end_object();
}

// Whether the run's latest segment took this result over from an earlier one (a resume
// that reused it) rather than producing it.
bool taken_over(const journal_task_result& r, const journal_run& run) {
    return r.reused || r.segment < run.segment;
}

// ---------------------------------------------------------------------------------------------
// list

int runs_list(const command_line& cl) {
    journal_error error;
    auto path = journal_path(cl, false, error);
    if (!path) return print_journal_failure(cl, error);
    std::vector<journal_run_summary> runs;
    journal_open_options o;
    o.quick_check = false;  // its cost grows with the journal; damage met is still `corrupt`
    auto db = journal::open(*path, journal_access::read, o);
    // Nothing recorded yet at the default location is an empty list, not an error.
    bool none_yet = !db && db.error().code == journal_errc::missing && default_journal(cl);
    if (!db && !none_yet) return print_journal_failure(cl, db.error());
    if (db) {
        auto listed = db->list_runs(cl.limit.value_or(50), owner_alive_here);
        if (!listed) return print_journal_failure(cl, listed.error());
        runs = std::move(*listed);
    }
    if (cl.output != output_format::human) {
        print_success("RunList",
                      [&](json_writer& w) {
                          w.begin_object();
                          w.member("journal", *path);
                          w.key("runs");
                          w.begin_array();
                          for (const auto& r : runs) {
                              w.begin_object();
                              w.member("runId", r.run_id);
                              w.member("workflow", r.workflow_name);
                              w.member("workflowPath", r.workflow_path);
                              w.member("state", to_string(r.state));
                              w.member("startedAt", utc_text(r.created_ms));
                              w.key("durationMs");
                              if (r.duration_ms)
                                  w.number(*r.duration_ms);
                              else
                                  w.null();
                              w.member("segment", static_cast<std::uint64_t>(r.segment));
                              w.key("tasks");
                              w.begin_object();
                              w.member("total", static_cast<std::uint64_t>(r.task_count));
                              w.member("recorded", static_cast<std::uint64_t>(r.recorded));
                              w.member("reused", static_cast<std::uint64_t>(r.reused));
                              w.key("states");
                              w.begin_object();
                              for (const auto& [state, n] : r.tasks_by_state)
                                  w.member(state, static_cast<std::uint64_t>(n));
                              w.end_object();
                              w.end_object();
                              write_owner(w, r.owner);
                              w.end_object();
                          }
                          w.end_array();
                          w.end_object();
                      },
                      {});
        return status(exit_status::success);
    }
    if (runs.empty()) {
        standard_output().write("no runs recorded in " + terminal_text(*path) + "\n");
        return status(exit_status::success);
    }
    std::string out = pad("RUN ID", 38) + pad("WORKFLOW", 20) + pad("STATE", 12) + pad("STARTED", 22) +
                      pad("DURATION", 10) + "TASKS\n";
    for (const auto& r : runs) {
        std::string tasks = std::to_string(r.recorded) + "/" + std::to_string(r.task_count);
        std::string detail;
        for (const auto& [state, n] : r.tasks_by_state)
            detail += (detail.empty() ? "" : ", ") + std::to_string(n) + " " + state;
        if (r.reused) detail += (detail.empty() ? "" : ", ") + std::to_string(r.reused) + " reused";
        if (!detail.empty()) tasks += " (" + detail + ")";
        out += pad(r.run_id, 38) + pad(terminal_text(r.workflow_name), 20) +
               pad(std::string(to_string(r.state)), 12) + pad(utc_text(r.created_ms), 22) +
               pad(duration_text(r.duration_ms), 10) + tasks + "\n";
    }
    standard_output().write(out);
    return status(exit_status::success);
}

// ---------------------------------------------------------------------------------------------
// show

std::vector<std::string> tail_lines(std::string_view text, std::size_t n) {
    std::vector<std::string> lines;
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    while (!text.empty() && lines.size() < n) {
        auto nl = text.rfind('\n');
        std::string_view line = nl == std::string_view::npos ? text : text.substr(nl + 1);
        lines.insert(lines.begin(), terminal_text(line.substr(0, 400)));
        if (nl == std::string_view::npos) break;
        text = text.substr(0, nl);
    }
    return lines;
}

std::string result_line(const std::string& id, const task_result& r, bool reused) {
    bool good = r.state == task_state::succeeded || r.state == task_state::skipped;
    std::string line =
        std::string(good ? "✓ " : "✗ ") + terminal_text(id) + "  " + std::string(to_string(r.state));
    if (r.exit_code) line += " (exit " + std::to_string(*r.exit_code) + ")";
    line += "  " + duration_text(r.duration_ms);
    if (r.attempts > 1) line += "  " + std::to_string(r.attempts) + " attempts";
    if (reused) line += "  reused";
    if (r.error && !good) line += ": " + terminal_text(r.error->message);
    return line + "\n";
}

int show_stream(const command_line& cl, journal& db) {
    fd_sink out(STDOUT_FILENO);
    auto e = db.read_stream(cl.run_id, *cl.task,
                            cl.show_stdout ? journal_stream::stdout_stream : journal_stream::stderr_stream,
                            [&](std::string_view chunk) { out.write(chunk); });
    if (e) return print_journal_failure(cl, *e);
    return status(exit_status::success);
}

void write_attempt(json_writer& w, const journal_attempt& a) {
    w.begin_object();
    w.member("attempt", static_cast<std::uint64_t>(a.intent.attempt));
    w.member("segment", static_cast<std::uint64_t>(a.segment));
    w.member("startedAt", utc_text(a.intent_ms));
    w.key("state");
    if (a.end)
        w.string(to_string(a.end->state));
    else
        w.null();
    w.key("exitCode");
    if (a.end && a.end->exit_code)
        w.number(*a.end->exit_code);
    else
        w.null();
    w.member("uncertain", a.uncertain());
    w.member("backend", a.intent.backend);
    // Where it ran (Slurm): recorded with its end.
    if (a.end && !a.end->slurm_node.empty()) w.member("node", a.end->slurm_node);
    if (a.end && !a.end->slurm_worker.empty()) w.member("worker", a.end->slurm_worker);
    w.key("argv");
    w.begin_array();
    for (const auto& s : a.intent.argv) w.string(s);
    w.end_array();
    w.key("envNames");
    w.begin_array();
    for (const auto& s : a.intent.env_names) w.string(s);
    w.end_array();
    if (a.handle) {
        w.key("handle");
        w.begin_object();
        if (a.handle->pid) w.member("pid", *a.handle->pid);
        if (!a.handle->cgroup.empty()) w.member("cgroup", a.handle->cgroup);
        if (!a.handle->container.empty()) w.member("container", a.handle->container);
        if (!a.handle->slurm_job_id.empty()) w.member("slurmJobId", a.handle->slurm_job_id);
        w.end_object();
    }
    w.end_object();
}

int show_task(const command_line& cl, journal& db, const journal_run& run, const plan& p) {
    auto index = p.find(*cl.task);
    if (!index)
        return print_journal_failure(
            cl, {journal_errc::unknown_run,
                 "run " + run.run_id + " has no task \"" + *cl.task + "\" (journal " + db.path() + ")"});
    auto result = db.load_result_at(run.run_id, *index, true);
    if (!result) return print_journal_failure(cl, result.error());
    std::vector<journal_attempt> attempts;
    auto e = db.for_each_attempt(run.run_id, [&](journal_attempt& a) {
        if (a.intent.task_index == *index) attempts.push_back(std::move(a));
        return a.intent.task_index <= *index;
    });
    if (e) return print_journal_failure(cl, *e);
    if (cl.output != output_format::human) {
        print_success("TaskRecord",
                      [&](json_writer& w) {
                          w.begin_object();
                          w.member("runId", run.run_id);
                          w.member("taskId", *cl.task);
                          w.key("result");
                          if (*result) {
                              task_result r = (*result)->result;
                              r.reused = taken_over(**result, run);
                              journal_results children(db, run.run_id);
                              write_task_result(w, p, *index, r, &children, streams_for(cl));
                          } else {
                              w.null();
                          }
                          w.key("attempts");
                          w.begin_array();
                          for (const auto& a : attempts) write_attempt(w, a);
                          w.end_array();
                          w.end_object();
                      },
                      {});
        return status(exit_status::success);
    }
    std::string out;
    if (*result) {
        const task_result& r = (*result)->result;
        out += result_line(*cl.task, r, taken_over(**result, run));
        for (const char* which : {"stdout", "stderr"}) {
            auto lines = tail_lines(which[3] == 'o' ? stdout_of(r) : stderr_of(r), 10);
            if (lines.empty()) continue;
            out += std::string("  ") + which + " (last lines; --" + which + " prints all):\n";
            for (const auto& l : lines) out += "  | " + l + "\n";
        }
    } else {
        out += "? " + terminal_text(*cl.task) + "  no final result recorded\n";
    }
    for (const auto& a : attempts) {
        out += "  attempt " + std::to_string(a.intent.attempt) + " (segment " + std::to_string(a.segment) +
               ", " + utc_text(a.intent_ms) +
               "): " + (a.end ? std::string(to_string(a.end->state)) : "no end recorded") +
               (a.uncertain() ? ", uncertain" : "") +
               (a.end && !a.end->slurm_node.empty() ? ", node " + a.end->slurm_node : "") +
               (a.end && !a.end->slurm_worker.empty() ? ", " + a.end->slurm_worker : "") + "\n";
    }
    standard_output().write(out);
    return status(exit_status::success);
}

int runs_show(const command_line& cl) {
    int failed = 0;
    auto db = open_journal(cl, journal_access::read, failed);
    if (!db) return failed;
    auto run = db->load_run(cl.run_id);
    if (!run) return print_journal_failure(cl, run.error());
    if (cl.show_stdout || cl.show_stderr) return show_stream(cl, *db);
    std::string why;
    auto p = stored_plan(*run, why);
    if (!p) return print_failure(cl, why, exit_status::persistence);
    if (cl.task) return show_task(cl, *db, *run, *p);
    auto uncertain = db->uncertain_attempts(cl.run_id);
    if (!uncertain) return print_journal_failure(cl, uncertain.error());
    journal_run_state state = shown_state(*run);
    std::optional<journal_error> read_error;
    diagnostics warnings;
    warn_running_leftovers(*db, cl.run_id, warnings);

    if (cl.output != output_format::human) {
        print_success("RunRecord",
                      [&](json_writer& w) {
                          w.begin_object();
                          w.member("runId", run->run_id);
                          w.member("workflow", run->workflow_name);
                          w.member("workflowPath", run->workflow_path);
                          w.member("workflowDigest", run->workflow_digest);
                          w.member("planDigest", run->plan_digest);
                          w.member("state", to_string(state));
                          w.member("startedAt", utc_text(run->created_ms));
                          w.key("durationMs");
                          if (run->duration_ms)
                              w.number(*run->duration_ms);
                          else
                              w.null();
                          w.member("segment", static_cast<std::uint64_t>(run->segment));
                          w.member("agentctlVersion", run->agentctl_version);
                          write_owner(w, run->owner);
                          write_raw_or_null(w, "argv", run->argv_json);
                          write_raw_or_null(w, "inputs", run->inputs_json);
                          write_raw_or_null(w, "options", run->options_json);
                          if (run->error) {
                              w.key("error");
                              w.begin_object();
                              w.member("code", to_string(run->error->code));
                              w.member("message", run->error->message);
                              w.end_object();
                          }
                          w.key("tasks");
                          w.begin_object();
                          // One result at a time, streams included: the document streams out.
                          journal_results children(*db, cl.run_id);
                          read_error = db->for_each_result(cl.run_id, true, [&](journal_task_result& r) {
                              if (r.task_index >= p->size()) return true;
                              r.result.reused = taken_over(r, *run);
                              w.key(r.task_id);
                              write_task_result(w, *p, r.task_index, r.result, &children, streams_for(cl));
                              return true;
                          });
                          if (!read_error && children.error) read_error = children.error;
                          w.end_object();
                          w.key("uncertain");
                          w.begin_array();
                          for (const auto& a : *uncertain) {
                              w.begin_object();
                              w.member("taskId", a.intent.task_id);
                              w.member("attempt", static_cast<std::uint64_t>(a.intent.attempt));
                              w.key("state");
                              if (a.end)
                                  w.string(to_string(a.end->state));
                              else
                                  w.null();
                              w.end_object();
                          }
                          w.end_array();
                          w.end_object();
                      },
                      warnings);
        if (read_error) return print_journal_failure(cl, *read_error);
        return status(exit_status::success);
    }

    std::string head = "run " + run->run_id + " (" + terminal_text(run->workflow_name) + ", " +
                       terminal_text(run->workflow_path) + "): " + std::string(to_string(state)) +
                       ", started " + utc_text(run->created_ms) + ", " + duration_text(run->duration_ms) +
                       (run->segment ? ", resumed " + std::to_string(run->segment) + "x" : "") + "\n";
    if (run->error) head += "  error: " + terminal_text(run->error->message) + "\n";
    standard_output().write(head);
    std::size_t recorded = 0, countable = 0;
    for (const auto& t : p->nodes)
        if (t.kind != plan_task::kind_t::aggregate)
            countable += t.kind == plan_task::kind_t::child ? t.child_count : 1;
    read_error = db->for_each_result(cl.run_id, true, [&](journal_task_result& r) {
        if (r.task_index >= p->size() || p->node(r.task_index).kind == plan_task::kind_t::aggregate)
            return true;
        ++recorded;
        std::string out = result_line(r.task_id, r.result, taken_over(r, *run));
        const task_result& t = r.result;
        if (t.state != task_state::succeeded && t.state != task_state::skipped)
            for (const auto& l : tail_lines(stderr_of(t), 5)) out += "  | " + l + "\n";
        standard_output().write(out);
        return true;
    });
    if (read_error) return print_journal_failure(cl, *read_error);
    std::string tail;
    for (const auto& a : *uncertain)
        tail += "? " + terminal_text(a.intent.task_id) + "  uncertain: attempt " +
                std::to_string(a.intent.attempt) + " " +
                (a.end ? std::string(to_string(a.end->state)) : "has no end") + "\n";
    tail += std::to_string(recorded) + " of " + std::to_string(countable) + " tasks have a result";
    if (!uncertain->empty()) tail += "; " + std::to_string(uncertain->size()) + " uncertain";
    standard_output().write(tail + "\n");
    print_diagnostics_human(cl, warnings);
    return status(exit_status::success);
}

// ---------------------------------------------------------------------------------------------
// gc

int runs_gc(const command_line& cl) {
    int failed = 0;
    auto db = open_journal(cl, journal_access::write, failed);
    if (!db) return failed;
    dead_run_sweep swept = sweep_dead_runs(&*db, /*whole_host=*/true);
    if (swept.error) return print_journal_failure(cl, *swept.error);
    auto report = db->gc(cl.keep.value_or(std::numeric_limits<std::size_t>::max()), owner_alive_here);
    if (!report) return print_journal_failure(cl, report.error());
    if (cl.output != output_format::human) {
        print_success(
            "GcReport",
            [&](json_writer& w) {
                w.begin_object();
                w.member("journal", db->path());
                w.key("leftovers");
                write_sweep_report(w, swept.removed);
                w.key("interrupted");
                w.begin_array();
                for (const auto& id : swept.interrupted) w.string(id);
                w.end_array();
                w.member("runsRemoved", static_cast<std::uint64_t>(report->runs_removed));
                w.member("runsKept", static_cast<std::uint64_t>(report->runs_kept));
                w.member("liveRunsKept", static_cast<std::uint64_t>(report->live_runs_kept));
                w.member("orphanStreamsRemoved", static_cast<std::uint64_t>(report->orphan_streams_removed));
                w.member("bytesBefore", report->bytes_before);
                w.member("bytesAfter", report->bytes_after);
                w.end_object();
            },
            swept.warnings);
        return status(swept.removed.ok() ? exit_status::success : exit_status::run_failed);
    }
    print_diagnostics_human(cl, swept.warnings);
    print_leftovers_human(cl, swept.removed);
    std::string out;
    for (const auto& id : swept.interrupted)
        out += "run " + id + " was left running by a dead agentctl: now interrupted\n";
    out += "removed " + std::to_string(report->runs_removed) +
           (report->runs_removed == 1 ? " run" : " runs") + ", kept " + std::to_string(report->runs_kept);
    if (report->live_runs_kept) out += " (" + std::to_string(report->live_runs_kept) + " live)";
    if (report->orphan_streams_removed)
        out += ", removed " + std::to_string(report->orphan_streams_removed) + " orphan stream files";
    out += "; " + db->path() + ": " + std::to_string(report->bytes_before) + " -> " +
           std::to_string(report->bytes_after) + " bytes\n";
    standard_output().write(out);
    return status(swept.removed.ok() ? exit_status::success : exit_status::run_failed);
}

}  // namespace

std::optional<int> parse_runs(command_line& cl, const arguments& a) {
    if (auto refused = parse_journal_db(cl, a)) return refused;
    const auto& operands = a.operands;
    cl.runs_action = operands.empty() ? "list" : operands[0];
    std::size_t wanted = cl.runs_action == "show" ? 2 : 1;
    if (cl.runs_action != "list" && cl.runs_action != "show" && cl.runs_action != "gc")
        return usage_error(cl, "runs takes list, show RUN_ID or gc, not \"" + cl.runs_action + "\"");
    if (operands.size() > wanted || (cl.runs_action == "show" && operands.size() != 2))
        return usage_error(cl, cl.runs_action == "show" ? "runs show needs exactly one RUN_ID"
                                                        : "runs " + cl.runs_action + " takes no operand");
    if (cl.runs_action == "show") cl.run_id = operands[1];
    auto count = [&](const char* name, std::optional<std::size_t>& into,
                     const char* action) -> std::optional<int> {
        if (!a.has(name)) return std::nullopt;
        if (cl.runs_action != action)
            return usage_error(cl, std::string("--") + name + " applies to runs " + action + " only");
        into = number_of<std::size_t>(a.value(name));
        if (!into || *into > 1000000000)
            return usage_error(cl, std::string("--") + name + " must be a whole number");
        return std::nullopt;
    };
    if (auto c = count("limit", cl.limit, "list")) return c;
    if (auto c = count("keep", cl.keep, "gc")) return c;
    if (cl.limit && *cl.limit == 0) return usage_error(cl, "--limit must be at least 1");
    if (a.has("task")) {
        if (cl.runs_action != "show") return usage_error(cl, "--task applies to runs show only");
        cl.task = a.value("task");
    }
    cl.show_stdout = a.has("stdout");
    cl.show_stderr = a.has("stderr");
    if ((cl.show_stdout || cl.show_stderr) && !cl.task)
        return usage_error(cl, "--stdout and --stderr need --task ID");
    if (cl.show_stdout && cl.show_stderr) return usage_error(cl, "--stdout and --stderr exclude each other");
    return std::nullopt;
}

int run_runs(const command_line& cl, watchdog*) {
    if (cl.runs_action == "show") return runs_show(cl);
    if (cl.runs_action == "gc") return runs_gc(cl);
    return runs_list(cl);
}

}  // namespace agentctl::cli
