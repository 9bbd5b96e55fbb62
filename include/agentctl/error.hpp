// Typed error codes of tasks and runs, the error value that carries one, and the CLI's exit
// statuses: the library's one error vocabulary (docs/DESIGN.md, "Errors").
//
// Every way a task or a run can fail has one code here. Its JSON spelling (to_string) is
// stable: reports, jsonl events and the journal use it. The flags say how the engine treats
// it: whether the program never started (a retry as `spawn_error` is safe), whether a retry
// cannot help, and whether it is a policy decision (exit status 3). docs/ERRORS.md lists
// every code with its meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace agentctl {

/// Why a task or a run did not simply succeed.
enum class error_code : std::uint8_t {
    // The program ran and ended badly.
    exit_nonzero,
    signaled,
    timeout,
    cancelled,
    output_limit_exceeded,
    oom_killed,
    // The program could not be started: nothing ran.
    spawn_failed,
    invalid_request,
    executable_not_found,
    interpreter_not_found,
    executable_changed,  ///< the path no longer names the file resolved or opened for it
    permission_denied,
    is_a_directory,
    exec_format_error,
    text_file_busy,
    cwd_unavailable,
    argument_list_too_long,
    resource_exhausted,
    sigchld_ignored,
    spawn_error,
    exit_status_lost,  ///< another waiter in this process reaped the program
    // What a run needs before anything starts.
    workspace_unavailable,
    secret_unavailable,
    isolation_unavailable,
    backend_unavailable,
    engine_variable_not_allowed,
    container_engine_error,
    container_cleanup_failed,
    // The Slurm backend: Slurm, not the program, ended the job; or its removal is unconfirmed.
    slurm_time_limit,
    slurm_node_failure,
    slurm_preempted,
    slurm_cancelled,
    slurm_boot_failure,
    slurm_deadline,
    slurm_launch_failed,
    slurm_unknown_end,
    slurm_cleanup_failed,
    worker_lost,  ///< the allocation worker running the attempt died or stopped answering
    // Policy.
    policy_process_not_allowed,
    policy_secret_process_not_allowed,
    approval_required,
    approval_denied,
    // extension.process protocol.
    input_invalid,
    invalid_schema,
    handshake_mismatch,
    bad_json,
    identity_mismatch,
    output_invalid,
    // Built-in actions (builtin.assert, builtin.read, builtin.write).
    assertion_failed,   ///< `that` was false: the message is the task's `message`
    path_not_allowed,   ///< a read or write path leaves the workspace or its writable roots
    capability_denied,  ///< the action's capability is denied by policy.toolsDeny (or not in toolsAllow)
    file_error,         ///< the file could not be read or written (missing, not text, too large, I/O)
    // Scheduling.
    dependency_not_succeeded,
    condition_false,
    route_not_selected,  ///< a router's decision did not name this task (docs/CONTROL_FLOW.md)
    condition_error,
    template_error,
    child_failed,
    loop_exhausted,  ///< a loop's condition still held after its last iteration (maxIterations)
    budget_exceeded,
    run_stopped,
    run_cancelled,
    not_started,
    // The run journal.
    journal_failed,  ///< the journal could not be written or read: the run cannot go on safely
    internal_error,
};

/// The code's JSON spelling, e.g. "exit_nonzero".
std::string_view to_string(error_code code);

/// The code spelled `name`, or nothing.
std::optional<error_code> error_code_from_string(std::string_view name);

/// The program never started, so nothing had an effect (the `spawn_error` retry reason).
bool nothing_ran(error_code code);

/// A retry cannot help: policy, or isolation that this host does not offer.
bool is_permanent(error_code code);

/// A policy decision: the run exits with status 3.
bool is_policy(error_code code);

/// A persistence failure (the journal): the run exits with status 5.
bool is_persistence(error_code code);

/// An error: its code, and a message for people (redacted: never a secret value).
struct task_error {
    error_code code = error_code::internal_error;
    std::string message;
};

/// A value, or the error that prevented it: std::expected's shape (C++23), for what crosses a
/// layer boundary and can fail. The error is a task_error but in the journal
/// (journal_result<T>: its own errors, docs/DESIGN.md "Errors").
template <typename T, typename E = task_error>
class expected {
public:
    expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    expected(E error) : v_(std::in_place_index<1>, std::move(error)) {}
    bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }
    T& operator*() { return std::get<0>(v_); }
    const T& operator*() const { return std::get<0>(v_); }
    T* operator->() { return &std::get<0>(v_); }
    const T* operator->() const { return &std::get<0>(v_); }
    const E& error() const { return std::get<1>(v_); }
    template <typename U>
    T value_or(U&& other) const {
        return has_value() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(other));
    }

private:
    std::variant<T, E> v_;
};

/// Exit statuses of the CLI, stable (docs/CLI.md, "Exit statuses").
enum class exit_status : int {
    success = 0,
    usage = 2,        ///< usage or validation
    policy = 3,       ///< policy or approval; also a resume refused because an effect is uncertain
    run_failed = 4,   ///< a task failed; isolation or backend unavailable
    persistence = 5,  ///< the journal is unreadable, corrupt, newer, or held by a live run
    not_ready = 6,    ///< doctor: a prerequisite of the workflow is missing (the reference's 6)
    cancelled = 130,  ///< SIGINT, SIGTERM, --timeout-seconds
};

}  // namespace agentctl
