// The scheduler: one loop that starts ready tasks until the job slots are full, waits for
// one completion, records it and releases dependants (after Ninja's build loop).
#include <agentctl/engine.hpp>

#include "engine/builtin_runner.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <deque>
#include <memory>
#include <queue>
#include <random>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl {

std::string_view to_string(run_state s) {
    switch (s) {
    case run_state::succeeded: return "succeeded";
    case run_state::failed: return "failed";
    case run_state::cancelled: return "cancelled";
    }
    return "failed";
}

std::string_view to_string(task_state s) {
    switch (s) {
    case task_state::succeeded: return "succeeded";
    case task_state::failed: return "failed";
    case task_state::timed_out: return "timed_out";
    case task_state::cancelled: return "cancelled";
    case task_state::output_limit_exceeded: return "output_limit_exceeded";
    case task_state::spawn_failed: return "spawn_failed";
    case task_state::skipped: return "skipped";
    }
    return "failed";
}

int run_report::exit_code() const {
    if (state == run_state::succeeded) return 0;
    if (state == run_state::cancelled) return 130;
    if (error && (error->code == "approval_required" || error->code == "approval_denied")) return 3;
    return 4;
}

std::vector<std::uint32_t> tasks_requiring_approval(const plan& p) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < p.tasks.size(); ++i)
        if (p.tasks[i].requires_approval) out.push_back(i);
    return out;
}

namespace {

bool is_failure(task_state s) {
    return s != task_state::succeeded && s != task_state::skipped && s != task_state::cancelled;
}

// Only failures declared safe are repeated (SPEC 2): a spawn error by default (nothing ran),
// a non-zero exit or a timeout when retry.on says so. An extension declared at_most_once is
// never invoked twice: only its spawn errors are retried.
bool retry_allowed(const retry_spec& retry, const action_spec& action, const task_result& r) {
    auto allows = [&](retry_reason reason) {
        return std::find(retry.on.begin(), retry.on.end(), reason) != retry.on.end();
    };
    if (r.state == task_state::spawn_failed) return allows(retry_reason::spawn_error);
    if (action.extension && action.extension->idempotency_class == idempotency::at_most_once) return false;
    switch (r.state) {
    case task_state::failed: return r.exit_code.value_or(0) != 0 && allows(retry_reason::exit_nonzero);
    case task_state::timed_out: return allows(retry_reason::timeout);
    default: return false;
    }
}

task_result skipped_result(std::string code, std::string message) {
    task_result r;
    r.state = task_state::skipped;
    r.error = task_error{std::move(code), std::move(message)};
    return r;
}

std::string make_run_id() {
    std::random_device rd;
    std::uint64_t bits = (std::uint64_t(rd()) << 32) | rd();
    static constexpr char hex[] = "0123456789abcdef";
    std::string id = "run-";
    for (int i = 0; i < 16; ++i) id.push_back(hex[(bits >> (60 - 4 * i)) & 15]);
    return id;
}

/// Shared state of one run. Owned by the loop coroutine and by every task coroutine.
class run_operation : public std::enable_shared_from_this<run_operation> {
public:
    run_operation(asio::any_io_executor ex, const plan& p, run_options options)
        : ex_(ex), plan_(p), options_(std::move(options)), wake_(ex), wall_timer_(ex) {
        std::size_t n = p.tasks.size();
        results_.resize(n);
        state_.assign(n, node::pending);
        unfinished_needs_.resize(n);
        dependants_.resize(n);
        for (std::uint32_t i = 0; i < n; ++i) {
            unfinished_needs_[i] = static_cast<std::uint32_t>(p.tasks[i].needs.size());
            for (auto need : p.tasks[i].needs) dependants_[need].push_back(i);
            if (unfinished_needs_[i] == 0) ready_.push(i);
        }
        jobs_ = std::clamp(options_.jobs.value_or(p.max_concurrency), 1, limits::max_concurrency);
        inputs_ = p.inputs;
        report_.run_id = options_.run_id.empty() ? make_run_id() : options_.run_id;
        if (!options_.runner) {
            builtin_ = make_builtin_runner(ex, p, options_, report_.run_id);
            runner_ = builtin_.get();
        } else {
            runner_ = options_.runner;
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
        asio::cancellation_type forward = (terminal || cancel_requests_ > 0) ? asio::cancellation_type::terminal
                                                                             : asio::cancellation_type::total;
        ++cancel_requests_;
        for (auto& [idx, signal] : running_signals_) signal->emit(forward);
        prepare_signal_.emit(forward);
        wake_.cancel();
    }

    asio::awaitable<void> loop() {
        auto self = shared_from_this();
        started_ = std::chrono::steady_clock::now();
        wake_.expires_at(asio::steady_timer::time_point::max());
        if (!check_approvals_up_front()) {
            close_unstarted();
            co_return;
        }
        std::optional<task_error> setup =
            co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::optional<task_error>)>(
                [this](auto handler) {
                    runner_->async_prepare(ex_, asio::bind_cancellation_slot(prepare_signal_.slot(), std::move(handler)));
                },
                asio::use_awaitable);
        if (setup || cancelling_) {
            if (setup) report_.error = std::move(setup);
            close_unstarted();
            co_await finish_runner();
            co_return;
        }
        arm_wall_time_budget();

        std::size_t total = plan_.tasks.size();
        while (finished_ < total) {
            while (!stopping() && running_ < static_cast<std::uint32_t>(jobs_) && !ready_.empty()) {
                std::uint32_t idx = ready_.top();
                ready_.pop();
                co_await dispatch(idx);
            }
            if (stopping() && running_ == 0) break;
            if (running_ == 0 && ready_.empty()) break;  // nothing left that can become ready
            // Woken by a completion, or by a cancellation that the next turn acts on.
            if (completed_.empty() && running_ > 0) {
                co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
                wake_.expires_at(asio::steady_timer::time_point::max());
            }
            while (!completed_.empty()) {
                auto [idx, result] = std::move(completed_.front());
                completed_.pop_front();
                --running_;
                finish(idx, std::move(result));
            }
        }
        wall_timer_.cancel();
        close_unstarted();
        co_await finish_runner();
        co_return;
    }

