// One task attempt as the engine hands it to a runner, and what identifies it once started.
#pragma once

#include <agentctl/plan.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

/// What identifies a started attempt, as soon as it is known: what a later process needs to
/// find it again (the journal's handle of the attempt).
struct attempt_started {
    std::optional<int> pid;      ///< host process leader (or engine client)
    std::uint64_t start_lo = 0;  ///< its start time (clock ticks after boot) is in [lo, hi]
    std::uint64_t start_hi = 0;
    std::string cgroup;            ///< its cgroup leaf, if any
    std::string container;         ///< container name, if any
    std::string container_engine;  ///< "docker" | "podman"
    std::string slurm_job_id;      ///< Slurm job, once known
};

/// Everything a runner needs for one attempt, already rendered by the engine.
struct attempt_request {
    const plan* compiled = nullptr;
    std::uint32_t task_index = 0;
    std::string task_id;
    std::uint32_t attempt = 1;       ///< 1-based
    boost::json::value with;         ///< the task's rendered input
    std::vector<std::string> args;   ///< rendered action args
    std::optional<std::string> cwd;  ///< rendered, relative to the workspace root
    /// Called (on the run's executor, possibly more than once as more becomes known) with
    /// what identifies the attempt once it started. Empty: nothing is called.
    std::function<void(const attempt_started&)> on_started;

    /// The task's node: its action, limits, timeout (a child's template; its id is task_id).
    const plan_task& task() const { return compiled->node(task_index); }
    const action_spec& action() const { return compiled->action_of(task()); }
};

}  // namespace agentctl
