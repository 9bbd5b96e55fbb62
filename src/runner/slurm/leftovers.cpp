// The Slurm jobs that dead runs left: found by their names and cancelled (docs/CRASH_SAFETY.md).
#include <agentctl/leftovers.hpp>

#include "exec/host.hpp"
#include "runner/completion.hpp"
#include "runner/slurm/client.hpp"
#include "runner/slurm/command.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace agentctl {
namespace {

asio::awaitable<slurm_leftover_report> cancel_leftovers(slurm_leftover_options options) {
    slurm_leftover_report report;
    slurm::tools tools;
    auto squeue = slurm::find_tool("squeue", options.search_path);
    auto scancel = slurm::find_tool("scancel", options.search_path);
    if (!squeue || !scancel) co_return report;
    report.slurm_found = true;
    tools.squeue = *squeue;
    tools.scancel = *scancel;
    auto env = slurm::client_environment(options.host_env, {});
    slurm::listing mine = co_await slurm::list_mine(tools.squeue, env);
    if (!mine.ok) {
        report.error = task_error{error_code::slurm_cleanup_failed,
                                  "the Slurm jobs of dead runs could not be listed: " + mine.error};
        co_return report;
    }
    auto dead = slurm::jobs_of_dead_runs(mine.entries, slurm::job_name_host(exec::host_name()),
                                         exec::process_start_time, options.run_ids);
    if (dead.empty()) co_return report;
    slurm::removal r = co_await slurm::cancel_and_confirm(tools, env, std::move(dead), 30s);
    for (const auto& e : r.gone) report.cancelled.push_back(slurm::job_text(e));
    for (const auto& e : r.left) report.left.push_back(slurm::job_text(e) + " " + e.state_text);
    if (!r.left.empty()) {
        std::string list;
        for (const auto& l : report.left) list += (list.empty() ? "" : ", ") + l;
        report.error = task_error{
            error_code::slurm_cleanup_failed,
            "Slurm jobs of dead runs are still pending, running or completing after scancel: " + list +
                (r.error.empty() ? "" : " (" + r.error + ")")};
    }
    co_return report;
}

}  // namespace

namespace detail {

void async_cancel_slurm_leftovers_impl(asio::any_io_executor ex, slurm_leftover_options options,
                                       asio::any_completion_handler<void(slurm_leftover_report)> handler) {
    complete_with(
        ex, cancel_leftovers(std::move(options)), std::move(handler),
        [] {
            slurm_leftover_report r;
            r.error = task_error{error_code::internal_error,
                                 "cancelling dead runs' Slurm jobs failed unexpectedly"};
            return r;
        },
        /*cancellable=*/false);
}

}  // namespace detail
}  // namespace agentctl
