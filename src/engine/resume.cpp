// Resuming a run of the journal: recompile what was recorded, decide per task what happens
// (docs/JOURNAL.md, "Resume"), claim the run, run the rest.
#include <agentctl/resume.hpp>

#include <agentctl/compensation.hpp>
#include <agentctl/json.hpp>
#include <agentctl/session.hpp>

#include "engine/outcome.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <unordered_map>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl {

std::string_view to_string(resume_action a) {
    switch (a) {
        case resume_action::reuse:
            return "reuse";
        case resume_action::keep_failed:
            return "keep_failed";
        case resume_action::run:
            return "run";
        case resume_action::rerun:
            return "rerun";
        case resume_action::uncertain:
            return "uncertain";
        case resume_action::aggregate:
            return "aggregate";
    }
    return "run";
}

namespace {

// What the decisions read of a task's last attempt. The attempt itself stays in memory only
// where it is needed whole: listed as uncertain, or its end taken as the result.
struct last_attempt {
    std::uint32_t attempt = 0;
    std::uint32_t segment = 0;
    std::optional<task_state> end;
    bool cleanup_failed = false;
    bool uncertain = false;

    static last_attempt of(const journal_attempt& a) {
        return {a.intent.attempt, a.segment, a.end ? std::optional(a.end->state) : std::nullopt,
                a.cleanup_failed, a.uncertain()};
    }
    std::string end_text() const {
        if (!end) return "started, no end recorded";
        std::string s(to_string(*end));
        if (cleanup_failed) s += ", cleanup failed";
        return s;
    }
};

std::string attempt_where(const journal_attempt& a) {
    std::string s;
    if (a.handle && a.handle->pid) s += ", pid " + std::to_string(*a.handle->pid);
    if (a.handle && !a.handle->container.empty()) s += ", container " + a.handle->container;
    if (a.handle && !a.handle->slurm_job_id.empty()) s += ", Slurm job " + a.handle->slurm_job_id;
    return s;
}

std::string failed_text(const resume_state::reused_result& r) {
    std::string s(to_string(r.state));
    if (r.exit_code)
        s += " (exit " + std::to_string(*r.exit_code) + ")";
    else if (r.error)
        s += " (" + std::string(to_string(r.error->code)) + ")";
    return s;
}

void refuse(resume_plan& rp, exit_status status, std::string message) {
    if (rp.status != exit_status::success) return;
    rp.status = status;
    rp.message = std::move(message);
}

}  // namespace

std::optional<session_request> recorded_request(const journal_run& run) {
    session_request request;
    request.file = run.workflow_path;
    request.source = run.workflow_source;
    boost::system::error_code ec;
    json::value inputs = json::parse(run.inputs_json, ec);
    if (ec || !inputs.is_object()) return std::nullopt;
    for (const auto& m : inputs.get_object())
        request.inputs.push_back(std::string(m.key()) + "=" + json::serialize(m.value()));
    // The run's variables as it recorded them (docs/JOURNAL.md, "runs"): its command line's,
    // and its workflow's variables files as they were read then, not as they are now.
    json::value recorded = json::parse(run.options_json, ec);
    if (const json::object* o = ec ? nullptr : recorded.if_object()) {
        if (const auto* vars = o->if_contains("vars"); vars && vars->is_object())
            for (const auto& m : vars->get_object())
                request.vars.push_back(std::string(m.key()) + "=" + json::serialize(m.value()));
        if (const auto* files = o->if_contains("varsFiles"); files && files->is_object())
            request.recorded_vars_files = files->get_object();
        // The run's --timeout and --retries (every task's) are part of its plan.
        if (const auto* t = o->if_contains("taskTimeoutSeconds"); t && t->is_number())
            request.task_timeout_seconds = t->to_number<double>();
        if (const auto* n = o->if_contains("retries"); n && n->is_int64())
            request.task_attempts = static_cast<int>(n->as_int64());
    }
    // A compensation run compiles its selection of the source document (docs/CONTROL_FLOW.md).
    request.compensation = recorded_compensation(run);
    return request;
}

