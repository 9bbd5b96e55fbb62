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
#include "runner/slurm/client.hpp"

#include <agentctl/backend.hpp>
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

enum class preflight_mode { strict, survey };

/// What the runner would run with (base_dir, search_path, host_env, the backend and its
/// options, containment for secret helpers), and how hard to look.
struct preflight_settings : runner_settings {
    preflight_mode mode = preflight_mode::strict;
};

struct preflight_result {
    std::optional<exec::directory> workspace;  ///< the canonical workspace root, held open
    std::string workspace_path;                ///< as named, when it could not be opened
    std::vector<prepared_action> actions;
    /// Container actions, strict: the engine that has the pinned image (indexed like actions).
    std::vector<std::optional<container::choice>> containers;
    std::optional<slurm::tools> slurm;  ///< backend slurm, strict: the commands, all checks passed
    std::vector<doctor_check> checks;  ///< survey: every check, per process action in plan order
    std::optional<task_error> error;   ///< strict: what stops the run before any task starts
    std::vector<diagnostic> warnings;  ///< strict: what the run should say before it starts
};

/// Where the preflight's steps say what they found: each check (survey), and the first error,
/// which stops the run (strict). The backends' steps (container/preflight.hpp,
/// slurm/preflight.hpp) write here too.
class preflight_report {
public:
    preflight_report(preflight_mode mode, preflight_result& result) : mode_(mode), result_(result) {}
    bool survey() const { return mode_ == preflight_mode::survey; }
    /// One check's outcome (survey only: a run says only what stops it).
    void check(std::string action, std::string check, std::string subject, std::string status,
               std::string detail, bool blocking = true) {
        if (survey())
            return result_.checks.push_back(doctor_check{std::move(action), std::move(check),
                                                         std::move(subject), std::move(status),
                                                         std::move(detail), blocking});
    }
    /// Strict: the run stops with `error`, unless an earlier one stopped it already.
    void stop(task_error error) {
        if (!survey() && !result_.error) result_.error = std::move(error);
    }
    bool stopped() const { return result_.error.has_value(); }
    std::vector<doctor_check>& checks() { return result_.checks; }

private:
    preflight_mode mode_;
    preflight_result& result_;
};

/// Runs the preflight of `p` on the coroutine's executor. Cancellation (the coroutine's)
/// stops it between steps and is forwarded to a running helper or engine call.
boost::asio::awaitable<preflight_result> run_preflight(const plan& p, const preflight_settings& settings);

}  // namespace agentctl
