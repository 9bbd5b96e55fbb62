// What a run records in its journal, in the commit order of docs/JOURNAL.md.
#include "engine/recorder.hpp"

#include "engine/outcome.hpp"

#include <agentctl/plan.hpp>
#include <agentctl/resume.hpp>

#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl {

run_recorder::run_recorder(journal_writer& journal, const plan& p, const resume_state* resume,
                           bool pass_output)
    : journal_(journal), plan_(p), resume_(resume), ended_(p.size(), false), pass_output_(pass_output) {}

asio::awaitable<std::optional<journal_error>> run_recorder::start_run(journal_run run,
                                                                      const std::string& run_id) {
    if (resume_) co_return std::nullopt;
    run.run_id = run_id;
    run.workflow_name = plan_.workflow_name;
    run.workflow_digest = plan_.workflow_digest;
    run.plan_digest = plan_.plan_digest;
    run.task_count = plan_.size() - static_cast<std::uint32_t>(plan_.expansions.size());  // no aggregates
    run.owner = this_process_owner();
    if (pass_output_) {
        // The run's options say that its shell tasks' output was not captured.
        boost::system::error_code ec;
        json::value options = run.options_json.empty() ? json::object() : json::parse(run.options_json, ec);
        if (!ec && options.is_object()) {
            options.get_object()["passOutput"] = true;
            run.options_json = json::serialize(options);
        }
    }
    journal_.record_run(std::move(run));
    co_return co_await journal_.async_sync(asio::use_awaitable);
}

asio::awaitable<std::optional<journal_error>> run_recorder::end_run(journal_run_end end) {
    journal_.record_run_end(std::move(end));
    co_return co_await journal_.async_sync(asio::use_awaitable);
}

asio::awaitable<std::optional<journal_error>> run_recorder::start_attempt(attempt_request& request) {
    journal_.record_intent(intent_of(request));
    if (auto error = co_await journal_.async_sync(asio::use_awaitable)) co_return error;
    request.on_started = [this, index = request.task_index, attempt = request.attempt](
                             const attempt_started& s) { record_handle(index, attempt, s); };
    co_return std::nullopt;
}

task_result run_recorder::retried(const attempt_request& request, task_result result) {
    task_result kept = without_streams(result);
    journal_.record_end(attempt_end{request.task_index, request.attempt, std::move(result), false});
    ended_[request.task_index] = true;
    return kept;
}

void run_recorder::final_result(std::uint32_t index, bool ran, task_result&& r) {
    std::string id = plan_.task_id(index);
    if (r.reused) {
        // Resume: a reused result whose final was lost after its end was committed gets it now.
        const auto& from = resume_->final_from_attempt;
        if (index >= from.size() || from[index] == 0) return;
        journal_.record_final(
            task_final{index, std::move(id), without_streams(r, /*in_place=*/true), from[index], true});
        return;
    }
    bool unstarted = r.error && r.error->code == error_code::journal_failed;
    if (ran && ended_[index]) {
        // Retried, then cancelled during its backoff: that end is recorded, with the streams.
        const std::uint32_t attempt = r.attempts;
        behind_ |=
            journal_.record_final(task_final{index, std::move(id), without_streams(r), attempt, false});
        return;
    }
    if (ran && r.attempts > 0 && !unstarted) {
        // The last attempt's end holds the streams; the final names it. Both go in one
        // commit: a crash never leaves an end whose final is missing.
        bool cleanup_failed = r.error && r.error->code == error_code::container_cleanup_failed;
        // The final is the end's result without its streams: the writer takes it from the end.
        const std::uint32_t attempt = r.attempts;
        behind_ |= journal_.record_end_and_final(attempt_end{index, attempt, std::move(r), cleanup_failed},
                                                 std::move(id));
        return;
    }
    behind_ |= journal_.record_final(task_final{index, std::move(id), std::move(r), std::nullopt, false});
}

asio::awaitable<std::optional<journal_error>> run_recorder::catch_up() {
    if (!behind_) co_return std::nullopt;
    behind_ = false;
    co_return co_await journal_.async_sync(asio::use_awaitable);
}

void run_recorder::record_handle(std::uint32_t index, std::uint32_t attempt, const attempt_started& s) {
    attempt_handle h;
    h.task_index = index;
    h.attempt = attempt;
    h.pid = s.pid;
    if (s.pid) h.pid_start_time = s.start_lo;
    h.cgroup = s.cgroup;
    h.container = s.container;
    h.container_engine = s.container_engine;
    h.slurm_job_id = s.slurm_job_id;
    journal_.record_handle(std::move(h));
}

attempt_intent run_recorder::intent_of(const attempt_request& request) const {
    const plan_task& t = request.task();
    const action_spec& a = request.action();
    attempt_intent i;
    i.task_index = request.task_index;
    i.task_id = request.task_id;
    i.attempt = request.attempt;
    i.backend = "local";
    i.isolation = std::string(to_string(a.isolation));
    i.argv.push_back(a.command);
    i.argv.insert(i.argv.end(), request.args.begin(), request.args.end());
    for (const auto& e : a.env) i.env_names.push_back(e.name);
    i.cwd = request.cwd;
    if (pass_output_ && a.kind == action_kind::shell_exec) {
        // Nothing is read, so no cap applies: the intent says where the output went instead.
        i.limits = json::object{{"timeoutMs", t.timeout_ms}, {"output", "passed through"}};
        return i;
    }
    i.limits = json::object{{"timeoutMs", t.timeout_ms},
                            {"stdoutBytes", t.limits.stdout_bytes},
                            {"stderrBytes", t.limits.stderr_bytes},
                            {"combinedBytes", t.limits.combined_bytes}};
    return i;
}

}  // namespace agentctl