resume_plan prepare_resume(journal& db, std::string_view run_id, const resume_options& options,
                           const owner_alive_fn& alive) {
    resume_plan rp;
    auto loaded = db.load_run(run_id);
    if (!loaded) {
        rp.journal_code = loaded.error().code;
        refuse(rp, exit_status::persistence, loaded.error().message);
        return rp;
    }
    rp.run = std::move(*loaded);
    rp.live = rp.run.state == journal_run_state::running && alive && alive(rp.run.owner);
    if (rp.live) {
        rp.journal_code = journal_errc::run_live;
        refuse(rp, exit_status::persistence,
               "run " + rp.run.run_id + " is live (driven by pid " + std::to_string(rp.run.owner.pid) +
                   " on " + rp.run.owner.host + "): it is never resumed twice");
        return rp;
    }

    // The stored document with the stored inputs, exactly: the same plan or nothing.
    auto request = recorded_request(rp.run);
    if (!request) {
        refuse(rp, exit_status::persistence,
               "journal " + db.path() + ": the inputs of run " + rp.run.run_id + " cannot be read");
        return rp;
    }
    session s = open_session(*request);
    rp.diags = std::move(s.diags);
    if (!s.ok()) {
        refuse(rp, s.status,
               "the stored workflow of run " + rp.run.run_id + " no longer compiles (" + s.failure + ")");
        return rp;
    }
    rp.compiled = std::move(s.compiled);
    rp.state.duration_before_ms = rp.run.duration_ms.value_or(0);
    const plan& p = *rp.compiled;
    if (p.plan_digest != rp.run.plan_digest) {
        refuse(rp, exit_status::persistence,
               "the stored workflow of run " + rp.run.run_id + " compiles to another plan (" + p.plan_digest +
                   ", recorded " + rp.run.plan_digest + "): this agentctl cannot resume it safely");
        return rp;
    }

    // One result and one attempt per task at a time: of each recorded final only what the
    // decisions and the scheduler read goes into rp.state.reuse (dropped after the decisions
    // where it is not reused), and of the attempts only what the decisions read
    // (last_attempt). A resume of 100 000 tasks holds a few dozen bytes per task.
    const std::size_t n = p.size();
    // A task recorded among unstarted ones comes without its id (journal_task_result::task_id).
    auto mismatch = [&](std::uint32_t index, const std::string& id) {
        return index >= n || (!id.empty() && p.task_id(index) != id);
    };
    bool bad = false;
    rp.state.reuse.resize(n);
    std::vector<std::optional<std::uint32_t>> final_segment(n);
    auto e = db.for_each_result(run_id, false, [&](journal_task_result& r) {
        if (mismatch(r.task_index, r.task_id)) return !(bad = true);
        final_segment[r.task_index] = r.segment;
        rp.state.reuse[r.task_index] = resume_state::reused_result{r.result.state, r.result.attempts,
                                                                   r.result.exit_code, r.result.error};
        return true;
    });
    std::vector<std::optional<last_attempt>> last(n);
    std::unordered_map<std::uint32_t, journal_attempt> whole;  // uncertain, or an end whose final was lost
    rp.state.attempts_before.assign(n, 0);
    if (!e && !bad)
        e = db.for_each_attempt(run_id, [&](journal_attempt& a) {
            if (mismatch(a.intent.task_index, a.intent.task_id)) return !(bad = true);
            const std::uint32_t i = a.intent.task_index;
            auto& before = rp.state.attempts_before[i];
            before = std::max(before, a.intent.attempt);
            last[i] = last_attempt::of(a);
            bool lost_final = a.end && a.end->state == task_state::succeeded && !final_segment[i];
            if (last[i]->uncertain || lost_final)
                whole.insert_or_assign(i, std::move(a));
            else
                whole.erase(i);
            return true;
        });
    if (e || bad) {
        rp.journal_code = e ? e->code : journal_errc::corrupt;
        refuse(rp, exit_status::persistence,
               e ? e->message
                 : "journal " + db.path() + ": run " + rp.run.run_id + " holds tasks its plan does not have");
        return rp;
    }

    // A task whose effect a compensation run undid is never reused: it runs again
    // (docs/CONTROL_FLOW.md, "Compensation").
    std::unordered_map<std::string, std::string> compensated;  // task id -> compensation run
    if (auto undone = compensated_effects(db, rp.run.run_id)) {
        for (const auto& u : *undone) compensated.emplace(u.source_task_id, u.compensation_run_id);
    } else {
        rp.journal_code = undone.error().code;
        refuse(rp, exit_status::persistence, undone.error().message);
        return rp;
    }

    rp.state.final_from_attempt.assign(n, 0);
    rp.decisions.resize(n);
    std::vector<bool> runs(n, false);
    for (std::uint32_t i = 0; i < n; ++i) {
        const plan_task& t = p.node(i);
        resume_decision& d = rp.decisions[i];
        const auto& f = rp.state.reuse[i];  // the recorded final, if any
        const auto& a = last[i];
        if (t.kind == plan_task::kind_t::aggregate) {
            d = {resume_action::aggregate, "recomputed from its children"};
        } else if (f && f->state == task_state::succeeded) {
            d = {resume_action::reuse, "succeeded in segment " + std::to_string(*final_segment[i])};
        } else if (!f && a && a->end == task_state::succeeded && !a->uncertain && !p.output_referenced(i)) {
            // Its end was committed, its final was not (a crash in between): it did succeed.
            // (When a later task reads its output, the streams would be needed in memory, and
            // only finals are read back with them: it then runs again, below.)
            d = {resume_action::reuse, "succeeded in segment " + std::to_string(a->segment) + " (attempt " +
                                           std::to_string(a->attempt) + ")"};
            rp.state.final_from_attempt[i] = a->attempt;
        } else if (a && a->uncertain) {
            const journal_attempt& kept = whole.at(i);
            rp.uncertain.push_back(kept);
            std::string why =
                "attempt " + std::to_string(a->attempt) + " " + a->end_text() + attempt_where(kept);
            if (options.rerun_uncertain)
                d = {resume_action::rerun, "uncertain: " + why + "; --rerun-uncertain"};
            else
                d = {resume_action::uncertain, "uncertain: " + why};
        } else if (f && f->attempts > 0 && is_failure(f->state) && f->state != task_state::cancelled) {
            if (options.retry_failed)
                d = {resume_action::run, failed_text(*f) + "; --retry-failed"};
            else
                d = {resume_action::keep_failed, failed_text(*f) + "; kept without --retry-failed"};
        } else if (f && f->state != task_state::skipped && f->state != task_state::cancelled &&
                   f->attempts == 0 && is_failure(f->state)) {
            // Failed without an attempt (a policy, template or approval decision): decided again.
            d = {resume_action::run, failed_text(*f) + " before starting; decided again"};
        } else if (a) {
            d = {resume_action::run,
                 "did not finish (attempt " + std::to_string(a->attempt) + " " + a->end_text() + ")"};
        } else {
            d = {resume_action::run,
                 f ? "never started (" + std::string(to_string(f->state)) + ")" : "never started"};
        }
        if (d.action == resume_action::reuse && !compensated.empty())
            if (auto it = compensated.find(p.task_id(i)); it != compensated.end()) {
                d = {resume_action::run,
                     "its effect was compensated by run " + it->second + "; it runs again"};
                rp.state.final_from_attempt[i] = 0;
            }
        // Dependants of anything that runs again run (the scheduler decides the same way).
        if (d.action == resume_action::reuse || d.action == resume_action::keep_failed) {
            std::vector<std::uint32_t> needs = t.needs;
            if (auto previous = p.previous_iteration(i)) needs.push_back(*previous);
            for (auto need : needs)
                if (runs[need]) {
                    d = {resume_action::run, "a need (" + p.task_id(need) + ") runs again"};
                    rp.state.final_from_attempt[i] = 0;
                    break;
                }
        }
        runs[i] = d.action == resume_action::run || d.action == resume_action::rerun ||
                  d.action == resume_action::uncertain ||
                  (d.action == resume_action::aggregate &&
                   std::any_of(runs.begin() + t.first_child, runs.begin() + t.first_child + t.child_count,
                               [](bool r) { return r; }));
    }

    // The results taken over: whole where a run needs them in memory, with their streams only
    // where something reads them later; the others stay a reused_result.
    for (std::uint32_t i = 0; i < n; ++i) {
        const resume_decision& d = rp.decisions[i];
        auto& kept = rp.state.reuse[i];
        if (d.action != resume_action::reuse && d.action != resume_action::keep_failed) {
            kept.reset();
            continue;
        }
        if (rp.state.final_from_attempt[i]) {
            journal_attempt& a = whole.at(i);
            task_result r = std::move(*a.end);
            r.streams_released = true;  // read back through the final the resume records
            kept = resume_state::reused_result{r.state, r.attempts, r.exit_code, r.error};
            rp.state.whole.emplace(i, std::move(r));
            continue;
        }
        const bool streams = p.output_referenced(i);
        if (!streams && p.node(i).kind == plan_task::kind_t::child) continue;
        auto full = db.load_result_at(run_id, i, streams);
        if (!full || !*full) {
            refuse(rp, exit_status::persistence,
                   full ? "journal " + db.path() + ": the result of task " + p.task_id(i) + " vanished"
                        : full.error().message);
            return rp;
        }
        task_result r = std::move((*full)->result);
        if (!streams) {
            // As the run that recorded it kept it: without the output's (empty) stream members.
            r = without_streams(r);
            r.streams_released = true;
        }
        rp.state.whole.emplace(i, std::move(r));
    }

    if (!rp.uncertain.empty() && !options.rerun_uncertain) {
        // The first few: a run stopped at -j 64 has 64, and each is listed by a dry run.
        std::string list;
        for (std::size_t i = 0; i < rp.uncertain.size() && i < 3; ++i) {
            const journal_attempt& a = rp.uncertain[i];
            if (!list.empty()) list += "; ";
            list += a.intent.task_id + ": attempt " + std::to_string(a.intent.attempt) + " " +
                    last_attempt::of(a).end_text() + attempt_where(a);
        }
        if (rp.uncertain.size() > 3) list += "; and " + std::to_string(rp.uncertain.size() - 3) + " more";
        refuse(rp, exit_status::policy,
               "run " + rp.run.run_id + " has " + std::to_string(rp.uncertain.size()) +
                   (rp.uncertain.size() == 1 ? " task" : " tasks") +
                   " whose last attempt may have had its effect (" + list +
                   "): nothing was run; resume with --rerun-uncertain to run them again");
    }
    return rp;
}

