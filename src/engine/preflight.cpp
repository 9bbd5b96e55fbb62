// The preflight, strict and survey (docs/DESIGN.md, "Preflight").
#include "engine/preflight.hpp"

#include "engine/container_client.hpp"
#include "exec/host.hpp"
#include "slurm/command.hpp"

#include <boost/asio/this_coro.hpp>

#include <iterator>
#include <map>

namespace asio = boost::asio;

namespace agentctl {
namespace {

bool cancelled(asio::cancellation_type t) {
    return t != asio::cancellation_type::none;
}

class preflight {
public:
    preflight(const plan& p, const preflight_settings& s) : plan_(p), settings_(s) {
        result_.actions.resize(p.actions.size());
    }

    asio::awaitable<preflight_result> run() {
        if (!open_workspace()) co_return std::move(result_);
        // The backend before any environment: a run that cannot reach Slurm runs no secret
        // helper either.
        if (settings_.backend == backend_kind::slurm) {
            co_await check_slurm();
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
            check_cwd(a);
            if (survey()) {
                // Doctor reports each action's checks together, engines included.
                for (const auto& e : a.env) survey_env(a, e);
                if (a.isolation == isolation_mode::container && a.container && !on_slurm())
                    co_await choose_engine(proc, a);
                continue;
            }
            prepared.environment = co_await resolve_environment(a.env, env_context());
            for (const auto& weak : prepared.environment.short_secrets) short_secret_warning(a, weak);
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
            co_await choose_engine(proc, a);
            if (result_.error) co_return std::move(result_);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled()))
                co_return std::move(result_);
        }
        co_return std::move(result_);
    }

private:
    bool survey() const { return settings_.mode == preflight_mode::survey; }
    bool on_slurm() const { return settings_.backend == backend_kind::slurm; }

    // Strict: the first problem stops the run. Survey: reported, and the checks go on.
    void slurm_problem(error_code code, std::string action, std::string subject, std::string status,
                       std::string detail, std::string message) {
        add(std::move(action), "backend", std::move(subject), std::move(status), std::move(detail));
        if (!survey() && !result_.error)
            result_.error =
                task_error{code, "the Slurm backend cannot run this workflow: " + std::move(message) +
                                     "; nothing was run"};
    }

