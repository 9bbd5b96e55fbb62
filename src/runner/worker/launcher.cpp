// isolation: process on allocation workers (docs/WORKER.md, "Dispatch", "What a launch is",
// "Failures"). The allowlist, the executable and the environment are the driver's preflight's,
// exactly as for a host process; the worker opens the cwd beneath the root on its node, and
// applies the caps, the timeout and the kill ladder there.
#include "runner/worker/launcher.hpp"

#include "exec/host.hpp"
#include "runner/launch_control.hpp"
#include "runner/worker/client.hpp"


#include <algorithm>
#include <list>
#include <tuple>
#include <utility>

namespace asio = boost::asio;
namespace wp = agentctl::worker_protocol;
using namespace std::chrono_literals;

namespace agentctl {
namespace {

// How long a worker may take from its start to its welcome (srun creating the step included).
constexpr auto connect_bound = 30s;
// A lost worker is replaced at most this often per site and run, then the site is given up.
constexpr std::uint32_t max_starts = 4;
// Beyond a task's timeout and kill grace, how long the driver waits for its result before it
// takes the worker for lost (the worker applies the timeout itself).
constexpr auto result_backstop = 30s;
// How long a worker may take to exit once its stdin is closed at the end of the run.
constexpr auto close_bound = 10s;
constexpr std::uint32_t heartbeat_ms = 1000;
// Runs sent ahead to a worker, per task it may run at once: enough that its queue outlasts a
// round trip through srun, which is tens of milliseconds even on an idle machine (frames
// written close together arrive ~40 ms apart), while a slot frees every few hundred
// microseconds for a short task (docs/SLURM.md, section 13: 4 gave 0.49x the local throughput
// on a quiet machine, 16 about 0.75x at 1 000 tasks, 32 no better); few enough that little
// waits on a worker that may be lost (its queued runs then end worker_lost with it:
// docs/WORKER.md, "Pipelining").
constexpr std::uint32_t ahead_per_slot = 16;

std::optional<error_code> code_named(const std::string& name) {
    if (name.empty()) return std::nullopt;
    return error_code_from_string(name).value_or(error_code::internal_error);
}

process_outcome local_outcome(wp::run_outcome o) {
    switch (o) {
        case wp::run_outcome::exited:
            return process_outcome::exited;
        case wp::run_outcome::timed_out:
            return process_outcome::timed_out;
        case wp::run_outcome::cancelled:
            return process_outcome::cancelled;
        case wp::run_outcome::output_limit_exceeded:
            return process_outcome::output_limit_exceeded;
        case wp::run_outcome::spawn_failed:
            break;
    }
    return process_outcome::spawn_failed;
}

// The worker's result and output as the host executor would have given them.
process_result local_result(wp::run_result& r, boost::json::string out, boost::json::string err) {
    process_result p;
    p.outcome = local_outcome(r.outcome);
    if (r.exit_code) p.exit_code = static_cast<int>(*r.exit_code);
    if (r.signal) p.signal = static_cast<int>(*r.signal);
    p.core_dumped = r.core_dumped;
    p.stdout_bytes = std::move(out);
    p.stderr_bytes = std::move(err);
    p.limit_stream = std::move(r.limit_stream);
    p.limit_bytes = r.limit_bytes;
    p.duration = std::chrono::microseconds(r.duration_us);
    p.usage = resource_usage{r.user_us, r.system_us, r.max_rss_kib};
    p.used = r.used == wp::used_containment::cgroup ? containment::cgroup : containment::process_group;
    p.descendants_killed = r.descendants_killed;
    p.error = code_named(r.error_code);
    p.error_message = std::move(r.error_message);
    return p;
}

struct site_state {
    worker_site site;
    std::shared_ptr<worker::client> worker;  ///< the current one (usable or lost)
    std::uint32_t starts = 0;
    std::string last_error;  ///< why its last worker was lost or could not start
    bool starting = false;   ///< a launch is starting a new worker here
    std::uint32_t limit = 0;  ///< its share of --jobs, once dispatch_ahead() was called
};

class worker_launcher final : public launcher {
public:
    worker_launcher(launch_context& ctx, std::vector<worker_site> sites, std::string backend)
        : launcher(ctx), backend_(std::move(backend)) {
        for (auto& s : sites) sites_.push_back(site_state{std::move(s), nullptr, 0, "", false, 0});
        hello_.run_id = ctx.settings.run_id;
        hello_.heartbeat_ms = heartbeat_ms;
    }

