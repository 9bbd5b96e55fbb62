// What the built-in runner reads of a run's settings: plain values, nothing else. The scheduler
// fills it from run_settings (and the run's id); collaborators come beside it.
#pragma once

#include <agentctl/backend.hpp>
#include <agentctl/process_types.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl {

struct runner_settings {
    std::string run_id;       ///< names containers and Slurm jobs, and extensions' effect ids
    std::string base_dir;     ///< absolute: where policy.workspaceRoot is relative to
    std::string search_path;  ///< PATH for bare command names, engines and Slurm commands
    /// agentctl's own environment: `{env: NAME}` sources, engine and Slurm clients.
    std::function<std::optional<std::string>(std::string_view)> host_env;
    containment_policy containment = containment_policy::automatic;
    backend_kind backend = backend_kind::local;
    slurm_options slurm;  ///< backend slurm: resource options of every job
    std::chrono::milliseconds drain_grace{250};
    /// builtin.shell.exec's stdout and stderr are agentctl's own (run_settings::pass_output).
    bool pass_output = false;
    /// `run --check`: nothing with an effect runs (processes, writes), reads still do.
    bool check = false;
    /// `run --diff`: builtin.write results carry their diff.
    bool diff = false;
};

}  // namespace agentctl
