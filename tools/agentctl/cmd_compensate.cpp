// agentctl compensate RUN_ID [--plan] [--task ID]: undo what a finished run did, by a
// compensation run linked to it (docs/CONTROL_FLOW.md, "Compensation"). The decisions are the
// library's prepare_compensation(); this is the command line around it.
#include "cli.hpp"
#include "journal_cli.hpp"

#include <agentctl/compensation.hpp>
#include <agentctl/resume.hpp>
#include <agentctl/version.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace json = boost::json;

namespace agentctl::cli {
namespace {

void write_plan(json_writer& w, const compensation_plan& cp) {
    w.begin_object();
    w.member("sourceRunId", cp.source.run_id);
    w.member("executable", cp.executable());
    if (!cp.run_id.empty()) w.member("runId", cp.run_id);
    w.key("tasks");
    w.begin_array();
    for (std::size_t i = 0; i < cp.request.items.size(); ++i) {
        const auto& item = cp.request.items[i];
        w.begin_object();
        w.member("taskId", compensation_task_id(item.source_task_id));
        w.member("sourceTaskId", item.source_task_id);
        w.member("uses", "action:" + cp.actions[i]);
        w.member("with", item.with);
        w.end_object();
    }
    w.end_array();
    w.key("alreadyCompensatedEffects");
    w.begin_array();
    for (const auto& e : cp.already) {
        w.begin_object();
        w.member("sourceTaskId", e.source_task_id);
        w.member("compensationRunId", e.compensation_run_id);
        w.member("compensationTaskId", e.compensation_task_id);
        w.member("compensationEffectId", e.compensation_effect_id);
        w.end_object();
    }
    w.end_array();
    w.key("blocked");
    w.begin_array();
    for (const auto& b : cp.blocked) {
        w.begin_object();
        w.member("sourceTaskId", b.source_task_id);
        w.member("code", b.code);
        w.member("message", b.message);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

int print_plan(const command_line& cl, const compensation_plan& cp) {
    if (cl.output != output_format::human) {
        print_success(
            "CompensationPlan", [&](json_writer& w) { write_plan(w, cp); }, cp.diags);
        return status(exit_status::success);
    }
    std::string out;
    for (std::size_t i = 0; i < cp.request.items.size(); ++i)
        out += "undo        " + cp.request.items[i].source_task_id + " with action:" + cp.actions[i] + "\n";
    for (const auto& e : cp.already)
        out += "compensated " + e.source_task_id + " (by " + e.compensation_run_id + ")\n";
    out += cp.executable()
               ? "compensate " + cp.source.run_id + " would run " + std::to_string(cp.request.items.size()) +
                     (cp.request.items.size() == 1 ? " undo" : " undos") + " as run " + cp.run_id +
                     " (plan only: nothing was run)\n"
               : "run " + cp.source.run_id + " has nothing to compensate\n";
    standard_output().write(out);
    return status(exit_status::success);
}

// The source run's recorded options a compensation run compiles with as well (its variables,
// every task's timeout and attempts), over the compensation's own.
std::string options_json(const compensation_plan& cp) {
    boost::system::error_code ec;
    json::value own = json::parse(compensation_options_json(cp.request), ec);
    json::value source = json::parse(cp.source.options_json, ec);
    if (const json::object* o = ec ? nullptr : source.if_object())
        for (const char* key : {"vars", "varsFiles", "taskTimeoutSeconds", "retries"})
            if (const auto* v = o->if_contains(key)) own.as_object()[key] = *v;
    return json::serialize(own);
}

}  // namespace

std::optional<int> parse_compensate(command_line& cl, const arguments& a) {
    if (auto refused = parse_journal_db(cl, a)) return refused;
    cl.compensate_plan = a.has("plan");
    if (a.has("task")) cl.task = a.value("task");
    if (a.has("workspace")) cl.workspace = a.value("workspace");
    if (a.operands.size() != 1) return usage_error(cl, "compensate needs exactly one RUN_ID");
    cl.run_id = a.operands[0];
    return std::nullopt;
}

int start_compensation(const command_line& cl, watchdog* watch, std::optional<journal> db,
                       const compensation_plan& cp) {
    auto request = recorded_request(cp.source);
    if (!request)
        return print_failure(cl, "the inputs of run " + cp.source.run_id + " cannot be read",
                             exit_status::persistence);
    request->compensation = cp.request;
    session s = open_session(*request);
    if (!s.ok()) return print_failure(cl, s.failure, exit_status::persistence, s.diags);
    const plan& p = *s.compiled;
    // `approval: always` (or the policy's) needs someone to approve: an unattended
    // compensation stops before any effect, as a run does.
    if (auto refusal = refuse_unapproved(s))
        return print_failure(cl, refusal->message, refusal->status, refusal->diags);
    // The undos run in the source run's folder, or in --workspace's (the reference's drivers
    // name the folder again; docs/CONTROL_FLOW.md, "Compensation").
    std::string base = cp.source.base_dir;
    if (cl.workspace) {
        session_request folder;
        folder.workspace = cl.workspace;
        auto resolved = resolve_base_dir(folder);
        if (!resolved) return print_failure(cl, resolved.error().message, exit_status::usage);
        base = *resolved;
    }
    if (auto refused = refuse_missing_commands(cl, p, base)) return *refused;
    dead_run_sweep swept = sweep_dead_runs(&*db, false);
    if (swept.error) return print_journal_failure(cl, *swept.error);
    journal_run record;
    record.workflow_path = cp.source.workflow_path;
    record.workflow_source = s.source;
    record.base_dir = base;
    record.inputs_json = json::serialize(p.inputs);
    json::array argv;
    for (const auto& word : cl.argv) argv.emplace_back(word);
    record.argv_json = json::serialize(argv);
    record.options_json = options_json(cp);
    record.agentctl_version = std::string(version());
    command_line ccl = cl;
    ccl.jobs = 1;           // one undo at a time
    ccl.keep_going = true;  // a failed undo does not stop the others
    ccl.check = false;
    ccl.new_run_id = cp.run_id;
    diagnostics diags = s.diags;
    diags.append(swept.warnings);
    if (cl.output == output_format::human) {
        print_diagnostics_human(cl, swept.warnings);
        if (!cl.quiet)
            standard_error().write("compensating run " + cp.source.run_id + " as run " + cp.run_id + "\n");
    }
    return execute_run(ccl, watch, p, diags, base, std::move(db), std::move(swept), std::move(record),
                       nullptr);
}

int run_compensate(const command_line& cl, watchdog* watch) {
    int failed = 0;
    auto db = open_journal(cl, cl.compensate_plan ? journal_access::read : journal_access::write, failed);
    if (!db) return failed;
    compensation_plan cp = prepare_compensation(*db, cl.run_id, cl.task, owner_alive_here);
    if (cp.journal_code) return print_journal_failure(cl, {*cp.journal_code, cp.message});
    if (!cp.ok()) {
        if (cl.compensate_plan && cl.output != output_format::human && !cp.blocked.empty()) {
            // The plan is the answer, blocked effects and all; the status says it cannot run.
            print_success(
                "CompensationPlan", [&](json_writer& w) { write_plan(w, cp); }, cp.diags);
            return status(cp.status);
        }
        return print_failure(cl, cp.message, cp.status, cp.diags);
    }
    if (cl.compensate_plan || !cp.executable()) return print_plan(cl, cp);
    return start_compensation(cl, watch, std::move(db), cp);
}

}  // namespace agentctl::cli
