// The preflight, strict and survey (docs/DESIGN.md, "Preflight").
#include "engine/preflight.hpp"

#include "engine/container_client.hpp"
#include "exec/host.hpp"

#include <boost/asio/this_coro.hpp>

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
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            prepared_action& prepared = result_.actions[proc.action_index];
            resolve_command(a, prepared);
            check_cwd(a);
            if (survey()) {
                // Doctor reports each action's checks together, engines included.
                for (const auto& e : a.env) survey_env(a, e);
                if (a.isolation == isolation_mode::container && a.container) co_await choose_engine(proc, a);
                continue;
            }
            prepared.environment = co_await resolve_environment(a.env, env_context());
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
                if (settings_.host_env && settings_.host_env(s.text))
                    add(a.name, "env", e.name, "ok", "from agentctl's environment variable " + s.text);
                else
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
