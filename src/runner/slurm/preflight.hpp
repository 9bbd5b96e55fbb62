// The Slurm backend's part of the preflight.
#pragma once

#include "runner/preflight_report.hpp"
#include "runner/slurm/client.hpp"

#include <agentctl/plan.hpp>

#include <boost/asio/awaitable.hpp>

#include <optional>

namespace agentctl::slurm {

/// Before any secret helper runs: the Slurm options, container actions refused, declared
/// names srun would read as its own, the five commands in agentctl's PATH, `scontrol ping`,
/// the partitions named (or the default one) up. Each is a check (survey); the first problem
/// stops the run (strict). The commands when every check passed (strict only).
boost::asio::awaitable<std::optional<tools>> check_backend(const plan& p, const preflight_settings& settings,
                                                           preflight_report& report);

}  // namespace agentctl::slurm
