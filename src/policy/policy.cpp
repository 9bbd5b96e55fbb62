// Policy rules (docs/DESIGN.md, "Plan"). Everything here is lexical: the
// front end reads no file system, so symlinks and existence are checked again at run time.
#include "policy/policy.hpp"

#include <agentctl/template.hpp>

#include <algorithm>

namespace agentctl::policy {
namespace {

std::string action_path(const action_spec& a) {
    return "spec.actions." + a.name;
}

std::string env_path(const action_spec& a, const env_entry& e) {
    return action_path(a) + ".env." + e.name;
}

bool contains(const std::vector<std::string>& list, std::string_view name) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

std::vector<std::string_view> views(const std::vector<std::string>& list) {
    return {list.begin(), list.end()};
}

std::string list_text(const std::vector<std::string>& list) {
    if (list.empty()) return "(empty)";
    std::string out;
    for (const auto& s : list) out += (out.empty() ? "" : ", ") + s;
    return out;
}

void report(const workflow& wf, diagnostics& diags, std::string code, const std::string& path,
            std::string message, std::string help) {
    diags.error(std::move(code), path, std::move(message), std::move(help), wf.where(path));
}

// Components of a `/` path without empty and `.` ones.
std::vector<std::string_view> components(std::string_view path) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (start <= path.size()) {
        std::size_t slash = path.find('/', start);
        std::size_t end = slash == std::string_view::npos ? path.size() : slash;
        std::string_view c = path.substr(start, end - start);
        if (!c.empty() && c != ".") out.push_back(c);
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    return out;
}

// The command of an action or a secret helper: absolute, or a bare name looked up in PATH.
void check_one_command(const workflow& wf, diagnostics& diags, std::string_view command,
                       const std::string& path) {
    if (command.empty() || looks_templated(command)) return;  // reported by the parser / check_no_templates
    if (command.front() != '/' && command.find('/') != std::string_view::npos) {
        report(wf, diags, "invalid_command", path,
               "command `" + std::string(command) +
                   "` is a relative path; it would depend on the working directory",
               "use an absolute path (/usr/bin/tool) or a bare name looked up in agentctl's PATH (tool)");
    } else if (basename(command).empty()) {
        report(wf, diags, "invalid_command", path, "command `" + std::string(command) + "` names a directory",
               "name the executable file, e.g. /usr/bin/tool");
    }
}

}  // namespace

std::string_view basename(std::string_view path) {
    std::size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool has_parent_component(std::string_view path) {
    auto parts = components(path);
    return std::find(parts.begin(), parts.end(), "..") != parts.end();
}

std::string_view cwd_problem(std::string_view cwd) {
    if (cwd.empty() || cwd.front() == '/') return "invalid_cwd";
    if (has_parent_component(cwd)) return "policy_path_escape";
    return "";
}

bool lexically_under(std::string_view path, std::string_view root) {
    bool path_absolute = !path.empty() && path.front() == '/';
    bool root_absolute = !root.empty() && root.front() == '/';
    if (path_absolute != root_absolute) return false;
    auto p = components(path);
    auto r = components(root);
    if (p.size() <= r.size()) return false;
    return std::equal(r.begin(), r.end(), p.begin());
}

void check_command_form(const workflow& wf, diagnostics& diags) {
    for (const auto& a : wf.actions)
        if (a.is_process()) check_one_command(wf, diags, a.command, action_path(a) + ".command");
}

void check_process_allowlist(const workflow& wf, diagnostics& diags) {
    const auto& allow = wf.policy.process_allowlist;
    for (const auto& a : wf.actions) {
        if (!a.is_process() || a.command.empty() || looks_templated(a.command)) continue;
        if (a.command.front() != '/' && a.command.find('/') != std::string::npos)
            continue;  // invalid_command
        std::string_view name = basename(a.command);
        if (name.empty() || contains(allow, name)) continue;
        std::string hint = nearest(name, views(allow));
        report(wf, diags, "policy_process_not_allowed", action_path(a) + ".command",
               "action `" + a.name + "` runs `" + std::string(name) +
                   "`, which is not in spec.policy.processAllowlist (" + list_text(allow) + ")",
               hint.empty() ? "add `" + std::string(name) + "` to spec.policy.processAllowlist"
                            : "did you mean `" + hint + "`? otherwise add `" + std::string(name) +
                                  "` to spec.policy.processAllowlist");
    }
}

void check_environment_allowlist(const workflow& wf, diagnostics& diags) {
    const auto& allow = wf.policy.environment_allowlist;
    for (const auto& a : wf.actions) {
        for (const auto& e : a.env) {
            if (!contains(allow, e.name)) {
                report(wf, diags, "policy_environment_not_allowed", env_path(a, e),
                       "action `" + a.name + "` sets `" + e.name +
                           "`, which is not in spec.policy.environmentAllowlist (" + list_text(allow) + ")",
                       "add `" + e.name + "` to spec.policy.environmentAllowlist");
            }
            if (e.source.kind == env_source::kind_t::env && !e.source.text.empty() &&
                !contains(allow, e.source.text)) {
                report(wf, diags, "policy_environment_not_allowed", env_path(a, e) + ".env",
                       "action `" + a.name + "` reads agentctl's variable `" + e.source.text +
                           "`, which is not in spec.policy.environmentAllowlist (" + list_text(allow) + ")",
                       "a source variable must be allowlisted too: add `" + e.source.text +
                           "` to spec.policy.environmentAllowlist");
            }
        }
    }
}

void check_secret_files(const workflow& wf, diagnostics& diags) {
    const auto& roots = wf.policy.secret_file_roots;
    for (const auto& a : wf.actions) {
        for (const auto& e : a.env) {
            if (e.source.kind != env_source::kind_t::file || looks_templated(e.source.text)) continue;
            const std::string path = env_path(a, e) + ".file";
            const std::string& file = e.source.text;
            if (roots.empty()) {
                report(wf, diags, "policy_secret_file_roots_missing", path,
                       "`" + e.name + "` reads the secret file `" + file +
                           "`, but spec.policy.secretFileRoots is empty",
                       "list the folder holding it in spec.policy.secretFileRoots");
            } else if (has_parent_component(file)) {
                report(wf, diags, "policy_path_escape", path,
                       "secret file `" + file + "` has a `..` component", "name the file without `..`");
            } else if (std::none_of(roots.begin(), roots.end(), [&](const std::string& root) {
                           return !has_parent_component(root) && lexically_under(file, root);
                       })) {
                report(wf, diags, "policy_secret_file_outside_roots", path,
                       "secret file `" + file + "` is not under any of spec.policy.secretFileRoots (" +
                           list_text(roots) + ")",
                       "move the file under a secret file root or add its folder to secretFileRoots");
            }
        }
    }
}

void check_secret_processes(const workflow& wf, diagnostics& diags) {
    const auto& allow = wf.policy.secret_process_allowlist;
    for (const auto& a : wf.actions) {
        for (const auto& e : a.env) {
            if (e.source.kind != env_source::kind_t::process) continue;
            const std::string& command = e.source.process.command;
            const std::string path = env_path(a, e) + ".process.command";
            check_one_command(wf, diags, command, path);
            if (command.empty() || looks_templated(command)) continue;
            std::string_view name = basename(command);
            if (name.empty() || contains(allow, name)) continue;
            report(wf, diags, "policy_secret_process_not_allowed", path,
                   "`" + e.name + "` comes from the helper `" + std::string(name) +
                       "`, which is not in spec.policy.secretProcessAllowlist (" + list_text(allow) + ")",
                   "add `" + std::string(name) + "` to spec.policy.secretProcessAllowlist");
        }
    }
}

void check_cwd(const workflow& wf, diagnostics& diags) {
    for (const auto& a : wf.actions) {
        if (!a.cwd) continue;
        // Templated parts are checked again once rendered; a literal `/` start or `..`
        // component is wrong whatever the templates render to.
        std::string_view problem = cwd_problem(*a.cwd);
        if (problem.empty()) continue;
        const std::string path = action_path(a) + ".cwd";
        if (problem == "invalid_cwd") {
            report(wf, diags, "invalid_cwd", path,
                   a.cwd->empty() ? "cwd is empty" : "cwd `" + *a.cwd + "` is absolute",
                   "write cwd relative to spec.policy.workspaceRoot, e.g. `repo` or `build/out`");
        } else {
            report(wf, diags, "policy_path_escape", path, "cwd `" + *a.cwd + "` has a `..` component",
                   "cwd must stay inside spec.policy.workspaceRoot: remove the `..`");
        }
    }
}

void check_roots(const workflow& wf, diagnostics& diags) {
    auto check = [&](const std::vector<std::string>& roots, const std::string& field) {
        for (std::size_t i = 0; i < roots.size(); ++i) {
            if (!has_parent_component(roots[i])) continue;
            report(wf, diags, "policy_path_escape", "spec.policy." + field + "[" + std::to_string(i) + "]",
                   field + " entry `" + roots[i] + "` has a `..` component",
                   "name the folder without `..` (relative to workspaceRoot, or absolute)");
        }
    };
    check(wf.policy.writable_roots, "writableRoots");
    check(wf.policy.secret_file_roots, "secretFileRoots");
}

void check_no_templates(const workflow& wf, diagnostics& diags) {
    auto refuse = [&](const std::string& path, const std::string& what) {
        report(wf, diags, "template_not_allowed", path, what + " cannot hold `${{ }}` templates",
               "commands and environment sources are fixed in the document; template args or cwd instead");
    };
    for (const auto& a : wf.actions) {
        if (looks_templated(a.command)) refuse(action_path(a) + ".command", "`command`");
        for (const auto& e : a.env) {
            const std::string path = env_path(a, e);
            switch (e.source.kind) {
                case env_source::kind_t::env:
                    if (looks_templated(e.source.text)) refuse(path + ".env", "an `env` source");
                    break;
                case env_source::kind_t::file:
                    if (looks_templated(e.source.text)) refuse(path + ".file", "a `file` source");
                    break;
                case env_source::kind_t::value:
                    if (looks_templated(e.source.text)) refuse(path + ".value", "a `value` source");
                    break;
                case env_source::kind_t::process: {
                    const auto& p = e.source.process;
                    if (looks_templated(p.command)) refuse(path + ".process.command", "a `process` source");
                    for (std::size_t i = 0; i < p.args.size(); ++i)
                        if (looks_templated(p.args[i]))
                            refuse(path + ".process.args[" + std::to_string(i) + "]", "a `process` source");
                    break;
                }
            }
        }
    }
}

void check_network(const workflow& wf, diagnostics& diags) {
    if (wf.policy.network_allowlist.empty()) return;
    std::string containers;
    for (const auto& a : wf.actions)
        if (a.isolation == isolation_mode::container)
            containers += (containers.empty() ? "`" : ", `") + a.name + "`";
    if (containers.empty()) return;
    const std::string path = "spec.policy.networkAllowlist";
    diags.warning("network_unavailable", path,
                  "container actions (" + containers +
                      ") run with no network at all: policy.networkAllowlist grants them none",
                  "fetch what they need before the run, or run that step as a host process", wf.where(path));
}

void check_policy(const workflow& wf, diagnostics& diags) {
    check_command_form(wf, diags);
    check_process_allowlist(wf, diags);
    check_environment_allowlist(wf, diags);
    check_secret_files(wf, diags);
    check_secret_processes(wf, diags);
    check_cwd(wf, diags);
    check_roots(wf, diags);
    check_no_templates(wf, diags);
    check_network(wf, diags);
}

}  // namespace agentctl::policy
