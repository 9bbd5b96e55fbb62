// The allocation's workers on two nodes (issue 28, item 6), through the real CLI, on the
// fixture started with AGENTCTL_SLURM_NODES=2 (two slurmd on this machine, nodes node1 and
// node2: docs/SLURM.md, section 13): a foreach is spread over a worker on each node, and a node
// set DOWN mid-run ends its own worker's attempts while the run goes on on the other node
// (the allocation asked for with --no-kill: docs/WORKER.md, "Failures").
#include "../support/deadline.hpp"
#include "cli_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// The fixture's node names (AGENTCTL_SLURM_NODE_LIST); the suite needs two.
std::vector<std::string> fixture_nodes() {
    std::istringstream in(slurm_test::env_or_empty("AGENTCTL_SLURM_NODE_LIST"));
    std::vector<std::string> nodes;
    for (std::string n; in >> n;) nodes.push_back(n);
    BOOST_TEST_REQUIRE(nodes.size() == 2u,
                       "run this suite through AGENTCTL_SLURM_NODES=2 tools/slurm-fixture (meson test "
                       "slurm-two-nodes)");
    return nodes;
}

// A foreach of `items` (shell commands) through /bin/sh, every item run to its end.
std::string foreach_workflow(const std::vector<std::string>& items) {
    std::string list;
    for (const auto& item : items) list += (list.empty() ? "" : ", ") + json::serialize(json::value(item));
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: two-nodes}\nspec:\n"
           "  policy:\n    approval: never\n    processAllowlist: [sh]\n"
           "  actions:\n    sh:\n      kind: builtin.shell.exec\n      command: /bin/sh\n"
           "      args: ['-c', '${{ vars.item }}']\n"
           "  tasks:\n    - {id: t, uses: action:sh, foreach: {items: [" +
           list + "]}, failure: continue}\n";
}

// Job ids squeue still lists (the fixture is private: every job is the tests'), waiting up to
// `bound` for them to go (a job stays COMPLETING while its steps end).
std::string jobs_left_after(std::chrono::seconds bound) {
    std::string left;
    bool gone = agentctl::test::poll_until(bound, 200ms, [&] {
        auto q = slurm_test::run({slurm_test::tool("squeue"), "--noheader", "--format=%A %T %N"},
                                 slurm_test::client_env(), 20s);
        left = q.exited && q.code == 0 ? q.out : "(squeue failed)";
        return left.empty();
    });
    return gone ? "" : left;
}

void resume_node(const std::string& node) {
    slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + node, "state=resume"},
                    slurm_test::client_env(), 20s);
    bool idle = agentctl::test::poll_until(60s, 200ms, [&] {
        auto s = slurm_test::run({slurm_test::tool("sinfo"), "--noheader", "--nodes=" + node, "--format=%T"},
                                 slurm_test::client_env(), 20s);
        return s.out == "idle\n";
    });
    BOOST_TEST(idle, "node " << node << " did not come back to idle");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(two_nodes_cli)

// --slurm-nodes 2: one allocation of both nodes, a worker on each; the tasks run on both (a
// worker has its node's CPUs as slots, 2 in this registration: 8 tasks of 1 s at --jobs 8 do
// not fit on one), the result and the journal say where each ran, and the allocation is gone
// afterwards.
BOOST_AUTO_TEST_CASE(a_foreach_runs_on_a_worker_per_node) {
    const auto nodes = fixture_nodes();
    cli_test::temp_dir dir;
    std::vector<std::string> items;
    for (int i = 0; i < 8; ++i) items.push_back("sleep 1; echo " + std::to_string(i));
    auto wf = dir.write("wf.yaml", foreach_workflow(items));
    std::string db = dir.path() + "/journal.db";
    cli_test::command_options o;
    o.bound = 120s;
    auto r = slurm_cli::agentctl({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "2",
                                  "--jobs", "8", "--db", db, wf},
                                 o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = json::parse(r.out);
    std::string run_id(v.at("data").at("runId").as_string());
    std::map<std::string, int> per_node;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;
        const auto& task = t.as_object();
        std::string node(task.at("slurm").at("node").as_string());
        ++per_node[node];
        BOOST_TEST(task.at("slurm").at("worker").as_string() == "worker." + node + ":1", task);
        std::string index = std::to_string(task.at("vars").at("foreachIndex").as_int64());
        BOOST_TEST(task.at("stdout").as_string() == index + "\n", task);
        // The journal records the same node for the attempt.
        auto show = cli_test::run({cli_test::agentctl_bin(), "--output", "json", "runs", "show", run_id,
                                   "--task", std::string(id), "--db", db},
                                  {});
        BOOST_TEST_REQUIRE(show.exit_code == 0, show.out << show.err);
        json::value shown = json::parse(show.out);
        BOOST_TEST(shown.at("data").at("attempts").at(0).at("node").as_string() == node, show.out);
    }
    BOOST_TEST(per_node.size() == 2u, r.out);
    for (const auto& n : nodes) BOOST_TEST(per_node[n] > 0, n << " ran nothing: " << r.out);
    std::string left = jobs_left_after(30s);
    BOOST_TEST(left.empty(), "jobs left: " << left);
}

