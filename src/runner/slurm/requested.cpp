// --slurm-nodes: the allocation agentctl asks for itself, its workers, and its release
// (docs/WORKER.md, "Asking for nodes"). The allocation is found by its job name, which the
// watchdog knows before salloc starts: a dead agentctl's allocation is cancelled by name while
// it is pending, by id once granted.
#include "runner/slurm/launcher.hpp"

#include "exec/client.hpp"
#include "runner/completion.hpp"
#include "runner/slurm/command.hpp"

#include <agentctl/events.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <tuple>
#include <variant>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl {
namespace {

// salloc waits in the queue until the nodes are granted; a run cancelled meanwhile stops it.
constexpr auto grant_bound = std::chrono::hours(24);
// The allocation must be shown gone within this after scancel; else a cleanup failure.
constexpr auto release_bound = 30s;
// How long salloc may wait before one squeue says why (docs/SLURM.md, section 13): a request
// that fits is granted within a scheduler pass or two (1-3 s measured).
constexpr auto pending_notice = 5s;

class requested_allocation {
public:
    requested_allocation(launch_context& ctx, slurm::tools tools)
        : ctx_(ctx), tools_(std::move(tools)), env_(slurm::client_environment(ctx.settings.host_env, {})) {}

    const slurm::tools& tools() const { return tools_; }

    // salloc, then the job's id and the CPUs of each node; why not, when it failed.
    asio::awaitable<expected<slurm::allocation>> request() {
        auto salloc = slurm::find_tool("salloc", ctx_.settings.search_path);
        if (!salloc) co_return fail("salloc was not found in agentctl's PATH: " + salloc.error().message);
        std::string error;
        auto name = slurm::job_name(ctx_.settings.run_id, this_job_owner(), "allocation", 1, error);
        if (!name) co_return fail(error);
        name_ = *name;
        const slurm_options& o = ctx_.settings.slurm;
        auto argv = slurm::salloc_argv({*salloc, name_, o.nodes, o.time, o.partition, o.account, o.qos});
        if (!argv) co_return fail(argv.error);
        if (watchdog* w = ctx_.watch) {
            w->announce_slurm({tools_.scancel, env_});
            w->announce_slurm_name(name_);
        }
        using namespace asio::experimental::awaitable_operators;
        auto waited = co_await (wait_for_grant(std::move(argv.argv)) || watch_pending());
        if (waited.index() == 1)
            co_return fail(std::get<1>(waited).empty()
                               ? "the run was cancelled while salloc waited"
                               : "salloc --nodes=" + std::to_string(o.nodes) + " stays pending (" +
                                     std::get<1>(waited) +
                                     "): the partition can never grant it (ask for fewer nodes or "
                                     "less time, or another --slurm-partition); the request was withdrawn");
        process_result& granted = std::get<0>(waited);
        if (granted.outcome != process_outcome::exited || granted.exit_code != 0)
            co_return fail("salloc --nodes=" + std::to_string(o.nodes) + ": " +
                           exec::describe_call(granted, grant_bound, slurm::default_output_limit) + ": " +
                           slurm::excerpt(granted.stderr_bytes));

        slurm::listing l = co_await slurm::list_by_names(tools_.squeue, names(), env_);
        if (!l.ok) co_return fail("the granted allocation could not be listed: " + l.error);
        auto it = std::find_if(l.entries.begin(), l.entries.end(),
                               [](const slurm::queue_entry& e) { return slurm::is_active(e.state); });
        if (it == l.entries.end()) co_return fail("salloc returned, but squeue lists no job named " + name_);
        job_id_ = it->job_id;
        if (watchdog* w = ctx_.watch) {
            w->announce_slurm_job(std::to_string(job_id_));
            w->release_slurm_name(name_);  // the id covers it now
        }

        process_result shown =
            co_await slurm::call(slurm::scontrol_show_job_detail(tools_.scontrol, job_id_), env_);
        if (shown.outcome != process_outcome::exited || shown.exit_code != 0)
            co_return fail("scontrol show job -d " + std::to_string(job_id_) + ": " + slurm::describe(shown) +
                           ": " + slurm::excerpt(shown.stderr_bytes));
        slurm::allocation_result a = slurm::read_allocation_detail(job_id_, shown.stdout_bytes);
        if (!a.found) co_return fail(a.error);
        co_return std::move(*a.found);
    }

