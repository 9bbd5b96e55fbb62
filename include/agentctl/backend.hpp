// Where task attempts run: on this machine (`local`) or on a Slurm cluster through `srun`
// (`slurm`), and the Slurm resource options. docs/DESIGN.md, "Slurm backend". What dead runs
// left on the backends is leftovers.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl {

/// Where host-process attempts run.
enum class backend_kind {
    local,  ///< on this machine (the default)
    slurm,  ///< one `srun` job per attempt on a Slurm cluster
};
std::string_view to_string(backend_kind);  ///< "local" | "slurm"
/// "local" or "slurm"; nothing for any other text.
std::optional<backend_kind> backend_from_string(std::string_view text);

/// How the Slurm backend starts attempts (docs/WORKER.md, "Choosing the mode").
enum class slurm_dispatch {
    automatic,  ///< `worker` inside an allocation (SLURM_JOB_ID set), `job` outside one
    worker,     ///< one `agentctl worker` step per node of the allocation agentctl runs in
    job,        ///< one `srun` job per attempt, each a new job (also inside an allocation)
};

/// Resource options of every Slurm job of a run; empty or absent ones are not passed, so the
/// cluster's defaults apply.
struct slurm_options {
    slurm_dispatch dispatch = slurm_dispatch::automatic;  ///< --slurm-dispatch auto|worker|job
    std::string partition;                       ///< --partition (a,b means any of these)
    std::string account;                         ///< --account
    std::string qos;                             ///< --qos
    std::optional<std::uint32_t> cpus_per_task;  ///< --cpus-per-task, >= 1
    std::optional<std::uint64_t> mem_mib;        ///< --mem in MiB, >= 1
    /// --slurm-nodes: outside an allocation, ask for this many whole nodes (salloc) and run
    /// their workers; 0: do not ask (docs/WORKER.md, "Asking for nodes").
    std::uint32_t nodes = 0;
    std::string time;  ///< --slurm-time: the time limit of that allocation, Slurm's syntax
};

/// Sets the option called `name` ("dispatch", "partition", "account", "qos", "cpus-per-task",
/// "mem", "nodes", "time": the command line's `--slurm-NAME`) from its text. Returns why the value is refused
/// (empty, a control character, not a whole number >= 1), or an empty string when it was set.
std::string set_slurm_option(slurm_options& options, std::string_view name, std::string_view value);

/// Why `options` cannot be used, or empty (what set_slurm_option checks, for options made
/// in code).
std::string slurm_options_error(const slurm_options& options);

}  // namespace agentctl