// node2 set DOWN while both workers run: the allocation (asked for with --no-kill) keeps node1,
// so node1's worker runs on. Every attempt sent to node2's worker ends worker_lost (its queued
// runs too: docs/WORKER.md, "Failures"); every task sent to node1's succeeds there, some of
// them started after the DOWN (each task notes whether the DOWN had happened when it began);
// none fails backend_unavailable. Without --no-kill, Slurm ended the whole allocation and
// node1's tasks ended worker_lost as well.
BOOST_AUTO_TEST_CASE(a_node_set_down_ends_its_worker_and_the_run_goes_on_on_the_other) {
    const auto nodes = fixture_nodes();
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    const std::string down_mark = dir.path() + "/down";
    std::vector<std::string> items;
    for (int i = 0; i < 16; ++i)
        items.push_back("if [ -e " + down_mark + " ]; then touch " + dir.path() + "/after-" +
                        std::to_string(i) + "; fi; sleep 1; : " + nonce);
    auto wf = dir.write("wf.yaml", foreach_workflow(items));
    bool downed = false;
    std::string down_said;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        // Both workers busy: a worker has its node's CPUs as slots (2 in this registration),
        // so with 3 tasks running both nodes run some.
        if (cli_test::processes_with(nonce).size() < 3) return false;
        auto down = slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + nodes.at(1),
                                     "state=down", "reason=agentctl-two-nodes-test"},
                                    slurm_test::client_env(), 20s);
        downed = down.exited && down.code == 0;
        down_said = slurm_test::describe(down);
        if (downed) dir.write("down", "");
        return true;
    };
    o.bound = 150s;
    auto r = slurm_cli::agentctl(
        {"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "2", "--jobs", "8", wf}, o);
    resume_node(nodes.at(1));
    BOOST_TEST_REQUIRE(downed, "node2 could not be set down: " << down_said << r.out << r.err);
    BOOST_TEST_REQUIRE(!r.timed_out, "the run did not end: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = json::parse(r.out);
    int lost = 0, on_first = 0, on_first_after_down = 0;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;
        const auto& task = t.as_object();
        std::string node(task.at("slurm").at("node").as_string());
        std::string code = slurm_cli::error_code_of(task);
        std::string index = std::to_string(task.at("vars").at("foreachIndex").as_int64());
        BOOST_TEST(code != "backend_unavailable", id << ": " << task);
        if (node == nodes.at(0)) {
            ++on_first;
            BOOST_TEST(task.at("state").as_string() == "succeeded", id << ": " << task);
            on_first_after_down += std::filesystem::exists(dir.path() + "/after-" + index);
        } else {
            BOOST_TEST(node == nodes.at(1), task);
            // A task may end on node2 before the DOWN; one running through it cannot succeed.
            bool ok = code == "worker_lost" || task.at("state").as_string() == "succeeded";
            BOOST_TEST(ok, id << ": " << task);
            lost += code == "worker_lost";
        }
    }
    BOOST_TEST(lost > 0, r.out);
    BOOST_TEST(on_first_after_down > 0, "node1 started nothing after node2 went down: " << r.out);
    BOOST_TEST(on_first > 0, r.out);
    BOOST_TEST(
        agentctl::test::poll_until(10s, 100ms, [&] { return cli_test::processes_with(nonce).empty(); }),
        "tasks of the run outlived it");
    std::string left = jobs_left_after(30s);
    BOOST_TEST(left.empty(), "jobs left: " << left);
}

BOOST_AUTO_TEST_SUITE_END()
