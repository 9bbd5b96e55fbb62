// The scheduler: one loop that starts ready tasks until the job slots are full, waits for
// one completion, records it and releases dependants (after Ninja's build loop). The
// decision for each ready task is admit() (admission.cpp); results the loop builds itself
// and the run's outcome are in outcome.cpp; what the journal gets is the recorder's
// (recorder.cpp); the tasks in flight are a task_group's children.
#include <agentctl/engine.hpp>

#include "engine/admission.hpp"
#include "engine/outcome.hpp"
#include "engine/output_contract.hpp"
#include "engine/recorder.hpp"
#include "exec/host.hpp"
#include "runner/builtin_runner.hpp"
#include "runner/task_group.hpp"

#include <agentctl/events.hpp>
#include <agentctl/resume.hpp>
#include <agentctl/runner.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace asio = boost::asio;

namespace agentctl {

std::vector<std::uint32_t> tasks_requiring_approval(const plan& p) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t v = 0; v < p.nodes.size(); ++v) {
        const plan_task& t = p.nodes[v];
        if (!t.requires_approval) continue;
        std::uint32_t tasks = t.kind == plan_task::kind_t::child ? t.child_count : 1;
        for (std::uint32_t k = 0; k < tasks; ++k) out.push_back(p.node_starts[v] + k);
    }
    return out;
}

namespace {

// Only failures declared safe are repeated: a spawn error by default (nothing ran), a
// non-zero exit or a timeout when retry.on says so. An extension declared at_most_once is
// never invoked twice: only its spawn errors are retried.
bool retry_allowed(const retry_spec& retry, const action_spec& action, const task_result& r) {
    auto allows = [&](retry_reason reason) {
        return std::find(retry.on.begin(), retry.on.end(), reason) != retry.on.end();
    };
    if (r.state == task_state::spawn_failed) return allows(retry_reason::spawn_error);
    if (action.extension && action.extension->idempotency_class == idempotency::at_most_once) return false;
    switch (r.state) {
        case task_state::failed:
            return r.exit_code.value_or(0) != 0 && allows(retry_reason::exit_nonzero);
        case task_state::timed_out:
            return allows(retry_reason::timeout);
        default:
            return false;
    }
}

}  // namespace

std::string new_run_id() {
    return "run-" + exec::random_hex(16);
}

namespace {

// Whether a final result was decided in this run, not taken over or left unstarted: what the
// resume report lists as `executed`.
bool decided_here(const task_result& r) {
    if (r.reused || r.state == task_state::skipped) return false;
    if (!r.error) return true;
    return r.error->code != error_code::not_started && r.error->code != error_code::run_stopped &&
           !(r.error->code == error_code::run_cancelled && r.attempts == 0);
}

// A task coroutine that threw: an internal error, with what it said.
task_result thrown_result(std::exception_ptr e) {
    task_result r = failed_result(error_code::internal_error, "the task coroutine failed");
    if (!e) return r;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        r.error->message += std::string(": ") + ex.what();
    } catch (...) {
    }
    return r;
}

runner_settings settings_for_runner(const run_settings& s, const std::string& run_id) {
    runner_settings r;
    r.run_id = run_id;
    r.base_dir = s.base_dir;
    r.search_path = s.search_path;
    r.host_env = s.host_env;
    r.containment = s.containment;
    r.backend = s.backend;
    r.slurm = s.slurm;
    r.drain_grace = s.drain_grace;
    r.pass_output = s.pass_output;
    r.check = s.check;
    r.diff = s.diff;
    return r;
}

/// One run. Owned by the loop coroutine and by every task coroutine.
class scheduler : public std::enable_shared_from_this<scheduler> {
public:
    /// Starts in one go before the loop yields to the other handlers of its executor.
    static constexpr std::uint32_t starts_per_turn = 32;

