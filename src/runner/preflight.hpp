// The one preflight: everything a run needs is checked and resolved before any effect.
//
// strict (the runner's prepare): opens the workspace root, resolves every host action's
// executable, resolves every environment (running `{process}` secret helpers) and picks the
// container engine that has each pinned image; the first failure stops the run. With the
// Slurm backend it first checks the Slurm commands, the controller and the partition, and
// refuses container actions.
// survey (doctor): the same checks without effects (no helper runs, no value is read),
// every one of them reported.
#pragma once

#include "runner/container/argv.hpp"
#include "runner/secrets.hpp"
#include "runner/slurm/client.hpp"
#include "exec/workspace.hpp"

#include <agentctl/backend.hpp>
#include <agentctl/doctor.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/runner.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

enum class preflight_mode { strict, survey };

struct preflight_settings {
    preflight_mode mode = preflight_mode::strict;
    std::string base_dir;     ///< absolute: --workspace, else the workflow's folder
    std::string search_path;  ///< PATH for bare command names and engines
    std::function<std::optional<std::string>(std::string_view)> host_env;
    containment_policy containment = containment_policy::automatic;  ///< for secret helpers
    backend_kind backend = backend_kind::local;
    slurm_options slurm;  ///< backend slurm: the partition to check
};

/// The engine and the exact image a container action runs with.
struct container_choice {
    container::engine engine;
    std::string image_id;  ///< the inspected id, so that a tag moved meanwhile cannot change it
};

/// What one process action runs with (indexed like plan::actions; empty for others).
struct prepared_action {
    std::string executable;            ///< host actions: the resolved absolute path
    std::string executable_error;      ///< host actions: why it could not be resolved
    resolved_environment environment;  ///< strict only
    std::optional<container_choice> container;
};

struct preflight_result {
    std::optional<exec::directory> workspace;  ///< the canonical workspace root, held open
    std::string workspace_path;                ///< as named, when it could not be opened
    std::vector<prepared_action> actions;
    std::optional<slurm::tools> slurm;  ///< backend slurm, strict: the commands, all checks passed
    std::vector<doctor_check> checks;  ///< survey: every check, per process action in plan order
    std::optional<task_error> error;   ///< strict: what stops the run before any task starts
    std::vector<diagnostic> warnings;  ///< strict: what the run should say before it starts
};

/// Runs the preflight of `p` on the coroutine's executor. Cancellation (the coroutine's)
/// stops it between steps and is forwarded to a running helper or engine call.
boost::asio::awaitable<preflight_result> run_preflight(const plan& p, const preflight_settings& settings);

}  // namespace agentctl
