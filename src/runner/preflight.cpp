// The preflight, strict and survey (docs/DESIGN.md, "Preflight").
#include "runner/preflight.hpp"

#include "exec/host.hpp"
#include "runner/container/preflight.hpp"
#include "runner/slurm/preflight.hpp"

#include <boost/asio/this_coro.hpp>

namespace asio = boost::asio;

namespace agentctl {
namespace {

bool cancelled(asio::cancellation_type t) {
    return t != asio::cancellation_type::none;
}

struct missing_command {
    const action_spec* action;
    std::string why;  ///< resolve_executable()'s error
};

// Every host action whose command is not found, in one message: each action, the PATH once
// ("command 'x' was not found in PATH (DIRS)" says it per action), the way out, and a file of
// that name in the workspace root when there is one (`command: proc.sh` for ./proc.sh). The
// caller says what was not done.
task_error missing_commands_error(const std::vector<missing_command>& missing, const std::string& workspace) {
    std::string search_note, lying_here;
    std::vector<std::string> parts;
    for (const auto& m : missing) {
        std::string why = m.why;
        constexpr std::string_view marker = " was not found in PATH (";
        if (auto at = why.find(marker); at != std::string::npos && why.back() == ')') {
            if (search_note.empty())
                search_note =
                    "PATH is " + why.substr(at + marker.size(), why.size() - at - marker.size() - 1);
            why = why.substr(0, at) + " was not found in PATH";
            if (lying_here.empty() && !workspace.empty())
                if (auto here = exec::canonical_path(workspace + "/" + m.action->command)) lying_here = *here;
        }
        parts.push_back("action \"" + m.action->name + "\": " + why);
    }
    std::string message =
        parts.size() == 1 ? parts[0] : std::to_string(parts.size()) + " executables are missing: ";
    if (parts.size() > 1)
        for (std::size_t i = 0; i < parts.size(); ++i) message += (i ? "; " : "") + parts[i];
    if (!search_note.empty()) {
        message += " (" + search_note + "); use an absolute path or add its folder to PATH";
        if (!lying_here.empty()) message += " (" + lying_here + " is in the workspace root)";
    }
    return task_error{error_code::executable_not_found, std::move(message)};
}

std::string_view basename_of(std::string_view path) {
    auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Programs whose first operand is a script they run (docs/DESIGN.md, "Doctor").
bool is_interpreter(std::string_view name) {
    for (std::string_view prefix : {"python", "pypy"})
        if (name.rfind(prefix, 0) == 0 &&
            name.find_first_not_of("0123456789.", prefix.size()) == std::string_view::npos)
            return true;
    for (std::string_view known : {"node", "nodejs", "bash", "sh", "dash", "zsh", "ksh", "ruby", "perl",
                                   "php", "Rscript", "pwsh", "lua", "tclsh"})
        if (name == known) return true;
    return false;
}

// What an interpreter's arguments run: a script file, a module (`-m`), inline code.
struct script_argument {
    enum class kind_t { none, script, module, inline_code };
    kind_t kind = kind_t::none;
    std::string text;
};

script_argument find_script(const std::string& command, const std::vector<std::string>& args) {
    if (!is_interpreter(basename_of(command))) return {};
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "-m") return {script_argument::kind_t::module, i + 1 < args.size() ? args[i + 1] : ""};
        if (arg == "-c" || arg == "-e" || arg == "--eval") return {script_argument::kind_t::inline_code, arg};
        if (arg.empty() || arg.front() == '-') continue;
        return {script_argument::kind_t::script, arg};
    }
    return {};
}

class preflight {
public:
    preflight(const plan& p, const preflight_settings& s)
        : plan_(p), settings_(s), report_(s.mode, result_.checks, result_.unverified, result_.error) {
        result_.actions.resize(p.actions.size());
        result_.containers.resize(p.actions.size());
    }

