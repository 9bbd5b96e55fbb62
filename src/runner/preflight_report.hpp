// What every step of the preflight shares: how hard to look, what the runner would run with,
// and where a step says what it found. The runner's own steps (preflight.cpp) and each
// backend's (container/preflight.cpp, slurm/preflight.cpp) use it.
#pragma once

#include "runner/settings.hpp"

#include <agentctl/doctor.hpp>
#include <agentctl/error.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

namespace slurm {
struct tools;
}

enum class preflight_mode { strict, survey };

/// The reference's name of a check of `kind` ("process:ACTION:command", ...; doctor_check).
std::string doctor_check_name(const std::string& action, std::string_view kind, const std::string& subject);
/// The reference's status for a survey's `status` of a check of `kind`.
std::string doctor_status(std::string_view kind, std::string_view status);

/// What the runner would run with (base_dir, search_path, host_env, the backend and its
/// options, containment for secret helpers), and how hard to look.
struct preflight_settings : runner_settings {
    preflight_mode mode = preflight_mode::strict;
    /// Strict, backend slurm: called once the commands are found, before `scontrol ping`, while
    /// the preflight goes on (the runner starts its allocation workers there, so that the
    /// ping overlaps the step's start: docs/WORKER.md, "Starting early"). True when it started
    /// workers in the allocation agentctl runs in: their steps run there whatever the cluster's
    /// default partition is, so that one is not looked up.
    std::function<bool(const slurm::tools&)> on_slurm_tools_found;
    /// ... and when the ping then fails: the runner stops those workers at once (their srun
    /// cannot create a step without a controller, and would retry for seconds).
    std::function<void()> on_slurm_controller_down;
};

/// Where the preflight's steps say what they found: each check (survey), and the first error,
/// which stops the run (strict). The backends' own steps (container/preflight.hpp,
/// slurm/preflight.hpp) write here too; the preflight (preflight.hpp) gathers them.
class preflight_report {
public:
    /// `checks`, `unverified` and `error`: where the survey's checks, what it leaves unchecked and
    /// the run's first error go.
    preflight_report(preflight_mode mode, std::vector<doctor_check>& checks,
                     std::vector<doctor_check>& unverified, std::optional<task_error>& error)
        : mode_(mode), checks_(checks), unverified_(unverified), error_(error) {}
    bool survey() const { return mode_ == preflight_mode::survey; }
    /// One check's outcome (survey only: a run says only what stops it). `kind` is
    /// "executable", "script", "cwd", "env", "engine" or "backend", `status` "ok", "missing",
    /// "unavailable", "unchecked" or "weak": the report names them as the reference does
    /// (doctor_check).
    void check(std::string action, std::string_view kind, std::string subject, std::string_view status,
               std::string detail, bool blocking = true) {
        if (!survey()) return;
        checks_.push_back(doctor_check{action, doctor_check_name(action, kind, subject), std::move(subject),
                                       doctor_status(kind, status), std::move(detail), blocking});
    }
    /// Something the survey does not verify (doctor_report::unverified).
    void unverified(const std::string& action, std::string_view kind, std::string detail) {
        if (survey())
            unverified_.push_back(doctor_check{action, doctor_check_name(action, kind, ""), "", "unchecked",
                                               std::move(detail), false});
    }
    /// Strict: the run stops with `error`, unless an earlier one stopped it already.
    void stop(task_error error) {
        if (!survey() && !error_) error_ = std::move(error);
    }
    bool stopped() const { return error_.has_value(); }
    std::vector<doctor_check>& checks() { return checks_; }

private:
    preflight_mode mode_;
    std::vector<doctor_check>& checks_;
    std::vector<doctor_check>& unverified_;
    std::optional<task_error>& error_;
};

}  // namespace agentctl