    scheduler(asio::any_io_executor ex, const plan& p, run_settings settings, run_collaborators with,
              const resume_state* resume)
        : ex_(ex),
          plan_(p),
          settings_(std::move(settings)),
          with_(with),
          resume_(resume),
          tasks_(ex),
          contracts_(p),
          children_(p),
          wall_timer_(ex) {
        const std::uint32_t n = p.size();
        // Per task only a few bytes (state, outcome, flags); results are kept whole without a
        // journal, and with one only where something reads them (docs/DESIGN.md, "Engine").
        if (with_.journal)
            recorder_.emplace(*with_.journal, p, resume, settings_.pass_output);
        else
            results_.resize(n);
        state_.assign(n, node::pending);
        outcomes_.resize(n);
        executed_.assign(n, false);
        queued_.assign(n, false);
        report_.resumed = resume != nullptr;
        // Readiness is counted per plan node: a child template waits for its needs and then
        // makes all its children ready; an aggregate waits for its children.
        const std::size_t nodes = p.nodes.size();
        unfinished_.assign(nodes, 0);
        dependants_.resize(nodes);
        for (std::uint32_t v = 0; v < nodes; ++v) {
            const plan_task& t = p.nodes[v];
            unfinished_[v] = t.kind == plan_task::kind_t::aggregate
                                 ? t.child_count
                                 : static_cast<std::uint32_t>(t.needs.size());
            for (auto need : t.needs) dependants_[p.node_of(need)].push_back(v);
        }
        for (std::uint32_t v = 0; v < nodes; ++v)
            if (unfinished_[v] == 0) make_ready(v);
        jobs_ = std::clamp(settings_.jobs.value_or(p.max_concurrency), 1, limits::max_concurrency);
        fit_jobs_to_descriptors();
        slot_busy_.assign(static_cast<std::size_t>(jobs_), false);
        view_.compiled = &plan_;
        view_.inputs = &plan_.inputs;
        view_.children = &children_;
        view_.release_unread_aggregates = true;
        view_.check = settings_.check;
        view_.state_of = [this](std::uint32_t i) -> std::optional<task_state> {
            if (state_[i] != node::done) return std::nullopt;
            return outcomes_[i].state;
        };
        view_.result_of = [this](std::uint32_t i) -> const task_result* {
            if (state_[i] != node::done) return nullptr;
            if (!with_.journal) return &results_[i];
            auto it = kept_.find(i);
            return it == kept_.end() ? nullptr : &it->second;
        };
        report_.run_id = settings_.run_id.empty() ? new_run_id() : settings_.run_id;
        if (!with_.runner) {
            builtin_ = std::make_unique<builtin_runner>(ex, p, settings_for_runner(settings_, report_.run_id),
                                                        with_.events, with_.watch);
            runner_ = builtin_.get();
        } else {
            runner_ = with_.runner;
        }
    }

    /// Called from the run's cancellation slot (or a budget timer).
    void cancel(asio::cancellation_type type, bool by_budget = false) {
        bool terminal = (type & asio::cancellation_type::terminal) != asio::cancellation_type::none;
        if (!cancelling_) {
            cancelling_ = true;
            cancelled_by_budget_ = by_budget;
        }
        // A second request escalates to terminal: kill at once.
        asio::cancellation_type forward = (terminal || cancel_requests_ > 0)
                                              ? asio::cancellation_type::terminal
                                              : asio::cancellation_type::total;
        ++cancel_requests_;
        tasks_.emit(forward);
        prepare_signal_.emit(forward);
        tasks_.wake();
    }

    asio::awaitable<void> loop() {
        auto self = shared_from_this();
        started_ = std::chrono::steady_clock::now();
        if (with_.expiry)
            with_.expiry->expire_ = [weak = weak_from_this()](std::uint32_t idx, const std::string& reason) {
                if (auto op = weak.lock()) op->expire(idx, reason);
            };
        for (const auto& w : report_.warnings) emit_warning(w);
        if (co_await record_run_start())
            co_await run_tasks();
        else
            co_await close_unstarted();
        // Before the run's end is recorded: an output that cannot be rendered fails a run that
        // had otherwise succeeded (in one that failed, a missing output is the failure's).
        std::optional<task_error> output_error;
        report_.output = render_outputs(view_, output_error);
        if (output_error && final_state() == run_state::succeeded) report_.error = std::move(output_error);
        co_await record_run_end();
        if (with_.expiry) with_.expiry->expire_ = nullptr;
    }

    /// task_expiry::expire(): a partial cancellation of that task's coroutine alone, which
    /// attempts() turns into a timeout.
    void expire(std::uint32_t idx, const std::string& reason) {
        if (!attempting_.count(idx) || expiring_.count(idx)) return;
        expiring_.emplace(idx, reason);
        tasks_.emit_one(idx, asio::cancellation_type::partial);
    }