    asio::awaitable<preflight_result> run() {
        if (!open_workspace()) co_return std::move(result_);
        if (!survey() && !pass_output_possible()) co_return std::move(result_);
        // `run --check` runs no process: what they need is not looked for, no helper runs.
        if (settings_.check && !survey()) co_return std::move(result_);
        // The backend before any environment: a run that cannot reach Slurm runs no secret
        // helper either.
        if (settings_.backend == backend_kind::slurm) {
            result_.slurm = co_await slurm::check_backend(plan_, settings_, report_);
            if (result_.error) co_return std::move(result_);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled()))
                co_return std::move(result_);
        }
        // A run resolves every command before it runs any secret helper, and fails once,
        // naming all that are missing, rather than once per task.
        if (!survey() && !resolve_commands()) co_return std::move(result_);
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            prepared_action& prepared = result_.actions[proc.action_index];
            if (survey()) resolve_command(a, prepared);
            check_script(a);
            check_cwd(a);
            if (survey()) {
                // Doctor reports each action's checks together, engines included.
                for (const auto& e : a.env) survey_env(a, e);
                if (a.isolation == isolation_mode::container && a.container && !on_slurm())
                    co_await engines_.choose(proc, a, settings_, report_);
                continue;
            }
            prepared.environment = co_await resolve_environment(a.env, env_context());
            for (const auto& weak : prepared.environment.short_secrets) short_secret_warning(a, weak);
            if (settings_.pass_output && !prepared.environment.secrets.empty() &&
                !prepared.environment.error) {
                result_.error = task_error{error_code::invalid_request,
                                           "action \"" + a.name +
                                               "\" has a secret in its environment, and output passed "
                                               "through (-u) is not redacted: capture it instead"};
                co_return std::move(result_);
            }
            if (prepared.environment.error) {
                result_.error =
                    task_error{prepared.environment.error->code,
                               "action \"" + a.name + "\": " + prepared.environment.error->message};
                co_return std::move(result_);
            }
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled()))
                co_return std::move(result_);
        }
        if (survey()) co_return std::move(result_);
        // A run asks engines last: a missing secret is found without asking any engine.
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            if (a.isolation != isolation_mode::container || !a.container) continue;
            result_.containers[proc.action_index] = co_await engines_.choose(proc, a, settings_, report_);
            if (result_.error) co_return std::move(result_);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled()))
                co_return std::move(result_);
        }
        co_return std::move(result_);
    }