    // docs/DESIGN.md, "Slurm backend": what is refused, the commands, `scontrol ping`, the
    // partitions (or the default one), each call bounded.
    asio::awaitable<void> check_slurm() {
        if (auto e = slurm_options_error(settings_.slurm); !e.empty()) {
            slurm_problem(error_code::invalid_request, "", "options", "unavailable", e, e);
            if (!survey()) co_return;
        }
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            if (a.isolation == isolation_mode::container) {
                std::string why =
                    "isolation: container is not supported on the Slurm backend; run this "
                    "workflow with --backend local";
                slurm_problem(error_code::backend_unavailable, a.name, "isolation: container", "unavailable",
                              why, "action \"" + a.name + "\" has " + why);
                if (!survey()) co_return;
                continue;
            }
            for (const auto& e : a.env) {
                std::string why = slurm::env_name_error(e.name);
                if (why.empty()) continue;
                add(a.name, "env", e.name, "unavailable", why);
                if (!survey() && !result_.error)
                    result_.error = task_error{error_code::engine_variable_not_allowed,
                                               "action \"" + a.name + "\": " + why + "; nothing was run"};
                if (!survey()) co_return;
            }
        }
        slurm::tools tools;
        std::string* slots[] = {&tools.srun, &tools.squeue, &tools.scancel, &tools.scontrol, &tools.sinfo};
        std::vector<std::string> missing;
        for (std::size_t i = 0; i < std::size(slurm::tool_names); ++i) {
            std::string name(slurm::tool_names[i]), error;
            if (auto path = slurm::find_tool(name, settings_.search_path, error)) {
                *slots[i] = *path;
                add("", "backend", name, "ok", *path);
            } else {
                missing.push_back(name);
                add("", "backend", name, "missing", error);
            }
        }
        if (!missing.empty()) {
            std::string list;
            for (std::size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
            if (!survey())
                result_.error = task_error{error_code::backend_unavailable,
                                           "the Slurm backend is unavailable: " + list +
                                               " not found in agentctl's PATH (" + settings_.search_path +
                                               "); install the Slurm client commands; nothing was run"};
            co_return;
        }
        auto env = slurm::client_environment(settings_.host_env, {});

        // The controller: `scontrol ping` fails in milliseconds when nothing listens.
        process_result ping = co_await slurm::call(slurm::scontrol_ping(tools.scontrol), env, true);
        if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return;
        bool up = ping.outcome == process_outcome::exited && ping.exit_code == 0 &&
                  slurm::ping_says_up(ping.stdout_bytes);
        std::string said = slurm::excerpt(ping.stdout_bytes + " " + ping.stderr_bytes);
        if (!up) {
            std::string detail = tools.scontrol + " ping: " + slurm::describe(ping) + ": " + said;
            add("", "backend", "controller", "unavailable", detail);
            if (!survey())
                result_.error =
                    task_error{error_code::backend_unavailable,
                               "the Slurm backend is unavailable: the controller did not answer (" + detail +
                                   "); nothing was run"};
            co_return;
        }
        add("", "backend", "controller", "ok", tools.scontrol + " ping: " + said);

        // The partitions named, or the cluster's default one.
        std::vector<std::string> partitions = slurm::split_partitions(settings_.slurm.partition);
        if (partitions.empty()) {
            process_result all = co_await slurm::call(slurm::sinfo_partitions(tools.sinfo), env, true);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return;
            std::optional<std::string> def;
            if (all.outcome == process_outcome::exited && all.exit_code == 0)
                def = slurm::default_partition(all.stdout_bytes);
            if (!def) {
                std::string detail =
                    all.outcome == process_outcome::exited && all.exit_code == 0
                        ? "the cluster has no default partition; name one with --slurm-partition"
                        : tools.sinfo + ": " + slurm::describe(all) + ": " + slurm::excerpt(all.stderr_bytes);
                slurm_problem(error_code::backend_unavailable, "", "partition", "unavailable", detail,
                              detail);
                co_return;
            }
            partitions.push_back(*def);
        }
        bool any_up = false;
        std::vector<std::string> down;
        for (const auto& name : partitions) {
            process_result r = co_await slurm::call(slurm::sinfo_partition(tools.sinfo, name), env, true);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return;
            std::string subject = "partition " + name;
            if (r.outcome != process_outcome::exited || r.exit_code != 0) {
                std::string detail = tools.sinfo + " --partition=" + name + ": " + slurm::describe(r) + ": " +
                                     slurm::excerpt(r.stderr_bytes);
                slurm_problem(error_code::backend_unavailable, "", subject, "unavailable", detail, detail);
                if (!survey()) co_return;
                continue;
            }
            slurm::partition_status st = slurm::parse_partition(r.stdout_bytes, name);
            if (!st.found) {
                std::string detail = "partition \"" + name + "\" does not exist (sinfo --partition=" + name +
                                     " listed nothing)";
                slurm_problem(error_code::backend_unavailable, "", subject, "missing", detail, detail);
                if (!survey()) co_return;
                continue;
            }
            if (!st.up) {
                down.push_back(name);
                add("", "backend", subject, "unavailable",
                    "partition \"" + name + "\" is not up: " + slurm::excerpt(r.stdout_bytes));
                continue;
            }
            any_up = true;
            add("", "backend", subject, "ok",
                std::string("partition \"") + name + "\" is up" + (st.is_default ? " (the default)" : ""));
        }
        if (!any_up) {
            std::string list;
            for (std::size_t i = 0; i < down.size(); ++i) list += (i ? ", " : "") + down[i];
            if (!survey() && !result_.error)
                result_.error = task_error{error_code::backend_unavailable,
                                           "the Slurm backend cannot run this workflow: no partition of " +
                                               list + " is up; nothing was run"};
            co_return;
        }
        if (!survey() && !result_.error) result_.slurm = std::move(tools);
    }