    // Every job of our name cancelled and confirmed gone; why not, when it is not.
    asio::awaitable<std::optional<task_error>> release() {
        if (name_.empty()) co_return std::nullopt;
        slurm::listing l = co_await slurm::list_by_names(tools_.squeue, names(), env_);
        if (!l.ok) co_return cleanup_failed("it could not be listed: " + l.error);
        std::vector<slurm::queue_entry> active;
        for (auto& e : l.entries)
            if (slurm::is_active(e.state)) active.push_back(std::move(e));
        slurm::removal r = co_await slurm::cancel_and_confirm(tools_, env_, std::move(active), release_bound);
        if (!r.left.empty())
            co_return cleanup_failed("still " + r.left.front().state_text + " after scancel" +
                                     (r.error.empty() ? "" : " (" + r.error + ")"));
        if (watchdog* w = ctx_.watch) {
            if (job_id_ != 0) w->release_slurm_job(std::to_string(job_id_));
            w->release_slurm_name(name_);
        }
        name_.clear();
        co_return std::nullopt;
    }

private:
    // salloc until it returns. Each side of `||` runs as a coroutine of its own, which accepts
    // only terminal cancellation unless told otherwise: the run's first SIGINT is a total one.
    asio::awaitable<process_result> wait_for_grant(std::vector<std::string> argv) {
        co_await accept_all_cancellation();
        co_return co_await slurm::call(std::move(argv), env_, true, slurm::default_output_limit, grant_bound);
    }

    // Once salloc has waited pending_notice: one squeue of the request's name (never a poll
    // loop: the controller is shared). A reason no wait can satisfy is returned, which ends
    // the wait; any other is said once as a warning (slurm_allocation_pending) and salloc goes
    // on waiting. Returns only then, or empty when cancelled; salloc's return cancels it.
    asio::awaitable<std::string> watch_pending() {
        co_await accept_all_cancellation();
        asio::steady_timer timer(co_await asio::this_coro::executor, pending_notice);
        auto waited = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (std::get<0>(waited)) co_return std::string();  // cancelled: salloc returned, or the run

        slurm::listing l = co_await slurm::list_by_names(tools_.squeue, names(), env_);
        // Granted meanwhile (salloc about to return), or not listed: nothing to say.
        bool pending = false;
        std::string reason;
        for (const auto& e : l.entries)
            if (e.state == slurm::job_state::pending) {
                pending = true;
                reason = e.reason;
            }
        if (pending && slurm::never_granted(reason)) co_return reason;
        if (pending && ctx_.events) {
            diagnostic d;
            d.code = "slurm_allocation_pending";
            d.level = severity::warning;
            d.path = "--slurm-nodes";
            d.message = "the Slurm allocation of this run (salloc --nodes=" +
                        std::to_string(ctx_.settings.slurm.nodes) + ", job " + name_ +
                        ") is still pending after " + std::to_string(pending_notice.count()) + " s (" +
                        reason + "); nothing runs until it is granted";
            d.help = "SIGINT (Ctrl-C) withdraws the request";
            run_event e;
            e.kind = run_event::kind_t::warning;
            e.warning = &d;
            ctx_.events->on_event(e);
        }
        timer.expires_at(asio::steady_timer::time_point::max());
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return std::string();
    }

    // A named vector: g++ 12 miscompiles a braced list held across a co_await.
    std::vector<std::string> names() const { return {name_}; }
    task_error fail(std::string why) const {
        return task_error{error_code::backend_unavailable,
                          "no Slurm allocation for this run: " + std::move(why) + "; nothing was run"};
    }
    task_error cleanup_failed(std::string why) const {
        return task_error{
            error_code::slurm_cleanup_failed,
            "the Slurm allocation " + name_ + " of this run was not released: " + std::move(why)};
    }

    launch_context& ctx_;
    slurm::tools tools_;
    std::vector<std::string> env_;
    std::string name_;  ///< the allocation's job name, once salloc may have made it; empty once released
    std::uint64_t job_id_ = 0;
};

// The workers' launcher, and the allocation they run in, released after the workers ended.
class holding_launcher final : public launcher {
public:
    holding_launcher(launch_context& ctx, std::unique_ptr<launcher> workers,
                     std::unique_ptr<requested_allocation> allocation)
        : launcher(ctx), workers_(std::move(workers)), allocation_(std::move(allocation)) {}

    asio::awaitable<void> launch(const launch_request& request, launch_result& out) override {
        return workers_->launch(request, out);
    }

    int dispatch_ahead(int jobs) override { return workers_->dispatch_ahead(jobs); }

    asio::awaitable<std::optional<task_error>> finish() override {
        auto workers = co_await workers_->finish();
        auto released = co_await allocation_->release();
        co_return workers ? workers : released;
    }

private:
    std::unique_ptr<launcher> workers_;
    std::unique_ptr<requested_allocation> allocation_;
};

}  // namespace

asio::awaitable<expected<std::unique_ptr<launcher>>> start_requested_allocation(launch_context& ctx,
                                                                                slurm::tools tools) {
    auto allocation = std::make_unique<requested_allocation>(ctx, std::move(tools));
    auto granted = co_await allocation->request();
    std::optional<task_error> failed;
    std::unique_ptr<launcher> workers;
    if (!granted) {
        failed = granted.error();
    } else if (auto made = co_await start_allocation_workers(ctx, allocation->tools(), *granted, false)) {
        workers = std::move(*made);
    } else {
        failed = made.error();
    }
    if (failed) {
        if (auto not_released = co_await allocation->release())
            failed->message += "; and " + not_released->message;
        co_return std::move(*failed);
    }
    co_return std::unique_ptr<launcher>(
        std::make_unique<holding_launcher>(ctx, std::move(workers), std::move(allocation)));
}

}  // namespace agentctl