namespace detail {

void async_resume_impl(asio::any_io_executor ex, const resume_plan& rp, run_settings settings,
                       run_collaborators with, asio::any_completion_handler<void(run_report)> handler) {
    auto fail = [&rp](std::string message) {
        run_report r;
        r.run_id = rp.run.run_id;
        r.state = run_state::failed;
        r.resumed = true;
        r.error = task_error{error_code::journal_failed, std::move(message)};
        return r;
    };
    journal_writer* writer = with.journal;
    if (!writer || !rp.ok() || !rp.compiled) {
        run_report r = fail(!writer ? "resume needs a journal to record into" : rp.message);
        asio::post(ex, [h = std::move(handler), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
        return;
    }
    writer->async_claim(
        rp.run.run_id, this_process_owner(), owner_alive_here,
        asio::bind_executor(ex, [ex, &rp, fail, settings = std::move(settings), with,
                                 handler = std::move(handler)](std::optional<journal_error> error) mutable {
            if (error)
                return std::move(handler)(
                    fail("run " + rp.run.run_id + " cannot be claimed: " + error->message));
            settings.run_id = rp.run.run_id;
            async_run_impl(ex, *rp.compiled, std::move(settings), with, &rp.state, std::move(handler));
        }));
}

}  // namespace detail
}  // namespace agentctl