    // Every site's first worker. Every srun is started and every hello sent before any welcome
    // is awaited, so that the steps start side by side (Slurm takes tens of milliseconds for
    // each: docs/SLURM.md, section 13) rather than node after node. The first failure fails
    // them all.
    asio::awaitable<std::optional<task_error>> start_all() {
        std::vector<std::optional<std::string>> why(sites_.size());
        for (std::size_t i = 0; i < sites_.size(); ++i) why[i] = spawn(sites_[i]);
        for (std::size_t i = 0; i < sites_.size(); ++i)
            if (!why[i]) why[i] = greet(sites_[i]);
        std::optional<task_error> failed;
        for (std::size_t i = 0; i < sites_.size(); ++i) {
            site_state& s = sites_[i];
            if (failed && !why[i]) {
                stop_starting(s, "another worker did not start");
                continue;
            }
            why[i] = co_await welcomed(s, why[i]);
            if (why[i] && !failed)
                failed = task_error{
                    error_code::backend_unavailable,
                    "the worker on " + s.site.label + " did not start: " + *why[i] + "; nothing was run"};
        }
        if (failed) co_await finish();
        co_return failed;
    }

    // start_all() ends now: the workers it waits for are lost, and no other starts.
    void abandon(const std::string& why) {
        abandoned_ = why;
        for (auto& w : starting_) w->lose(why);
    }

    asio::awaitable<void> launch(const launch_request& request, launch_result& out) override {
        auto ctl = co_await launch_control::create();
        out.isolation = "process";
        out.backend = backend_;
        out.process.outcome = process_outcome::spawn_failed;
        wp::run_request req;
        if (auto error = build(request, req)) {
            out.error = std::move(error);
            out.command = req.executable;
            co_return;
        }
        out.command = req.executable;

        // A worker with a free slot, or a wait for one, then the run sent to it once. Sent, it
        // ends only by that worker's result or as worker_lost, never on another worker: a run
        // with no `started` may have started all the same, its `started` lost with the worker
        // (docs/WORKER.md, "Pipelining").
        worker::pending_run p;
        std::shared_ptr<worker::client> w;
        std::uint32_t generation = 0;
        co_await dispatch(request, req, ctl, w, generation, p, out);
        if (!w) co_return;
        out.slurm_node = w->label();  // the node as Slurm names it (the worker says its host name)
        out.slurm_worker = "worker." + w->label() + ":" + std::to_string(generation);
        if (!p.result) {
            // The worker is gone with the run, started or queued: whether it had its effect is
            // unknown (docs/WORKER.md, "Failures").
            out.process.outcome = ctl->cancelled() ? process_outcome::cancelled : process_outcome::exited;
            out.containment = "worker";
            out.error = task_error{error_code::worker_lost,
                                   "the worker on " + w->label() + " was lost (" + w->lost_reason() +
                                       ") with the task sent to it; whether it ran is unknown"};
            co_return;
        }
        out.process = local_result(*p.result, std::move(p.out), std::move(p.err));
        out.containment = std::string(to_string(out.process.used));
    }

