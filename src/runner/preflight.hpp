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

#include "exec/workspace.hpp"
#include "runner/container/argv.hpp"
#include "runner/launcher.hpp"
#include "runner/preflight_report.hpp"
#include "runner/slurm/client.hpp"

#include <agentctl/diagnostic.hpp>
#include <agentctl/doctor.hpp>
#include <agentctl/plan.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

struct preflight_result {
    std::optional<exec::directory> workspace;  ///< the canonical workspace root, held open
    std::string workspace_path;                ///< as named, when it could not be opened
    std::vector<prepared_action> actions;
    /// Container actions, strict: the engine that has the pinned image (indexed like actions).
    std::vector<std::optional<container::choice>> containers;
    std::optional<slurm::tools> slurm;  ///< backend slurm, strict: the commands, all checks passed
    std::vector<doctor_check> checks;  ///< survey: every check, per process action in plan order
    std::vector<doctor_check> unverified;  ///< survey: what it does not check (doctor_report)
    std::optional<task_error> error;   ///< strict: what stops the run before any task starts
    std::vector<diagnostic> warnings;  ///< strict: what the run should say before it starts
};

/// Runs the preflight of `p` on the coroutine's executor. Cancellation (the coroutine's)
/// stops it between steps and is forwarded to a running helper or engine call.
boost::asio::awaitable<preflight_result> run_preflight(const plan& p, const preflight_settings& settings);

}  // namespace agentctl
