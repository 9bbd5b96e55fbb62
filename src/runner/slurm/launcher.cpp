// isolation: process on the Slurm backend. One srun client per launch, run by the same
// bounded executor as a host process; one poller per run batching squeue over every active
// job name; timeouts, cancellation and output overflow end the job through the controller
// and confirm it gone; at the end, a sweep of the run's jobs. Decisions: docs/DESIGN.md,
// "Slurm backend"; what Slurm does: docs/SLURM.md.
#include "runner/slurm/launcher.hpp"

#include "exec/host.hpp"
#include "runner/launch_control.hpp"
#include "runner/slurm/allocation.hpp"
#include "runner/slurm/classify.hpp"
#include "runner/slurm/command.hpp"
#include "runner/worker/launcher.hpp"

#include <agentctl/watchdog.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl {
namespace {

using steady = std::chrono::steady_clock;

// The poller's pace while no launch waits for it: learns ids and nodes of running jobs.
constexpr auto poll_tick = 1s;
// Between two polls however many launches ask: bounds squeue calls to 50 a second.
constexpr auto poll_spacing = 20ms;
// After a failed poll (a controller that does not answer takes 9-10 s anyway).
constexpr auto poll_retry = 1s;
// srun has exited: how long to wait for the job's final state (it is COMPLETING meanwhile).
constexpr auto settle_bound = 20s;
// A job never listed is taken as never created once its srun has been gone this long.
constexpr auto absent_after = 500ms;
// A stopped job must be shown gone within this (after the grace); else a cleanup failure.
constexpr auto removal_bound = 30s;
// After scancel of a known job srun returns by itself (measured 160 ms); else it is killed.
constexpr auto client_exit_bound = 5s;
// What the classification reads of srun's stderr: its own lines come last.
constexpr std::size_t stderr_tail_bytes = 16 * 1024;

/// One launch's job as the poller sees it.
struct tracked_job {
    std::string name;
    const attempt_request* attempt = nullptr;
    std::optional<std::uint64_t> id;  ///< once listed
    std::string node;
    std::optional<slurm::job_state> state;
    std::string state_text;
    bool listed = false;                                       ///< in the last successful poll
    steady::time_point polled_at = steady::time_point::min();  ///< start of that poll
    std::function<void()> notify;
};

bool final_state(const tracked_job& t) {
    return t.listed && t.state && !slurm::is_active(*t.state);
}

std::string where(const tracked_job& t) {
    if (!t.id) return "";
    return " (Slurm job " + std::to_string(*t.id) + (t.node.empty() ? "" : " on " + t.node) + ")";
}

// How srun's attempt ended, from its status, its stderr and the job's state (docs/SLURM.md,
// section 5), as the process result and error the task result is made of.
void classify(launch_result& out, const tracked_job& t) {
    process_result& p = out.process;
    slurm::end_evidence ev;
    ev.srun_exit = p.exit_code;
    ev.srun_signal = p.signal;
    std::string_view tail = p.stderr_bytes;
    if (tail.size() > stderr_tail_bytes) tail.remove_prefix(tail.size() - stderr_tail_bytes);
    ev.stderr_tail = tail;
    if (t.listed && t.state) ev.state = *t.state;
    slurm::attempt_end end = slurm::classify_end(ev);
    using kind = slurm::end_kind;
    auto code = error_code_from_string(slurm::error_code(end.kind)).value_or(error_code::slurm_unknown_end);
    switch (end.kind) {
        case kind::succeeded:
            p.exit_code = 0;
            p.signal.reset();
            return;
        case kind::exit_nonzero:
            p.exit_code = end.exit_code;
            p.signal.reset();
            return;
        case kind::signaled:
            p.exit_code.reset();
            p.signal = end.signal;
            return;
        case kind::stopped:
            return;
        case kind::executable_not_found:
        case kind::permission_denied:
        case kind::launch_failed:
            // Nothing ran: like a spawn failure of a host process (retryable as spawn_error).
            p.outcome = process_outcome::spawn_failed;
            p.exit_code.reset();
            p.signal.reset();
            out.error = task_error{code, end.message + where(t)};
            return;
        default:
            // Slurm's own end (time limit, node failure, out of memory, ...) or a program that
            // ran elsewhere than asked: the program's status is told only when it is its own.
            p.exit_code = end.exit_code && *end.exit_code != 0 ? end.exit_code : std::nullopt;
            p.signal = end.signal;
            out.error = task_error{code, end.message + where(t)};
            return;
    }
}

class slurm_launcher final : public launcher {
public:
    slurm_launcher(launch_context& ctx, slurm::tools tools)
        : launcher(ctx), tools_(std::move(tools)), poll_timer_(ctx.ex), finish_wake_(ctx.ex) {
        owner_ = this_job_owner();
    }