    // A worker with room (w stays null when there is none and never will be: `out` says why),
    // the run sent, and its frames until the result or the worker's loss.
    asio::awaitable<void> dispatch(const launch_request& request, wp::run_request& req,
                                   std::shared_ptr<launch_control>& ctl, std::shared_ptr<worker::client>& w,
                                   std::uint32_t& generation, worker::pending_run& p, launch_result& out) {
        w = nullptr;
        for (;;) {
            std::tie(w, generation) = pick();
            if (w) break;
            if (ctl->cancelled()) {
                out.process.outcome = process_outcome::cancelled;
                out.process.error_message = "cancelled before a worker was free";
                co_return;
            }
            if (site_state* s = restartable()) {
                co_await start(*s);
                continue;
            }
            if (!any_alive()) {
                // Nothing of this attempt ran anywhere, not uncertain: the backend is gone (a
                // node set DOWN ends the allocation with it) (docs/WORKER.md, "Failures").
                out.error = task_error{error_code::backend_unavailable,
                                       "no worker is left: " + last_errors() + "; the task never started"};
                co_return;
            }
            waiters_.push_back(ctl.get());
            auto it = std::prev(waiters_.end());
            co_await ctl->wait();
            waiters_.erase(it);
        }

        p.notify = [weak = std::weak_ptr<launch_control>(ctl)] {
            if (auto c = weak.lock()) c->notify();
        };
        req.tag = next_tag_++;
        const plan_task& task = request.attempt->task();
        auto grace = std::chrono::seconds(ctx_.compiled->kill_grace_seconds);
        // Armed when the task starts: while its run waits in the worker's queue, the worker's
        // heartbeats are what says it is alive.
        std::optional<launch_control::clock::time_point> backstop;
        w->start_run(req, p);
        bool cancel_sent = false, terminal_sent = false, reported = false;
        for (;;) {
            if (p.started && !reported) {
                reported = true;
                // The pid is on the worker's node: nothing this host could check or kill.
                if (request.attempt->on_started) request.attempt->on_started(attempt_started{});
                backstop = launch_control::clock::now() + std::chrono::milliseconds(task.timeout_ms) + grace +
                           result_backstop;
            }
            if (p.result || w->lost()) break;
            if (ctl->cancelled() && !terminal_sent) {
                bool terminal = ctl->terminal() || grace.count() == 0;
                if (!cancel_sent || terminal)
                    w->cancel(req.tag, terminal ? wp::cancel_kind::terminal : wp::cancel_kind::graceful);
                cancel_sent = true;
                terminal_sent = terminal;
            }
            if (backstop && launch_control::clock::now() >= *backstop) {
                w->lose("no result for a task " + std::to_string(result_backstop.count()) +
                        " s after its timeout and kill grace");
                break;
            }
            if (backstop)
                co_await ctl->wait(*backstop - launch_control::clock::now());
            else
                co_await ctl->wait();
        }
        w->forget(req.tag);
        slot_freed();
    }

    // --jobs split over the workers: one task at a time to each site in turn, up to its slots,
    // so that all of them together never run more than --jobs. Each may be sent
    // ahead_per_slot times its share more, which waits in its queue.
    int dispatch_ahead(int jobs) override {
        jobs_ = static_cast<std::uint32_t>(std::max(jobs, 1));
        share_jobs();
        std::uint32_t ahead = 0;
        for (auto& s : sites_) {
            ahead += s.limit * ahead_per_slot;
            if (s.worker && s.worker->usable()) s.worker->set_limit(s.limit, s.limit * ahead_per_slot);
        }
        return static_cast<int>(ahead);
    }

    // The end of the run: every worker's stdin closed, then each awaited until it has said
    // `bye` (every task of it reaped) or exited. Closed together, the workers end side by side.
    // Slurm's end of a step takes ~30 ms more after its worker's exit (docs/SLURM.md, section
    // 13): with a watchdog, that is left to it, which waits for each srun after our clean exit
    // and kills it after a bound (docs/WORKER.md, "The end of a run"); without one, each srun
    // is awaited here.
    asio::awaitable<std::optional<task_error>> finish() override {
        std::vector<std::pair<std::shared_ptr<worker::client>, bool>> ending;
        for (auto& s : sites_) {
            if (!s.worker) continue;
            ending.emplace_back(std::move(s.worker), s.site.leave_step_end && ctx_.watch);
            ending.back().first->close_input();
        }
        for (auto& [w, leave] : ending) co_await w->close(close_bound, leave);
        co_return std::nullopt;
    }

private:
    // Starts a worker on `s`; nothing when it said welcome, else why not.
    asio::awaitable<std::optional<std::string>> start(site_state& s) {
        s.starting = true;
        if (s.worker) {
            auto old = std::move(s.worker);
            co_await old->close(close_bound);
        }
        auto why = spawn(s);
        if (!why) why = greet(s);
        co_return co_await welcomed(s, why);
    }

