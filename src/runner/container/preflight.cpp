// The container backend's part of the preflight (docs/DESIGN.md, "Containers"): which engine
// runs each container action, with exactly which image. Never pulls.
#include "runner/container/preflight.hpp"

#include "runner/container/client.hpp"

#include <boost/asio/this_coro.hpp>

namespace asio = boost::asio;

namespace agentctl::container {
namespace {

bool cancelled(asio::cancellation_type t) {
    return t != asio::cancellation_type::none;
}

}  // namespace

// Candidates in the plan's order (`auto`: Docker, then Podman). Strict: the first that has
// the pinned image, or the run fails closed. Survey: every candidate is asked and
// reported; with `auto`, one that has the image makes the others non-blocking.
asio::awaitable<std::optional<choice>> engine_chooser::choose(const plan_process& proc, const action_spec& a,
                                                              const preflight_settings& settings,
                                                              preflight_report& report) {
    const container_spec& spec = *a.container;
    std::vector<std::string> tried;
    bool any_engine = false, any_ok = false;
    std::size_t first_check = report.checks().size();
    for (const auto& name : proc.engines) {
        auto eng = find_engine(name, settings.search_path);
        if (eng && eng->name == "podman") {
            if (auto tini = find_static_tini(settings.search_path))
                eng->init_path = *tini;
            else
                eng = tini.error();
        }
        if (!eng) {
            tried.push_back(eng.error().message);
            report.check(a.name, "engine", name, "unavailable", eng.error().message);
            continue;
        }
        any_engine = true;
        if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) {
            report.check(a.name, "engine", name, "unchecked", "cancelled before " + eng->path + " was asked");
            continue;
        }
        auto key = std::make_pair(eng->path, spec.image);
        auto known = probed_.find(key);
        if (known == probed_.end())
            known = probed_.emplace(key, co_await probe_image(*eng, spec.image, settings.host_env)).first;
        const image_probe& probe = known->second;
        if (probe.ok) {
            any_ok = true;
            report.check(a.name, "engine", name, "ok",
                         eng->path + " has the pinned image " + spec.image +
                             (probe.image_id == spec.image ? "" : " (" + probe.image_id + ")"));
            if (!report.survey()) co_return choice{*eng, probe.image_id};
        } else {
            tried.push_back(probe.message);
            report.check(
                a.name, "engine", name, "unavailable",
                probe.message + "; start the engine and load the pinned image (agentctl never pulls)");
        }
    }
    if (report.survey()) {
        if (any_ok)
            for (std::size_t i = first_check; i < report.checks().size(); ++i)
                report.checks()[i].blocking = false;
        co_return std::nullopt;
    }
    // The run sees its own cancellation and marks every task cancelled.
    if (cancelled((co_await asio::this_coro::cancellation_state).cancelled())) co_return std::nullopt;
    std::string label = spec.runtime == engine_choice::docker   ? "Docker"
                        : spec.runtime == engine_choice::podman ? "Podman"
                                                                : "Docker or Podman";
    std::string why =
        any_engine ? label + " on linux: " : label + " container runtime was not found on linux: ";
    for (std::size_t i = 0; i < tried.size(); ++i) why += (i ? "; " : "") + tried[i];
    while (!why.empty() && why.back() == '.') why.pop_back();
    report.stop(task_error{error_code::isolation_unavailable,
                           "requested process isolation is unavailable for action \"" + a.name +
                               "\" (image " + spec.image + "): " + why +
                               ". Nothing was run: agentctl never pulls an image and never runs a container "
                               "action on the host"});
    co_return std::nullopt;
}

}  // namespace agentctl::container