private:
    bool survey() const { return settings_.mode == preflight_mode::survey; }
    bool on_slurm() const { return settings_.backend == backend_kind::slurm; }

    // run_settings::pass_output hands agentctl's own descriptors to a host process; a Slurm job
    // or a container has none of them (docs/PARALLEL.md, "Output").
    bool pass_output_possible() {
        if (!settings_.pass_output) return true;
        std::string why;
        if (on_slurm())
            why = "the slurm backend: a job's output reaches agentctl through Slurm, not its own descriptors";
        for (const auto& proc : plan_.processes)
            if (why.empty() && plan_.actions[proc.action_index].isolation == isolation_mode::container)
                why = "a container action (\"" + plan_.actions[proc.action_index].name +
                      "\"): its output reaches agentctl through the engine's client";
        if (why.empty()) return true;
        result_.error =
            task_error{error_code::invalid_request,
                       "output passed through (-u) is not available with " + why + "; nothing was run"};
        return false;
    }

    void add(std::string action, std::string check, std::string subject, std::string status,
             std::string detail, bool blocking = true) {
        report_.check(std::move(action), std::move(check), std::move(subject), std::move(status),
                      std::move(detail), blocking);
    }

    environment_context env_context() const {
        environment_context ctx;
        ctx.policy = &plan_.policy;
        ctx.workspace = result_.workspace ? &*result_.workspace : nullptr;
        ctx.search_path = settings_.search_path;
        ctx.host_env = settings_.host_env;
        ctx.containment = settings_.containment;
        return ctx;
    }

    bool open_workspace() {
        const std::string& root = plan_.policy.workspace_root;
        std::string full = (!root.empty() && root[0] == '/') ? root : settings_.base_dir + "/" + root;
        result_.workspace_path = full;
        auto opened = exec::directory::open(full);
        if (opened) {
            result_.workspace = std::move(*opened);
            return true;
        }
        const std::string& why = opened.error().message;
        if (survey()) {
            add("", "cwd", full, "missing", "the workspace root is not an accessible directory: " + why);
            return true;  // every other check still runs, and says what it could not see
        }
        result_.error = task_error{error_code::workspace_unavailable,
                                   "workspace root " + full + " is not available: " + why};
        return false;
    }

    void resolve_command(const action_spec& a, prepared_action& prepared) {
        if (a.isolation == isolation_mode::container) {
            add(a.name, "executable", a.command, "unchecked",
                "runs inside the image; the engine reports it when the container starts");
            return;
        }
        if (auto path = resolve_executable(a.command, settings_.search_path)) {
            prepared.executable = *path;
            if (exec::is_executable_file(*path))
                add(a.name, "executable", *path, "ok", "a regular executable file");
            else
                add(a.name, "executable", *path, "missing", "not a regular executable file");
        } else {
            prepared.executable_error = path.error().message;
            add(a.name, "executable", a.command, "missing", prepared.executable_error);
        }
    }

    // Strict: every host action's bare command name must resolve in PATH. An absolute path
    // is only checked when its task starts (an earlier task may create it), and a container
    // action's command runs inside its image.
    bool resolve_commands() {
        std::vector<missing_command> missing;
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            prepared_action& prepared = result_.actions[proc.action_index];
            if (a.isolation == isolation_mode::container || !prepared.executable_error.empty() ||
                !prepared.executable.empty())
                continue;
            resolve_command(a, prepared);
            if (!prepared.executable_error.empty()) missing.push_back({&a, prepared.executable_error});
        }
        if (missing.empty()) return true;
        result_.error = missing_commands_error(missing, result_.workspace_path);
        result_.error->message += "; nothing was run";
        return false;
    }

    void short_secret_warning(const action_spec& a, const std::string& what) {
        diagnostics d;
        d.warning(
            "secret_too_short_to_redact", "spec.actions." + a.name + ".env." + what.substr(0, what.find(' ')),
            "action \"" + a.name + "\": the secret " + what + " is shorter than " +
                std::to_string(limits::min_redactable_secret_bytes) +
                " bytes: every occurrence of it in output and errors becomes [REDACTED]",
            "use a longer secret, or {env: NAME, secret: false} for a host variable that is not a secret");
        result_.warnings.push_back(d.items().front());
    }

    // Survey: the script an interpreter is given (`python3 analyze.py`), beneath the action's
    // cwd, is a regular file (looked at, never read); what it needs itself is not checked.
    void check_script(const action_spec& a) {
        if (!survey()) return;
        script_argument arg = find_script(a.command, a.args);
        if (arg.kind == script_argument::kind_t::module)
            return report_.unverified(
                a.name, "module",
                "Python modules named by -m (" + arg.text + ") are not imported or checked");
        if (arg.kind == script_argument::kind_t::inline_code)
            return report_.unverified(a.name, "code", "inline code (" + arg.text + ") is not checked");
        if (arg.kind == script_argument::kind_t::none) return;
        if (a.isolation == isolation_mode::container)
            return report_.unverified(a.name, "script", "the script " + arg.text + " runs inside the image");
        if (arg.text.find("${{") != std::string::npos) {
            add(a.name, "script", arg.text, "unchecked", "rendered per task");
        } else if (auto why = script_problem(a, arg.text)) {
            add(a.name, "script", arg.text, "missing", *why);
        } else {
            add(a.name, "script", arg.text, "ok", "a regular file (not read)");
        }
        report_.unverified(a.name, "script-dependencies",
                           "what " + arg.text +
                               " needs itself (its imports, helper-internal files and tools) is not checked");
    }

    // Why `script` (relative to the action's cwd, or absolute) is not a readable regular file.
    std::optional<std::string> script_problem(const action_spec& a, const std::string& script) {
        std::optional<exec::directory> base;
        std::string relative = script;
        if (!script.empty() && script.front() == '/') {
            auto root = exec::directory::open("/");
            if (!root) return "the root folder cannot be opened";
            base = std::move(*root);
            relative = script.substr(1);
        } else {
            if (!result_.workspace) return "the workspace root is missing";
            std::string cwd = a.cwd ? *a.cwd : ".";
            if (cwd.find("${{") != std::string::npos) return std::nullopt;  // said by the cwd check
            auto dir = result_.workspace->open_beneath(cwd);
            if (!dir) return "its folder: " + dir.error().message;
            base = std::move(*dir);
        }
        exec::file_read r = exec::read_file_beneath(*base, relative, 0, /*content=*/false);
        switch (r.problem) {
            case exec::read_problem::none:
                return std::nullopt;
            case exec::read_problem::missing:
                return "no such file beneath " + base->path();
            case exec::read_problem::escapes:
                return "it leads out of " + base->path();
            case exec::read_problem::not_regular:
                return "not a regular file";
            default:
                return "cannot be opened: " + r.detail;
        }
    }

    void check_cwd(const action_spec& a) {
        if (!survey() || !a.cwd) return;  // a run opens each task's cwd when the task starts
        std::string cwd = *a.cwd;
        if (cwd.find("${{") != std::string::npos) {
            add(a.name, "cwd", cwd, "unchecked", "rendered per task");
            return;
        }
        if (!result_.workspace) {
            add(a.name, "cwd", cwd, "missing", "the workspace root is missing");
            return;
        }
        if (auto opened = result_.workspace->open_beneath(cwd); !opened) {
            add(a.name, "cwd", cwd, "missing", opened.error().message);
            return;
        }
        add(a.name, "cwd", cwd, "ok", "a directory beneath the workspace root");
    }

    void survey_env(const action_spec& a, const env_entry& e) {
        const env_source& s = e.source;
        switch (s.kind) {
            case env_source::kind_t::value:
                add(a.name, "env", e.name, "ok", "a literal value");
                return;
            case env_source::kind_t::env:
                if (auto v = settings_.host_env ? settings_.host_env(s.text) : std::nullopt) {
                    if (s.is_secret() && !v->empty() && v->size() < limits::min_redactable_secret_bytes)
                        add(a.name, "env", e.name, "weak",
                            "from agentctl's environment variable " + s.text + ", whose value is " +
                                std::to_string(v->size()) + (v->size() == 1 ? " byte" : " bytes") +
                                ": too short to redact without destroying output; use a longer secret, or "
                                "{env: " +
                                s.text + ", secret: false} if it is not one",
                            /*blocking=*/false);
                    else
                        add(a.name, "env", e.name, "ok", "from agentctl's environment variable " + s.text);
                } else
                    add(a.name, "env", e.name, "missing",
                        "agentctl's environment variable " + s.text + " is not set");
                return;
            case env_source::kind_t::file: {
                if (!result_.workspace) {
                    add(a.name, "env", e.name, "missing",
                        "the secret file " + s.text + ": the workspace root is missing");
                    return;
                }
                if (auto read = read_secret_file(env_context(), s.text, /*content=*/false))
                    add(a.name, "env", e.name, "ok", "the secret file " + s.text + " is readable (not read)");
                else
                    add(a.name, "env", e.name, "missing",
                        "the secret file " + s.text + ": " + read.error().message);
                return;
            }
            case env_source::kind_t::process: {
                if (auto path = resolve_executable(s.process.command, settings_.search_path))
                    add(a.name, "env", e.name, "ok",
                        "the secret helper " + *path + " is executable (not run)");
                else
                    add(a.name, "env", e.name, "missing",
                        "the secret helper " + s.process.command + ": " + path.error().message);
                return;
            }
        }
    }

    const plan& plan_;
    const preflight_settings& settings_;
    preflight_result result_;
    preflight_report report_;
    container::engine_chooser engines_;
};

}  // namespace

