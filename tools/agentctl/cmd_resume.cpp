// agentctl resume RUN_ID: continue a run of the journal (the decisions are the library's
// prepare_resume(); this is the command line around it).
#include "cli.hpp"
#include "journal_cli.hpp"
#include "run_display.hpp"

#include <boost/json/parse.hpp>

namespace json = boost::json;

namespace agentctl::cli {
namespace {

int print_dry_run(const command_line& cl, journal& db, resume_plan& rp) {
    if (rp.journal_code) return print_journal_failure(cl, {*rp.journal_code, rp.message});
    diagnostics still_running;
    warn_running_leftovers(db, cl.run_id, still_running);
    rp.diags.append(still_running);
    if (!rp.compiled) return print_failure(cl, rp.message, rp.status, rp.diags);
    const plan& p = *rp.compiled;
    if (cl.output != output_format::human) {
        print_success(
            "ResumePlan",
            [&](json_writer& w) {
                w.begin_object();
                w.member("runId", rp.run.run_id);
                w.member("workflow", rp.run.workflow_name);
                w.member("segment", static_cast<std::uint64_t>(rp.run.segment));
                w.member("wouldRun", rp.ok());
                if (!rp.ok()) w.member("refusal", rp.message);
                w.key("tasks");
                w.begin_array();
                for (std::uint32_t i = 0; i < p.size(); ++i) {
                    w.begin_object();
                    w.member("taskId", p.task_id(i));
                    w.member("action", to_string(rp.decisions[i].action));
                    w.member("reason", rp.decisions[i].reason);
                    w.end_object();
                }
                w.end_array();
                w.end_object();
            },
            rp.diags);
        return status(rp.status);
    }
    std::string out;
    std::size_t counts[6] = {};
    for (std::uint32_t i = 0; i < p.size(); ++i) {
        const resume_decision& d = rp.decisions[i];
        ++counts[static_cast<int>(d.action)];
        if (d.action == resume_action::aggregate) continue;
        std::string action(to_string(d.action));
        action.resize(std::max<std::size_t>(action.size(), 12), ' ');
        out += action + p.task_id(i) + ": " + d.reason + "\n";
    }
    out += "resume " + rp.run.run_id + " would reuse " + std::to_string(counts[0] + counts[1]) + " and run " +
           std::to_string(counts[2] + counts[3]) + " of " + std::to_string(p.size() - counts[5]) + " tasks";
    if (counts[4]) out += "; " + std::to_string(counts[4]) + " uncertain";
    out += " (dry run: nothing was run)\n";
    standard_output().write(out);
    print_diagnostics_human(cl, still_running);
    if (!rp.ok()) return print_failure(cl, rp.message, rp.status);
    return status(exit_status::success);
}

// The command line that was given, with --rerun-uncertain (and the run's id for --last, which
// may name another run by then): what continues the run.
std::string rerun_command(const command_line& cl) {
    std::string out;
    bool added = false;
    for (const auto& word : cl.argv) {
        out += (out.empty() ? "" : " ") + shell_word(word == "--last" ? cl.run_id : word);
        if (!added && word == "resume") {
            out += " --rerun-uncertain";
            added = true;
        }
    }
    return out;
}

int print_refusal(const command_line& cl, journal& db, const resume_plan& rp) {
    if (rp.journal_code) return print_journal_failure(cl, {*rp.journal_code, rp.message});
    diagnostics d = rp.diags;
    warn_running_leftovers(db, cl.run_id, d);
    if (!rp.uncertain.empty() && cl.output == output_format::human) {
        // One line for the run, not two per task: how many, where to see them, and the
        // command that continues (the tasks are listed by --dry-run and runs show).
        std::size_t n = rp.uncertain.size();
        print_diagnostics_human(cl, d);
        return print_failure(cl,
                             "run " + cl.run_id + ": " + std::to_string(n) +
                                 (n == 1 ? " task was" : " tasks were") +
                                 " running when it stopped and may have had " + (n == 1 ? "its" : "their") +
                                 " effect; nothing was run (--dry-run lists them). To run " +
                                 (n == 1 ? "it" : "them") + " again: " + rerun_command(cl),
                             rp.status);
    }
    for (const auto& a : rp.uncertain)
        d.error("resume_uncertain", "",
                "task \"" + a.intent.task_id + "\": attempt " + std::to_string(a.intent.attempt) +
                    (a.end ? " ended " + std::string(to_string(a.end->state)) +
                                 (a.cleanup_failed ? ", cleanup failed" : "")
                           : " has an intent and no end: it may have had its effect"),
                "check what it did, then resume with --rerun-uncertain to run it again", {});
    return print_failure(cl, rp.message, rp.status, d);
}

// The stored run options over the command line's (--jobs given now wins).
command_line stored_options(const command_line& cl, const resume_plan& rp) {
    command_line r = cl;
    r.file = rp.run.workflow_path;
    boost::system::error_code ec;
    json::value v = json::parse(rp.run.options_json, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    if (!o) return r;
    if (!cl.jobs)
        if (auto* j = o->if_contains("jobs"); j && j->is_int64()) r.jobs = static_cast<int>(j->as_int64());
    if (auto* k = o->if_contains("keepGoing"); k && k->is_bool()) r.keep_going = k->as_bool();
    if (auto* c = o->if_contains("check"); c && c->is_bool()) r.check = c->as_bool();
    if (auto* d = o->if_contains("diff"); d && d->is_bool()) r.diff = d->as_bool();
    // The run's --timeout-seconds bounds the resumed part too, counted from the resume.
    if (auto* t = o->if_contains("timeoutSeconds"); t && t->is_number())
        r.timeout_seconds = t->to_number<double>();
    if (auto* b = o->if_contains("backend"); b && b->is_string())
        if (auto kind = backend_from_string(b->as_string())) r.backend = *kind;
    if (auto* s = o->if_contains("slurm"); s && s->is_object()) {
        const json::object& so = s->as_object();
        auto text = [&](const char* k) {
            auto* x = so.if_contains(k);
            return x && x->is_string() ? std::string(x->as_string()) : std::string();
        };
        r.slurm.partition = text("partition");
        r.slurm.account = text("account");
        r.slurm.qos = text("qos");
        if (auto* c = so.if_contains("cpusPerTask"); c && c->is_number())
            r.slurm.cpus_per_task = c->to_number<std::uint32_t>();
        if (auto* m = so.if_contains("memMiB"); m && m->is_number())
            r.slurm.mem_mib = m->to_number<std::uint64_t>();
        // The run's dispatch and the nodes it asked for: a resume asks for them again.
        for (const char* k : {"dispatch", "time"})
            if (std::string t = text(k); !t.empty()) set_slurm_option(r.slurm, k, t);
        if (auto* n = so.if_contains("nodes"); n && n->is_number())
            set_slurm_option(r.slurm, "nodes", std::to_string(n->to_number<std::uint32_t>()));
    }
    return r;
}

}  // namespace

void print_resume_summary(const command_line& cl, const plan& p, const run_report& report) {
    if (cl.quiet) return;
    std::size_t reused = 0, executed = 0;
    for (std::uint32_t i = 0; i < p.size() && i < report.outcomes.size(); ++i) {
        if (p.node(i).kind == plan_task::kind_t::aggregate) continue;
        reused += report.outcomes[i].reused;
        executed += report.outcomes[i].executed;
    }
    standard_error().write("resumed run " + report.run_id + ": " + std::to_string(reused) +
                           " tasks reused, " + std::to_string(executed) + " executed\n");
}

std::optional<int> parse_resume(command_line& cl, const arguments& a) {
    if (auto refused = parse_journal_db(cl, a)) return refused;
    if (auto refused = parse_jobs(cl, a)) return refused;
    cl.retry_failed = a.has("retry-failed");
    cl.rerun_uncertain = a.has("rerun-uncertain");
    cl.dry_run = a.has("dry-run");
    cl.last = a.has("last");
    if (cl.last && !a.operands.empty()) return usage_error(cl, "resume takes a RUN_ID or --last, not both");
    if (!cl.last && a.operands.size() != 1)
        return usage_error(cl, "resume needs exactly one RUN_ID (or --last)");
    if (!cl.last) cl.run_id = a.operands[0];
    return std::nullopt;
}

int run_resume(const command_line& given, watchdog* watch) {
    int failed = 0;
    auto db = open_journal(given, given.dry_run ? journal_access::read : journal_access::write, failed);
    if (!db) return failed;
    command_line cl = given;
    if (auto none = take_last_run(cl, *db)) return *none;
    resume_options o;
    o.retry_failed = cl.retry_failed;
    o.rerun_uncertain = cl.rerun_uncertain;
    resume_plan rp = prepare_resume(*db, cl.run_id, o, owner_alive_here);
    if (cl.dry_run) return print_dry_run(cl, *db, rp);
    if (!rp.ok()) return print_refusal(cl, *db, rp);
    command_line rcl = stored_options(cl, rp);
    if (cl.output == output_format::human) print_diagnostics_human(cl, rp.diags);
    if (auto refused = refuse_missing_commands(cl, *rp.compiled, rp.run.base_dir)) return *refused;

    // What the dead run (and any other) left goes first; then the claim, then the rest.
    dead_run_sweep swept = sweep_dead_runs(&*db, false);
    if (swept.error) return print_journal_failure(cl, *swept.error);
    diagnostics diags = rp.diags;
    diags.append(swept.warnings);
    if (cl.output == output_format::human) print_diagnostics_human(cl, swept.warnings);
    return execute_run(rcl, watch, *rp.compiled, diags, rp.run.base_dir, std::move(db), std::move(swept), {},
                       &rp);
}

}  // namespace agentctl::cli
