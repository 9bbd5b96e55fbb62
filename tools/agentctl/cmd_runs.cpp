// agentctl runs [list] | show RUN_ID [--task ID] [--stdout|--stderr] | gc [--keep N]: the
// journal read back (docs/CLI.md, "runs").
#include "cli.hpp"
#include "journal_cli.hpp"
#include "run_display.hpp"

#include <agentctl/compensation.hpp>
#include <agentctl/resume.hpp>
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

// `s` cut to `width` characters (code points, the last one then "…"), then padded to them
// and `gap` spaces.
std::string column(const std::string& s, std::size_t width, std::size_t gap = 1) {
    std::string out;
    std::size_t chars = 0;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t len = 1;
        while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xc0) == 0x80) ++len;
        if (chars + 1 == width && i + len < s.size()) {
            out += "…";
            ++chars;
            break;
        }
        out.append(s, i, len);
        ++chars;
        i += len;
    }
    return out + std::string(width - chars + gap, ' ');
}

// At most 6 characters: "850 ms", "2.50 s", "12.3 s", "17 min", "3.5 h".
std::string short_duration(std::optional<std::uint64_t> ms) {
    if (!ms) return "-";
    double s = *ms / 1000.0;
    char buf[32];
    if (s < 100) return duration_text(ms);
    if (s < 6000)
        std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
    else
        std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
    return buf;
}

// A journal past this size gets `runs gc` suggested under the list.
constexpr std::uint64_t gc_hint_bytes = std::uint64_t(1) << 30;

journal_run_state shown_state(const journal_run& r) {
    if (r.state == journal_run_state::running && !owner_alive_here(r.owner))
        return journal_run_state::interrupted;
    return r.state;
}

// The stored document compiled with the stored inputs: the plan its results are indexed by.
std::optional<plan> stored_plan(const journal_run& run, std::string& why) {
    // As resume compiles it: a compensation run's selection included.
    auto request = recorded_request(run);
    if (!request) {
        why = "the inputs of run " + run.run_id + " cannot be read";
        return std::nullopt;
    }
    session s = open_session(*request);
    if (!s.ok()) {
        why = "the stored workflow of run " + run.run_id + " no longer compiles (" + s.failure + ")";
        return std::nullopt;
    }
    return std::move(s.compiled);
}

