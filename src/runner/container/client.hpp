// Talking to a container engine client: finding it, bounded calls, the image check and the
// event log. The argument vectors and the parsing are pure (argv.hpp).
#pragma once

#include "runner/container/argv.hpp"

#include <agentctl/error.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentctl::container {

/// Finds `name` as a regular executable file in the absolute directories of `search_path`
/// (empty and relative entries skipped), and for podman also at /opt/podman/bin/podman; the
/// error says where it looked.
expected<engine> find_engine(std::string_view name, std::string_view search_path);

/// The static tini Podman's `--init-path` takes (engine::init_path): `tini-static` (Debian's
/// and Ubuntu's tini package) or `docker-init` (what Docker's packages ship for its --init) in
/// the absolute directories of `search_path`, else /usr/libexec/docker/docker-init. The error
/// says what is missing and how to get it.
expected<std::string> find_static_tini(std::string_view search_path);

/// Runs `<engine> args...` bounded by call_timeout and call_output_limit. Not cancellable
/// unless `cancellable` (then through the coroutine's cancellation state).
boost::asio::awaitable<process_result> call(const engine& e, std::vector<std::string> args,
                                            std::vector<std::string> env, bool cancellable = false);

/// `<engine> image inspect` of `reference` (NAME@sha256:D or sha256:ID), checked: the image
/// found must be the pinned one (its id, or a repo digest of that very name). Never pulls.
/// Cancellable through the coroutine's cancellation state.
boost::asio::awaitable<image_probe> probe_image(const engine& e, const std::string& reference,
                                                const host_environment& host_env);

/// Reads the event log for container `name` since `since` (bounded like every call).
boost::asio::awaitable<container_events> events_of(const engine& e, const std::string& name,
                                                   std::chrono::system_clock::time_point since,
                                                   std::vector<std::string> env);

/// What remove_dead_owners_containers did on one engine.
struct owners_sweep {
    std::vector<swept_container> containers;  ///< each container of a dead owner, removed or not
    std::string list_error;                   ///< why the engine could not list; empty if it did
};

/// Removes the containers on `e` whose owner (an agentctl on this host) is dead: what a
/// crashed runner left. Best effort, bounded like every call.
boost::asio::awaitable<owners_sweep> remove_dead_owners_containers(const engine& e,
                                                                   std::vector<std::string> env);

}  // namespace agentctl::container
