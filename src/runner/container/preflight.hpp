// The container backend's part of the preflight.
#pragma once

#include "runner/container/argv.hpp"
#include "runner/preflight_report.hpp"

#include <agentctl/plan.hpp>

#include <boost/asio/awaitable.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace agentctl::container {

/// Picks the engine of each container action; asks each engine about each image once.
class engine_chooser {
public:
    /// Candidates in the plan's order (`auto`: Docker, then Podman). Strict: the first that
    /// has the pinned image, or the run stops (isolation_unavailable). Survey: every candidate
    /// is asked and reported; with `auto`, one that has the image makes the others
    /// non-blocking. Cancellable between candidates, and during an engine's answer.
    boost::asio::awaitable<std::optional<choice>> choose(const plan_process& proc, const action_spec& a,
                                                         const preflight_settings& settings,
                                                         preflight_report& report);

private:
    std::map<std::pair<std::string, std::string>, image_probe> probed_;  // (engine path, image)
};

}  // namespace agentctl::container