    run_report take_report() {
        report_.outcomes = std::move(outcomes_);
        report_.tasks = std::move(results_);
        report_.duration = run_time();
        if (!report_.error && denied_)
            report_.error =
                task_error{error_code::approval_denied, "approval was denied for at least one task"};
        if (!report_.error && cancelling_ && cancelled_by_budget_)
            report_.error =
                task_error{error_code::budget_exceeded,
                           "the run exceeded budgets.maxWallTimeSeconds (" +
                               std::to_string(*plan_.budgets.max_wall_time_seconds) + " s) and was stopped"};
        report_.state = final_state();
        if (builtin_) report_.leftovers = builtin_->take_leftovers();
        return std::move(report_);
    }

private:
    enum class node : std::uint8_t { pending, running, done };

    asio::awaitable<void> run_tasks() {
        if (!with_.approvals && !settings_.check) {
            auto needing = tasks_requiring_approval(plan_);
            if (!needing.empty()) {
                report_.error = approval_required_error(plan_, needing);
                failed_before_start_ = true;
                co_await close_unstarted();
                co_return;
            }
        }
        std::optional<task_error> setup = co_await runner_->async_prepare(
            ex_, asio::bind_cancellation_slot(prepare_signal_.slot(), asio::use_awaitable));
        if (setup || cancelling_) {
            if (setup) report_.error = std::move(setup);
            failed_before_start_ = setup.has_value();
            co_await close_unstarted();
            co_await finish_runner();
            co_return;
        }
        arm_wall_time_budget();
        // A runner that queues attempts itself takes some ahead of --jobs; it keeps at most
        // jobs_ running (docs/WORKER.md, "Pipelining"). Not when args are rendered at dispatch
        // (vars.jobSlot among them): a slot must stay within 1..--jobs and name a running task.
        bool deferred = std::any_of(plan_.nodes.begin(), plan_.nodes.end(),
                                    [](const plan_task& t) { return t.argv_deferred; });
        if (!deferred) {
            window_ = jobs_ + std::clamp(runner_->dispatch_ahead(jobs_), 0, limits::max_concurrency);
            slot_busy_.assign(static_cast<std::size_t>(window_), false);
        } else {
            window_ = jobs_;
        }

        std::size_t total = plan_.size();
        while (finished_ < total) {
            bool held = false;
            std::uint32_t dispatched = 0;
            while (!stopping() && tasks_.size() < static_cast<std::size_t>(window_) && !ready_.empty()) {
                if (with_.gate && !with_.gate->open()) {
                    held = true;
                    break;
                }
                std::uint32_t idx = ready_.top();
                ready_.pop();
                queue_next_child(idx);
                std::optional<admission> asking = dispatch(idx);
                if (asking) co_await approve(idx, std::move(*asking));
                // A large batch of starts (a thousand children at --jobs 1000) lets the rest of
                // the loop in every few starts: the spawns and intent commits of the first ones
                // go on meanwhile (docs/DESIGN.md, "Starting a large batch").
                if (++dispatched % starts_per_turn == 0) co_await asio::post(ex_, asio::use_awaitable);
            }
            if (stopping() && tasks_.size() == 0) break;
            if (tasks_.size() == 0 && ready_.empty()) break;  // nothing left that can become ready
            // Woken by a completion, or by a cancellation that the next turn acts on; while the
            // gate holds tasks back, also to ask it again.
            if (tasks_.size() > 0 || held)
                co_await tasks_.wait(
                    held ? std::optional<std::chrono::steady_clock::duration>(dispatch_gate::recheck)
                         : std::nullopt);
            while (tasks_.has_finished()) {
                auto& f = tasks_.next_finished();
                if (f.error || !f.result) f.result = std::make_unique<task_result>(thrown_result(f.error));
                finish(f.id, std::move(*f.result));
                tasks_.pop_finished();
            }
        }
        wall_timer_.cancel();
        co_await close_unstarted();
        co_await finish_runner();
    }

    // Plan node `v` can start: its task, or for a child template its first child (the others
    // follow one at a time, queue_next_child()), which keeps the ready queue as small as the
    // plan's nodes however many children there are.
    void make_ready(std::uint32_t v) {
        const plan_task& t = plan_.nodes[v];
        if (t.kind == plan_task::kind_t::child && t.child_count == 0) return;
        const std::uint32_t first = plan_.node_starts[v];
        queued_[first] = true;
        ready_.push(first);
    }

    // A child was taken from the ready queue: its next sibling takes its place. Children are
    // consecutive plan indices and nothing else lies between them, so the queue yields the
    // same order as if all of them had been queued at once.
    void queue_next_child(std::uint32_t idx) {
        const plan_task& t = plan_.node(idx);
        // A loop's next iteration waits for this one to be final instead (record()).
        if (t.kind != plan_task::kind_t::child || t.expansion == plan_task::expansion_t::loop) return;
        const std::uint32_t next = idx + 1;
        if (next < t.first_child + t.child_count && !queued_[next]) {
            queued_[next] = true;
            ready_.push(next);
        }
    }

