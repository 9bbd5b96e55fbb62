// The runner used when the application gives none: host processes and containers.
#pragma once

#include <agentctl/engine.hpp>

#include <memory>
#include <string>

namespace agentctl {

/// A runner for `p` that spawns host processes (isolation: process) and engine clients
/// (isolation: container) under the run's options. Lives as long as the run.
std::unique_ptr<task_runner> make_builtin_runner(boost::asio::any_io_executor ex, const plan& p,
                                                 const run_options& options, std::string run_id);

}  // namespace agentctl