    void add(std::string action, std::string check, std::string subject, std::string status,
             std::string detail, bool blocking = true) {
        if (!survey()) return;
        result_.checks.push_back(doctor_check{std::move(action), std::move(check), std::move(subject),
                                              std::move(status), std::move(detail), blocking});
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
        std::string error;
        result_.workspace = exec::directory::open(full, error);
        if (result_.workspace) return true;
        if (survey()) {
            add("", "cwd", full, "missing", "the workspace root is not an accessible directory: " + error);
            return true;  // every other check still runs, and says what it could not see
        }
        result_.error = task_error{error_code::workspace_unavailable,
                                   "workspace root " + full + " is not available: " + error};
        return false;
    }

    void resolve_command(const action_spec& a, prepared_action& prepared) {
        if (a.isolation == isolation_mode::container) {
            add(a.name, "executable", a.command, "unchecked",
                "runs inside the image; the engine reports it when the container starts");
            return;
        }
        std::string error;
        if (auto path = resolve_executable(a.command, settings_.search_path, error)) {
            prepared.executable = *path;
            std::string why;
            if (exec::is_executable_file(*path, why))
                add(a.name, "executable", *path, "ok", "a regular executable file");
            else
                add(a.name, "executable", *path, "missing", "not a regular executable file");
        } else {
            prepared.executable_error = error;
            add(a.name, "executable", a.command, "missing", error);
        }
    }

    // Strict: every host action's bare command name must resolve in PATH. An absolute path
    // is only checked when its task starts (an earlier task may create it), and a container
    // action's command runs inside its image.
    bool resolve_commands() {
        std::vector<std::string> missing;
        std::string search_note;
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            prepared_action& prepared = result_.actions[proc.action_index];
            if (a.isolation == isolation_mode::container || !prepared.executable_error.empty() ||
                !prepared.executable.empty())
                continue;
            resolve_command(a, prepared);
            if (prepared.executable_error.empty()) continue;
            // "command 'x' was not found in PATH (DIRS)": the PATH is said once for all.
            std::string why = prepared.executable_error;
            constexpr std::string_view marker = " was not found in PATH (";
            if (auto at = why.find(marker); at != std::string::npos && why.back() == ')') {
                if (search_note.empty())
                    search_note =
                        "PATH is " + why.substr(at + marker.size(), why.size() - at - marker.size() - 1);
                why = why.substr(0, at) + " was not found in PATH";
            }
            missing.push_back("action \"" + a.name + "\": " + why);
        }
        if (missing.empty()) return true;
        std::string message =
            missing.size() == 1 ? missing[0] : std::to_string(missing.size()) + " executables are missing: ";
        if (missing.size() > 1)
            for (std::size_t i = 0; i < missing.size(); ++i) message += (i ? "; " : "") + missing[i];
        if (!search_note.empty()) message += " (" + search_note + ")";
        message += "; nothing was run";
        result_.error = task_error{error_code::executable_not_found, std::move(message)};
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

