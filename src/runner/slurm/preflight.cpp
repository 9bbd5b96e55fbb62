// The Slurm backend's part of the preflight (docs/DESIGN.md, "Slurm backend"): what it refuses,
// its commands, the controller and the partitions, before any secret helper runs.
#include "runner/slurm/preflight.hpp"

#include "runner/slurm/client.hpp"
#include "runner/slurm/command.hpp"

#include <boost/asio/this_coro.hpp>

#include <iterator>

namespace asio = boost::asio;

namespace agentctl::slurm {
namespace {

bool cancelled(asio::cancellation_type t) {
    return t != asio::cancellation_type::none;
}

class backend_check {
public:
    backend_check(const plan& p, const preflight_settings& s, preflight_report& report)
        : plan_(p), settings_(s), report_(report) {}

    bool survey() const { return report_.survey(); }

    void add(std::string action, std::string check, std::string subject, std::string status,
             std::string detail) {
        report_.check(std::move(action), std::move(check), std::move(subject), std::move(status),
                      std::move(detail));
    }

    // Strict: the first problem stops the run. Survey: reported, and the checks go on.
    void slurm_problem(error_code code, std::string action, std::string subject, std::string status,
                       std::string detail, std::string message) {
        add(std::move(action), "backend", std::move(subject), std::move(status), std::move(detail));
        report_.stop(task_error{
            code, "the Slurm backend cannot run this workflow: " + std::move(message) + "; nothing was run"});
    }

