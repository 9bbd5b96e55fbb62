// Starting one program for one task attempt, on the host or in a container.
//
// The built-in runner turns an attempt into one launch (builtin.shell.exec) or two
// (extension.process: handshake, then invoke); a launcher knows how to start the program
// under the action's isolation mode and reports the raw result.
#pragma once

#include "runner/preflight.hpp"
#include "exec/workspace.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/process.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

struct extension_cache;  // engine/extension.cpp: compiled extension schemas

/// What every launch of a run shares. Owned by the built-in runner; lives as long as the run.
struct launch_context {
    boost::asio::any_io_executor ex;
    const plan* compiled = nullptr;
    const run_options* options = nullptr;
    std::string run_id;
    exec::directory workspace;                    ///< the canonical workspace root, held open
    std::vector<prepared_action> actions;         ///< per action, from the strict preflight
    std::shared_ptr<extension_cache> extensions;  ///< made by the first extension.process attempt
    std::optional<slurm::tools> slurm;            ///< backend slurm: the commands, from the strict preflight

    const resolved_environment& environment_of(std::uint32_t action_index) const {
        return actions[action_index].environment;
    }
};

/// One program start.
struct launch_request {
    const attempt_request* attempt = nullptr;
    std::vector<std::string> extra_args;    ///< after the action's args (extension protocol flags)
    std::optional<std::string> stdin_data;  ///< nullopt: stdin is /dev/null
    std::string phase = "shell";            ///< shell | handshake | invoke (container names)
};

/// What a launch produced. `process` holds raw bytes: redaction is the caller's job.
struct launch_result {
    process_result process;
    std::string command;      ///< the resolved executable, or the engine client
    std::string isolation;    ///< "process" | "container"
    std::string engine;       ///< container: "docker" | "podman"
    std::string containment;  ///< "cgroup" | "process-group" | "engine"
    /// Set when the program could not be started (nothing ran), or when something after it
    /// failed (container cleanup); the task fails with this error.
    std::optional<task_error> error;
    bool oom_killed = false;  ///< container: the engine says the memory limit killed it
    std::string backend = "local";  ///< "local" | "slurm"
    std::optional<std::uint64_t>
        slurm_job_id;         ///< slurm: the job, once squeue listed it (slurm/launcher.cpp)
    std::string slurm_node;   ///< slurm: the node, as squeue printed it
    std::string slurm_state;  ///< slurm: the job state last seen (final once confirmed)
};

/// Starts programs under one isolation mode.
class launcher {
public:
    virtual ~launcher() = default;

    /// Completion signature: void(launch_result). Cancellation through the handler's slot
    /// (terminal: kill now; total/partial: graceful), as for async_run_process.
    virtual void async_launch(const launch_request& request,
                              boost::asio::any_completion_handler<void(launch_result)> handler) = 0;

    /// Once per run, after the last launch completed: finishes what launches left for later
    /// (container removal) and checks that nothing the run created is left. Completion
    /// signature: void(std::optional<task_error>); not cancellable. Default: nothing.
    virtual void async_finish(boost::asio::any_completion_handler<void(std::optional<task_error>)> handler);

protected:
    explicit launcher(launch_context& ctx) : ctx_(ctx) {}
    launch_context& ctx_;
};

/// The allowlist, checked again right before the effect: why policy.processAllowlist refuses
/// the action's command (by its basename), or nothing.
std::optional<task_error> allowlist_refusal(const launch_context& ctx, const action_spec& action);

/// Where a program launched elsewhere (a container, a Slurm node) works: the attempt's cwd
/// opened beneath the workspace root, or the root itself.
struct working_directory {
    std::optional<exec::directory> opened;  ///< the cwd, held open until the program has exited
    int fd = -1;                            ///< the cwd's or the root's descriptor
    std::string path;                       ///< its canonical path: what the engine binds, srun changes to
};

/// Opens `cwd` (empty or ".": the root) beneath the workspace root into `out`; the error
/// (cwd_unavailable) when it is not there, leads out, or its path cannot be read.
std::optional<task_error> open_working_directory(const launch_context& ctx,
                                                 const std::optional<std::string>& cwd,
                                                 working_directory& out);

/// A launch as a task result: state and error from the outcome, stdout/stderr redacted with
/// `env.secrets` and made valid UTF-8, and the shell output object
/// `{status, changed, exitCode, signal?, stdout, stderr}`. `timeout_ms` is named on timeout.
task_result to_task_result(launch_result r, const resolved_environment& env, std::int64_t timeout_ms,
                           bool streams_once = false);

/// isolation: process.
std::unique_ptr<launcher> make_host_launcher(launch_context& ctx);
/// isolation: container (Docker or Podman).
std::unique_ptr<launcher> make_container_launcher(launch_context& ctx);
/// isolation: process on the Slurm backend: one srun job per launch.
std::unique_ptr<launcher> make_slurm_launcher(launch_context& ctx);

}  // namespace agentctl
