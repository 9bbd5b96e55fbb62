// The table of error codes: spelling and flags in one place.
#include <agentctl/error.hpp>

#include <cstddef>

namespace agentctl {
namespace {

struct code_info {
    error_code code;
    std::string_view name;
    bool nothing_ran = false;
    bool permanent = false;
    bool policy = false;
};

constexpr bool ran = false, none_ran = true;

// In enum order: the table is indexed by the code (checked below).
constexpr code_info table[] = {
    {error_code::exit_nonzero, "exit_nonzero"},
    {error_code::signaled, "signaled"},
    {error_code::timeout, "timeout"},
    {error_code::cancelled, "cancelled"},
    {error_code::output_limit_exceeded, "output_limit_exceeded"},
    {error_code::oom_killed, "oom_killed"},
    {error_code::spawn_failed, "spawn_failed", none_ran},
    {error_code::invalid_request, "invalid_request", none_ran},
    {error_code::executable_not_found, "executable_not_found", none_ran},
    {error_code::interpreter_not_found, "interpreter_not_found", none_ran},
    {error_code::executable_changed, "executable_changed", none_ran},
    {error_code::permission_denied, "permission_denied", none_ran},
    {error_code::is_a_directory, "is_a_directory", none_ran},
    {error_code::exec_format_error, "exec_format_error", none_ran},
    {error_code::text_file_busy, "text_file_busy", none_ran},
    {error_code::cwd_unavailable, "cwd_unavailable", none_ran},
    {error_code::argument_list_too_long, "argument_list_too_long", none_ran},
    {error_code::resource_exhausted, "resource_exhausted", none_ran},
    {error_code::sigchld_ignored, "sigchld_ignored", none_ran},
    {error_code::spawn_error, "spawn_error", none_ran},
    {error_code::exit_status_lost, "exit_status_lost", ran},
    {error_code::workspace_unavailable, "workspace_unavailable", none_ran, true},
    {error_code::secret_unavailable, "secret_unavailable", none_ran},
    {error_code::isolation_unavailable, "isolation_unavailable", none_ran, true},
    {error_code::backend_unavailable, "backend_unavailable", none_ran, true},
    {error_code::engine_variable_not_allowed, "engine_variable_not_allowed", none_ran, true},
    {error_code::container_engine_error, "container_engine_error", none_ran},
    {error_code::container_cleanup_failed, "container_cleanup_failed", ran},
    {error_code::slurm_time_limit, "slurm_time_limit", ran},
    {error_code::slurm_node_failure, "slurm_node_failure", ran},
    {error_code::slurm_preempted, "slurm_preempted", ran},
    {error_code::slurm_cancelled, "slurm_cancelled", ran},
    {error_code::slurm_boot_failure, "slurm_boot_failure", ran},
    {error_code::slurm_deadline, "slurm_deadline", ran},
    {error_code::slurm_launch_failed, "slurm_launch_failed", none_ran},
    {error_code::slurm_unknown_end, "slurm_unknown_end", ran},
    {error_code::slurm_cleanup_failed, "slurm_cleanup_failed", ran},
    {error_code::worker_lost, "worker_lost", ran},
    {error_code::policy_process_not_allowed, "policy_process_not_allowed", none_ran, true, true},
    {error_code::policy_secret_process_not_allowed, "policy_secret_process_not_allowed", none_ran, true,
     true},
    {error_code::approval_required, "approval_required", none_ran, true, true},
    {error_code::approval_denied, "approval_denied", none_ran, true, true},
    {error_code::input_invalid, "input_invalid", none_ran},
    {error_code::invalid_schema, "invalid_schema", none_ran, true},
    {error_code::handshake_mismatch, "handshake_mismatch", none_ran},
    {error_code::bad_json, "bad_json"},
    {error_code::identity_mismatch, "identity_mismatch"},
    {error_code::output_invalid, "output_invalid"},
    {error_code::assertion_failed, "assertion_failed"},
    // The reference fails the run here (exit 4), not on policy (exit 3): a run-time denial.
    {error_code::path_not_allowed, "path_not_allowed", none_ran, true},
    {error_code::capability_denied, "capability_denied", none_ran, true},
    {error_code::file_error, "file_error"},
    {error_code::dependency_not_succeeded, "dependency_not_succeeded", none_ran},
    {error_code::condition_false, "condition_false", none_ran},
    {error_code::route_not_selected, "route_not_selected", none_ran},
    {error_code::condition_error, "condition_error", none_ran},
    {error_code::template_error, "template_error", none_ran},
    {error_code::child_failed, "child_failed"},
    {error_code::loop_exhausted, "loop_exhausted"},
    {error_code::budget_exceeded, "budget_exceeded", none_ran},
    {error_code::run_stopped, "run_stopped", none_ran},
    {error_code::run_cancelled, "run_cancelled", none_ran},
    {error_code::not_started, "not_started", none_ran},
    {error_code::journal_failed, "journal_failed", none_ran, true},
    {error_code::internal_error, "internal_error"},
};
constexpr std::size_t table_size = sizeof table / sizeof table[0];

constexpr bool table_in_enum_order() {
    for (std::size_t i = 0; i < table_size; ++i)
        if (static_cast<std::size_t>(table[i].code) != i) return false;
    return static_cast<std::size_t>(error_code::internal_error) + 1 == table_size;
}
static_assert(table_in_enum_order(), "the error table must list every code in enum order");

const code_info& info(error_code c) {
    return table[static_cast<std::size_t>(c)];
}

}  // namespace

std::string_view to_string(error_code code) {
    return info(code).name;
}

std::optional<error_code> error_code_from_string(std::string_view name) {
    for (const auto& i : table)
        if (i.name == name) return i.code;
    return std::nullopt;
}

bool nothing_ran(error_code code) {
    return info(code).nothing_ran;
}
bool is_permanent(error_code code) {
    return info(code).permanent;
}
bool is_policy(error_code code) {
    return info(code).policy;
}

bool is_persistence(error_code code) {
    return code == error_code::journal_failed;
}

}  // namespace agentctl
