// Preflight without effects: can every process action of a plan run on this host?
//
// Runs no task, no secret helper and pulls nothing. It looks at files (executables, the
// working directory, secret files by name), at agentctl's environment (names only) and asks
// each candidate container engine to inspect the pinned image.
#pragma once

#include <agentctl/backend.hpp>
#include <agentctl/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl {

struct plan;

/// One prerequisite of one process action, in the reference's vocabulary.
struct doctor_check {
    std::string action;  ///< the action's name ("" for the workspace and the backend)
    /// "process:ACTION:command" | "process:ACTION:script" | "process:ACTION:cwd" |
    /// "process:ACTION:env:NAME" | "container:ACTION" | "workspace" | "backend:SUBJECT" |
    /// "process:ACTION:backend"
    std::string check;
    std::string subject;  ///< what was looked at: a path, a variable name, an engine
    /// "present" | "missing_or_not_executable" (command) | "missing_or_not_file" (script) |
    /// "missing_or_denied" (cwd, workspace) | "missing" | "unavailable" | "unchecked" | "weak"
    /// (usable, with a warning: a secret too short to redact without destroying output)
    std::string status;
    std::string detail;  ///< why, for people; never a secret value nor a file's content
    /// A failure of this check alone makes the report not ready (false for an engine that
    /// `runtime: auto` can do without, because another candidate has the image).
    bool blocking = true;

    bool failed() const { return status.rfind("missing", 0) == 0 || status == "unavailable"; }
};

/// What `doctor` says it did not verify, whatever it found: a run alone shows these.
inline constexpr std::string_view doctor_scope =
    "local prerequisites only; doctor does not establish workflow execution readiness: what "
    "helpers need themselves, modules, secret helpers' results and remote services are known "
    "only when a run uses them";

struct doctor_report {
    bool ready = true;        ///< no blocking check failed
    std::string workflow;     ///< metadata.name
    std::string plan_digest;  ///< the plan's
    std::string workspace;    ///< the canonical workspace root, when it exists
    std::vector<doctor_check> checks;  ///< per process action in plan order, then per check
    /// What was not checked, by name (status "unchecked"): a script's own dependencies, the
    /// modules of `python -m`, inline code.
    std::vector<doctor_check> unverified;
};

struct doctor_options {
    std::string base_dir;     ///< absolute: --workspace, else the workflow's folder
    std::string search_path;  ///< PATH for bare command names and engines
    /// agentctl's own environment: `{env: NAME}` sources (presence only) and engine clients.
    std::function<std::optional<std::string>(std::string_view)> host_env;
    backend_kind backend = backend_kind::local;  ///< slurm: the Slurm commands, controller and partition too
    slurm_options slurm;
};

namespace detail {
void async_doctor_impl(boost::asio::any_io_executor ex, const plan& p, doctor_options options,
                       boost::asio::any_completion_handler<void(doctor_report)> handler);
}

/// The host actions of `p` whose bare command name `search_path` does not resolve, said in
/// one message as a run's preflight says it (each action, the PATH once, "use an absolute path
/// or add its folder to PATH", and a file of that name in the workspace root, `base_dir` being
/// the base of policy.workspaceRoot); nothing when every one resolves. Looks at files only: a
/// front end asks before it records a run that could not start.
std::optional<task_error> missing_commands(const plan& p, std::string_view search_path,
                                           const std::string& base_dir);

/// Checks every process action of `p` (which must outlive the operation).
///
/// Completion signature: void(doctor_report). Cancellation through the token's slot stops
/// a running engine inspection; the report then says which checks did not complete.
/// Thread safety: use from the executor's thread.
template <typename Token>
auto async_doctor(boost::asio::any_io_executor ex, const plan& p, doctor_options options, Token&& token) {
    return boost::asio::async_initiate<Token, void(doctor_report)>(
        [](auto handler, boost::asio::any_io_executor e, const plan* pp, doctor_options o) {
            detail::async_doctor_impl(std::move(e), *pp, std::move(o), std::move(handler));
        },
        token, std::move(ex), &p, std::move(options));
}

}  // namespace agentctl