    // Each task in flight holds descriptors: more jobs than the limit allows would fail
    // spawns with EMFILE, so run fewer and say why.
    void fit_jobs_to_descriptors() {
        exec::fd_budget fit = exec::fit_jobs_to_fd_limit(jobs_);
        if (fit.jobs >= jobs_) return;
        diagnostics warn;
        warn.warning("jobs_lowered_to_fit_fd_limit", "",
                     std::to_string(jobs_) + " jobs need " + std::to_string(fit.needed) +
                         " file descriptors but the hard limit (ulimit -Hn) is " +
                         std::to_string(fit.hard_limit) + "; running " + std::to_string(fit.jobs) +
                         " at a time",
                     "raise the hard limit (ulimit -Hn, or LimitNOFILE= for a service) to run more at once");
        report_.warnings.push_back(warn.items().front());
        jobs_ = fit.jobs;
    }

    bool stopping() const { return cancelling_ || stop_after_failure_ || report_.error.has_value(); }

    // Once every task is done: what the runner left for later (container removal) and its
    // check that nothing is left. A failure there fails the run.
    asio::awaitable<void> finish_runner() {
        std::optional<task_error> error = co_await runner_->async_finish(ex_, asio::use_awaitable);
        if (error && !report_.error) report_.error = std::move(error);
    }

