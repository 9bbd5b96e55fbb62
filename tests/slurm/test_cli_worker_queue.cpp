// Runs sent ahead to an allocation worker (docs/WORKER.md, "Pipelining"), through the real
// CLI inside `salloc`: a worker lost with runs still in its queue ends every run it was sent as
// worker_lost, uncertain for resume, the queued ones included: the driver cannot tell a run
// queued there from one whose `started` was lost with the worker, so none is sent again. Kept
// apart from test_cli_slurm.cpp so that the two files change independently; the small helpers
// below are that file's, in short.
#include "cli_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// `salloc -N1 --exclusive -- agentctl ARGS...` with the fixture's SLURM_CONF.
cli_test::command_result in_allocation(const std::vector<std::string>& args,
                                       cli_test::command_options options) {
    std::vector<std::string> argv = {slurm_test::tool("salloc"), "--nodes=1", "--exclusive", "--quiet", "--",
                                     cli_test::agentctl_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    options.env.push_back("SLURM_CONF=" + slurm_cli::slurm_conf());
    return cli_test::run(argv, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(worker_queue_cli)

// The attempts of the run in `db` that have no end yet (all of them while the run goes on),
// from `runs show` of its only run; -1 while the journal does not list the run.
int attempts_without_end(const std::string& db) {
    auto list = cli_test::run({cli_test::agentctl_bin(), "--output", "json", "runs", "list", "--db", db}, {});
    if (list.exit_code != 0) return -1;
    json::value listed = json::parse(list.out);
    const auto& runs = listed.at("data").at("runs").as_array();
    if (runs.empty()) return -1;
    std::string run_id(runs.at(0).at("runId").as_string());
    auto show =
        cli_test::run({cli_test::agentctl_bin(), "--output", "json", "runs", "show", run_id, "--db", db}, {});
    if (show.exit_code != 0) return -1;
    json::value shown = json::parse(show.out);
    return static_cast<int>(shown.at("data").at("uncertain").as_array().size());
}

// --jobs 1: the worker runs one task and holds the next four in its queue. The worker is killed
// once all five runs were sent to it (their intents are in the journal, and each run is sent as
// soon as its intent is: the kill cannot land between) while only the first had started. Every
// one of the five then ends worker_lost on the first worker and is uncertain for resume; none is
// sent to the worker that could replace it (each ran at most once: the queued ones not at all).
// Before the rule, the four queued runs were sent again and ran on generation 2.
BOOST_AUTO_TEST_CASE(queued_runs_of_a_lost_worker_end_worker_lost_and_are_not_sent_again) {
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    std::string items = json::serialize(json::value("sleep 300; : " + nonce));
    for (int i = 1; i <= 4; ++i) items += ", " + json::serialize(json::value("touch q" + std::to_string(i)));
    auto wf = dir.write("wf.yaml",
                        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: queue}\nspec:\n"
                        "  policy:\n    approval: never\n    processAllowlist: [sh]\n"
                        "  actions:\n    sh:\n      kind: builtin.shell.exec\n      command: /bin/sh\n"
                        "      args: ['-c', '${{ vars.item }}']\n"
                        "  tasks:\n    - {id: t, uses: action:sh, foreach: {items: [" +
                            items + "]}, failure: continue}\n");
    std::string db = dir.path() + "/journal.db";
    bool killed = false;
    cli_test::command_options o;
    o.cwd = dir.path();
    o.poll = [&](pid_t) {
        if (cli_test::processes_with(nonce).empty() || attempts_without_end(db) < 5) return false;
        if (!cli_test::kill_parent_of(nonce)) return false;
        killed = true;
        return true;
    };
    o.bound = 120s;
    auto r =
        in_allocation({"--output", "json", "run", "--db", db, "--jobs", "1", "--backend", "slurm", wf}, o);
    BOOST_TEST_REQUIRE(killed, "never saw the five runs sent and the first running: " << r.out << r.err);
    json::value v = json::parse(r.out);
    std::string run_id(v.at("data").at("runId").as_string());
    int lost = 0;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;
        const auto& task = t.as_object();
        bool was_lost = task.contains("error") && task.at("error").at("code") == "worker_lost";
        BOOST_TEST(was_lost, id << ": " << task);
        lost += was_lost;
        // The journal: one attempt each, on the first worker, uncertain.
        auto show = cli_test::run({cli_test::agentctl_bin(), "--output", "json", "runs", "show", run_id,
                                   "--task", std::string(id), "--db", db},
                                  {});
        BOOST_TEST_REQUIRE(show.exit_code == 0, show.out << show.err);
        json::value shown = json::parse(show.out);
        const auto& attempts = shown.at("data").at("attempts").as_array();
        BOOST_TEST(attempts.size() == 1u, show.out);
        const auto& attempt = attempts.at(0).as_object();
        BOOST_TEST(attempt.at("uncertain").as_bool(), show.out);
        std::string worker(attempt.at("worker").as_string());
        BOOST_TEST(worker.substr(worker.size() - 2) == ":1", show.out);
    }
    BOOST_TEST(lost == 5, r.out);
    for (int i = 1; i <= 4; ++i) BOOST_TEST(!std::filesystem::exists(dir.path() + "/q" + std::to_string(i)));
}

BOOST_AUTO_TEST_SUITE_END()
