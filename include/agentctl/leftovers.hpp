// What dead agentctl runs left on the backends, found and removed: their Slurm jobs and their
// containers. For `resume` and `runs gc`; a run does the same on the engines it uses before it
// starts anything. docs/CRASH_SAFETY.md.
#pragma once

#include <agentctl/error.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

/// What cancel_slurm_leftovers looks for.
struct slurm_leftover_options {
    std::string search_path;  ///< agentctl's PATH, where squeue and scancel are found
    /// agentctl's environment (SLURM_CONF is passed on to the Slurm commands).
    std::function<std::optional<std::string>(std::string_view)> host_env;
    /// Only these runs' jobs; empty: every dead run's (`runs gc`).
    std::vector<std::string> run_ids;
};

/// What cancel_slurm_leftovers did.
struct slurm_leftover_report {
    bool slurm_found = false;            ///< squeue and scancel are in the PATH
    std::vector<std::string> cancelled;  ///< "JOBID NAME" of each job cancelled and confirmed gone
    std::vector<std::string> left;       ///< "JOBID NAME STATE" of each job that could not be shown gone
    std::optional<task_error> error;     ///< slurm_cleanup_failed: the listing or a removal failed
};

namespace detail {
void async_cancel_slurm_leftovers_impl(
    boost::asio::any_io_executor ex, slurm_leftover_options options,
    boost::asio::any_completion_handler<void(slurm_leftover_report)> handler);
}

/// Finds the Slurm jobs of dead agentctl runs by their names (this user's jobs that are not
/// final, `squeue --me`) and cancels them: only jobs whose name says they were submitted
/// from this host by an agentctl process that is gone (its pid no longer exists, or now has
/// another start time), of one of `run_ids` when given. A live owner's, another host's, or a
/// job named otherwise is never touched. Each cancelled job is confirmed gone with squeue.
/// For `resume` and `runs gc`. Without Slurm commands in the PATH it completes at once with
/// `slurm_found` false. Completion signature: void(slurm_leftover_report). Not cancellable.
template <typename Token>
auto async_cancel_slurm_leftovers(boost::asio::any_io_executor ex, slurm_leftover_options options,
                                  Token&& token) {
    return boost::asio::async_initiate<Token, void(slurm_leftover_report)>(
        [](auto handler, boost::asio::any_io_executor e, slurm_leftover_options o) {
            detail::async_cancel_slurm_leftovers_impl(std::move(e), std::move(o), std::move(handler));
        },
        token, std::move(ex), std::move(options));
}

/// What remove_container_leftovers looks for.
struct container_leftover_options {
    std::string search_path;  ///< agentctl's PATH, where docker and podman are found
    /// agentctl's environment (the engines' connection variables, DOCKER_HOST and the like,
    /// are passed on to their clients).
    std::function<std::optional<std::string>(std::string_view)> host_env;
};

/// What remove_container_leftovers did.
struct container_leftover_report {
    std::vector<std::string> engines;         ///< the engines found and asked, "docker" | "podman"
    std::vector<swept_container> containers;  ///< each container of a dead owner, removed or not
    std::vector<std::string> unlisted;        ///< "ENGINE: why" of each engine that could not list
};

namespace detail {
void async_remove_container_leftovers_impl(
    boost::asio::any_io_executor ex, container_leftover_options options,
    boost::asio::any_completion_handler<void(container_leftover_report)> handler);
}

/// Removes the containers that dead agentctl processes of this host left on every engine in
/// the PATH (Docker and Podman): those labelled agentctl.owner with this host and a pid that no
/// longer exists or now has another start time. A live owner's, another host's and an
/// unlabelled container are never touched. For `runs gc`; a run does the same on the engines
/// it uses before it starts anything. An engine whose client is missing is not asked; one that
/// cannot list (its daemon is down) is named in `unlisted`. Completion signature:
/// void(container_leftover_report). Not cancellable; every engine call is bounded.
template <typename Token>
auto async_remove_container_leftovers(boost::asio::any_io_executor ex, container_leftover_options options,
                                      Token&& token) {
    return boost::asio::async_initiate<Token, void(container_leftover_report)>(
        [](auto handler, boost::asio::any_io_executor e, container_leftover_options o) {
            detail::async_remove_container_leftovers_impl(std::move(e), std::move(o), std::move(handler));
        },
        token, std::move(ex), std::move(options));
}

}  // namespace agentctl
