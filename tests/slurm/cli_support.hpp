// What the CLI suites on the Slurm fixture share (test_cli_*.cpp): the fixture's SLURM_CONF
// handed to agentctl, and a task's error code read from a JSON report.
#pragma once

#include "../cli/command.hpp"
#include "spawn.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace slurm_cli {

// The fixture's SLURM_CONF; fails the case outside tools/slurm-fixture.
inline std::string slurm_conf() {
    std::string conf = slurm_test::env_or_empty("SLURM_CONF");
    BOOST_TEST_REQUIRE(!conf.empty(), "SLURM_CONF is not set: run this suite through tools/slurm-fixture");
    return conf;
}

// agentctl with the fixture's SLURM_CONF added to the minimal environment.
inline cli_test::command_result agentctl(const std::vector<std::string>& args,
                                         cli_test::command_options options) {
    options.env.push_back("SLURM_CONF=" + slurm_conf());
    return cli_test::agentctl(args, options);
}

// A task's error code in a JSON report; "" when it has none.
inline std::string error_code_of(const boost::json::object& task) {
    if (!task.contains("error") || !task.at("error").is_object()) return "";
    return std::string(task.at("error").at("code").as_string());
}

}  // namespace slurm_cli