    // start() in three steps, so that start_all() can take each step on every site before the
    // next. First the worker's program (its srun), unless the start was abandoned.
    std::optional<std::string> spawn(site_state& s) {
        s.starting = true;
        ++s.starts;
        auto w = std::make_shared<worker::client>(ctx_.ex, s.site.label, s.site.slots);
        s.worker = w;
        std::optional<std::string> why = abandoned_;
        if (!why) {
            auto command = s.site.command(s.starts);
            why = command ? w->start(*command) : command.error().message;
        }
        if (why) w->lose(*why);
        return why;
    }

    // Then its hello. The digest is computed once per process, while the first srun creates its
    // step (the binary's SHA-256 takes milliseconds, tens under load: docs/SLURM.md, section 13).
    std::optional<std::string> greet(site_state& s) {
        std::optional<std::string> why;
        if (hello_.build_digest.empty()) {
            if (const auto& digest = exec::build_digest())
                hello_.build_digest = *digest;
            else
                why = "the worker protocol needs this agentctl's build digest: " + digest.error().message;
        }
        if (!why && abandoned_) why = *abandoned_;
        if (!why) why = s.worker->send_hello(hello_);
        if (why) {
            s.worker->lose(*why);
        } else {
            starting_.push_back(s.worker);
        }
        return why;
    }

    // A worker started beside one that failed is stopped as at the end of a run: its stdin
    // closed, finish() awaits its bye or its exit. Killing its srun instead, perhaps while
    // the step is being created, leaves the step listed for seconds more (docs/WORKER.md,
    // "Dispatch").
    void stop_starting(site_state& s, const std::string& why) {
        s.worker->close_input();
        std::erase(starting_, s.worker);
        s.starting = false;
        s.last_error = why;
    }

    // Then its welcome, unless `why` says it failed already (it is then lost).
    asio::awaitable<std::optional<std::string>> welcomed(site_state& s, std::optional<std::string> why) {
        std::shared_ptr<worker::client> w = s.worker;
        if (!why) why = co_await w->await_welcome(connect_bound);
        if (why) w->lose(*why);
        std::erase(starting_, w);
        s.starting = false;
        if (why) s.last_error = *why;
        if (!why && jobs_) {
            share_jobs();
            w->set_limit(s.limit, s.limit * ahead_per_slot);
        }
        slot_freed();  // its slots, or its failure, for whoever waits
        co_return why;
    }

    // The worker with the most free slots, and its generation on its site.
    std::pair<std::shared_ptr<worker::client>, std::uint32_t> pick() {
        site_state* best = nullptr;
        for (auto& s : sites_)
            if (s.worker && s.worker->free_slots() > 0 &&
                (!best || s.worker->free_slots() > best->worker->free_slots()))
                best = &s;
        if (!best) return {nullptr, 0};
        return {best->worker, best->starts};
    }

    // A site whose worker was lost and may be replaced, with no one replacing it already.
    site_state* restartable() {
        for (auto& s : sites_)
            if (!s.starting && s.worker && s.worker->lost() && s.starts < max_starts) {
                if (s.last_error.empty()) s.last_error = s.worker->lost_reason();
                return &s;
            }
        return nullptr;
    }

    bool any_alive() const {
        return std::any_of(sites_.begin(), sites_.end(), [](const site_state& s) {
            return s.starting || (s.worker && s.worker->usable());
        });
    }

    std::string last_errors() const {
        std::string list;
        for (const auto& s : sites_) {
            std::string why = s.worker && s.worker->lost() ? s.worker->lost_reason() : s.last_error;
            list += (list.empty() ? "" : "; ") + s.site.label + ": " + why;
        }
        return list;
    }