    asio::awaitable<void> launch(const launch_request& request, launch_result& out) override {
        auto ctl = co_await launch_control::create();
        out = co_await run(request, std::move(ctl));
    }

private:
    // The poller learnt a job's id (before it ended): it is the attempt's handle (recorded in
    // the journal), and the watchdog cancels it if agentctl dies (docs/CRASH_SAFETY.md).
    void job_known(const tracked_job& t, const attempt_request& attempt, std::uint64_t job_id) {
        std::string id = std::to_string(job_id);
        if (watchdog* w = ctx_.watch) {
            w->announce_slurm_job(id);
            w->release_slurm_name(t.name);  // the id covers it now
        }
        if (attempt.on_started) {
            attempt_started started;
            started.slurm_job_id = std::move(id);
            attempt.on_started(started);
        }
    }

    std::vector<std::string> helper_env() const {
        return slurm::client_environment(ctx_.settings.host_env, {});
    }

    asio::awaitable<launch_result> run(const launch_request& request, std::shared_ptr<launch_control> ctl) {
        launch_control& c = *ctl;
        const attempt_request& attempt = *request.attempt;
        const action_spec& action = attempt.action();
        const plan_task& task = attempt.task();
        const prepared_action& prepared = ctx_.actions[task.action_index];
        launch_result out;
        out.isolation = "process";
        out.containment = "slurm";
        out.backend = "slurm";
        out.process.outcome = process_outcome::spawn_failed;
        auto fail = [&](error_code code, std::string message) {
            out.error = task_error{code, std::move(message)};
            return out;
        };
        const slurm::tools& tools = tools_;

        // Fail closed before anything is submitted, exactly as for a host process.
        if (auto refused = allowlist_refusal(ctx_, action)) co_return fail(refused->code, refused->message);
        if (prepared.executable.empty())
            co_return fail(error_code::executable_not_found, prepared.executable_error);
        out.command = prepared.executable;
        // Open until srun has exited; its path is what the node changes to.
        auto cwd = open_working_directory(ctx_, attempt.cwd);
        if (!cwd) co_return fail(cwd.error().code, cwd.error().message);
        const auto& env = ctx_.environment_of(task.action_index).entries;
        slurm::srun_request sr;
        for (const auto& entry : env) {
            std::string name = entry.substr(0, entry.find('='));
            if (auto why = slurm::env_name_error(name); !why.empty())
                co_return fail(error_code::engine_variable_not_allowed, why);
            sr.env_names.push_back(std::move(name));
        }
        sr.srun = tools.srun;
        sr.run_id = ctx_.settings.run_id;
        sr.owner = owner_;
        // Task ids are [a-z0-9_-]: ".handshake" and ".invoke" cannot collide with another task.
        sr.task_id = request.phase == "shell" ? attempt.task_id : attempt.task_id + "." + request.phase;
        sr.attempt = attempt.attempt;
        sr.executable = prepared.executable;
        sr.args = attempt.args;
        sr.args.insert(sr.args.end(), request.extra_args.begin(), request.extra_args.end());
        sr.cwd = cwd->path;
        auto grace = std::chrono::seconds(ctx_.compiled->kill_grace_seconds);
        sr.timeout_ms = static_cast<std::uint64_t>(task.timeout_ms);
        sr.kill_grace_ms = static_cast<std::uint64_t>(grace.count()) * 1000;
        const slurm_options& o = ctx_.settings.slurm;
        sr.resources = slurm::resource_options{o.partition, o.account, o.qos, o.cpus_per_task, o.mem_mib};
        sr.forward_stdin = request.stdin_data.has_value();
        slurm::argv_result argv = slurm::srun_argv(sr);
        if (!argv)
            co_return fail(error_code::invalid_request,
                           "the srun command line cannot be made: " + argv.error);
        std::string error;
        std::string name = *slurm::job_name(sr.run_id, sr.owner, sr.task_id, sr.attempt, error);

        if (c.stopping()) {  // cancelled before anything was submitted
            out.process.outcome = process_outcome::cancelled;
            out.process.error_message = "cancelled before the Slurm job was submitted";
            co_return out;
        }

        process_request req;
        req.executable = tools.srun;
        req.argv = std::move(argv.argv);
        // Built from nothing: SLURM_CONF and the declared values (docs/SLURM.md, section 3).
        req.env = slurm::client_environment(ctx_.settings.host_env, env);
        req.cwd_fd = cwd->fd;
        req.cwd_display = cwd->path;
        req.stdin_data = request.stdin_data;
        req.stdout_limit = task.limits.stdout_bytes;
        req.stderr_limit = task.limits.stderr_bytes;
        req.combined_limit = task.limits.combined_bytes;
        // A backstop only: the task's timeout is ours (below), so that the job is ended through
        // the controller while srun still runs.
        req.timeout = std::chrono::milliseconds(task.timeout_ms) + grace + removal_bound + 60s;
        req.drain_grace = ctx_.settings.drain_grace;
        req.containment = containment_policy::process_group_only;

        auto t = std::make_shared<tracked_job>();
        t->name = name;
        t->attempt = &attempt;
        t->notify = [weak = std::weak_ptr<launch_control>(ctl)] {
            if (auto c = weak.lock()) c->notify();
        };
        jobs_.emplace(name, t);
        ++submitted_;
        // Until the poller learns the id, a crash leaves the watchdog only the name to cancel.
        if (watchdog* w = ctx_.watch) {
            if (!announced_) w->announce_slurm({tools_.scancel, helper_env()});
            announced_ = true;
            w->announce_slurm_name(name);
        }
        ensure_poller();

        co_await c.run_client(std::move(req), std::chrono::milliseconds(task.timeout_ms));

        std::optional<std::string> cleanup_error;
        std::string after;
        if (!c.client()) {
            // The timeout or a cancellation while srun runs: end the job through the controller.
            after = c.stopped_by();
            bool graceful = grace.count() > 0 && !c.terminal();
            cleanup_error = co_await stop(c, *t, graceful, grace);
            out.process = std::move(*c.client());
            out.process.outcome = c.timed_out() ? process_outcome::timed_out : process_outcome::cancelled;
            out.process.exit_code.reset();  // srun's status after scancel, not the program's
            out.process.signal.reset();
        } else if (c.client()->outcome == process_outcome::exited) {
            co_await settle(c, *t);
            out.process = std::move(*c.client());
            classify(out, *t);
        } else if (c.client()->outcome == process_outcome::spawn_failed) {
            out.process = std::move(*c.client());
            out.error =
                task_error{error_code::backend_unavailable,
                           "srun could not be started: " + out.process.error_message + "; nothing was run"};
        } else {
            // The executor killed srun (an output cap, or the backstop): killing srun's process
            // group leaves its job running (docs/SLURM.md, section 7), so end it now.
            after = c.client()->outcome == process_outcome::output_limit_exceeded ? "an output limit"
                                                                                  : "the timeout";
            cleanup_error = co_await stop(c, *t, false, 0s);
            out.process = std::move(*c.client());
            out.process.exit_code.reset();
            out.process.signal.reset();
        }
        cwd->opened.reset();
        if (cleanup_error)
            out.error = task_error{error_code::slurm_cleanup_failed, "failed to confirm that Slurm job " +
                                                                         name + " is gone after " + after +
                                                                         ": " + *cleanup_error};
        // Confirmed gone (or never created): no longer the watchdog's to cancel if we die.
        if (!cleanup_error && ctx_.watch) {
            if (t->id)
                ctx_.watch->release_slurm_job(std::to_string(*t->id));
            else
                ctx_.watch->release_slurm_name(name);
        }
        out.slurm_job_id = t->id;
        out.slurm_node = t->node;
        out.slurm_state = t->state_text;
        // srun's CPU time and memory, not the program's: not reported.
        out.process.usage = resource_usage{};
        out.process.descendants_killed = 0;
        jobs_.erase(name);
        if (jobs_.empty()) poll_timer_.cancel();  // the poller ends
        co_return out;
    }