void write_reconciliation(json_writer& w, const compensated_effect& e) {
    w.begin_object();
    w.member("status", "compensated");
    w.member("sourceRunId", e.source_run_id);
    w.member("sourceTaskId", e.source_task_id);
    w.member("compensationRunId", e.compensation_run_id);
    w.member("compensationTaskId", e.compensation_task_id);
    w.member("compensationEffectId", e.compensation_effect_id);
    w.end_object();
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

// What `runs show --failed` keeps: a task that ended badly, not one that was never started
// (a cancelled run's unstarted tasks) nor an aggregate (its children are shown).
bool failed_task(const plan& p, const journal_task_result& r) {
    const task_state s = r.result.state;
    if (p.node(r.task_index).kind == plan_task::kind_t::aggregate) return false;
    if (s == task_state::succeeded || s == task_state::skipped) return false;
    return !(s == task_state::cancelled && r.result.attempts == 0);
}

// Whether the run's latest segment took this result over from an earlier one (a resume
// that reused it) rather than producing it.
bool taken_over(const journal_task_result& r, const journal_run& run) {
    return r.reused || r.segment < run.segment;
}

// Its recorded id; a task recorded among unstarted ones has none in the journal: the plan's.
std::string id_of(const journal_task_result& r, const plan& p) {
    return r.task_id.empty() ? p.task_id(r.task_index) : r.task_id;
}

// ---------------------------------------------------------------------------------------------
// list

int runs_list(const command_line& cl) {
    journal_error error;
    auto path = journal_path(cl, false, error);
    if (!path) return print_journal_failure(cl, error);
    std::vector<journal_run_summary> runs;
    std::uint64_t bytes = 0;
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
        bytes = db->bytes();
    }
    if (cl.output != output_format::human) {
        print_success("RunList",
                      [&](json_writer& w) {
                          w.begin_object();
                          w.member("journal", *path);
                          w.member("journalBytes", bytes);
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
    // 80 columns: the full run id (to copy, or complete), a cut workflow name, the start in
    // UTC without the year, and the tasks that have a result of those that run, with the
    // failed ones (runs show has every state; --output json too). 64 columns before TASKS:
    // 15 are left, enough for "10000/10000 ✗10".
    std::string out = column("RUN ID", 20, 2) + column("WORKFLOW", 10) + column("STATE", 11) +
                      column("STARTED", 11) + column("TIME", 6) + "TASKS\n";
    for (const auto& r : runs) {
        std::string tasks = std::to_string(r.recorded) + "/" + std::to_string(r.task_count);
        std::uint32_t failed = 0;
        for (const auto& [state, n] : r.tasks_by_state)
            if (state != "succeeded" && state != "skipped" && state != "cancelled") failed += n;
        if (failed) tasks += " ✗" + std::to_string(failed);
        std::string started = utc_text(r.created_ms).substr(5, 11);  // MM-DDTHH:MM
        started[5] = ' ';
        out += column(r.run_id, 20, 2) + column(terminal_text(r.workflow_name), 10) +
               column(std::string(to_string(r.state)), 11) + column(started, 11) +
               column(short_duration(r.duration_ms), 6) + tasks + "\n";
    }
    out += "journal " + terminal_text(*path) + ": " + bytes_text(bytes);
    if (bytes >= gc_hint_bytes)
        out += "; agentctl runs gc --keep 20" + (cl.db ? " --db " + shell_word(*cl.db) : std::string()) +
               " removes all but the newest 20 runs";
    out += "\n";
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

// Whether the task's output went straight to agentctl's own stdout and stderr (-u), so that
// the journal holds none of it.
bool output_passed_through(journal& db, const journal_run& run, const std::string& task) {
    std::string why;
    auto p = stored_plan(run, why);
    auto index = p ? p->find(task) : std::nullopt;
    if (!index) return false;
    auto result = db.load_result_at(run.run_id, *index, false);
    return result && *result && (**result).result.output_passed_through;
}

int show_stream(const command_line& cl, journal& db, const journal_run& run) {
    fd_sink out(STDOUT_FILENO);
    std::uint64_t written = 0;
    auto e = db.read_stream(
        cl.run_id, *cl.task, cl.show_stdout ? journal_stream::stdout_stream : journal_stream::stderr_stream,
        [&](std::string_view chunk) {
            written += chunk.size();
            out.write(chunk);
        },
        cl.attempt);
    if (!e && written == 0 && !cl.attempt) {
        // Nothing recorded: silence, or output that was never captured (-u)? Say which.
        if (output_passed_through(db, run, *cl.task))
            standard_error().write(
                "agentctl: the output of " + terminal_text(*cl.task) +
                " was not captured: it went straight to agentctl's stdout and stderr (-u)\n");
    }
    if (e && e->code == journal_errc::unknown_run && !cl.attempt) {
        // A task recorded among unstarted ones has no row of its own, and no stream: its index
        // in the stored plan finds its result (the plan is compiled only then).
        std::string why;
        auto p = stored_plan(run, why);
        if (auto index = p ? p->find(*cl.task) : std::nullopt) {
            auto unstarted = db.load_result_at(run.run_id, *index, false);
            if (unstarted && *unstarted) e.reset();
        }
    }
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

// `runs show --task ID [--attempt N] --output json`: the TaskRecord document, its result
// written by `result`.
int print_task_record(const command_line& cl, const journal_run& run,
                      const std::vector<journal_attempt>& attempts,
                      const std::function<void(json_writer&)>& result) {
    print_success("TaskRecord",
                  [&](json_writer& w) {
                      w.begin_object();
                      w.member("runId", run.run_id);
                      w.member("taskId", *cl.task);
                      if (cl.attempt) w.member("attempt", static_cast<std::uint64_t>(*cl.attempt));
                      w.key("result");
                      result(w);
                      w.key("attempts");
                      w.begin_array();
                      for (const auto& a : attempts) write_attempt(w, a);
                      w.end_array();
                      w.end_object();
                  },
                  {});
    return status(exit_status::success);
}

// The last lines of a result's streams, for people.
std::string stream_tails(const task_result& r) {
    if (r.output_passed_through)
        return "  output: not captured (it went straight to agentctl's stdout and stderr: -u)\n";
    std::string out;
    for (const char* which : {"stdout", "stderr"}) {
        auto lines = tail_lines(which[3] == 'o' ? stdout_of(r) : stderr_of(r), 10);
        if (lines.empty()) continue;
        out += std::string("  ") + which + " (last lines; --" + which + " prints all):\n";
        for (const auto& l : lines) out += "  | " + l + "\n";
    }
    return out;
}

// `runs show --task ID --attempt N`: one attempt, an earlier one of a retried task too.
int show_attempt(const command_line& cl, journal& db, const journal_run& run, const plan& p,
                 std::uint32_t index) {
    auto loaded = db.load_attempt(run.run_id, *cl.task, *cl.attempt, true);
    if (!loaded) return print_journal_failure(cl, loaded.error());
    if (!*loaded)
        return print_journal_failure(
            cl, {journal_errc::unknown_run, "run " + run.run_id + " has no attempt " +
                                                std::to_string(*cl.attempt) + " of task \"" + *cl.task +
                                                "\" (journal " + db.path() + ")"});
    const journal_attempt& a = **loaded;
    if (cl.output != output_format::human) {
        return print_task_record(cl, run, {a}, [&](json_writer& w) {
            if (a.end)
                write_task_result(w, p, index, *a.end, nullptr, streams_for(cl));
            else
                w.null();
        });
    }
    std::string out = "attempt " + std::to_string(a.intent.attempt) + " of " + terminal_text(*cl.task) +
                      " (segment " + std::to_string(a.segment) + ", " + utc_text(a.intent_ms) + ")" +
                      (a.uncertain() ? ", uncertain" : "") + "\n";
    std::string argv;
    for (const auto& word : a.intent.argv) argv += (argv.empty() ? "" : " ") + shell_word(word);
    out += "  argv: " + terminal_text(argv) + "\n";
    if (a.end)
        out += "  " + result_line(*cl.task, *a.end, false) + stream_tails(*a.end);
    else
        out += "  no end recorded\n";
    standard_output().write(out);
    return status(exit_status::success);
}

int show_task(const command_line& cl, journal& db, const journal_run& run, const plan& p) {
    auto index = p.find(*cl.task);
    if (!index)
        return print_journal_failure(
            cl, {journal_errc::unknown_run,
                 "run " + run.run_id + " has no task \"" + *cl.task + "\" (journal " + db.path() + ")"});
    if (cl.attempt) return show_attempt(cl, db, run, p, *index);
    auto result = db.load_result_at(run.run_id, *index, true);
    if (!result) return print_journal_failure(cl, result.error());
    std::vector<journal_attempt> attempts;
    auto e = db.for_each_attempt(run.run_id, [&](journal_attempt& a) {
        if (a.intent.task_index == *index) attempts.push_back(std::move(a));
        return a.intent.task_index <= *index;
    });
    if (e) return print_journal_failure(cl, *e);
    if (cl.output != output_format::human) {
        return print_task_record(cl, run, attempts, [&](json_writer& w) {
            if (!*result) {
                w.null();
                return;
            }
            task_result r = (*result)->result;
            r.reused = taken_over(**result, run);
            journal_results children(db, run.run_id);
            write_task_result(w, p, *index, r, &children, streams_for(cl));
        });
    }
    std::string out;
    if (*result) {
        const task_result& r = (*result)->result;
        out += result_line(*cl.task, r, taken_over(**result, run)) + stream_tails(r);
    } else {
        out += "? " + terminal_text(*cl.task) + "  no final result recorded\n";
    }
    if (attempts.size() > 1) out += "  attempts (--attempt N shows one):\n";
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

int runs_show(const command_line& given) {
    int failed = 0;
    auto db = open_journal(given, journal_access::read, failed);
    if (!db) return failed;
    command_line cl = given;
    if (auto none = take_last_run(cl, *db)) return *none;
    auto run = db->load_run(cl.run_id);
    if (!run) return print_journal_failure(cl, run.error());
    if (cl.show_stdout || cl.show_stderr) return show_stream(cl, *db, *run);
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
    auto compensated = compensated_effects(*db, cl.run_id);
    if (!compensated) return print_journal_failure(cl, compensated.error());
    const std::vector<compensated_effect>& reconciliations = *compensated;

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
                          // Compensation (docs/CONTROL_FLOW.md): a compensation run names its
                          // source; any run lists the effects its compensation runs undid.
                          if (!p->source_run_id.empty()) {
                              w.member("mode", "compensation");
                              w.member("sourceRunId", p->source_run_id);
                          }
                          w.key("effectReconciliations");
                          w.begin_array();
                          for (const auto& e : reconciliations) write_reconciliation(w, e);
                          w.end_array();
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
                              if (cl.failed_only && !failed_task(*p, r)) return true;
                              r.result.reused = taken_over(r, *run);
                              w.key(id_of(r, *p));
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
    std::size_t recorded = 0, countable = 0, failures = 0;
    for (const auto& t : p->nodes)
        if (t.kind != plan_task::kind_t::aggregate)
            countable += t.kind == plan_task::kind_t::child ? t.child_count : 1;
    read_error = db->for_each_result(cl.run_id, true, [&](journal_task_result& r) {
        if (r.task_index >= p->size() || p->node(r.task_index).kind == plan_task::kind_t::aggregate)
            return true;
        ++recorded;
        bool bad = failed_task(*p, r);
        failures += bad;
        if (cl.failed_only && !bad) return true;
        std::string out = result_line(id_of(r, *p), r.result, taken_over(r, *run));
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
    if (cl.failed_only) tail += "; " + std::to_string(failures) + " failed";
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
    print_leftovers_human(cl, swept.removed, &swept.dead_owners);
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
    cl.last = a.has("last");
    cl.failed_only = a.has("failed");
    std::size_t wanted = cl.runs_action == "show" && !cl.last ? 2 : 1;
    if (cl.runs_action != "list" && cl.runs_action != "show" && cl.runs_action != "gc")
        return usage_error(cl, "runs takes list, show RUN_ID or gc, not \"" + cl.runs_action + "\"");
    if ((cl.last || cl.failed_only) && cl.runs_action != "show")
        return usage_error(cl, std::string(cl.last ? "--last" : "--failed") + " applies to runs show only");
    if (cl.last && operands.size() > 1)
        return usage_error(cl, "runs show takes a RUN_ID or --last, not both");
    if (operands.size() != wanted && (cl.runs_action == "show" || operands.size() > wanted))
        return usage_error(cl, cl.runs_action == "show" ? "runs show needs exactly one RUN_ID (or --last)"
                                                        : "runs " + cl.runs_action + " takes no operand");
    if (cl.runs_action == "show" && !cl.last) cl.run_id = operands[1];
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
    if (cl.failed_only && cl.task) return usage_error(cl, "--failed and --task exclude each other");
    if (a.has("attempt")) {
        if (!cl.task) return usage_error(cl, "--attempt needs --task ID");
        auto n = number_of<std::uint32_t>(a.value("attempt"));
        if (!n || *n == 0)
            return usage_error(cl, "--attempt " + a.value("attempt") + ": not an attempt number (1, 2, ...)");
        cl.attempt = *n;
    }
    return std::nullopt;
}

int run_runs(const command_line& cl, watchdog*) {
    if (cl.runs_action == "show") return runs_show(cl);
    if (cl.runs_action == "gc") return runs_gc(cl);
    return runs_list(cl);
}

}  // namespace agentctl::cli