    void check_cwd(const action_spec& a) {
        if (!survey()) return;  // a run opens each task's cwd when the task starts
        std::string cwd = a.cwd ? *a.cwd : ".";
        if (cwd.find("${{") != std::string::npos) {
            add(a.name, "cwd", cwd, "unchecked", "rendered per task");
            return;
        }
        if (!result_.workspace) {
            add(a.name, "cwd", cwd, "missing", "the workspace root is missing");
            return;
        }
        std::string error;
        if (!result_.workspace->open_beneath(cwd, error)) {
            add(a.name, "cwd", cwd, "missing", error);
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
                std::string error;
                if (read_secret_file(env_context(), s.text, error, /*content=*/false))
                    add(a.name, "env", e.name, "ok", "the secret file " + s.text + " is readable (not read)");
                else
                    add(a.name, "env", e.name, "missing", "the secret file " + s.text + ": " + error);
                return;
            }
            case env_source::kind_t::process: {
                std::string error;
                if (auto path = resolve_executable(s.process.command, settings_.search_path, error))
                    add(a.name, "env", e.name, "ok",
                        "the secret helper " + *path + " is executable (not run)");
                else
                    add(a.name, "env", e.name, "missing",
                        "the secret helper " + s.process.command + ": " + error);
                return;
            }
        }
    }

    // Candidates in the plan's order (`auto`: Docker, then Podman). Strict: the first that has
    // the pinned image, or the run fails closed. Survey: every candidate is asked and
    // reported; with `auto`, one that has the image makes the others non-blocking.
    asio::awaitable<void> choose_engine(const plan_process& proc, const action_spec& a) {
        const container_spec& spec = *a.container;
        std::vector<std::string> tried;
        bool any_engine = false, any_ok = false;
        std::size_t first_check = result_.checks.size();
        for (const auto& name : proc.engines) {
            std::string error;
            auto eng = container::find_engine(name, settings_.search_path, error);
            if (eng && eng->name == "podman") {
                auto tini = container::find_static_tini(settings_.search_path, error);
                if (tini)
                    eng->init_path = *tini;
                else
                    eng.reset();
            }
            if (!eng) {
                tried.push_back(error);
                add(a.name, "engine", name, "unavailable", error);
                continue;
            }
            any_engine = true;
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) {
                add(a.name, "engine", name, "unchecked", "cancelled before " + eng->path + " was asked");
                continue;
            }
            auto key = std::make_pair(eng->path, spec.image);
            auto known = probed_.find(key);
            if (known == probed_.end())
                known =
                    probed_
                        .emplace(key, co_await container::probe_image(*eng, spec.image, settings_.host_env))
                        .first;
            const container::image_probe& probe = known->second;
            if (probe.ok) {
                any_ok = true;
                add(a.name, "engine", name, "ok",
                    eng->path + " has the pinned image " + spec.image +
                        (probe.image_id == spec.image ? "" : " (" + probe.image_id + ")"));
                if (!survey()) {
                    result_.actions[proc.action_index].container = container_choice{*eng, probe.image_id};
                    co_return;
                }
            } else {
                tried.push_back(probe.message);
                add(a.name, "engine", name, "unavailable",
                    probe.message + "; start the engine and load the pinned image (agentctl never pulls)");
            }
        }
        if (survey()) {
            if (any_ok)
                for (std::size_t i = first_check; i < result_.checks.size(); ++i)
                    result_.checks[i].blocking = false;
            co_return;
        }
        // The run sees its own cancellation and marks every task cancelled.
        if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return;
        std::string label = spec.runtime == engine_choice::docker   ? "Docker"
                            : spec.runtime == engine_choice::podman ? "Podman"
                                                                    : "Docker or Podman";
        std::string why =
            any_engine ? label + " on linux: " : label + " container runtime was not found on linux: ";
        for (std::size_t i = 0; i < tried.size(); ++i) why += (i ? "; " : "") + tried[i];
        while (!why.empty() && why.back() == '.') why.pop_back();
        result_.error =
            task_error{error_code::isolation_unavailable,
                       "requested process isolation is unavailable for action \"" + a.name + "\" (image " +
                           spec.image + "): " + why +
                           ". Nothing was run: agentctl never pulls an image and never runs a container "
                           "action on the host"};
    }

    const plan& plan_;
    const preflight_settings& settings_;
    preflight_result result_;
    std::map<std::pair<std::string, std::string>, container::image_probe> probed_;  // (engine path, image)
};

}  // namespace

asio::awaitable<preflight_result> run_preflight(const plan& p, const preflight_settings& settings) {
    preflight pf(p, settings);
    co_return co_await pf.run();
}

}  // namespace agentctl