    // srun has exited by itself: the job's final state, from the first poll that started after
    // srun ended (later ones while it is COMPLETING), within settle_bound.
    asio::awaitable<void> settle(launch_control& c, tracked_job& t) {
        auto until = c.client_done_at() + settle_bound;
        auto since = c.client_done_at();
        std::chrono::milliseconds pause = 20ms;
        for (;;) {
            co_await wait_polled(c, t, since, until);
            if (t.polled_at < since) co_return;  // no poll answered in time
            if (!t.listed) co_return;            // srun got no job (it is listed until MinJobAge)
            if (final_state(t)) co_return;
            if (c.stopping() || steady::now() >= until) co_return;  // the finish sweep checks it again
            co_await c.wait(pause);
            pause = std::min<std::chrono::milliseconds>(pause * 2, 500ms);
            since = steady::now();
        }
    }

    // Until a poll that started at or after `since` has covered `t`, or `until`.
    asio::awaitable<void> wait_polled(launch_control& c, tracked_job& t, steady::time_point since,
                                      steady::time_point until) {
        while (t.polled_at < since && steady::now() < until) {
            request_poll();
            co_await c.wait(until - steady::now());
        }
    }

    // Ends a job through the controller and confirms it gone (docs/SLURM.md, section 5):
    // `scancel --signal=TERM` and the grace when `graceful`, then SIGKILL to the step and
    // scancel of the job (by name while its id is unknown), srun killed only if it does not
    // return by itself, and a poll after both that lists the job final or not at all. Returns
    // what could not be confirmed.
    asio::awaitable<std::optional<std::string>> stop(launch_control& c, tracked_job& t, bool graceful,
                                                     std::chrono::seconds grace) {
        const slurm::tools& tools = tools_;
        auto env = helper_env();
        if (!t.id) {
            // A job srun has submitted is listed, pending or not: learn its id first, so that
            // its step can be killed at once.
            auto since = steady::now();
            co_await wait_polled(c, t, since, since + 2s);
        }
        // A pending job has no program to signal: no grace for it.
        if (graceful && t.id && t.listed && t.state == slurm::job_state::running) {
            co_await slurm::call(slurm::scancel_signal(tools.scancel, *t.id, "TERM"), env);
            auto until = steady::now() + grace;
            while (!c.client() && !c.terminal() && steady::now() < until)
                co_await c.wait(until - steady::now());
        }
        auto deadline = steady::now() + removal_bound;
        for (;;) {
            auto cancel_at = steady::now();
            bool by_id = t.id.has_value();
            if (by_id) {
                co_await slurm::call(slurm::scancel_kill_step(tools.scancel, *t.id), env);
                std::vector<std::uint64_t> ids(1, *t.id);  // no braced list: GCC 12 trips in a coroutine
                co_await slurm::call(slurm::scancel_jobs(tools.scancel, ids), env);
            } else {
                co_await slurm::call(slurm::scancel_by_name(tools.scancel, t.name), env);
            }
            // srun returns once its job has ended; one that does not is killed (the job was
            // cancelled above, and is confirmed below).
            auto wait_until = cancel_at + (by_id ? client_exit_bound : 1s);
            while (!c.client() && steady::now() < wait_until) co_await c.wait(wait_until - steady::now());
            if (!c.client()) {
                c.kill_client();
                while (!c.client()) co_await c.wait();
            }
            auto since = std::max(cancel_at, c.client_done_at());
            auto round_end = std::min(deadline, steady::now() + 5s);
            std::chrono::milliseconds pause = 20ms;
            bool learnt_id = false;
            while (steady::now() < round_end) {
                co_await wait_polled(c, t, since, round_end);
                if (t.polled_at >= since) {
                    if (final_state(t)) co_return std::nullopt;
                    if (!t.listed && (t.id || t.polled_at >= c.client_done_at() + absent_after))
                        co_return std::nullopt;  // purged, or never created
                    if (t.listed && !by_id) {
                        learnt_id = true;  // submitted after all: cancel it by id now
                        break;
                    }
                }
                co_await c.wait(pause);
                pause = std::min<std::chrono::milliseconds>(pause * 2, 500ms);
                since = steady::now();
            }
            if (steady::now() >= deadline && !learnt_id) {
                std::string why;
                if (t.listed)
                    why = "job " + std::to_string(*t.id) + " is still " + t.state_text + " " +
                          std::to_string(removal_bound.count()) + " s after scancel";
                else
                    why = "its state could not be read" +
                          (poll_error_.empty() ? std::string() : ": " + poll_error_);
                co_return why;
            }
            if (steady::now() >= deadline) deadline = steady::now() + 5s;  // one more round for the new id
        }
    }

