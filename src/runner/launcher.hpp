// Starting one program for one task attempt: what every backend's launcher shares.
//
// The built-in runner turns an attempt into one launch (builtin.shell.exec) or two
// (extension.process: handshake, then invoke); a launcher knows how to start the program
// under its backend (host/, container/, slurm/) and reports the raw result.
#pragma once

#include "exec/workspace.hpp"
#include "runner/secrets.hpp"
#include "runner/settings.hpp"

#include <agentctl/attempt.hpp>
#include <agentctl/process_types.hpp>
#include <agentctl/task_result.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentctl {

class event_sink;

class watchdog;
struct extension_cache;  // runner/extension.cpp: compiled extension schemas

/// What one process action runs with, from the strict preflight (indexed like plan::actions;
/// empty for other actions).
struct prepared_action {
    std::string executable;            ///< host actions: the resolved absolute path
    std::string executable_error;      ///< host actions: why it could not be resolved
    resolved_environment environment;  ///< strict only
};

/// What every launch of a run shares. Owned by the built-in runner; lives as long as the run.
struct launch_context {
    boost::asio::any_io_executor ex;
    const plan* compiled = nullptr;
    runner_settings settings;
    watchdog* watch = nullptr;                    ///< told of engines and Slurm jobs; may be null
    event_sink* events = nullptr;                 ///< for warnings before the first task; may be null
    exec::directory workspace;                    ///< the canonical workspace root, held open
    std::vector<prepared_action> actions;         ///< per action, from the strict preflight
    std::shared_ptr<extension_cache> extensions;  ///< made by the first extension.process attempt

    const resolved_environment& environment_of(std::uint32_t action_index) const {
        return actions[action_index].environment;
    }
};

/// One program start.
struct launch_request {
    const attempt_request* attempt = nullptr;
    std::vector<std::string> extra_args;    ///< after the action's args (extension protocol flags)
    std::optional<std::string> stdin_data;  ///< nullopt: stdin is /dev/null
    std::string phase = "shell";            ///< shell | handshake | invoke (container and job names)
};

/// What a launch produced. `process` holds raw bytes: redaction is the caller's job.
struct launch_result {
    process_result process;
    std::string command;      ///< the resolved executable, or the engine client
    std::string isolation;    ///< "process" | "container"
    std::string engine;       ///< container: "docker" | "podman"
    std::string containment;  ///< "cgroup" | "process-group" | "engine" | "slurm"
    /// Set when the program could not be started (nothing ran), or when something after it
    /// failed (container cleanup); the task fails with this error.
    std::optional<task_error> error;
    bool oom_killed = false;  ///< container: the engine says the memory limit killed it
    bool output_passed = false;  ///< host: the process wrote to agentctl's stdout/stderr (pass_output)
    std::string backend = "local";              ///< "local" | "slurm"
    std::optional<std::uint64_t> slurm_job_id;  ///< slurm: the job, once squeue listed it
    std::string slurm_node;                     ///< slurm: the node, as squeue printed it
    std::string slurm_worker;                   ///< slurm, allocation mode: "worker.NODE:N"
    std::string slurm_state;                    ///< slurm: the job state last seen (final once confirmed)
};

/// Starts programs on one backend.
class launcher {
public:
    virtual ~launcher() = default;

    /// Starts the program and waits for its end, filling `out` (default-made by the caller);
    /// `request` and `out` outlive the coroutine. The coroutine's cancellation reaches the
    /// program (terminal: kill now; total/partial: graceful) and completes the launch as a
    /// value, as for async_run_process. The result is the caller's, not returned: a returned
    /// one would be held twice more, in this frame and in the caller's (docs/DESIGN.md, "What
    /// an in-flight task holds").
    virtual boost::asio::awaitable<void> launch(const launch_request& request, launch_result& out) = 0;

    /// Once per run, after the last launch completed: finishes what launches left for later
    /// (container removal) and checks that nothing the run created is left. Not cancellable.
    /// Default: nothing.
    virtual boost::asio::awaitable<std::optional<task_error>> finish();

    /// task_runner::dispatch_ahead for the launches of this launcher. Default: 0.
    virtual int dispatch_ahead(int /*jobs*/) { return 0; }

protected:
    explicit launcher(launch_context& ctx) : ctx_(ctx) {}
    launch_context& ctx_;
};

/// The allowlist, checked again right before the effect: why policy.processAllowlist refuses
/// the action's command (by its basename), or nothing.
std::optional<task_error> allowlist_refusal(const launch_context& ctx, const action_spec& action);

/// Where a program works: the attempt's cwd opened beneath the workspace root, or the root
/// itself.
struct working_directory {
    std::optional<exec::directory> opened;  ///< the cwd, held open until the program has exited
    int fd = -1;                            ///< the cwd's or the root's descriptor
    std::string path;                       ///< its canonical path: what the engine binds, srun changes to
};

/// Opens `cwd` (empty or ".": the root) beneath the workspace root; cwd_unavailable when it is
/// not there, leads out, or (with `canonical`) its path cannot be read.
expected<working_directory> open_working_directory(const launch_context& ctx,
                                                   const std::optional<std::string>& cwd,
                                                   bool canonical = true);

/// A launch as a task result: state and error from the outcome, stdout/stderr redacted with
/// `env.secrets` and made valid UTF-8, and the shell output object
/// `{status, changed, exitCode, signal?, stdout, stderr}`. `timeout_ms` is named on timeout.
task_result to_task_result(launch_result r, const resolved_environment& env, std::int64_t timeout_ms,
                           bool streams_once = false);

}  // namespace agentctl