    run_report take_report() {
        report_.output = render_outputs();
        report_.tasks = std::move(results_);
        report_.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - started_);
        if (!report_.error && denied_)
            report_.error = task_error{"approval_denied", "approval was denied for at least one task"};
        if (!report_.error && cancelling_ && cancelled_by_budget_)
            report_.error = task_error{"budget_exceeded", "the run exceeded budgets.maxWallTimeSeconds (" +
                                                              std::to_string(*plan_.budgets.max_wall_time_seconds) +
                                                              " s) and was stopped"};
        bool any_failure = std::any_of(report_.tasks.begin(), report_.tasks.end(),
                                       [](const task_result& r) { return is_failure(r.state); });
        if (cancelling_ && !cancelled_by_budget_) report_.state = run_state::cancelled;
        else if (any_failure || report_.error) report_.state = run_state::failed;
        else report_.state = run_state::succeeded;
        return std::move(report_);
    }

private:
    enum class node { pending, running, done };

    bool stopping() const { return cancelling_ || stop_after_failure_ || report_.error.has_value(); }

    // Once every task is done: what the runner left for later (container removal) and its
    // check that nothing is left. A failure there fails the run.
    asio::awaitable<void> finish_runner() {
        std::optional<task_error> error =
            co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::optional<task_error>)>(
                [this](auto handler) { runner_->async_finish(ex_, std::move(handler)); }, asio::use_awaitable);
        if (error && !report_.error) report_.error = std::move(error);
    }

    bool check_approvals_up_front() {
        if (options_.approvals) return true;
        auto needing = tasks_requiring_approval(plan_);
        if (needing.empty()) return true;
        std::string ids;
        for (std::size_t i = 0; i < needing.size() && i < 5; ++i)
            ids += (i ? ", " : "") + plan_.tasks[needing[i]].id;
        if (needing.size() > 5) ids += " and " + std::to_string(needing.size() - 5) + " more";
        report_.error = task_error{
            "approval_required",
            "policy.approval is \"" + std::string(to_string(plan_.policy.approval)) + "\" and " +
                std::to_string(needing.size()) + (needing.size() == 1 ? " task needs" : " tasks need") +
                " approval to run a process (" + ids + "); nothing was run. Run with --interactive on a "
                "terminal to approve, or set spec.policy.approval: never for unattended runs"};
        return false;
    }

    void arm_wall_time_budget() {
        if (!plan_.budgets.max_wall_time_seconds) return;
        wall_timer_.expires_after(std::chrono::seconds(*plan_.budgets.max_wall_time_seconds));
        wall_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) self->cancel(asio::cancellation_type::total, /*by_budget=*/true);
        });
    }

    render_context context_for(const json::value& vars, const json::value* with) const {
        render_context ctx;
        ctx.inputs = &inputs_;
        ctx.vars = &vars;
        ctx.with = with;
        ctx.task_output = [this](std::string_view id) -> const json::value* {
            auto i = plan_.find(id);
            if (!i || state_[*i] != node::done) return nullptr;
            return &results_[*i].output;
        };
        return ctx;
    }

    // Decides what to do with a ready task: skip it, complete it here, or start it.
    asio::awaitable<void> dispatch(std::uint32_t idx) {
        const plan_task& t = plan_.tasks[idx];
        for (auto need : t.needs) {
            const task_result& r = results_[need];
            if (r.state != task_state::succeeded) {
                record(idx, skipped_result("dependency_not_succeeded",
                                           "dependency \"" + plan_.tasks[need].id + "\" " +
                                               std::string(to_string(r.state))));
                co_return;
            }
        }
        if (t.kind == plan_task::kind_t::aggregate) {
            record(idx, aggregate_result(t));
            co_return;
        }

        json::value vars(t.vars);
        if (t.when) {
            render_context ctx = context_for(vars, nullptr);
            std::string error;
            auto value = evaluate(*t.when, ctx, error);
            if (!value) {
                record(idx, failed_result("condition_error", "when \"" + t.when->expression + "\": " + error));
                co_return;
            }
            if (!*value) {
                task_result r = skipped_result("condition_false", "when \"" + t.when->expression + "\" is false");
                json::object out;
                out["reason"] = "condition_false";
                out["condition"] = json::object{{"expression", t.when->expression}, {"result", false}};
                r.output = std::move(out);
                record(idx, std::move(r));
                co_return;
            }
        }

        attempt_request request;
        request.compiled = &plan_;
        request.task_index = idx;
        std::string error;
        if (!render_request(t, vars, request, error)) {
            record(idx, failed_result("template_error", error));
            co_return;
        }

        const action_spec& action = plan_.action_of(t);
        if (action.kind == action_kind::assign) {
            task_result r;
            r.state = task_state::succeeded;
            r.attempts = 1;
            r.output = request.with;
            record(idx, std::move(r));
            co_return;
        }

        std::uint64_t reservation = t.limits.combined_bytes * (action.kind == action_kind::extension_process ? 2 : 1);
        if (plan_.budgets.max_process_output_bytes) {
            std::uint64_t budget = *plan_.budgets.max_process_output_bytes;
            if (output_reserved_ + reservation > budget) {
                record(idx, failed_result("budget_exceeded",
                                          "budgets.maxProcessOutputBytes (" + std::to_string(budget) +
                                              ") cannot cover this task's output limit (" +
                                              std::to_string(reservation) + " bytes; " +
                                              std::to_string(budget - std::min(budget, output_reserved_)) +
                                              " left); it was not started"));
                co_return;
            }
        }

        if (t.requires_approval && options_.approvals && !approved_all_) {
            approval_answer answer = co_await asio::async_initiate<decltype(asio::use_awaitable), void(approval_answer)>(
                [this, idx](auto handler) { options_.approvals->async_approve(plan_, idx, std::move(handler)); },
                asio::use_awaitable);
            if (answer == approval_answer::all) approved_all_ = true;
            if (answer == approval_answer::no) {
                record(idx, failed_result("approval_denied", "approval was denied; the task did not run"));
                denied_ = true;
                co_return;
            }
            if (stopping()) {  // cancelled while asking
                ready_.push(idx);
                co_return;
            }
        }

        output_reserved_ += reservation;
        reservations_[idx] = reservation;
        start(idx, std::move(request));
    }

    bool render_request(const plan_task& t, const json::value& vars, attempt_request& request, std::string& error) {
        const action_spec& action = plan_.action_of(t);
        render_context ctx = context_for(vars, nullptr);
        if (t.with_deferred) {
            auto with = render(t.with, ctx, error);
            if (!with) return false;
            request.with = std::move(*with);
        } else {
            request.with = t.with;
        }
        // Action-level `with` holds defaults; the task's keys win.
        if (action.with.is_object() && (request.with.is_object() || request.with.is_null())) {
            json::object merged = action.with.get_object();
            if (request.with.is_object())
                for (const auto& m : request.with.get_object()) merged[m.key()] = m.value();
            request.with = std::move(merged);
        }
        if (!action.is_process()) return true;

        ctx.with = &request.with;
        if (t.argv_deferred) {
            for (const auto& a : action.args) {
                auto s = render_text(a, ctx, error);
                if (!s) return false;
                request.args.push_back(std::move(*s));
            }
            if (action.cwd) {
                auto s = render_text(*action.cwd, ctx, error);
                if (!s) return false;
                request.cwd = std::move(*s);
            }
        } else {
            request.args = t.args ? *t.args : action.args;
            request.cwd = t.cwd ? t.cwd : action.cwd;
        }
        return true;
    }

    void start(std::uint32_t idx, attempt_request request) {
        state_[idx] = node::running;
        ++running_;
        auto signal = std::make_unique<asio::cancellation_signal>();
        auto slot = signal->slot();
        running_signals_.emplace(idx, std::move(signal));
        asio::co_spawn(ex_, run_task(idx, std::move(request)),
                       asio::bind_cancellation_slot(
                           slot, [self = shared_from_this(), idx](std::exception_ptr e, task_result r) {
                               if (e) {
                                   r = task_result{};
                                   r.state = task_state::failed;
                                   r.error = task_error{"internal_error", "the task coroutine failed"};
                                   try {
                                       std::rethrow_exception(e);
                                   } catch (const std::exception& ex) {
                                       r.error->message += std::string(": ") + ex.what();
                                   } catch (...) {
                                   }
                               }
                               self->completed_.emplace_back(idx, std::move(r));
                               self->wake_.cancel();
                           }));
    }

    // One coroutine per task: its attempts, with backoff between retries.
    asio::awaitable<task_result> run_task(std::uint32_t idx, attempt_request request) {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_await asio::this_coro::throw_if_cancelled(false);
        const plan_task& t = plan_.tasks[idx];
        auto begun = std::chrono::steady_clock::now();
        task_result result;
        for (std::uint32_t attempt = 1;; ++attempt) {
            request.attempt = attempt;
            emit_started(idx, attempt);
            result = co_await asio::async_initiate<decltype(asio::use_awaitable), void(task_result)>(
                [this](auto handler, const attempt_request* r) { runner_->async_run(*r, std::move(handler)); },
                asio::use_awaitable, &request);
            result.attempts = attempt;
            bool cancelled = (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
            if (cancelled || attempt >= static_cast<std::uint32_t>(t.retry.max_attempts) ||
                !retry_allowed(t.retry, plan_.action_of(t), result))
                break;
            if (t.retry.backoff_ms > 0) {
                asio::steady_timer backoff(ex_, std::chrono::milliseconds(t.retry.backoff_ms));
                co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
                if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
                    result.state = task_state::cancelled;
                    break;
                }
            }
        }
        result.duration_ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begun).count());
        co_return result;
    }

    void emit_started(std::uint32_t idx, std::uint32_t attempt) {
        if (!options_.events) return;
        run_event e;
        e.kind = run_event::kind_t::task_started;
        e.task_index = idx;
        e.attempt = attempt;
        e.elapsed = std::chrono::steady_clock::now() - started_;
        e.running = running_;
        e.finished = static_cast<std::uint32_t>(finished_);
        options_.events->on_event(e);
    }

    void finish(std::uint32_t idx, task_result r) {
        running_signals_.erase(idx);
        auto reserved = reservations_.find(idx);
        if (reserved != reservations_.end()) {
            output_reserved_ -= std::min(output_reserved_, reserved->second);
            output_reserved_ += r.output_bytes;
            reservations_.erase(reserved);
        }
        record(idx, std::move(r));
    }

    // A task reached its final state: store it, tell the sink, release dependants.
    void record(std::uint32_t idx, task_result r) {
        const plan_task& t = plan_.tasks[idx];
        state_[idx] = node::done;
        results_[idx] = std::move(r);
        ++finished_;
        const task_result& stored = results_[idx];
        if (is_failure(stored.state) && t.failure == failure_mode::stop && !options_.keep_going &&
            t.kind != plan_task::kind_t::aggregate) {
            if (!stop_after_failure_) stopped_by_ = idx;
            stop_after_failure_ = true;
        }
        if (options_.events) {
            run_event e;
            e.kind = run_event::kind_t::task_finished;
            e.task_index = idx;
            e.attempt = stored.attempts;
            e.result = &stored;
            e.elapsed = std::chrono::steady_clock::now() - started_;
            e.running = running_;
            e.finished = static_cast<std::uint32_t>(finished_);
            options_.events->on_event(e);
        }
        for (auto d : dependants_[idx])
            if (--unfinished_needs_[d] == 0) ready_.push(d);
    }

    task_result failed_result(std::string code, std::string message) {
        task_result r;
        r.state = task_state::failed;
        r.error = task_error{std::move(code), std::move(message)};
        return r;
    }

    task_result aggregate_result(const plan_task& t) const {
        task_result r;
        json::array items;
        items.reserve(t.children.size());
        bool any_failed = false, any_cancelled = false, all_skipped = true;
        for (auto child : t.children) {
            const task_result& c = results_[child];
            any_failed |= is_failure(c.state);
            any_cancelled |= c.state == task_state::cancelled;
            all_skipped &= c.state == task_state::skipped;
            json::object item;
            item["index"] = plan_.tasks[child].expansion_index;
            item["taskId"] = plan_.tasks[child].id;
            item["state"] = to_string(c.state);
            item["output"] = c.output;
            if (c.error) item["error"] = json::object{{"code", c.error->code}, {"message", c.error->message}};
            else item["error"] = nullptr;
            items.push_back(std::move(item));
        }
        r.state = any_failed      ? task_state::failed
                  : any_cancelled ? task_state::cancelled
                  : (all_skipped && !t.children.empty()) ? task_state::skipped
                                                         : task_state::succeeded;
        if (r.state == task_state::failed) r.error = task_error{"child_failed", "at least one item failed"};
        r.output = json::object{{"items", std::move(items)}};
        return r;
    }

    // Tasks that never started: cancelled when the run was cancelled, skipped otherwise.
    void close_unstarted() {
        for (std::uint32_t i = 0; i < plan_.tasks.size(); ++i) {
            if (state_[i] == node::done) continue;
            if (report_.error && !stop_after_failure_) {
                record(i, skipped_result("not_started", "not started: " + report_.error->message));
            } else if (cancelling_) {
                task_result r;
                r.state = task_state::cancelled;
                r.error = task_error{"run_cancelled", "not started: the run was cancelled"};
                record(i, std::move(r));
            } else if (stop_after_failure_) {
                record(i, skipped_result("run_stopped", "not started: the run stopped after task \"" +
                                                            plan_.tasks[stopped_by_].id + "\" failed"));
            } else {
                record(i, skipped_result("not_started", "not started"));
            }
        }
    }

    json::value render_outputs() const {
        if (plan_.outputs.empty()) {
            json::object out;
            for (std::uint32_t i = 0; i < plan_.tasks.size(); ++i)
                if (plan_.tasks[i].kind != plan_task::kind_t::child) out[plan_.tasks[i].id] = results_[i].output;
            return out;
        }
        json::object out;
        json::value vars = json::object{};
        render_context ctx;
        ctx.inputs = &inputs_;
        ctx.vars = &vars;
        ctx.task_output = [this](std::string_view id) -> const json::value* {
            auto i = plan_.find(id);
            if (!i || state_[*i] != node::done) return nullptr;
            return &results_[*i].output;
        };
        for (const auto& m : plan_.outputs) {
            std::string error;
            auto v = render(m.value(), ctx, error);
            out[m.key()] = v ? std::move(*v) : json::value(nullptr);
        }
        return out;
    }

    asio::any_io_executor ex_;
    const plan& plan_;
    run_options options_;
    std::unique_ptr<task_runner> builtin_;
    task_runner* runner_ = nullptr;
    json::value inputs_;
    int jobs_ = 1;

    std::vector<task_result> results_;
    std::vector<node> state_;
    std::vector<std::uint32_t> unfinished_needs_;
    std::vector<std::vector<std::uint32_t>> dependants_;
    // Ready tasks in plan order (plan order is topological with declaration tie-breaks).
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready_;
    std::deque<std::pair<std::uint32_t, task_result>> completed_;
    std::unordered_map<std::uint32_t, std::unique_ptr<asio::cancellation_signal>> running_signals_;
    std::unordered_map<std::uint32_t, std::uint64_t> reservations_;
    std::uint64_t output_reserved_ = 0;
    std::uint32_t running_ = 0;
    std::size_t finished_ = 0;

    asio::cancellation_signal prepare_signal_;
    asio::steady_timer wake_;  // cancelled to wake the loop: a completion or a cancellation
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

void async_run_impl(asio::any_io_executor ex, const plan& p, run_options options,
                    asio::any_completion_handler<void(run_report)> handler) {
    auto op = std::make_shared<run_operation>(ex, p, std::move(options));
    // The caller's slot drives our own cancellation logic (graceful first, then terminal);
    // the loop coroutine itself is never interrupted mid-step.
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected())
        slot.assign([weak = std::weak_ptr<run_operation>(op)](asio::cancellation_type type) {
            if (auto op = weak.lock()) op->cancel(type);
        });
    asio::co_spawn(ex, op->loop(),
                   [op, ex, handler = std::move(handler)](std::exception_ptr e) mutable {
                       auto slot = asio::get_associated_cancellation_slot(handler);
                       if (slot.is_connected()) slot.clear();
                       run_report report = op->take_report();
                       if (e && !report.error) report.error = task_error{"internal_error", "the scheduler failed"};
                       auto handler_ex = asio::get_associated_executor(handler, ex);
                       asio::dispatch(handler_ex, [h = std::move(handler), r = std::move(report)]() mutable {
                           std::move(h)(std::move(r));
                       });
                   });
}

}  // namespace detail
}  // namespace agentctl