std::string doctor_check_name(const std::string& action, std::string_view kind, const std::string& subject) {
    if (kind == "executable") return "process:" + action + ":command";
    if (kind == "env") return "process:" + action + ":env:" + subject;
    if (kind == "engine") return "container:" + action;
    if (kind == "cwd" && action.empty()) return "workspace";
    if (kind == "backend" && action.empty()) return "backend:" + subject;
    return "process:" + action + ":" + std::string(kind);
}

std::string doctor_status(std::string_view kind, std::string_view status) {
    if (status == "ok") return "present";
    if (status != "missing") return std::string(status);
    if (kind == "executable") return "missing_or_not_executable";
    if (kind == "script") return "missing_or_not_file";
    if (kind == "cwd") return "missing_or_denied";
    return "missing";
}

asio::awaitable<preflight_result> run_preflight(const plan& p, const preflight_settings& settings) {
    preflight pf(p, settings);
    co_return co_await pf.run();
}

std::optional<task_error> missing_commands(const plan& p, std::string_view search_path,
                                           const std::string& base_dir) {
    std::vector<missing_command> missing;
    for (const auto& proc : p.processes) {
        const action_spec& a = p.actions[proc.action_index];
        if (a.isolation == isolation_mode::container) continue;
        if (auto path = resolve_executable(a.command, search_path); !path)
            if (path.error().code == error_code::executable_not_found)
                missing.push_back({&a, path.error().message});
    }
    if (missing.empty()) return std::nullopt;
    const std::string& root = p.policy.workspace_root;
    return missing_commands_error(missing, !root.empty() && root[0] == '/' ? root : base_dir + "/" + root);
}

}  // namespace agentctl