    // docs/DESIGN.md, "Slurm backend": what is refused, the commands, `scontrol ping`, the
    // partitions (or the default one), each call bounded.
    asio::awaitable<std::optional<tools>> run() {
        if (auto e = slurm_options_error(settings_.slurm); !e.empty()) {
            slurm_problem(error_code::invalid_request, "", "options", "unavailable", e, e);
            if (!survey()) co_return std::nullopt;
        }
        for (const auto& proc : plan_.processes) {
            const action_spec& a = plan_.actions[proc.action_index];
            if (a.isolation == isolation_mode::container) {
                std::string why =
                    "isolation: container is not supported on the Slurm backend; run this "
                    "workflow with --backend local";
                slurm_problem(error_code::backend_unavailable, a.name, "isolation: container", "unavailable",
                              why, "action \"" + a.name + "\" has " + why);
                if (!survey()) co_return std::nullopt;
                continue;
            }
            for (const auto& e : a.env) {
                std::string why = env_name_error(e.name);
                if (why.empty()) continue;
                add(a.name, "env", e.name, "unavailable", why);
                report_.stop(task_error{error_code::engine_variable_not_allowed,
                                        "action \"" + a.name + "\": " + why + "; nothing was run"});
                if (!survey()) co_return std::nullopt;
            }
        }
        tools tools;
        std::string* slots[] = {&tools.srun, &tools.squeue, &tools.scancel, &tools.scontrol, &tools.sinfo};
        std::vector<std::string> missing;
        for (std::size_t i = 0; i < std::size(tool_names); ++i) {
            std::string name(tool_names[i]);
            if (auto path = find_tool(name, settings_.search_path)) {
                *slots[i] = *path;
                add("", "backend", name, "ok", *path);
            } else {
                missing.push_back(name);
                add("", "backend", name, "missing", path.error().message);
            }
        }
        if (!missing.empty()) {
            std::string list;
            for (std::size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
            report_.stop(task_error{error_code::backend_unavailable,
                                    "the Slurm backend is unavailable: " + list +
                                        " not found in agentctl's PATH (" + settings_.search_path +
                                        "); install the Slurm client commands; nothing was run"});
            co_return std::nullopt;
        }
        auto env = client_environment(settings_.host_env, {});
        bool in_allocation = settings_.on_slurm_tools_found && settings_.on_slurm_tools_found(tools);

        // The controller: `scontrol ping` fails in milliseconds when nothing listens.
        process_result ping = co_await call(scontrol_ping(tools.scontrol), env, true);
        if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return std::nullopt;
        bool up =
            ping.outcome == process_outcome::exited && ping.exit_code == 0 && ping_says_up(ping.stdout_bytes);
        std::string said = excerpt(std::string(ping.stdout_bytes) + " " + std::string(ping.stderr_bytes));
        if (!up) {
            if (settings_.on_slurm_controller_down) settings_.on_slurm_controller_down();
            std::string detail = tools.scontrol + " ping: " + describe(ping) + ": " + said;
            add("", "backend", "controller", "unavailable", detail);
            report_.stop(task_error{error_code::backend_unavailable,
                                    "the Slurm backend is unavailable: the controller did not answer (" +
                                        detail + "); nothing was run"});
            co_return std::nullopt;
        }
        add("", "backend", "controller", "ok", tools.scontrol + " ping: " + said);

        // The partitions named, or the cluster's default one. Inside an allocation with none
        // named, the worker steps run in the allocation whatever the default is: no `sinfo`
        // (one controller call less, and its CPU off the step's start: docs/SLURM.md, section 13).
        std::vector<std::string> partitions = split_partitions(settings_.slurm.partition);
        if (in_allocation && partitions.empty()) {
            add("", "backend", "partition", "ok",
                "the run's steps go to the allocation agentctl runs in; no partition is chosen");
            co_return tools;
        }
        // The listing that found the default partition also says whether it is up: no second
        // sinfo for it (each Slurm call costs a run's start ~10 ms, docs/SLURM.md, section 13).
        std::optional<process_result> listing;
        if (partitions.empty()) {
            process_result all = co_await call(sinfo_partitions(tools.sinfo), env, true);
            if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return std::nullopt;
            std::optional<std::string> def;
            if (all.outcome == process_outcome::exited && all.exit_code == 0)
                def = default_partition(all.stdout_bytes);
            if (!def) {
                std::string detail =
                    all.outcome == process_outcome::exited && all.exit_code == 0
                        ? "the cluster has no default partition; name one with --slurm-partition"
                        : tools.sinfo + ": " + describe(all) + ": " + excerpt(all.stderr_bytes);
                slurm_problem(error_code::backend_unavailable, "", "partition", "unavailable", detail,
                              detail);
                co_return std::nullopt;
            }
            partitions.push_back(*def);
            listing = std::move(all);
        }
        bool any_up = false;
        std::vector<std::string> down;
        for (const auto& name : partitions) {
            process_result r;
            if (listing) {
                r = *listing;
            } else {
                r = co_await call(sinfo_partition(tools.sinfo, name), env, true);
                if (cancelled((co_await asio::this_coro::cancellation_state).cancelled()))
                    co_return std::nullopt;
            }
            std::string subject = "partition " + name;
            if (r.outcome != process_outcome::exited || r.exit_code != 0) {
                std::string detail = tools.sinfo + " --partition=" + name + ": " + describe(r) + ": " +
                                     excerpt(r.stderr_bytes);
                slurm_problem(error_code::backend_unavailable, "", subject, "unavailable", detail, detail);
                if (!survey()) co_return std::nullopt;
                continue;
            }
            partition_status st = parse_partition(r.stdout_bytes, name);
            if (!st.found) {
                std::string detail = "partition \"" + name + "\" does not exist (sinfo --partition=" + name +
                                     " listed nothing)";
                slurm_problem(error_code::backend_unavailable, "", subject, "missing", detail, detail);
                if (!survey()) co_return std::nullopt;
                continue;
            }
            if (!st.up) {
                down.push_back(name);
                add("", "backend", subject, "unavailable",
                    "partition \"" + name + "\" is not up: " + excerpt(r.stdout_bytes));
                continue;
            }
            any_up = true;
            add("", "backend", subject, "ok",
                std::string("partition \"") + name + "\" is up" + (st.is_default ? " (the default)" : ""));
        }
        if (!any_up) {
            std::string list;
            for (std::size_t i = 0; i < down.size(); ++i) list += (i ? ", " : "") + down[i];
            report_.stop(task_error{error_code::backend_unavailable,
                                    "the Slurm backend cannot run this workflow: no partition of " + list +
                                        " is up; nothing was run"});
            co_return std::nullopt;
        }
        if (survey() || report_.stopped()) co_return std::nullopt;
        co_return tools;
    }

private:
    const plan& plan_;
    const preflight_settings& settings_;
    preflight_report& report_;
};

}  // namespace

asio::awaitable<std::optional<tools>> check_backend(const plan& p, const preflight_settings& settings,
                                                    preflight_report& report) {
    backend_check check(p, settings, report);
    co_return co_await check.run();
}

}  // namespace agentctl::slurm