    void request_poll() {
        poll_requested_ = true;
        ensure_poller();
        poll_timer_.cancel();
    }

    void ensure_poller() {
        if (poller_running_ || jobs_.empty()) return;
        poller_running_ = true;
        // The poller clears the flag itself as it ends (a new one may start right after);
        // here only when it failed unexpectedly.
        asio::co_spawn(ctx_.ex, poller(), [this](std::exception_ptr e) {
            if (e) poller_running_ = false;
            finish_wake_.cancel();
        });
    }

    // The one poller of the run: one squeue (chunked by names) per poll for every job whose
    // launch is in flight, at most every poll_spacing, at least every poll_tick.
    asio::awaitable<void> poller() {
        auto last = steady::time_point::min();
        bool failed = false;
        while (!jobs_.empty()) {
            if (!poll_requested_) {
                poll_timer_.expires_after(poll_tick);
                auto [ec] = co_await poll_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
                if (!ec) poll_requested_ = true;  // the tick
                continue;
            }
            if (last != steady::time_point::min()) {
                auto earliest =
                    last + (failed ? steady::duration(poll_retry) : steady::duration(poll_spacing));
                if (steady::now() < earliest) {
                    poll_timer_.expires_at(earliest);
                    co_await poll_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
                    continue;
                }
            }
            poll_requested_ = false;
            last = steady::now();
            std::vector<std::string> names;
            names.reserve(jobs_.size());
            for (const auto& [n, t] : jobs_) names.push_back(n);
            slurm::listing l = co_await slurm::list_by_names(tools_.squeue, names, helper_env());
            failed = !l.ok;
            if (!l.ok) {
                poll_error_ = l.error;
                continue;
            }
            poll_error_.clear();
            std::unordered_map<std::string_view, const slurm::queue_entry*> by_name;
            for (const auto& e : l.entries) {
                auto& slot = by_name[e.name];
                if (!slot || slot->job_id < e.job_id) slot = &e;
            }
            for (const auto& n : names) {
                auto it = jobs_.find(n);
                if (it == jobs_.end()) continue;  // its launch ended meanwhile
                tracked_job& t = *it->second;
                bool knew = t.id.has_value();
                auto found = by_name.find(n);
                t.listed = found != by_name.end();
                if (t.listed) {
                    const slurm::queue_entry& e = *found->second;
                    t.id = e.job_id;
                    if (!e.nodes.empty()) t.node = e.nodes;
                    t.state = e.state;
                    t.state_text = e.state_text;
                }
                t.polled_at = last;
                if (!knew && t.id) job_known(t, *t.attempt, *t.id);
                if (t.notify) t.notify();
            }
        }
        poller_running_ = false;
        finish_wake_.cancel();
    }

public:
    // The run is over: no job of it may be pending, running or completing. Listed by name
    // among this user's jobs that are not final (so also jobs whose id no launch learnt),
    // cancelled and confirmed gone.
    asio::awaitable<std::optional<task_error>> finish() override {
        poll_timer_.cancel();
        while (poller_running_) {
            finish_wake_.expires_after(1s);
            co_await finish_wake_.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        if (submitted_ == 0) co_return std::nullopt;
        auto env = helper_env();
        slurm::listing mine = co_await slurm::list_mine(tools_.squeue, env);
        if (!mine.ok)
            co_return task_error{
                error_code::slurm_cleanup_failed,
                "the run's Slurm jobs could not be listed to confirm that none is left: " + mine.error};
        auto ours = slurm::jobs_of_run(mine.entries, ctx_.settings.run_id, owner_);
        if (ours.empty()) co_return std::nullopt;
        slurm::removal r = co_await slurm::cancel_and_confirm(tools_, env, std::move(ours), removal_bound);
        if (r.left.empty()) co_return std::nullopt;
        std::string list;
        for (const auto& e : r.left)
            list += (list.empty() ? "" : ", ") + slurm::job_text(e) + " " + e.state_text;
        co_return task_error{
            error_code::slurm_cleanup_failed,
            "Slurm jobs of this run are still pending, running or completing after scancel: " + list +
                (r.error.empty() ? "" : " (" + r.error + ")")};
    }

private:
    slurm::tools tools_;
    slurm::job_owner owner_;
    std::unordered_map<std::string, std::shared_ptr<tracked_job>> jobs_;  ///< launches in flight, by job name
    std::uint64_t submitted_ = 0;
    asio::steady_timer poll_timer_;
    asio::steady_timer finish_wake_;
    bool poller_running_ = false;
    bool poll_requested_ = false;
    std::string poll_error_;
    bool announced_ = false;  ///< the watchdog knows our scancel
};

}  // namespace

std::unique_ptr<launcher> make_slurm_launcher(launch_context& ctx, slurm::tools tools) {
    return std::make_unique<slurm_launcher>(ctx, std::move(tools));
}

slurm::job_owner this_job_owner() {
    slurm::job_owner owner;
    owner.host = exec::host_name();
    owner.pid = exec::own_pid();
    owner.start_time = exec::process_start_time(owner.pid).value_or("");
    return owner;
}

namespace {

// Inside an allocation, worker dispatch (auto or worker), no --slurm-nodes: where the workers
// run. Nothing in every other case, and when the allocation cannot be read.
std::optional<slurm::allocation> allocation_for_workers(const launch_context& ctx) {
    const slurm_options& o = ctx.settings.slurm;
    if (o.nodes > 0 || o.dispatch == slurm_dispatch::job) return std::nullopt;
    slurm::allocation_result a = slurm::read_allocation(ctx.settings.host_env);
    if (!a.error.empty()) return std::nullopt;
    return std::move(a.found);
}

// One site per node of `alloc`, each starting `srun ... agentctl worker` there.
expected<std::vector<worker_site>> allocation_sites(launch_context& ctx, const slurm::tools& tools,
                                                    const slurm::allocation& alloc, bool leave_step_end) {
    auto self = exec::canonical_path("/proc/self/exe");
    if (!self)
        return task_error{error_code::backend_unavailable,
                          "agentctl's own path cannot be read for its workers: " + self.error().message +
                              "; nothing was run"};
    slurm::job_owner owner = this_job_owner();
    std::vector<worker_site> sites;
    for (std::size_t i = 0; i < alloc.nodes.size(); ++i) {
        worker_site site;
        site.label = alloc.nodes[i];
        site.slots = alloc.cpus[i];
        site.leave_step_end = leave_step_end;
        site.command = [&ctx, srun = tools.srun, agentctl = *self, owner, job = alloc.job_id,
                        node = alloc.nodes[i],
                        cpus = alloc.cpus[i]](std::uint32_t generation) -> expected<exec::channel_command> {
            slurm::worker_step_request r;
            r.srun = srun;
            r.job_id = job;
            r.node = node;
            r.cpus = cpus;
            r.agentctl = agentctl;
            std::string error;
            auto name = slurm::job_name(ctx.settings.run_id, owner, "worker." + node, generation, error);
            if (!name) return task_error{error_code::backend_unavailable, error};
            r.name = std::move(*name);
            slurm::argv_result argv = slurm::worker_step_argv(r);
            if (!argv) return task_error{error_code::backend_unavailable, argv.error};
            return exec::channel_command{srun, std::move(argv.argv),
                                         slurm::client_environment(ctx.settings.host_env, {})};
        };
        sites.push_back(std::move(site));
    }
    return sites;
}

}  // namespace

std::unique_ptr<starting_workers> allocation_workers_to_start(launch_context& ctx,
                                                              const slurm::tools& tools) {
    auto alloc = allocation_for_workers(ctx);
    if (!alloc) return nullptr;
    auto sites = allocation_sites(ctx, tools, *alloc, true);
    if (!sites) return nullptr;  // start_slurm_launcher meets the same error and says it
    return workers_to_start(ctx, std::move(*sites), "slurm");
}

asio::awaitable<expected<std::unique_ptr<launcher>>> start_slurm_launcher(launch_context& ctx,
                                                                          slurm::tools tools) {
    const slurm_options& o = ctx.settings.slurm;
    slurm::allocation_result a = slurm::read_allocation(ctx.settings.host_env);
    if (o.nodes > 0) {
        // Asking for nodes inside an allocation would queue a second one behind the first.
        if (a.found || !a.error.empty())
            co_return task_error{error_code::backend_unavailable,
                                 "--slurm-nodes asks for an allocation, but agentctl already runs inside one "
                                 "(SLURM_JOB_ID is set): leave --slurm-nodes out to use it; nothing was run"};
        co_return co_await start_requested_allocation(ctx, std::move(tools));
    }
    // Outside an allocation, or asked for: one job per launch. Inside one, its jobs would be
    // new jobs queued for the very nodes the allocation holds (docs/WORKER.md, "Why").
    if (o.dispatch == slurm_dispatch::job ||
        (o.dispatch == slurm_dispatch::automatic && !a.found && a.error.empty()))
        co_return make_slurm_launcher(ctx, std::move(tools));
    if (!a.error.empty())
        co_return task_error{
            error_code::backend_unavailable,
            "the Slurm allocation agentctl runs in cannot be read: " + a.error + "; nothing was run"};
    if (!a.found)
        co_return task_error{
            error_code::backend_unavailable,
            "--slurm-dispatch worker needs a Slurm allocation: run agentctl inside salloc or "
            "sbatch, ask for one with --slurm-nodes, or choose --slurm-dispatch job; nothing was run"};
    co_return co_await start_allocation_workers(ctx, tools, *a.found, true);
}

asio::awaitable<expected<std::unique_ptr<launcher>>> start_allocation_workers(launch_context& ctx,
                                                                              const slurm::tools& tools,
                                                                              const slurm::allocation& alloc,
                                                                              bool leave_step_end) {
    auto sites = allocation_sites(ctx, tools, alloc, leave_step_end);
    if (!sites) co_return sites.error();
    co_return co_await start_worker_launcher(ctx, std::move(*sites), "slurm");
}

}  // namespace agentctl
