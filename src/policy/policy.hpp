// Policy rules over a parsed workflow: one function per rule, each adding diagnostics
// located with workflow::where(). The plan compiler runs them all through check_policy()
// and reuses the lexical path helpers for values rendered from templates.
#pragma once

#include <agentctl/diagnostic.hpp>
#include <agentctl/spec.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace agentctl::policy {

/// Commands are an absolute path or a bare name; a relative path with `/` is refused.
void check_command_form(const workflow& wf, diagnostics& diags);
/// basename(command) must be in processAllowlist.
void check_process_allowlist(const workflow& wf, diagnostics& diags);
/// Env names and `{env: SRC}` source names must be in environmentAllowlist.
void check_environment_allowlist(const workflow& wf, diagnostics& diags);
/// `{file: PATH}` needs secretFileRoots and must lie lexically under one of them.
void check_secret_files(const workflow& wf, diagnostics& diags);
/// `{process: {command}}`: command form and basename in secretProcessAllowlist.
void check_secret_processes(const workflow& wf, diagnostics& diags);
/// Action `cwd` is relative to workspaceRoot, without `..` components.
void check_cwd(const workflow& wf, diagnostics& diags);
/// writableRoots and secretFileRoots have no `..` components.
void check_roots(const workflow& wf, diagnostics& diags);
/// `command` and every `env` source are never templated.
void check_no_templates(const workflow& wf, diagnostics& diags);

/// policy.networkAllowlist next to container actions: they run with no network at all, so the
/// list grants them nothing (a warning; host processes are not sandboxed, docs/COMPATIBILITY.md).
void check_network(const workflow& wf, diagnostics& diags);

/// Every rule above, in that order.
void check_policy(const workflow& wf, diagnostics& diags);

/// The part after the last `/`.
std::string_view basename(std::string_view path);
/// True when a `/`-separated component of `path` is exactly `..`.
bool has_parent_component(std::string_view path);
/// "" when `cwd` is acceptable; otherwise the diagnostic code (invalid_cwd, policy_path_escape).
std::string_view cwd_problem(std::string_view cwd);
/// True when `path` lies strictly below `root`, comparing normalised components (no I/O).
bool lexically_under(std::string_view path, std::string_view root);

}  // namespace agentctl::policy
