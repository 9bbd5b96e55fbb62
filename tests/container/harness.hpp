// Harness for the container tests: real Docker and Podman set up by tools/container-fixture,
// workflows run through the library on an io_context with a hard bound (a hang is a
// failure), and the oracle every case ends with: no container of the run is left.
#pragma once

#include <agentctl/engine.hpp>
#include <agentctl/plan.hpp>

#include "../cli/command.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace agentctl {
inline std::ostream& operator<<(std::ostream& os, task_state s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, run_state s) { return os << to_string(s); }
}  // namespace agentctl

namespace ctr_test {

using namespace std::chrono_literals;

/// The test image, "sha256:<id>", known to both engines ($AGENTCTL_TEST_IMAGE).
const std::string& image();
/// Engine name -> absolute client path, as agentctl finds it in $PATH.
std::string engine_path(const std::string& engine);
/// What the engine CLIs need from the fixture: DOCKER_HOST, CONTAINERS_CONF.
std::vector<std::string> fixture_env();

/// Runs `<engine> args...` with the fixture's environment (60 s bound).
cli_test::command_result engine_cli(const std::string& engine, const std::vector<std::string>& args);

/// agentctl.owner label values ("HOST:PID:START:PIDNS") of three owners: a dead agentctl of
/// this host (a real pid and start time, the process since reaped), a live one (this test)
/// and one on another host.
struct owner_labels {
    std::string dead, live, elsewhere;
};
owner_labels make_owner_labels();

/// Four detached `sleep 300` containers on `engine`, as a crashed runner, a live one, another
/// host's and a stranger would leave them: named agentctl-job-KIND-TAG, labelled with the
/// owners of make_owner_labels() (the stranger's with none). Their names by kind: "dead",
/// "live", "elsewhere", "unlabelled".
std::map<std::string, std::string> start_owned_containers(const std::string& engine);

/// The container exists on `engine`, running or not.
bool container_exists(const std::string& engine, const std::string& name);

/// Waits (up to 5 s) until the container is gone: `rm --force` may return before it is (Docker).
bool container_gone(const std::string& engine, const std::string& name);

/// Removes the containers at once, whatever their state.
void remove_containers(const std::string& engine, const std::map<std::string, std::string>& names);

/// Names of containers (running or not) labelled `label` ("key=value") on `engine`.
std::vector<std::string> containers_labelled(const std::string& engine, const std::string& label);

/// A workflow document: `policy` lines go under spec.policy (processAllowlist etc.; approval
/// is never), `actions` and `tasks` are YAML blocks at their usual indentation.
std::string make_workflow(const std::string& policy, const std::string& actions, const std::string& tasks,
                     const std::string& runtime_block = "");

/// A container action block (indented for spec.actions) running `command args` on `engine`.
struct action_options {
    std::string timeout = "";      ///< timeoutSeconds, if set
    std::string extra = "";        ///< more action lines (cwd, env, limits), 6-space indented
    std::string container = "";    ///< more container lines (memoryLimitBytes...), 8-space indented
    std::string image_ref = "";    ///< default: image()
};
std::string container_action(const std::string& name, const std::string& engine, const std::string& command,
                             const std::vector<std::string>& args, const action_options& options = {});

/// What a run may be told while it runs.
struct run_control {
    boost::asio::cancellation_signal* signal = nullptr;
    std::string run_id;
    void cancel(boost::asio::cancellation_type type) { signal->emit(type); }
};

struct run_setup {
    std::string workspace;  ///< base folder (workspaceRoot "."); required
    std::optional<std::string> search_path;  ///< default: $PATH
    std::map<std::string, std::optional<std::string>> env;  ///< overrides of agentctl's environment
    std::optional<int> jobs;
    std::chrono::seconds bound{180};
    /// Called about every 20 ms while the run is in flight; return true once done.
    std::function<bool(run_control&)> poll;

    run_setup& with_jobs(int n) { jobs = n; return *this; }
    run_setup& with_search_path(std::string p) { search_path = std::move(p); return *this; }
    run_setup& with_env(const std::string& name, std::optional<std::string> value) { env[name] = std::move(value); return *this; }
    run_setup& with_poll(std::function<bool(run_control&)> f) { poll = std::move(f); return *this; }
};

/// A setup running in `workspace`.
inline run_setup in(std::string workspace) {
    run_setup s;
    s.workspace = std::move(workspace);
    return s;
}

struct run_outcome {
    std::optional<agentctl::plan> compiled;
    agentctl::run_report report;
    std::chrono::milliseconds wall{0};
    bool hung = false;  ///< the bound passed; the run was cancelled (terminal) and awaited

    const agentctl::task_result& task(const std::string& id) const;
};

/// Parses, compiles and runs `yaml` (requires it to be valid). The run id is unique and
/// recognisable ("ctr-test-<hex>").
run_outcome run_yaml(const std::string& yaml, const run_setup& setup);

/// The oracle O-CTR: no container labelled with the run's id on either engine.
void require_no_containers_left(const run_outcome& out);


/// A fresh temporary folder (removed afterwards), with helpers to make files in it.
using cli_test::temp_dir;

}  // namespace ctr_test
