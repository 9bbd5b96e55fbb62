// isolation: container (Docker or Podman).
#pragma once

#include "runner/container/argv.hpp"
#include "runner/launcher.hpp"

#include <agentctl/watchdog.hpp>

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace agentctl {

/// One engine client (`docker run` / `podman run`) per launch. `choices`: the strict
/// preflight's engine and image per action (indexed like plan::actions; empty for others).
std::unique_ptr<launcher> make_container_launcher(launch_context& ctx,
                                                  std::vector<std::optional<container::choice>> choices);

namespace container {
/// Before anything starts: what crashed runners left on the engines of `choices` (each asked
/// once), removed; each container found, removed or not.
boost::asio::awaitable<std::vector<swept_container>> remove_dead_owners(
    const std::vector<std::optional<choice>>& choices, const host_environment& host_env);
}  // namespace container

}  // namespace agentctl
