// The containers that dead runs left: on the engines a run uses, before it starts, and on every
// engine in the PATH for `runs gc` (docs/CRASH_SAFETY.md).
#include <agentctl/leftovers.hpp>

#include "runner/completion.hpp"
#include "runner/container/client.hpp"
#include "runner/container/launcher.hpp"

#include <algorithm>

namespace asio = boost::asio;

namespace agentctl {
namespace {

asio::awaitable<container_leftover_report> remove_container_leftovers(container_leftover_options options) {
    container_leftover_report report;
    for (const char* name : {"docker", "podman"}) {
        auto e = container::find_engine(name, options.search_path);
        if (!e) continue;
        report.engines.emplace_back(name);
        auto swept = co_await container::remove_dead_owners_containers(
            *e, container::client_environment(options.host_env));
        if (!swept.list_error.empty()) report.unlisted.push_back(std::move(swept.list_error));
        for (auto& c : swept.containers) report.containers.push_back(std::move(c));
    }
    co_return report;
}

}  // namespace

asio::awaitable<std::vector<swept_container>> container::remove_dead_owners(
    const std::vector<std::optional<choice>>& choices, const host_environment& host_env) {
    std::vector<swept_container> out;
    std::vector<std::string> seen;
    for (const auto& c : choices) {
        if (!c || std::find(seen.begin(), seen.end(), c->engine.path) != seen.end()) continue;
        seen.push_back(c->engine.path);
        auto removed = co_await remove_dead_owners_containers(c->engine, client_environment(host_env));
        for (auto& s : removed.containers) out.push_back(std::move(s));
    }
    co_return out;
}

namespace detail {

void async_remove_container_leftovers_impl(
    asio::any_io_executor ex, container_leftover_options options,
    asio::any_completion_handler<void(container_leftover_report)> handler) {
    complete_with(
        ex, remove_container_leftovers(std::move(options)), std::move(handler),
        [] {
            container_leftover_report r;
            r.unlisted.emplace_back("removing dead runs' containers failed unexpectedly");
            return r;
        },
        /*cancellable=*/false);
}

}  // namespace detail
}  // namespace agentctl