    void share_jobs() {
        for (auto& s : sites_) s.limit = 0;
        std::uint32_t left = jobs_;
        for (bool gave = true; left > 0 && gave;) {
            gave = false;
            for (auto& s : sites_) {
                std::uint32_t slots = s.site.slots ? s.site.slots : s.worker ? s.worker->slots() : 0;
                if (left > 0 && s.limit < slots) {
                    ++s.limit;
                    --left;
                    gave = true;
                }
            }
        }
    }

    void slot_freed() {
        for (launch_control* c : waiters_) c->notify();
    }

    std::optional<task_error> build(const launch_request& launch, wp::run_request& req) {
        const attempt_request& request = *launch.attempt;
        const action_spec& action = request.action();
        const plan_task& task = request.task();
        const prepared_action& prepared = ctx_.actions[task.action_index];
        if (auto refused = allowlist_refusal(ctx_, action)) return refused;
        if (prepared.executable.empty())
            return task_error{error_code::executable_not_found, prepared.executable_error};
        req.executable = prepared.executable;
        req.argv.reserve(request.args.size() + launch.extra_args.size() + 1);
        req.argv.push_back(action.command);
        req.argv.insert(req.argv.end(), request.args.begin(), request.args.end());
        req.argv.insert(req.argv.end(), launch.extra_args.begin(), launch.extra_args.end());
        req.env = prepared.environment.entries;
        req.workspace_root = ctx_.workspace.path();
        req.cwd = request.cwd.value_or("");
        req.stdin_data = launch.stdin_data;
        req.stdout_limit = task.limits.stdout_bytes;
        req.stderr_limit = task.limits.stderr_bytes;
        req.combined_limit = task.limits.combined_bytes;
        req.timeout_ms = static_cast<std::uint64_t>(task.timeout_ms);
        req.kill_grace_ms = static_cast<std::uint64_t>(ctx_.compiled->kill_grace_seconds) * 1000;
        req.drain_grace_ms = static_cast<std::uint64_t>(ctx_.settings.drain_grace.count());
        req.containment = ctx_.settings.containment == containment_policy::process_group_only
                              ? wp::containment_request::process_group_only
                              : wp::containment_request::automatic;
        return std::nullopt;
    }

    std::string backend_;
    std::vector<site_state> sites_;
    wp::hello hello_;
    std::uint64_t next_tag_ = 1;
    std::uint32_t jobs_ = 0;              ///< the run's --jobs, from dispatch_ahead()
    std::list<launch_control*> waiters_;  ///< launches waiting for a free slot
    std::vector<std::shared_ptr<worker::client>> starting_;  ///< hellos sent, welcomes not yet in
    std::optional<std::string> abandoned_;      ///< abandon()'s reason
};

}  // namespace

namespace {

class starting final : public starting_workers {
public:
    starting(launch_context& ctx, std::vector<worker_site> sites, std::string backend)
        : workers_(std::make_unique<worker_launcher>(ctx, std::move(sites), std::move(backend))) {}

    asio::awaitable<std::optional<task_error>> start() override { return workers_->start_all(); }

    void abandon(const std::string& why) override { workers_->abandon(why); }

    std::unique_ptr<launcher> take() override { return std::move(workers_); }

private:
    std::unique_ptr<worker_launcher> workers_;
};

}  // namespace

std::unique_ptr<starting_workers> workers_to_start(launch_context& ctx, std::vector<worker_site> sites,
                                                   std::string backend) {
    return std::make_unique<starting>(ctx, std::move(sites), std::move(backend));
}

asio::awaitable<expected<std::unique_ptr<launcher>>> start_worker_launcher(launch_context& ctx,
                                                                           std::vector<worker_site> sites,
                                                                           std::string backend) {
    auto workers = workers_to_start(ctx, std::move(sites), std::move(backend));
    if (auto failed = co_await workers->start()) co_return std::move(*failed);
    co_return workers->take();
}

}  // namespace agentctl