    void arm_wall_time_budget() {
        if (!plan_.budgets.max_wall_time_seconds) return;
        wall_timer_.expires_after(std::chrono::seconds(*plan_.budgets.max_wall_time_seconds));
        wall_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) self->cancel(asio::cancellation_type::total, /*by_budget=*/true);
        });
    }

    // Acts on the admission decision for a ready task. Only an approval needs a wait: that
    // decision is returned, for approve(); the others are done without a coroutine frame.
    std::optional<admission> dispatch(std::uint32_t idx) {
        if (auto reused = reusable(idx)) {
            record(idx, std::move(*reused));
            return std::nullopt;
        }
        view_.output_reserved = output_reserved_;
        view_.job_slot = lowest_free_slot();
        admission a = admit(view_, idx);
        if (a.kind == admission::kind_t::record) {
            record(idx, std::move(a.result));
            return std::nullopt;
        }
        if (a.needs_approval && with_.approvals && !approved_all_) return a;
        start(idx, std::move(a));
        return std::nullopt;
    }

    // A task admitted to start that needs an approval first.
    asio::awaitable<void> approve(std::uint32_t idx, admission a) {
        approval_answer answer = co_await with_.approvals->async_approve(plan_, idx, asio::use_awaitable);
        if (answer == approval_answer::all) approved_all_ = true;
        if (answer == approval_answer::no) {
            record(idx,
                   failed_result(error_code::approval_denied, "approval was denied; the task did not run"));
            denied_ = true;
            co_return;
        }
        if (stopping()) {  // cancelled while asking
            ready_.push(idx);
            co_return;
        }
        start(idx, std::move(a));
    }

    // In the job slot view_.job_slot.
    void start(std::uint32_t idx, admission&& a) {
        output_reserved_ += a.reservation;
        reservations_[idx] = a.reservation;
        slot_busy_[view_.job_slot - 1] = true;
        slot_of_[idx] = view_.job_slot;
        executed_[idx] = true;
        state_[idx] = node::running;
        tasks_.spawn(idx, attempts(idx, std::move(a.request)), shared_from_this());
    }

    // GNU parallel's {%}: the lowest slot no running task holds (docs/DESIGN.md, "Job slots").
    // Only called while a slot is free (fewer than window_ tasks run).
    std::uint32_t lowest_free_slot() const {
        auto it = std::find(slot_busy_.begin(), slot_busy_.end(), false);
        return static_cast<std::uint32_t>(it - slot_busy_.begin()) + 1;
    }

    // Resume: an earlier segment's result stands unless a need of the task runs again. What
    // the resume kept of it: the result whole where a run needs it, else its outcome (the
    // journal has the rest).
    std::optional<task_result> reusable(std::uint32_t idx) const {
        if (!resume_ || idx >= resume_->reuse.size() || !resume_->reuse[idx]) return std::nullopt;
        for (auto need : plan_.node(idx).needs)
            if (executed_[need]) return std::nullopt;
        if (auto previous = plan_.previous_iteration(idx); previous && executed_[*previous])
            return std::nullopt;
        task_result r;
        if (auto it = resume_->whole.find(idx); it != resume_->whole.end()) {
            r = it->second;
        } else {
            const resume_state::reused_result& f = *resume_->reuse[idx];
            r.state = f.state;
            r.attempts = f.attempts;
            r.exit_code = f.exit_code;
            r.error = f.error;
            r.streams_released = true;
        }
        r.reused = true;
        return r;
    }

    // One coroutine per task: its attempts, with backoff between retries.
    // The result is made on the heap, once: through co_spawn's completion and the task group,
    // only the pointer moves.
    asio::awaitable<std::unique_ptr<task_result>> attempts(std::uint32_t idx, attempt_request request) {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_await asio::this_coro::throw_if_cancelled(false);
        const plan_task& t = plan_.node(idx);
        auto begun = std::chrono::steady_clock::now();
        std::uint32_t before = attempts_before(idx);
        auto owned = std::make_unique<task_result>();
        task_result& result = *owned;
        for (std::uint32_t attempt = 1;; ++attempt) {
            request.attempt = before + attempt;
            if (recorder_) {
                if (auto error = co_await recorder_->start_attempt(request)) {
                    journal_broke(*error);
                    result = failed_result(error_code::journal_failed, "the attempt was not started: " + error->message);
                    result.attempts = request.attempt - 1;
                    break;
                }
            }
            emit(run_event::kind_t::task_started, idx, request.attempt);
            attempting_.insert(idx);
            // The result is written in place: returned by value, it would be held in this frame
            // while the attempt runs (docs/DESIGN.md, "What an in-flight task holds").
            if (builtin_) {
                // Awaited directly: no bridge through async_run()'s handler (builtin_runner::attempt).
                try {
                    co_await builtin_->attempt(request, result);
                } catch (...) {
                    result = builtin_runner::attempt_failed_unexpectedly();
                }
            } else {
                co_await through_handler(request, result);
            }
            attempting_.erase(idx);
            result.attempts = request.attempt;
            result.argv.clear();
            if (plan_.action_of(t).is_process()) {  // a built-in action has no command line
                result.argv.reserve(request.args.size() + 1);
                result.argv.push_back(plan_.action_of(t).command);
                result.argv.insert(result.argv.end(), request.args.begin(), request.args.end());
            }
            // The run's cancellation is total or terminal; a partial one is expire()'s, for
            // this attempt alone: it ended as a timeout, and a next attempt starts afresh.
            const asio::cancellation_type cancelled_by =
                (co_await asio::this_coro::cancellation_state).cancelled();
            const bool cancelled =
                (cancelled_by & (asio::cancellation_type::total | asio::cancellation_type::terminal)) !=
                asio::cancellation_type::none;
            if (auto expired = expiring_.find(idx); expired != expiring_.end()) {
                if (!cancelled && result.state == task_state::cancelled) {
                    result.state = task_state::timed_out;
                    result.error = task_error{error_code::timeout, expired->second};
                }
                expiring_.erase(expired);
                if (!cancelled)
                    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
            }
            if (cancelled || attempt >= static_cast<std::uint32_t>(t.retry.max_attempts) ||
                !retry_allowed(t.retry, plan_.action_of(t), result))
                break;
            emit(run_event::kind_t::attempt_failed, idx, request.attempt, &result);
            // Retried: this attempt's end (with its streams) goes to the journal now; the last
            // attempt's end is recorded with the task's final result (finish()).
            if (recorder_) result = recorder_->retried(request, std::move(result));
            if (t.retry.backoff_ms > 0) {
                asio::steady_timer backoff(ex_, std::chrono::milliseconds(t.retry.backoff_ms));
                co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
                if ((co_await asio::this_coro::cancellation_state).cancelled() !=
                    asio::cancellation_type::none) {
                    result.state = task_state::cancelled;
                    break;
                }
            }
            if (recorder_) recorder_->next_attempt(idx);
        }
        result.duration_ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun)
                .count());
        co_return owned;
    }

    // Another runner's attempt, through its handler.
    asio::awaitable<void> through_handler(const attempt_request& request, task_result& out) {
        out = co_await runner_->async_run(request, asio::use_awaitable);
    }

    // Tells the sink: an attempt started, one failed and will be retried (`result`: that
    // attempt's), a task reached its final state (`result`: its final one).
    void emit(run_event::kind_t kind, std::uint32_t idx, std::uint32_t attempt,
              const task_result* result = nullptr) {
        if (!with_.events) return;
        run_event e;
        e.kind = kind;
        e.task_index = idx;
        e.attempt = attempt;
        e.result = result;
        if (kind == run_event::kind_t::attempt_failed)
            e.retry_in_ms = static_cast<std::uint32_t>(std::max(0, plan_.node(idx).retry.backoff_ms));
        if (auto slot = slot_of_.find(idx); kind == run_event::kind_t::task_started && slot != slot_of_.end())
            e.job_slot = slot->second;
        send(e);
    }

    // With when it happened and the run's counts as they are now.
    void send(run_event& e) {
        e.elapsed = std::chrono::steady_clock::now() - started_;
        e.running = static_cast<std::uint32_t>(tasks_.size());
        e.finished = static_cast<std::uint32_t>(finished_);
        with_.events->on_event(e);
    }

    void emit_warning(const diagnostic& d) {
        if (!with_.events) return;
        run_event e;
        e.kind = run_event::kind_t::warning;
        e.warning = &d;
        e.elapsed = std::chrono::steady_clock::now() - started_;
        with_.events->on_event(e);
    }

    void finish(std::uint32_t idx, task_result&& r) {
        if (auto slot = slot_of_.find(idx); slot != slot_of_.end()) {
            slot_busy_[slot->second - 1] = false;
            slot_of_.erase(slot);
        }
        auto reserved = reservations_.find(idx);
        if (reserved != reservations_.end()) {
            output_reserved_ -= std::min(output_reserved_, reserved->second);
            output_reserved_ += r.output_bytes;
            reservations_.erase(reserved);
        }
        record(idx, std::move(r), /*ran=*/true);
    }

    // A task reached its final state: tell the sink, journal it, keep what is read later,
    // release dependants. `ran`: it comes from attempts (the last one's end is recorded here,
    // with the final).
    // `r` is taken (moved from): a reference, so that it is moved once, into the journal or the
    // results (docs/DESIGN.md, "Where a task's time goes").
    void record(std::uint32_t idx, task_result&& r, bool ran = false) {
        // A preview's outputs are predictions: no outputSchema holds them (as in the reference).
        if (!settings_.check) contracts_.check(idx, r);
        const plan_task& t = plan_.node(idx);
        state_[idx] = node::done;
        outcomes_[idx] = task_outcome{r.state, r.attempts, r.reused, decided_here(r)};
        ++finished_;
        // An aggregate (a sub-workflow's too) that failed because a child did is that child's
        // failure, counted once; a loop's that hit its bound failed on its own.
        const bool own_failure =
            is_failure(r.state) && ((t.kind != plan_task::kind_t::aggregate && !t.subworkflow) ||
                                    (r.error && r.error->code != error_code::child_failed));
        if (own_failure) ++failures_;
        if (own_failure && t.failure == failure_mode::stop && !settings_.keep_going) {
            if (!stop_after_failure_) stopped_by_ = idx;
            stop_after_failure_ = true;
        }
        emit(run_event::kind_t::task_finished, idx, r.attempts, &r);
        if (!recorder_) {
            if (keeps_streams(idx, r.state))
                results_[idx] = std::move(r);
            else
                results_[idx] = without_streams(r);
        } else {
            keep(idx, r);
            recorder_->final_result(idx, ran, std::move(r));
        }
        if (t.kind == plan_task::kind_t::child) {
            // The aggregate of an expanded task waits for its children only.
            const plan_expansion& e = plan_.expansions[t.expansion_slot];
            if (t.expansion == plan_task::expansion_t::loop && idx + 1 < e.first_child + e.count &&
                !queued_[idx + 1]) {
                queued_[idx + 1] = true;
                ready_.push(idx + 1);
            }
            const std::uint32_t v = plan_.node_of(e.aggregate);
            if (--unfinished_[v] == 0) make_ready(v);
            return;
        }
        for (auto d : dependants_[plan_.node_of(idx)])
            if (--unfinished_[d] == 0) make_ready(d);
    }

    // With a journal, what stays in memory of a final result: the whole result when something
    // later reads its output, the result without its streams for a declared task (the run's
    // default output lists them: one per declared task, not per child), nothing otherwise.
    void keep(std::uint32_t idx, const task_result& r) {
        if (plan_.output_referenced(idx))
            kept_.insert_or_assign(idx, r);
        else if (plan_.node(idx).kind != plan_task::kind_t::child)
            kept_.insert_or_assign(idx, without_streams(r));
    }

    std::uint32_t attempts_before(std::uint32_t idx) const {
        if (!resume_ || idx >= resume_->attempts_before.size()) return 0;
        return resume_->attempts_before[idx];
    }

    run_state final_state() const {
        if (cancelling_ && !cancelled_by_budget_) return run_state::cancelled;
        if (failures_ > 0 || report_.error || denied_ || cancelled_by_budget_) return run_state::failed;
        return run_state::succeeded;
    }

    // The whole run's: a resume adds the time its earlier segments recorded.
    std::chrono::milliseconds run_time() const {
        auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                         started_);
        return now + std::chrono::milliseconds(resume_ ? resume_->duration_before_ms : 0);
    }

    // The run's record is committed before any effect.
    asio::awaitable<bool> record_run_start() {
        if (!recorder_) co_return true;
        auto error = co_await recorder_->start_run(settings_.record, report_.run_id);
        if (!error) co_return true;
        journal_broke(*error);
        co_return false;
    }

    // The run's end, and everything queued before it, committed before the run completes.
    asio::awaitable<void> record_run_end() {
        if (!recorder_) co_return;
        journal_run_end end;
        end.state = final_state() == run_state::succeeded   ? journal_run_state::succeeded
                    : final_state() == run_state::cancelled ? journal_run_state::cancelled
                                                            : journal_run_state::failed;
        end.duration_ms = static_cast<std::uint64_t>(run_time().count());
        end.error = report_.error;
        if (auto error = co_await recorder_->end_run(std::move(end))) journal_broke(*error);
    }

    // A journal write failed: nothing more can be recorded, so nothing more may start.
    void journal_broke(const journal_error& e) {
        if (!report_.error)
            report_.error = task_error{error_code::journal_failed, "the run journal failed: " + e.message};
        tasks_.wake();
    }

    // The final result of every task that never started: cancelled when the run was cancelled,
    // skipped otherwise, and the same for all of them.
    task_result unstarted_result() const {
        if (report_.error && failed_before_start_)
            // The run's error says why, once: a thousand copies of it would say nothing more.
            return skipped_result(error_code::not_started,
                                  "not started: the run failed before any task started (" +
                                      std::string(to_string(report_.error->code)) + ")");
        if (report_.error && !stop_after_failure_)
            return skipped_result(error_code::not_started, "not started: " + report_.error->message);
        if (cancelling_) {
            task_result r;
            r.state = task_state::cancelled;
            r.error = task_error{error_code::run_cancelled, "not started: the run was cancelled"};
            return r;
        }
        if (stop_after_failure_)
            return skipped_result(error_code::run_stopped, "not started: the run stopped after task \"" +
                                                               plan_.task_id(stopped_by_) + "\" failed");
        return skipped_result(error_code::not_started, "not started");
    }

    // Tasks that never started get unstarted_result(), told to the sink and the journal once
    // per stretch of consecutive tasks, not once per task: a run timeout may leave a million
    // children, whose finals one by one took seconds and a journal queue of 64 MiB
    // (docs/JOURNAL.md, "unstarted"). Then the aggregates, from their children.
    asio::awaitable<void> close_unstarted() {
        const task_result unstarted = unstarted_result();
        std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
        auto waits = [this](std::uint32_t i) {
            return state_[i] != node::done && plan_.node(i).kind != plan_task::kind_t::aggregate;
        };
        for (std::uint32_t i = 0; i < plan_.size(); ++i) {
            if (!waits(i)) continue;
            const std::uint32_t first = i;
            for (; i < plan_.size() && waits(i); ++i) close_unstarted_task(i, unstarted);
            ranges.emplace_back(first, i);
        }
        for (const auto& [first, end] : ranges) emit_not_started(first, end, unstarted);
        if (recorder_ && !ranges.empty()) recorder_->unstarted(unstarted_tasks{std::move(ranges), unstarted});
        for (std::uint32_t i = 0; i < plan_.size(); ++i) {
            if (state_[i] == node::done) continue;
            if (recorder_)
                if (auto error = co_await recorder_->catch_up()) journal_broke(*error);
            // An aggregate: its children come before it in plan order, so they are all final.
            record(i, aggregate_result(view_, i));
        }
    }

    // What record() does for a task, but for the event and the journal, which take the whole
    // stretch at once.
    void close_unstarted_task(std::uint32_t idx, const task_result& r) {
        state_[idx] = node::done;
        outcomes_[idx] = task_outcome{r.state, r.attempts, r.reused, decided_here(r)};
        ++finished_;
        if (!recorder_)
            results_[idx] = keeps_streams(idx, r.state) ? r : without_streams(r);
        else
            keep(idx, r);
    }

    // Without a journal, whether a finished task's result stays whole in results_ (for the
    // report), or leaves its captured streams (run_settings::keep_streams).
    bool keeps_streams(std::uint32_t idx, task_state state) const {
        return settings_.keep_streams || state != task_state::succeeded || plan_.output_referenced(idx);
    }

    void emit_not_started(std::uint32_t first, std::uint32_t end, const task_result& r) {
        if (!with_.events) return;
        run_event e;
        e.kind = run_event::kind_t::tasks_not_started;
        e.task_index = first;
        e.end_index = end;
        e.result = &r;
        send(e);
    }

    asio::any_io_executor ex_;
    bool failed_before_start_ = false;  ///< the approval check or the runner's prepare failed
    const plan& plan_;
    run_settings settings_;
    run_collaborators with_;
    const resume_state* resume_ = nullptr;
    std::unique_ptr<builtin_runner> builtin_;
    task_runner* runner_ = nullptr;
    std::optional<run_recorder> recorder_;  ///< with a journal
    run_view view_;
    int jobs_ = 1;
    int window_ = 1;  ///< jobs_ and what the runner takes ahead: tasks handed to it at once

    // Per task (plan index).
    std::vector<task_result> results_;                     // every final result, without a journal only
    std::unordered_map<std::uint32_t, task_result> kept_;  // with a journal: keep()
    std::vector<node> state_;
    std::vector<task_outcome> outcomes_;
    std::vector<bool> executed_;  // resume: the task runs again in this segment
    std::vector<bool> queued_;    // in ready_ (or was)
    std::size_t failures_ = 0;    // final results that are failures (aggregates aside)
    // Per plan node.
    std::vector<std::uint32_t> unfinished_;  // needs (an aggregate: children) not final yet
    std::vector<std::vector<std::uint32_t>> dependants_;
    // Ready tasks in plan order (plan order is topological with declaration tie-breaks).
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready_;
    task_group<std::unique_ptr<task_result>> tasks_;  // the tasks in flight, one coroutine each
    output_contracts contracts_;     // the tasks' outputSchemas, compiled as needed
    child_tasks children_;           // the children admit() renders
    std::unordered_map<std::uint32_t, std::uint64_t> reservations_;
    std::vector<bool> slot_busy_;                               // by slot - 1: held by a running task
    std::unordered_map<std::uint32_t, std::uint32_t> slot_of_;  // running task -> its slot
    std::unordered_set<std::uint32_t> attempting_;              // tasks whose runner call is under way
    std::unordered_map<std::uint32_t, std::string> expiring_;   // expire()d, with the reason
    std::uint64_t output_reserved_ = 0;
    std::size_t finished_ = 0;

    asio::cancellation_signal prepare_signal_;
    asio::steady_timer wall_timer_;
    bool cancelling_ = false;
    bool cancelled_by_budget_ = false;
    int cancel_requests_ = 0;
    bool stop_after_failure_ = false;
    std::uint32_t stopped_by_ = 0;
    bool approved_all_ = false;
    bool denied_ = false;
    std::chrono::steady_clock::time_point started_;
    run_report report_;
};

}  // namespace

namespace detail {

void async_run_impl(asio::any_io_executor ex, const plan& p, run_settings settings, run_collaborators with,
                    const resume_state* resume, asio::any_completion_handler<void(run_report)> handler) {
    auto op = std::make_shared<scheduler>(ex, p, std::move(settings), with, resume);
    // The caller's slot drives our own cancellation logic (graceful first, then terminal);
    // the loop coroutine itself is never interrupted mid-step.
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected())
        slot.assign([weak = std::weak_ptr<scheduler>(op)](asio::cancellation_type type) {
            if (auto op = weak.lock()) op->cancel(type);
        });
    asio::co_spawn(ex, op->loop(), [op, ex, handler = std::move(handler)](std::exception_ptr e) mutable {
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        run_report report = op->take_report();
        if (e && !report.error) report.error = task_error{error_code::internal_error, "the scheduler failed"};
        auto handler_ex = asio::get_associated_executor(handler, ex);
        asio::dispatch(handler_ex, [h = std::move(handler), r = std::move(report)]() mutable {
            std::move(h)(std::move(r));
        });
    });
}

}  // namespace detail
}  // namespace agentctl
