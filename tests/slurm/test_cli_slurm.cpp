// `agentctl run --backend slurm` and `agentctl doctor --backend slurm` end to end, through the
// real CLI against the Slurm of tools/slurm-fixture (meson test slurm-cli), and the library's
// hook that cancels a dead run's jobs. Every case that starts jobs ends by proving that no
// job of its run is pending, running or completing.
#include "../support/deadline.hpp"
#include "cli_support.hpp"
#include "slurm_names.hpp"
#include "spawn.hpp"

#include "runner/slurm/command.hpp"
#include "runner/slurm/job.hpp"

#include <agentctl/leftovers.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using agentctl::slurm::queue_entry;

namespace {

using slurm_test::env_or_empty;

// The fixture's facts; fails loudly outside it.
struct cluster {
    std::string conf, partition, partition2, node, fixture, dir, probe, squeue, scancel, srun;

    static const cluster& get() {
        static const cluster c = [] {
            cluster c;
            c.conf = env_or_empty("SLURM_CONF");
            BOOST_TEST_REQUIRE(!c.conf.empty(),
                               "SLURM_CONF is not set: run this suite through tools/slurm-fixture "
                               "(meson test slurm-cli)");
            c.partition = env_or_empty("AGENTCTL_SLURM_PARTITION");
            c.partition2 = env_or_empty("AGENTCTL_SLURM_PARTITION2");
            c.node = env_or_empty("AGENTCTL_SLURM_NODE");
            c.fixture = env_or_empty("AGENTCTL_SLURM_FIXTURE");
            c.dir = env_or_empty("AGENTCTL_SLURM_DIR");
            c.probe = cli_test::probe_bin();
            c.squeue = slurm_test::tool("squeue");
            c.scancel = slurm_test::tool("scancel");
            c.srun = slurm_test::tool("srun");
            BOOST_TEST_REQUIRE(!c.partition.empty());
            BOOST_TEST_REQUIRE(!c.node.empty());
            return c;
        }();
        return c;
    }
};

json::value parse_json(const std::string& text) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    BOOST_TEST_REQUIRE(!ec, "not JSON: " << text);
    return v;
}

// agentctl with the fixture's SLURM_CONF (and `env`) added to the minimal environment.
cli_test::command_result cli(const std::vector<std::string>& args, cli_test::command_options options = {}) {
    if (options.bound == std::chrono::milliseconds(60000)) options.bound = 180s;
    return slurm_cli::agentctl(args, options);
}

// A workflow: `policy` lines under spec.policy (approval is never), `runtime` lines under
// spec.runtime, actions and tasks as YAML blocks at their usual indentation.
std::string workflow(const std::string& policy, const std::string& actions, const std::string& tasks,
                     const std::string& runtime = "") {
    return "apiVersion: agentctl.dev/v1\n"
           "kind: Workflow\n"
           "metadata: {name: slurm-cli}\n"
           "spec:\n"
           "  policy:\n"
           "    approval: never\n" +
           policy + (runtime.empty() ? "" : "  runtime:\n" + runtime) + "  actions:\n" + actions +
           "  tasks:\n" + tasks;
}

std::string yaml_quoted(const std::string& s) {
    return json::serialize(json::value(s));
}

// A probe action: `extra` are more action lines (6-space indented).
std::string probe_action(const std::string& name, const std::vector<std::string>& args,
                         const std::string& extra = "") {
    std::string list;
    for (const auto& a : args) list += (list.empty() ? "" : ", ") + yaml_quoted(a);
    return "    " + name +
           ":\n      kind: builtin.shell.exec\n      command: " + yaml_quoted(cluster::get().probe) +
           "\n      args: [" + list + "]\n" + extra;
}

// Every job of this user that is not final, from `squeue --me`.
std::vector<queue_entry> my_active_jobs() {
    auto o =
        slurm_test::run(agentctl::slurm::squeue_mine(cluster::get().squeue), slurm_test::client_env(), 30s);
    BOOST_TEST_REQUIRE((o.exited && o.code == 0), "squeue: " << slurm_test::describe(o));
    return agentctl::slurm::parse_squeue(o.out);
}

// The same once a run inside salloc has ended: agentctl returns at its workers' bye, and the
// allocation stays COMPLETING until Slurm has ended the worker's step (tens of milliseconds;
// docs/WORKER.md, "The end of a run", bounds it at 5 s). Polled until empty, at most 5 s.
std::vector<queue_entry> my_active_jobs_after_the_steps_end() {
    std::vector<queue_entry> left;
    agentctl::test::poll_until(5s, 50ms, [&] {
        left = my_active_jobs();
        return left.empty();
    });
    return left;
}

// The jobs, not final, submitted by the agentctl with pid `pid` (the owner in their names).
std::vector<queue_entry> active_jobs_of(pid_t pid) {
    std::vector<queue_entry> out;
    for (auto& e : my_active_jobs()) {
        auto f = agentctl::slurm::parse_job_name(e.name);
        if (f && f->owner.pid == pid) out.push_back(e);
    }
    return out;
}

// The same by run id (any owner).
std::vector<queue_entry> active_jobs_of_run(const std::string& run_id) {
    std::vector<queue_entry> out;
    for (auto& e : my_active_jobs()) {
        auto f = agentctl::slurm::parse_job_name(e.name);
        if (f && f->run_id == run_id) out.push_back(e);
    }
    return out;
}

std::string names_of(const std::vector<queue_entry>& jobs) {
    std::string s;
    for (const auto& e : jobs) s += " " + std::to_string(e.job_id) + ":" + e.state_text + ":" + e.name;
    return s;
}

const json::object& task_of(const json::value& run, const std::string& id) {
    return run.at("data").at("tasks").at(id).as_object();
}

using slurm_cli::error_code_of;

// Runs the fixture's `controller stop|start`.
void controller(const std::string& what) {
    const auto& c = cluster::get();
    BOOST_TEST_REQUIRE(!c.fixture.empty(), "AGENTCTL_SLURM_FIXTURE is not set");
    auto o = slurm_test::run(
        {"/bin/sh", c.fixture, "controller", what},
        {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "AGENTCTL_FIXTURE_DIR=" + c.dir, "SLURM_CONF=" + c.conf}, 60s);
    BOOST_TEST_REQUIRE((o.exited && o.code == 0), "controller " << what << ": " << slurm_test::describe(o));
}

void wait_node_idle() {
    const auto& c = cluster::get();
    auto until = std::chrono::steady_clock::now() + 30s;
    std::string state;
    for (;;) {
        auto o =
            slurm_test::run({slurm_test::tool("sinfo"), "--noheader", "--nodes=" + c.node, "--format=%T"},
                            slurm_test::client_env(), 20s);
        state = o.out;
        if (state == "idle\n") return;
        BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < until), "the node is not idle: " << state);
        slurm_test::pause(100ms);
    }
}

const std::string allow_probe = "    processAllowlist: [probe, sh]\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(backend_cli)

BOOST_AUTO_TEST_CASE(results_exit_codes_signals_and_streams) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string actions = probe_action("ok", {"exit", "0"}) + probe_action("three", {"exit", "3"}) +
                          probe_action("segv", {"signal-self", "SEGV"}) +
                          "    streams:\n      kind: builtin.shell.exec\n      command: /bin/sh\n"
                          "      args: [-c, 'printf \"to out\"; printf \"to err\" >&2']\n"
                          "      stdoutLimitBytes: 64\n      stderrLimitBytes: 64\n";
    std::string tasks =
        "    - {id: ok, uses: action:ok}\n"
        "    - {id: three, uses: action:three, failure: continue}\n"
        "    - {id: segv, uses: action:segv, failure: continue}\n"
        "    - {id: streams, uses: action:streams}\n";
    auto wf = dir.write("wf.yaml", workflow(allow_probe, actions, tasks));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--jobs", "4", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);  // a task failed
    json::value v = parse_json(r.out);
    std::string run_id(v.at("data").at("runId").as_string());

    auto slurm_fields = [&](const json::object& t, const std::string& state) {
        BOOST_TEST(t.at("backend").as_string() == "slurm");
        BOOST_TEST(t.at("containment").as_string() == "slurm");
        BOOST_TEST(t.at("isolation").as_string() == "process");
        const auto& s = t.at("slurm").as_object();
        BOOST_TEST(s.at("jobId").as_int64() > 0);
        BOOST_TEST(s.at("node").as_string() == c.node);
        BOOST_TEST(s.at("state").as_string() == state);
    };
    const auto& ok = task_of(v, "ok");
    BOOST_TEST(ok.at("state").as_string() == "succeeded");
    BOOST_TEST(ok.at("exitCode").as_int64() == 0);
    BOOST_TEST(ok.at("command").as_string() == c.probe);
    slurm_fields(ok, "COMPLETED");

    const auto& three = task_of(v, "three");
    BOOST_TEST(three.at("state").as_string() == "failed");
    BOOST_TEST(three.at("exitCode").as_int64() == 3);
    BOOST_TEST(error_code_of(three) == "exit_nonzero");
    slurm_fields(three, "FAILED");

    const auto& segv = task_of(v, "segv");
    BOOST_TEST(segv.at("state").as_string() == "failed");
    BOOST_TEST(segv.at("exitCode").is_null());
    BOOST_TEST(segv.at("signal").as_string() == "SIGSEGV");
    BOOST_TEST(error_code_of(segv) == "signaled");
    slurm_fields(segv, "FAILED");

    const auto& streams = task_of(v, "streams");
    BOOST_TEST(streams.at("state").as_string() == "succeeded", streams);
    BOOST_TEST(streams.at("stdout").as_string() == "to out");
    BOOST_TEST(streams.at("stderr").as_string() == "to err");
    slurm_fields(streams, "COMPLETED");

    // Distinct jobs, and none of the run left.
    std::set<std::int64_t> ids;
    for (const char* t : {"ok", "three", "segv", "streams"})
        ids.insert(task_of(v, t).at("slurm").at("jobId").as_int64());
    BOOST_TEST(ids.size() == 4u);
    auto left = active_jobs_of_run(run_id);
    BOOST_TEST(left.empty(), names_of(left));

    // A local run of the same workflow keeps the local shape: no backend members at all.
    auto local = cli({"--output", "json", "run", "--jobs", "4", wf});
    json::value lv = parse_json(local.out);
    BOOST_TEST(!task_of(lv, "ok").contains("backend"));
    BOOST_TEST(!task_of(lv, "ok").contains("slurm"));
}

BOOST_AUTO_TEST_CASE(a_timeout_leaves_no_job) {
    cli_test::temp_dir dir;
    // Ignores SIGTERM: the grace passes, then the step is killed.
    std::string actions = probe_action("stubborn", {"trap-term", "ignore"}, "      timeoutSeconds: 2\n") +
                          probe_action("slow", {"sleep", "300"}, "      timeoutSeconds: 2\n");
    std::string tasks =
        "    - {id: stubborn, uses: action:stubborn, failure: continue}\n"
        "    - {id: slow, uses: action:slow, failure: continue}\n";
    auto wf = dir.write("wf.yaml", workflow(allow_probe, actions, tasks, "    killGraceSeconds: 1\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--jobs", "2", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    BOOST_TEST(r.wall < 40s, "the run took " << r.wall.count() << " ms");
    json::value v = parse_json(r.out);
    for (const char* id : {"stubborn", "slow"}) {
        const auto& t = task_of(v, id);
        BOOST_TEST(t.at("state").as_string() == "timed_out", id << ": " << t);
        BOOST_TEST(error_code_of(t) == "timeout", id);
        BOOST_TEST(t.at("slurm").at("jobId").as_int64() > 0);
        std::string state(t.at("slurm").at("state").as_string());
        BOOST_TEST((state == "CANCELLED" || state == "FAILED"), id << ": " << state);
    }
    auto left = active_jobs_of_run(std::string(v.at("data").at("runId").as_string()));
    BOOST_TEST(left.empty(), names_of(left));
}

BOOST_AUTO_TEST_CASE(sigint_cancels_pending_and_running_jobs) {
    // More long tasks than the node has CPUs, all submitted at once: some run, the others pend.
    auto cpus_out = slurm_test::run(
        {slurm_test::tool("sinfo"), "--noheader", "--nodes=" + cluster::get().node, "--format=%c"},
        slurm_test::client_env(), 20s);
    int cpus = std::atoi(cpus_out.out.c_str());
    BOOST_TEST_REQUIRE(cpus > 0, "sinfo: " << slurm_test::describe(cpus_out));
    const int n = cpus + 2;
    std::string items;
    for (int i = 0; i < n; ++i) items += (i ? ", " : "") + std::to_string(i);
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml",
                        workflow(allow_probe, probe_action("long", {"sleep", "300"}),
                                 "    - {id: long, uses: action:long, foreach: {items: [" + items + "]}}\n"));
    std::size_t seen_running = 0, seen_pending = 0;
    bool interrupted = false;
    pid_t agent = -1;
    cli_test::command_options o;
    o.poll = [&](pid_t pid) {
        agent = pid;
        auto jobs = active_jobs_of(pid);
        std::size_t running = 0, pending = 0;
        for (const auto& j : jobs) {
            running += j.state == agentctl::slurm::job_state::running;
            pending += j.state == agentctl::slurm::job_state::pending;
        }
        if (jobs.size() < static_cast<std::size_t>(n) || running == 0 || pending == 0) return false;
        seen_running = running;
        seen_pending = pending;
        ::kill(pid, SIGINT);
        interrupted = true;
        return true;
    };
    o.bound = 120s;
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--jobs", std::to_string(n), wf}, o);
    BOOST_TEST_REQUIRE(interrupted,
                       "never saw " << n << " jobs, some running and some pending: " << r.out << r.err);
    BOOST_TEST_MESSAGE("SIGINT with " << seen_running << " running and " << seen_pending << " pending");
    BOOST_TEST(r.exit_code == 130, r.out << r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("state").as_string() == "cancelled");
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        BOOST_TEST(t.at("state").as_string() == "cancelled", std::string(id) << ": " << t);
    }
    auto left = active_jobs_of(agent);
    BOOST_TEST(left.empty(), names_of(left));
}

// Crash safety (docs/CRASH_SAFETY.md): agentctl SIGKILLed with jobs running. Killing their
// srun clients does not end the jobs; the watchdog's scancel of the announced job ids does.
BOOST_AUTO_TEST_CASE(sigkill_of_agentctl_cancels_its_running_jobs) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml",
                        workflow(allow_probe, probe_action("long", {"sleep", "300"}),
                                 "    - {id: long, uses: action:long, foreach: {items: [1, 2]}}\n"));
    bool killed = false;
    pid_t agent = -1;
    cli_test::command_options o;
    o.poll = [&](pid_t pid) {
        agent = pid;
        auto jobs = active_jobs_of(pid);
        std::size_t running = 0;
        for (const auto& j : jobs) running += j.state == agentctl::slurm::job_state::running;
        if (running < 2) return false;
        ::kill(pid, SIGKILL);
        killed = true;
        return true;
    };
    o.bound = 120s;
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--jobs", "2", wf}, o);
    BOOST_TEST_REQUIRE(killed, "never saw both jobs running: " << r.out << r.err);
    BOOST_TEST(r.signal == SIGKILL);
    std::vector<queue_entry> left;
    agentctl::test::poll_until(30s, 200ms, [&] {
        left = active_jobs_of(agent);
        return left.empty();
    });
    BOOST_TEST(left.empty(), "still pending or running 30 s after the SIGKILL: " << names_of(left));
}

BOOST_AUTO_TEST_CASE(an_output_flood_is_stopped_and_its_job_cancelled) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow(allow_probe,
                                            probe_action("flood", {"flood", "--fd", "1", "--ignore-signals"},
                                                         "      stdoutLimitBytes: 100000\n"),
                                            "    - {id: flood, uses: action:flood}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    const auto& t = task_of(v, "flood");
    BOOST_TEST(t.at("state").as_string() == "output_limit_exceeded", t);
    BOOST_TEST(error_code_of(t) == "output_limit_exceeded");
    BOOST_TEST(t.at("limitStream").as_string() == "stdout");
    BOOST_TEST(t.at("stdout").as_string().size() == 100000u);
    BOOST_TEST(t.at("slurm").at("jobId").as_int64() > 0);
    auto left = active_jobs_of_run(std::string(v.at("data").at("runId").as_string()));
    BOOST_TEST(left.empty(), names_of(left));
}

BOOST_AUTO_TEST_CASE(the_environment_is_the_declared_names_plus_slurms_own) {
    cli_test::temp_dir dir;
    const std::string secret = "secret value, with = and spaces " + cli_test::make_nonce();
    std::string actions = probe_action("env", {"report-env"},
                                       "      env:\n"
                                       "        FOO: {value: bar}\n"
                                       "        TOKEN: {env: AGENTCTL_TEST_TOKEN}\n");
    auto wf = dir.write(
        "wf.yaml", workflow(allow_probe + "    environmentAllowlist: [FOO, TOKEN, AGENTCTL_TEST_TOKEN]\n",
                            actions, "    - {id: env, uses: action:env}\n"));
    cli_test::command_options o;
    // agentctl's own variables, SLURM_* ones included, must not reach the task (or steer srun).
    // With SLURM_JOB_ID set agentctl is inside an allocation: one job per task is then asked for.
    o.env = {"AGENTCTL_TEST_TOKEN=" + secret, "SLURM_JOB_ID=999999", "SLURM_MY_OWN=x", "OTHER=y"};
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-dispatch", "job", wf}, o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = parse_json(r.out);
    const auto& t = task_of(v, "env");
    std::map<std::string, std::string> seen;
    std::istringstream lines(std::string(t.at("stdout").as_string()));
    std::string line;
    while (std::getline(lines, line)) seen[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
    std::set<std::string> names;
    for (const auto& [k, val] : seen) names.insert(k);
    // Declared FOO and TOKEN, then Slurm's own only: none of agentctl's (SLURM_MY_OWN, OTHER,
    // AGENTCTL_TEST_TOKEN), whatever its names look like.
    std::string problems = slurm_test::environment_problems(names, {"FOO", "TOKEN"}, {"SLURM_MY_OWN"});
    BOOST_TEST(problems.empty(), problems);
    if (auto d = slurm_test::differences_from_the_usual(names, {"FOO", "TOKEN"}); !d.empty())
        slurm_test::record_difference(d);
    BOOST_TEST(seen["FOO"] == "bar");
    BOOST_TEST(seen["TOKEN"] == "[REDACTED]");  // the value arrived; the report redacts it
    BOOST_TEST(seen["SLURM_JOB_ID"] == std::to_string(t.at("slurm").at("jobId").as_int64()));
    BOOST_TEST(seen["SLURM_JOB_PARTITION"] == cluster::get().partition);
    BOOST_TEST(r.out.find(secret) == std::string::npos);

    // The second partition, by name.
    auto r2 =
        cli({"--output", "json", "run", "--backend", "slurm", "--slurm-dispatch", "job", "--slurm-partition",
             cluster::get().partition2, "--slurm-cpus-per-task", "1", "--slurm-mem", "64", wf},
            o);
    BOOST_TEST_REQUIRE(r2.exit_code == 0, r2.out << r2.err);
    json::value v2 = parse_json(r2.out);
    std::string out2(task_of(v2, "env").at("stdout").as_string());
    BOOST_TEST(out2.find("SLURM_JOB_PARTITION=" + cluster::get().partition2 + "\n") != std::string::npos,
               out2);
}

BOOST_AUTO_TEST_CASE(secret_values_never_appear_in_any_argv) {
    cli_test::temp_dir dir;
    const std::string secret = "agentctl-argv-secret-" + cli_test::make_nonce();
    std::string marker = dir.path() + "/started";
    std::string actions = probe_action("hold", {"trap-term", "exit", "0", "--marker", marker},
                                       "      env:\n        TOKEN: {env: AGENTCTL_TEST_TOKEN}\n");
    auto wf = dir.write(
        "wf.yaml", workflow(allow_probe + "    environmentAllowlist: [TOKEN, AGENTCTL_TEST_TOKEN]\n", actions,
                            "    - {id: hold, uses: action:hold}\n"));
    std::size_t scanned = 0, srun_seen = 0;
    std::vector<std::string> leaks;
    cli_test::command_options o;
    o.env = {"AGENTCTL_TEST_TOKEN=" + secret};
    o.poll = [&](pid_t pid) {
        if (!fs::exists(marker)) return false;
        // The program runs: agentctl, srun (both of its processes), slurmstepd and the task.
        for (pid_t p : slurm_test::all_pids()) {
            auto cmd = slurm_test::cmdline_of(p);
            if (!cmd) continue;
            ++scanned;
            if (cmd->find(secret) != std::string::npos) leaks.push_back(std::to_string(p));
            if (cmd->rfind(cluster::get().srun, 0) == 0 && cmd->find("--export=TOKEN") != std::string::npos)
                ++srun_seen;
        }
        ::kill(pid, SIGINT);
        return true;
    };
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf}, o);
    BOOST_TEST(r.exit_code == 130, r.out << r.err);
    BOOST_TEST(scanned > 10u);
    BOOST_TEST(srun_seen >= 1u, "no srun client with --export=TOKEN was running");
    BOOST_TEST(
        leaks.empty(), "the secret is in the argv of pids" << [&] {
            std::string s;
            for (auto& l : leaks) s += " " + l;
            return s;
        }());
}

BOOST_AUTO_TEST_CASE(jobs_bounds_the_submitted_jobs) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml",
                        workflow(allow_probe, probe_action("nap", {"sleep", "1"}),
                                 "    - {id: nap, uses: action:nap, foreach: {items: [1, 2, 3, 4, 5]}}\n"));
    std::size_t most = 0;
    cli_test::command_options o;
    o.poll = [&](pid_t pid) {
        most = std::max(most, active_jobs_of(pid).size());
        return false;
    };
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--jobs", "2", wf}, o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    BOOST_TEST(most >= 1u);
    BOOST_TEST(most <= 2u, most << " jobs of the run were in the queue at once");
}

// agentctl parallel --backend slurm --slurm-dispatch job: each job one srun job, GNU parallel's
// output and exit status.
BOOST_AUTO_TEST_CASE(parallel_runs_its_jobs_as_slurm_jobs) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    cli_test::command_options o;
    o.cwd = dir.path();
    auto r = cli({"parallel", "--backend", "slurm", "--slurm-dispatch", "job", "--slurm-partition",
                  c.partition, "-k", "--shell", "echo {} job=${SLURM_JOB_ID:-none}", ":::", "a", "b"},
                 o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    std::istringstream lines(r.out);
    std::vector<std::string> got;
    for (std::string l; std::getline(lines, l);) got.push_back(l);
    BOOST_TEST_REQUIRE(got.size() == 2u, r.out);
    BOOST_TEST(got[0].rfind("a job=", 0) == 0u, got[0]);
    BOOST_TEST(got[1].rfind("b job=", 0) == 0u, got[1]);
    BOOST_TEST(got[0].find("job=none") == std::string::npos, "not a Slurm job: " << got[0]);
    auto failed = cli({"parallel", "--backend", "slurm", "--slurm-partition", c.partition, "--shell",
                       "exit {}", ":::", "0", "2", "3"},
                      o);
    BOOST_TEST(failed.exit_code == 2, failed.out << failed.err);  // two jobs failed
    BOOST_TEST(my_active_jobs().empty());
}

BOOST_AUTO_TEST_CASE(an_unknown_partition_fails_closed_and_doctor_says_so) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow(allow_probe, probe_action("ok", {"exit", "0"}),
                                            "    - {id: ok, uses: action:ok}\n"));
    auto before = my_active_jobs().size();
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-partition", "nope", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    const auto& error = v.at("data").at("error").as_object();
    BOOST_TEST(error.at("code").as_string() == "backend_unavailable");
    std::string message(error.at("message").as_string());
    BOOST_TEST(message.find("\"nope\"") != std::string::npos, message);
    BOOST_TEST(message.find("nothing was run") != std::string::npos, message);
    BOOST_TEST(task_of(v, "ok").at("state").as_string() == "skipped");
    BOOST_TEST(!task_of(v, "ok").contains("slurm"));
    BOOST_TEST(my_active_jobs().size() == before);

    auto d = cli({"--output", "json", "doctor", "--backend", "slurm", "--slurm-partition", "nope", wf});
    BOOST_TEST(d.exit_code == 6, d.out << d.err);
    json::value dv = parse_json(d.out);
    BOOST_TEST(!dv.at("data").at("ready").as_bool());
    std::map<std::string, std::string> backend;
    for (const auto& c : dv.at("data").at("checks").as_array())
        backend[std::string(c.at("check").as_string())] = std::string(c.at("status").as_string());
    BOOST_TEST(backend["backend:srun"] == "present");
    BOOST_TEST(backend["backend:controller"] == "present");
    BOOST_TEST(backend["backend:partition nope"] == "missing");

    auto ready = cli({"--output", "json", "doctor", "--backend", "slurm", "--slurm-partition",
                      cluster::get().partition2, wf});
    BOOST_TEST(ready.exit_code == 0, ready.out << ready.err);
    json::value rv = parse_json(ready.out);
    BOOST_TEST(rv.at("data").at("ready").as_bool());
    auto human = cli({"doctor", "--backend", "slurm", wf});
    BOOST_TEST(human.exit_code == 0, human.out << human.err);
    BOOST_TEST(human.out.find("backend:controller: present") != std::string::npos, human.out);
}

BOOST_AUTO_TEST_CASE(container_actions_are_refused) {
    cli_test::temp_dir dir;
    std::string actions =
        "    boxed:\n      kind: builtin.shell.exec\n      command: /bin/true\n      isolation: container\n"
        "      container:\n        image: \"sha256:" +
        std::string(64, 'f') + "\"\n        runtime: podman\n";
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [\"true\"]\n", actions,
                                            "    - {id: boxed, uses: action:boxed}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("error").at("code").as_string() == "backend_unavailable");
    std::string message(v.at("data").at("error").at("message").as_string());
    BOOST_TEST(message.find("isolation: container") != std::string::npos, message);
    BOOST_TEST(task_of(v, "boxed").at("state").as_string() == "skipped");
    auto d = cli({"--output", "json", "doctor", "--backend", "slurm", wf});
    BOOST_TEST(d.exit_code == 6, d.out << d.err);
    bool refused = false;
    json::value dv = parse_json(d.out);
    for (const auto& c : dv.at("data").at("checks").as_array())
        refused |= c.at("check").as_string() == "process:boxed:backend" &&
                   c.at("status").as_string() == "unavailable";
    BOOST_TEST(refused, d.out);
}

BOOST_AUTO_TEST_CASE(backend_flags_are_checked) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow(allow_probe, probe_action("ok", {"exit", "0"}),
                                            "    - {id: ok, uses: action:ok}\n"));
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"run", "--slurm-partition", "main", wf},
             {"doctor", "--slurm-mem", "10", wf},
             {"check", "--backend", "slurm", wf},
             {"plan", "--backend", "local", wf},
             {"run", "--backend", "kubernetes", wf},
             {"run", "--backend", "slurm", "--slurm-mem", "0", wf},
             {"run", "--backend", "slurm", "--slurm-cpus-per-task", "-1", wf},
             {"run", "--backend", "slurm", "--slurm-partition", "", wf}}) {
        auto r = cli(args);
        std::string what;
        for (const auto& a : args) what += a + " ";
        BOOST_TEST(r.exit_code == 2, what << ": " << r.out << r.err);
    }
    // Slurm's variables cannot be declared: srun reads them as its own options.
    auto steer =
        dir.write("steer.yaml",
                  workflow(allow_probe + "    environmentAllowlist: [SLURM_PARTITION]\n",
                           probe_action("ok", {"exit", "0"}, "      env: {SLURM_PARTITION: {value: x}}\n"),
                           "    - {id: ok, uses: action:ok}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", steer});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value sv = parse_json(r.out);
    BOOST_TEST(sv.at("data").at("error").at("code").as_string() == "engine_variable_not_allowed");
}

BOOST_AUTO_TEST_CASE(an_extension_runs_as_two_jobs_with_its_request_on_stdin) {
    std::string textstats = env_or_empty("AGENTCTL_TEXTSTATS");
    BOOST_TEST_REQUIRE(fs::exists(textstats),
                       "AGENTCTL_TEXTSTATS is not the sample extension: " << textstats);
    cli_test::temp_dir dir;
    std::string actions =
        "    textstats:\n      kind: extension.process\n      command: " + yaml_quoted(textstats) +
        "\n      protocolVersion: agentctl.dev/process-extension/v1\n      idempotency: pure\n"
        "      capabilities: [text.count]\n"
        "      inputSchema: {type: object, required: [text], additionalProperties: false,\n"
        "                    properties: {text: {type: string}}}\n"
        "      outputSchema: {type: object, required: [words, lines, bytes, longest], additionalProperties: "
        "false,\n"
        "                     properties: {words: {type: integer, minimum: 0}, lines: {type: integer, "
        "minimum: 0},\n"
        "                                  bytes: {type: integer, minimum: 0},\n"
        "                                  longest: {type: string}}}\n";
    auto wf = dir.write(
        "wf.yaml",
        workflow("    processAllowlist: [agentctl-textstats]\n", actions,
                 "    - {id: count, uses: action:textstats, with: {text: \"the quick brown fox\"}}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = parse_json(r.out);
    const auto& t = task_of(v, "count");
    BOOST_TEST(t.at("output").at("words").as_int64() == 4);
    BOOST_TEST(t.at("output").at("longest").as_string() == "quick");
    BOOST_TEST(t.at("backend").as_string() == "slurm");
    BOOST_TEST(t.at("slurm").at("state").as_string() == "COMPLETED");
    auto left = active_jobs_of_run(std::string(v.at("data").at("runId").as_string()));
    BOOST_TEST(left.empty(), names_of(left));
}

BOOST_AUTO_TEST_CASE(slurm_commands_missing_from_the_path_fail_closed) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow(allow_probe, probe_action("ok", {"exit", "0"}),
                                            "    - {id: ok, uses: action:ok}\n"));
    // A PATH without Slurm: the probe is named by its absolute path, srun is looked up.
    std::vector<std::string> env = {"PATH=" + dir.path(), "HOME=/root", "SLURM_CONF=" + cluster::get().conf,
                                    "AGENTCTL_STATE_DIR=" + cli_test::test_state_dir()};
    auto r = slurm_test::run({cli_test::agentctl_bin(), "--output", "json", "run", "--backend", "slurm", wf},
                             env, 60s);
    BOOST_TEST_REQUIRE((r.exited && r.code == 4), slurm_test::describe(r));
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("error").at("code").as_string() == "backend_unavailable");
    std::string message(v.at("data").at("error").at("message").as_string());
    for (const char* tool : {"srun", "squeue", "scancel", "scontrol", "sinfo"})
        BOOST_TEST(message.find(tool) != std::string::npos, tool << ": " << message);
    BOOST_TEST(message.find(dir.path()) != std::string::npos, message);  // where it looked
    BOOST_TEST(task_of(v, "ok").at("state").as_string() == "skipped");
    auto d = slurm_test::run(
        {cli_test::agentctl_bin(), "--output", "json", "doctor", "--backend", "slurm", wf}, env, 60s);
    BOOST_TEST((d.exited && d.code == 6), slurm_test::describe(d));
    json::value dv = parse_json(d.out);
    std::size_t missing = 0;
    for (const auto& c : dv.at("data").at("checks").as_array())
        missing +=
            c.at("check").as_string().starts_with("backend:") && c.at("status").as_string() == "missing";
    BOOST_TEST(missing == 5u, d.out);
}

// Stops the controller (and restarts it).
BOOST_AUTO_TEST_CASE(a_stopped_controller_fails_closed) {
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow(allow_probe, probe_action("ok", {"exit", "0"}),
                                            "    - {id: ok, uses: action:ok}\n"));
    controller("stop");
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf});
    auto d = cli({"--output", "json", "doctor", "--backend", "slurm", wf});
    controller("start");
    wait_node_idle();
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    BOOST_TEST(r.wall < 10s, "the run took " << r.wall.count() << " ms to fail");
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("error").at("code").as_string() == "backend_unavailable");
    std::string message(v.at("data").at("error").at("message").as_string());
    BOOST_TEST(message.find("scontrol ping") != std::string::npos, message);
    BOOST_TEST(message.find("nothing was run") != std::string::npos, message);
    BOOST_TEST(task_of(v, "ok").at("state").as_string() == "skipped");
    BOOST_TEST(d.exit_code == 6, d.out << d.err);
    bool down = false;
    json::value dv = parse_json(d.out);
    for (const auto& c : dv.at("data").at("checks").as_array())
        down |= c.at("subject").as_string() == "controller" && c.at("status").as_string() == "unavailable";
    BOOST_TEST(down, d.out);
    auto left = active_jobs_of_run(std::string(v.at("data").at("runId").as_string()));
    BOOST_TEST(left.empty(), names_of(left));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(leftovers)

// Jobs named as agentctl names them, for owners dead and alive, cancelled by the library's hook.
BOOST_AUTO_TEST_CASE(a_dead_runs_jobs_are_cancelled_and_no_one_elses) {
    const auto& c = cluster::get();
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::ifstream stat("/proc/self/stat");
    std::string line;
    std::getline(stat, line);
    auto at = line.rfind(')');
    for (int field = 2; at != std::string::npos && field < 22; ++field) at = line.find(' ', at + 1);
    std::string start = line.substr(at + 1, line.find(' ', at + 1) - at - 1);
    using agentctl::slurm::job_owner;
    const job_owner alive{host, static_cast<long>(::getpid()), start};
    const job_owner reused{host, static_cast<long>(::getpid()), start + "1"};  // same pid, other start
    const job_owner elsewhere{"another-host", 4242, "1"};
    const std::string run = "run-leftover" + std::to_string(::getpid());
    const std::string other_run = "run-other" + std::to_string(::getpid());
    struct job {
        std::string run;
        job_owner owner;
        bool cancelled;  // by the hook, asked for `run` only
    };
    const std::vector<job> jobs = {
        {run, reused, true}, {run, alive, false}, {run, elsewhere, false}, {other_run, reused, false}};
    std::vector<std::unique_ptr<slurm_test::child>> sruns;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        agentctl::slurm::srun_request r;
        r.srun = c.srun;
        r.run_id = jobs[i].run;
        r.owner = jobs[i].owner;
        r.task_id = "left-" + std::to_string(i);
        r.executable = c.probe;
        r.args = {"sleep", "300"};
        r.cwd = "/tmp";
        auto argv = agentctl::slurm::srun_argv(r);
        BOOST_TEST_REQUIRE(bool(argv), argv.error);
        std::string error;
        names.push_back(*agentctl::slurm::job_name(r.run_id, r.owner, r.task_id, r.attempt, error));
        sruns.push_back(std::make_unique<slurm_test::child>(argv.argv, slurm_test::client_env()));
    }
    auto listed = [&] {
        std::map<std::string, queue_entry> m;
        for (auto& e : my_active_jobs()) m[e.name] = e;
        return m;
    };
    auto until = std::chrono::steady_clock::now() + 60s;
    while (listed().size() < jobs.size()) {
        BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < until), "the jobs never appeared in squeue");
        slurm_test::pause(100ms);
    }

    boost::asio::io_context io;
    agentctl::slurm_leftover_options options;
    options.search_path = "/usr/local/bin:/usr/bin:/bin";
    options.host_env = [](std::string_view name) -> std::optional<std::string> {
        if (name == "SLURM_CONF") return env_or_empty("SLURM_CONF");
        return std::nullopt;
    };
    options.run_ids = {run};
    std::optional<agentctl::slurm_leftover_report> report;
    agentctl::async_cancel_slurm_leftovers(io.get_executor(), options,
                                           [&](agentctl::slurm_leftover_report r) { report = std::move(r); });
    io.run();
    BOOST_TEST_REQUIRE(report.has_value());
    BOOST_TEST(report->slurm_found);
    BOOST_TEST(!report->error.has_value(), (report->error ? report->error->message : ""));
    BOOST_TEST_REQUIRE(report->cancelled.size() == 1u);
    BOOST_TEST(report->cancelled[0].find(names[0]) != std::string::npos, report->cancelled[0]);
    auto now = listed();
    for (std::size_t i = 0; i < jobs.size(); ++i)
        BOOST_TEST((now.count(names[i]) == 0) == jobs[i].cancelled, names[i]);

    // Without run ids every dead owner's job goes: the other run's too, never the live one's.
    options.run_ids.clear();
    report.reset();
    io.restart();
    agentctl::async_cancel_slurm_leftovers(io.get_executor(), options,
                                           [&](agentctl::slurm_leftover_report r) { report = std::move(r); });
    io.run();
    BOOST_TEST_REQUIRE(report.has_value());
    now = listed();
    BOOST_TEST(now.count(names[3]) == 0u);
    BOOST_TEST(now.count(names[1]) == 1u);
    BOOST_TEST(now.count(names[2]) == 1u);

    // Ours to clean up: the live owner's and the other host's.
    std::vector<std::uint64_t> ids;
    for (auto& [n, e] : now)
        if (n == names[1] || n == names[2]) ids.push_back(e.job_id);
    slurm_test::run(agentctl::slurm::scancel_jobs(c.scancel, ids), slurm_test::client_env(), 30s);
    for (auto& s : sruns) s->wait(30s);
    until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        bool any = false;
        for (auto& [n, e] : listed()) any |= std::find(names.begin(), names.end(), n) != names.end();
        if (!any) break;
        BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < until), "the test's jobs are still listed");
        slurm_test::pause(100ms);
    }
}

BOOST_AUTO_TEST_SUITE_END()

// Last: the node goes down while a task runs (and is brought back).
BOOST_AUTO_TEST_SUITE(node_failure)

BOOST_AUTO_TEST_CASE(a_node_failure_is_reported_as_slurms_not_the_programs) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string marker = dir.path() + "/started";
    auto wf = dir.write(
        "wf.yaml", workflow(allow_probe, probe_action("hold", {"trap-term", "exit", "0", "--marker", marker}),
                            "    - {id: hold, uses: action:hold}\n"));
    bool downed = false;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        if (!fs::exists(marker)) return false;
        auto down = slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + c.node,
                                     "state=down", "reason=agentctl-cli-test"},
                                    slurm_test::client_env(), 20s);
        downed = down.exited && down.code == 0;
        return true;
    };
    auto r = cli({"--output", "json", "run", "--backend", "slurm", wf}, o);
    // ReturnToService=2 brings the node back once slurmd answers; resume it if not.
    slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + c.node, "state=resume"},
                    slurm_test::client_env(), 20s);
    wait_node_idle();
    BOOST_TEST_REQUIRE(downed, "the node could not be set down");
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);  // srun itself said 0
    json::value v = parse_json(r.out);
    const auto& t = task_of(v, "hold");
    BOOST_TEST(t.at("state").as_string() == "failed", t);
    BOOST_TEST(error_code_of(t) == "slurm_node_failure", t);
    BOOST_TEST(t.at("slurm").at("state").as_string() == "NODE_FAIL");
    BOOST_TEST(t.at("exitCode").is_null(), t);
}

BOOST_AUTO_TEST_SUITE_END()

// Needs the fixture's cgroup mode (AGENTCTL_SLURM_CGROUP=v1): meson test slurm-cli-oom.
BOOST_AUTO_TEST_SUITE(oom_cli)

BOOST_AUTO_TEST_CASE(an_out_of_memory_kill_is_reported_as_such) {
    BOOST_TEST_REQUIRE(
        env_or_empty("AGENTCTL_SLURM_CGROUP") == "v1",
        "run through tools/slurm-fixture with AGENTCTL_SLURM_CGROUP=v1 (meson test slurm-cli-oom)");
    cli_test::temp_dir dir;
    auto wf = dir.write(
        "wf.yaml",
        workflow(allow_probe, probe_action("big", {"alloc", "200"}) + probe_action("small", {"alloc", "10"}),
                 "    - {id: big, uses: action:big, failure: continue}\n"
                 "    - {id: small, uses: action:small}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-mem", "50", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    const auto& big = task_of(v, "big");
    BOOST_TEST(big.at("state").as_string() == "failed", big);
    BOOST_TEST(error_code_of(big) == "oom_killed", big);
    BOOST_TEST(big.at("slurm").at("state").as_string() == "OUT_OF_MEMORY");
    const auto& small = task_of(v, "small");
    BOOST_TEST(small.at("state").as_string() == "succeeded", small);
}

BOOST_AUTO_TEST_SUITE_END()

// Allocation mode (docs/WORKER.md): agentctl inside `salloc`, its tasks sent to one
// `agentctl worker` step per node instead of being submitted as jobs. Every case runs agentctl
// as salloc's command, exactly as a user does.
BOOST_AUTO_TEST_SUITE(allocation_cli)

namespace {

// `salloc -N1 --exclusive -- agentctl ARGS...` with the fixture's SLURM_CONF.
cli_test::command_result in_allocation(const std::vector<std::string>& args,
                                       cli_test::command_options options = {}) {
    std::vector<std::string> argv = {slurm_test::tool("salloc"), "--nodes=1", "--exclusive", "--quiet", "--",
                                     cli_test::agentctl_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    options.env.push_back("SLURM_CONF=" + cluster::get().conf);
    if (options.bound == std::chrono::milliseconds(60000)) options.bound = 180s;
    return cli_test::run(argv, options);
}

// `salloc -N1 --exclusive -- /bin/sh -c SCRIPT ARGS...` with the fixture's SLURM_CONF: for cases
// that look at the allocation after agentctl is gone (the script's $0 is usually agentctl).
cli_test::command_result sh_in_allocation(const std::string& script, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {
        slurm_test::tool("salloc"), "--nodes=1", "--exclusive", "--quiet", "--", "/bin/sh", "-c", script};
    argv.insert(argv.end(), args.begin(), args.end());
    cli_test::command_options options;
    options.env.push_back("SLURM_CONF=" + cluster::get().conf);
    options.bound = 180s;
    return cli_test::run(argv, options);
}

const std::string sh_action =
    "    sh:\n      kind: builtin.shell.exec\n      command: /bin/sh\n      args: ['-c', '${{ vars.item "
    "}}']\n";

// Until no process of this machine carries any of `needles` in its command line, at most
// `bound`.
bool all_gone_within(const std::vector<std::string>& needles, std::chrono::seconds bound) {
    return agentctl::test::poll_until(bound, 50ms, [&] {
        return std::none_of(needles.begin(), needles.end(),
                            [](const std::string& n) { return !cli_test::processes_with(n).empty(); });
    });
}

bool gone_within(const std::string& nonce, std::chrono::seconds bound) {
    return all_gone_within({nonce}, bound);
}

// In the command line of the run's worker (`AGENTCTL worker`, this build's path) and of the srun
// that started it (`srun ... -- AGENTCTL worker`): the run's processes besides its tasks.
std::string worker_command() {
    return cli_test::agentctl_bin() + std::string(1, '\0') + "worker";
}

// A run refused before anything ran (exit 4 under --output json): its message, which must say
// `why` and that nothing was run.
void expect_refused(const cli_test::command_result& r, const std::string& why) {
    BOOST_TEST_REQUIRE(!r.timed_out, r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    std::string message(v.at("data").at("error").at("message").as_string());
    BOOST_TEST(message.find(why) != std::string::npos, message);
    BOOST_TEST(message.find("nothing was run") != std::string::npos, message);
}

// Shell, for a script run inside the allocation after agentctl returned: polls `squeue -s`
// (`squeue`: the script's argument naming it, such as "$2") every 5 ms until no worker step of
// the run is listed, for at most 5 s, then prints "steps: LEFT (listed in N polls)" on stderr.
// Normally no poll lists one; the bound is what holds whatever happens (docs/WORKER.md, "The
// end of a run": the watchdog kills srun after 2 s at most, and Slurm then ends the step within
// ~2.4 s), also on a loaded 2-core machine running the sanitizer build.
std::string poll_worker_steps(const std::string& squeue) {
    return "listed=0; end=$(($(date +%s) + 5)); while steps=$(\"" + squeue +
           "\" -h -s -o %j | grep worker.); [ -n \"$steps\" ] && [ $(date +%s) -lt $end ]; do "
           "listed=$((listed + 1)); sleep 0.005; done; echo \"steps: $steps (listed in $listed polls)\" "
           ">&2; ";
}

}  // namespace

// The issue's deadlock: 30 tasks at --jobs 8 inside an exclusive allocation of the only node.
// As jobs they would queue behind the allocation for ever; on the worker they all run.
BOOST_AUTO_TEST_CASE(thirty_tasks_in_an_exclusive_allocation_run_on_the_worker) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string items;
    for (int i = 0; i < 30; ++i)
        items += (items.empty() ? "" : ", ") + yaml_quoted("echo task" + std::to_string(i));
    std::string tasks =
        "    - {id: many, uses: action:sh, foreach: {items: [" + items +
        "]}}\n"
        "    - {id: three, uses: action:sh, foreach: {items: ['printf out; printf err >&2; exit 3']}, "
        "failure: continue}\n"
        "    - {id: segv, uses: action:sh, foreach: {items: ['kill -SEGV $$']}, failure: continue}\n"
        "    - {id: env, uses: action:sh, foreach: {items: ['env | sort']}}\n"
        "    - {id: slow, uses: action:sh, foreach: {items: ['exec sleep 300']}, timeoutSeconds: 2, failure: "
        "continue}\n";
    std::string actions = sh_action;
    actions.insert(actions.find("      args:"), "      env: {GREETING: {value: hello}}\n");
    auto wf = dir.write(
        "wf.yaml",
        workflow("    processAllowlist: [sh]\n    environmentAllowlist: [GREETING]\n", actions, tasks));
    auto r = in_allocation({"--output", "json", "run", "--backend", "slurm", "--jobs", "8", wf});
    BOOST_TEST_REQUIRE(!r.timed_out, "the run did not end: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);  // three, segv and slow failed
    json::value v = parse_json(r.out);
    const auto& all = v.at("data").at("tasks").as_object();
    int many = 0;
    for (const auto& [id, t] : all) {
        if (id.find("--") == std::string::npos) continue;  // a foreach parent: nothing of its own ran
        const auto& o = t.as_object();
        BOOST_TEST(o.at("backend").as_string() == "slurm", id);
        BOOST_TEST(o.at("slurm").at("node").as_string() == c.node, id);
        // Not a job of its own: the worker's step ran it, contained as a local run contains it.
        BOOST_TEST(!o.at("slurm").as_object().contains("jobId"), id);
        BOOST_TEST(o.at("containment").as_string() != "slurm", id);
        if (id.starts_with("many--")) {
            ++many;
            BOOST_TEST(o.at("state").as_string() == "succeeded", id);
            BOOST_TEST(o.at("stdout").as_string().starts_with("task"), id);
        }
    }
    BOOST_TEST(many == 30);
    // Single tasks as one-item foreach: their ids carry the index and a digest.
    auto only = [&](const std::string& prefix) -> const json::object& {
        for (const auto& [id, t] : all)
            if (id.starts_with(prefix + "--")) return t.as_object();
        BOOST_FAIL("no task " << prefix);
        return all.at(prefix).as_object();
    };
    const auto& three = only("three");
    BOOST_TEST(three.at("exitCode").as_int64() == 3);
    BOOST_TEST(three.at("stdout").as_string() == "out");
    BOOST_TEST(three.at("stderr").as_string() == "err");
    BOOST_TEST(error_code_of(three) == "exit_nonzero");
    const auto& segv = only("segv");
    BOOST_TEST(segv.at("signal").as_string() == "SIGSEGV");
    BOOST_TEST(error_code_of(only("slow")) == "timeout");
    // Exactly the declared environment, as locally: nothing of Slurm's or the worker's.
    std::string env(only("env").at("stdout").as_string());
    BOOST_TEST(env.find("GREETING=hello") != std::string::npos, env);
    BOOST_TEST(env.find("SLURM_") == std::string::npos, env);
    // No job was submitted for a task: the allocation is the only job, and it is gone.
    auto left = my_active_jobs_after_the_steps_end();
    BOOST_TEST(left.empty(), names_of(left));
}

BOOST_AUTO_TEST_CASE(dispatch_job_and_worker_outside_an_allocation) {
    cli_test::temp_dir dir;
    auto wf =
        dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                      "    - {id: one, uses: action:sh, foreach: {items: ['true']}}\n"));
    // Asked for workers with no allocation: refused before anything runs.
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-dispatch", "worker", wf});
    BOOST_TEST(r.exit_code == 4, r.out << r.err);
    BOOST_TEST(r.out.find("needs a Slurm allocation") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("backend_unavailable") != std::string::npos, r.out);
    auto bad = cli({"run", "--backend", "slurm", "--slurm-dispatch", "sometimes", wf});
    BOOST_TEST(bad.exit_code == 2, bad.out << bad.err);
}

// The workers start while the preflight goes on (docs/WORKER.md, "Starting early"): a
// preflight that fails after the controller answered stops them and waits for their srun, so
// no step of the run is left (squeue -s, inside the allocation, after agentctl returned;
// under load Slurm may still list a step for a moment after its srun has returned, so for at
// most 5 s: poll_worker_steps).
BOOST_AUTO_TEST_CASE(a_preflight_that_fails_leaves_no_worker_step) {
    cli_test::temp_dir dir;
    std::string actions =
        "    missing:\n      kind: builtin.shell.exec\n      command: /nonexistent/agentctl-test\n";
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [agentctl-test]\n", actions,
                                            "    - {id: one, uses: action:missing}\n"));
    std::string script = "\"$0\" --output json run --backend slurm \"$1\"; status=$?; " +
                         poll_worker_steps("$2") + "exit $status";
    auto r = sh_in_allocation(script, {cli_test::agentctl_bin(), wf, slurm_test::tool("squeue")});
    BOOST_TEST_REQUIRE(!r.timed_out, r.out << r.err);
    BOOST_TEST(r.exit_code != 0, r.out << r.err);
    BOOST_TEST(r.out.find("executable_not_found") != std::string::npos, r.out << r.err);
    BOOST_TEST_REQUIRE(r.err.find("steps:") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("worker.") == std::string::npos,
               "a worker step outlived agentctl by 5 s: " << r.err);
}

// The end of a run (docs/WORKER.md, "The end of a run"): agentctl returns at the worker's `bye`
// (every task of it reaped) and leaves srun's last milliseconds and the step's end to its
// watchdog. Nothing of the run outlives that for long: no worker step in squeue -s (inside the
// allocation, polled every 5 ms after agentctl returned) and no worker or srun process, both
// within 5 s (tens of milliseconds normally; the watchdog kills srun after 2 s at most, and Slurm
// then ends the step within ~2.4 s, so 5 s is the bound that holds whatever happens).
BOOST_AUTO_TEST_CASE(the_worker_step_ends_right_after_agentctl_returns) {
    cli_test::temp_dir dir;
    std::string items;
    for (int i = 0; i < 20; ++i) items += std::string(items.empty() ? "" : ", ") + "'true'";
    auto wf = dir.write("wf.yaml",
                        workflow("    processAllowlist: [sh]\n", sh_action,
                                 "    - {id: many, uses: action:sh, foreach: {items: [" + items + "]}}\n"));
    std::string script = "\"$0\" --output json run --backend slurm --jobs 4 \"$1\"; status=$?; " +
                         poll_worker_steps("$2") + "exit $status";
    auto r = sh_in_allocation(script, {cli_test::agentctl_bin(), wf, slurm_test::tool("squeue")});
    BOOST_TEST_REQUIRE(!r.timed_out, r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("state").as_string() == "succeeded", r.out);
    BOOST_TEST_REQUIRE(r.err.find("steps:") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("worker.") == std::string::npos,
               "a worker step outlived agentctl by 5 s: " << r.err);
    BOOST_TEST(all_gone_within({worker_command()}, 5s), "a worker or its srun outlived agentctl by 5 s");
    BOOST_TEST_MESSAGE("after agentctl returned: " << r.err.substr(r.err.find("steps:")));
}

// Every Slurm client agentctl starts with `options` goes through a shim in `dir` that logs its
// name; calls() reads the log and empties it.
struct logged_clients {
    std::string log;
    cli_test::command_options options;

    explicit logged_clients(const cli_test::temp_dir& dir) : log(dir.path() + "/calls.log") {
        std::string shims = dir.path() + "/shims";
        std::filesystem::create_directory(shims);
        for (const char* tool : {"srun", "squeue", "scancel", "scontrol", "sinfo"}) {
            std::string path = shims + "/" + tool;
            std::ofstream(path) << "#!/bin/sh\necho " << tool << " >> " << log << "\nexec "
                                << slurm_test::tool(tool) << " \"$@\"\n";
            std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        }
        options.env.push_back("PATH=" + shims + ":/usr/bin:/bin");
    }
    std::string calls() const {
        std::ifstream in(log);
        std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream(log, std::ios::trunc).close();
        return said;
    }
};

// Inside an allocation, with no partition named, the preflight asks no `sinfo`: the worker steps
// run in the allocation whatever the cluster's default partition is (docs/SLURM.md, section 13).
// Every Slurm client agentctl starts goes through a shim on its PATH that logs it.
BOOST_AUTO_TEST_CASE(inside_an_allocation_the_preflight_asks_no_sinfo) {
    cli_test::temp_dir dir;
    auto wf =
        dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                      "    - {id: one, uses: action:sh, foreach: {items: ['true']}}\n"));
    logged_clients clients(dir);
    const cli_test::command_options& o = clients.options;
    auto r = in_allocation({"--output", "json", "run", "--backend", "slurm", wf}, o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    std::string calls = clients.calls();
    BOOST_TEST(calls.find("srun") != std::string::npos, calls);
    BOOST_TEST(calls.find("scontrol") != std::string::npos, calls);
    BOOST_TEST(calls.find("sinfo") == std::string::npos, calls);
    // A partition named is still checked.
    auto named = in_allocation(
        {"--output", "json", "run", "--backend", "slurm", "--slurm-partition", cluster::get().partition, wf},
        o);
    BOOST_TEST_REQUIRE(named.exit_code == 0, named.out << named.err);
    std::string calls2 = clients.calls();
    BOOST_TEST(calls2.find("sinfo") != std::string::npos, calls2);
}

// A run refused before its preflight starts nothing on Slurm and runs nothing: the worker steps
// start during the preflight (docs/WORKER.md, "Starting early"), never while the workflow is read
// or the journal opened; a step started earlier would have to be ended before anything ran
// (docs/SLURM.md, section 13, "fourth pass"). Every Slurm client agentctl starts goes through a
// shim on its PATH that logs it.
BOOST_AUTO_TEST_CASE(a_run_refused_before_its_preflight_starts_no_worker_step) {
    cli_test::temp_dir dir;
    logged_clients clients(dir);
    const cli_test::command_options& o = clients.options;
    std::string touch =
        "    - {id: one, uses: action:ACTION, foreach: {items: ['touch " + dir.path() + "/ran']}}\n";
    auto with_action = [&](const std::string& action) {
        std::string tasks = touch;
        tasks.replace(tasks.find("ACTION"), 6, action);
        return workflow("    processAllowlist: [sh]\n", sh_action, tasks);
    };
    // A workflow that does not compile (its task names an action that is not there).
    auto invalid = in_allocation(
        {"--output", "json", "run", "--backend", "slurm", dir.write("invalid.yaml", with_action("missing"))},
        o);
    BOOST_TEST(invalid.exit_code != 0, invalid.out << invalid.err);
    BOOST_TEST(invalid.exit_code != 4, invalid.out << invalid.err);  // refused before the backend
    // A journal that cannot be used (a folder where its file should be): exit 5.
    std::filesystem::create_directory(dir.path() + "/journal.db");
    auto journal = in_allocation({"--output", "json", "run", "--backend", "slurm", "--db",
                                  dir.path() + "/journal.db", dir.write("valid.yaml", with_action("sh"))},
                                 o);
    BOOST_TEST(journal.exit_code == 5, journal.out << journal.err);
    std::string calls = clients.calls();
    BOOST_TEST(calls.find("srun") == std::string::npos, calls);
    BOOST_TEST(!std::filesystem::exists(dir.path() + "/ran"));
    // The same workflow with a usable journal does run on the worker, through the shim.
    auto ran = in_allocation({"--output", "json", "run", "--backend", "slurm", "--db",
                              dir.path() + "/journal2.db", dir.path() + "/valid.yaml"},
                             o);
    BOOST_TEST_REQUIRE(ran.exit_code == 0, ran.out << ran.err);
    BOOST_TEST(std::filesystem::exists(dir.path() + "/ran"));
    std::string calls2 = clients.calls();
    BOOST_TEST(calls2.find("srun") != std::string::npos, calls2);
}

// The worker step starts before `scontrol ping` answers, in parallel with it (docs/WORKER.md,
// "Starting early"); a controller that does not answer fails the run as before, and the srun
// started meanwhile is killed at once, with no step (it could not create one): without that,
// the run would wait for srun's own retries (9 s, docs/SLURM.md, section 9).
BOOST_AUTO_TEST_CASE(a_stopped_controller_inside_an_allocation_stops_the_starting_worker) {
    const auto& c = cluster::get();
    BOOST_TEST_REQUIRE(!c.fixture.empty(), "AGENTCTL_SLURM_FIXTURE is not set");
    cli_test::temp_dir dir;
    auto wf =
        dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                      "    - {id: one, uses: action:sh, foreach: {items: ['true']}}\n"));
    // Inside the allocation: the controller stopped, agentctl timed, srun's left counted, the
    // controller started again.
    std::string script =
        "fixture() { env PATH=/usr/bin:/bin:/usr/sbin:/sbin AGENTCTL_FIXTURE_DIR=\"$3\" /bin/sh \"$2\" "
        "controller \"$1\" >/dev/null 2>&1; }; fixture stop \"$2\" \"$3\" || exit 97; "
        "start=$(date +%s%N); \"$0\" --output json run --backend slurm \"$1\"; status=$?; "
        "echo \"took: $(( ($(date +%s%N) - start) / 1000000 )) ms\" >&2; "
        "echo \"sruns: $(pgrep -f -c \"srun.*:worker[.]\")\" >&2; "
        "fixture start \"$2\" \"$3\" || exit 98; exit $status";
    auto r = sh_in_allocation(script, {cli_test::agentctl_bin(), wf, c.fixture, c.dir});
    wait_node_idle();
    expect_refused(r, "scontrol ping");
    BOOST_TEST(r.err.find("sruns: 0") != std::string::npos, "an srun outlived agentctl: " << r.err);
    auto took = r.err.find("took: ");
    BOOST_TEST_REQUIRE(took != std::string::npos, r.err);
    BOOST_TEST(std::stoi(r.err.substr(took + 6)) < 5000, "the run waited for srun: " << r.err);
}

// The workers of several nodes start side by side (docs/WORKER.md, "Dispatch"). The fixture has
// one node, so it is named twice in SLURM_JOB_NODELIST: two sites, two worker steps on it. Both
// start: the run's tasks run. Then one srun fails (a shim on agentctl's PATH lets one srun
// through and fails the other), first the later one, then the earlier one once the other srun
// has started (a marker the other's shim writes), while the other's step starts: exit 4 naming the site,
// nothing run, the worker that did start stopped, no step of the run left (squeue -s inside the allocation,
// for at most 5 s) and no worker process left. Killing the other srun instead of closing its worker's stdin
// left its step for more than 5 s in the second case.
BOOST_AUTO_TEST_CASE(the_workers_of_two_sites_start_side_by_side) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string shims = dir.path() + "/shims";
    std::filesystem::create_directory(shims);
    // fail-later: the srun that comes second fails; fail-earlier: the first fails once the second
    // has started.
    std::ofstream(shims + "/srun")
        << "#!/bin/sh\ncd " << dir.path() << " || exit 1\n"
        << "if mkdir one-started 2>/dev/null; then first=1; else first=0; : >two-started; fi\n"
        << "other_started() { i=0; while [ ! -e two-started ] && [ $i -lt 200 ]; do "
           "sleep 0.05; i=$((i + 1)); done; }\n"
        << "if { [ -e fail-later ] && [ $first = 0 ]; } || "
           "{ [ -e fail-earlier ] && [ $first = 1 ] && other_started; }; then\n"
        << "  echo 'srun: error: no step here (test)' >&2; exit 1\nfi\nexec " << slurm_test::tool("srun")
        << " \"$@\"\n";
    std::filesystem::permissions(shims + "/srun", std::filesystem::perms::owner_all);
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                            "    - {id: t, uses: action:sh, foreach: {items: ['touch " +
                                                dir.path() + "/ran1', 'touch " + dir.path() + "/ran2']}}\n"));
    std::string script =
        "SLURM_JOB_NODELIST=\"$1,$1\" SLURM_JOB_CPUS_PER_NODE='1(x2)' PATH=\"$2:/usr/bin:/bin\" \"$0\" "
        "--output json "
        "run --backend slurm --jobs 2 \"$3\"; status=$?; " +
        poll_worker_steps("$4") + "exit $status";
    auto run = [&] {
        return sh_in_allocation(script,
                                {cli_test::agentctl_bin(), c.node, shims, wf, slurm_test::tool("squeue")});
    };
    auto both = run();
    BOOST_TEST_REQUIRE(both.exit_code == 0, both.out << both.err);
    BOOST_TEST(std::filesystem::exists(dir.path() + "/ran1"));
    BOOST_TEST(std::filesystem::exists(dir.path() + "/ran2"));

    for (std::string failing : {"fail-later", "fail-earlier"}) {
        BOOST_TEST_CONTEXT(failing) {
            std::filesystem::remove_all(dir.path() + "/one-started");
            std::filesystem::remove(dir.path() + "/two-started");
            std::filesystem::remove(dir.path() + "/fail-later");
            std::filesystem::remove(dir.path() + "/ran1");
            std::filesystem::remove(dir.path() + "/ran2");
            dir.write(failing, "");
            auto one = run();
            expect_refused(one, "did not start");
            BOOST_TEST(!std::filesystem::exists(dir.path() + "/ran1"));
            BOOST_TEST(!std::filesystem::exists(dir.path() + "/ran2"));
            BOOST_TEST_REQUIRE(one.err.find("steps:") != std::string::npos, one.err);
            BOOST_TEST_MESSAGE(failing << ": " << one.err.substr(one.err.find("steps:")));
            BOOST_TEST(one.err.find("worker.") == std::string::npos,
                       "a worker step outlived agentctl by 5 s: " << one.err);
            BOOST_TEST(all_gone_within({worker_command()}, 5s), "a worker outlived the run");
        }
    }
}

// A worker killed mid-task: a lost worker fails its task as worker_lost and the run goes on;
// nothing of the run is left.
BOOST_AUTO_TEST_CASE(a_killed_worker_fails_its_task_as_worker_lost) {
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    std::string tasks = "    - {id: victim, uses: action:sh, foreach: {items: ['sleep 300; : " + nonce +
                        "']}, failure: continue}\n";
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [sh, sleep]\n", sh_action, tasks));
    bool killed = false;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        if (!cli_test::kill_parent_of(nonce)) return false;
        killed = true;
        return true;
    };
    o.bound = 120s;
    auto r = in_allocation({"--output", "json", "run", "--backend", "slurm", wf}, o);
    BOOST_TEST_REQUIRE(killed, "never saw the task running: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    std::string codes;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object())
        if (id.find("--") != std::string::npos) codes += error_code_of(t.as_object());
    BOOST_TEST(codes == "worker_lost", r.out);
    BOOST_TEST(gone_within(nonce, 10s), "the task outlived its worker");
}

// A workflow of two `sleep` tasks of about five minutes whose command lines carry `nonce`,
// for the cases that interrupt a run while both run.
std::string two_long_tasks(cli_test::temp_dir& dir, const std::string& nonce) {
    std::string items = yaml_quoted("sleep 301; : " + nonce) + ", " + yaml_quoted("sleep 302; : " + nonce);
    return dir.write("wf.yaml",
                     workflow("    processAllowlist: [sh]\n", sh_action,
                              "    - {id: long, uses: action:sh, foreach: {items: [" + items + "]}}\n"));
}

// Both of two_long_tasks()'s tasks and the worker are running: the moment the interrupting
// cases wait for.
bool both_tasks_and_the_worker_run(const std::string& nonce) {
    return cli_test::processes_with(nonce).size() >= 2 && !cli_test::processes_with(worker_command()).empty();
}

// SIGINT while tasks run on the worker: the cancel goes through the worker, which stops each
// task's tree on the node; the run ends 130 with every task cancelled, nothing of it is left on
// the node (tasks, worker, srun) and the allocation it asked for is released.
BOOST_AUTO_TEST_CASE(sigint_cancels_the_running_tasks_through_the_worker) {
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    auto wf = two_long_tasks(dir, nonce);
    bool interrupted = false;
    cli_test::command_options o;
    o.poll = [&](pid_t pid) {
        // The worker seen too: the check at the end looks for what was there.
        if (!both_tasks_and_the_worker_run(nonce)) return false;
        ::kill(pid, SIGINT);
        interrupted = true;
        return true;
    };
    o.bound = 120s;
    auto r =
        cli({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "1", "--jobs", "2", wf}, o);
    BOOST_TEST_REQUIRE(interrupted, "never saw both tasks and the worker running: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 130, r.out << r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("state").as_string() == "cancelled");
    int cancelled = 0;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;  // the foreach parent
        BOOST_TEST(t.at("state").as_string() == "cancelled", std::string(id) << ": " << t);
        cancelled += t.at("state") == "cancelled";
    }
    BOOST_TEST(cancelled == 2, r.out);
    BOOST_TEST(all_gone_within({nonce, worker_command()}, 5s),
               "tasks, the worker or its srun still there 5 s after the cancelled run ended");
    auto left = my_active_jobs_after_the_steps_end();
    BOOST_TEST(left.empty(), names_of(left));
}

// SIGKILL of agentctl: the watchdog kills srun, the worker sees its stdin close and kills its
// tasks; nothing of the run is left within 5 s.
BOOST_AUTO_TEST_CASE(sigkill_of_agentctl_leaves_nothing_on_the_node) {
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    auto wf = two_long_tasks(dir, nonce);
    bool killed = false;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        if (!both_tasks_and_the_worker_run(nonce)) return false;
        // agentctl itself, not salloc (whose command line names the workflow too).
        for (pid_t p : cli_test::processes_with(dir.path() + "/wf.yaml")) {
            std::ifstream cmdline("/proc/" + std::to_string(p) + "/cmdline");
            std::string argv0;
            std::getline(cmdline, argv0, '\0');
            if (argv0 == cli_test::agentctl_bin()) ::kill(p, SIGKILL);
        }
        killed = true;
        return true;
    };
    o.bound = 120s;
    auto r = in_allocation({"run", "--backend", "slurm", "--jobs", "2", dir.path() + "/wf.yaml"}, o);
    BOOST_TEST_REQUIRE(killed, "never saw both tasks running: " << r.out << r.err);
    BOOST_TEST(all_gone_within({nonce, worker_command()}, 5s),
               "tasks, the worker or its srun still there 5 s after SIGKILL of agentctl");
}

// --slurm-nodes outside an allocation (docs/WORKER.md, "Asking for nodes"): agentctl asks for
// the node itself, runs the tasks on its worker and releases it; a request that cannot be
// granted fails closed.
BOOST_AUTO_TEST_CASE(asked_for_nodes_run_the_tasks_and_are_released) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                            "    - {id: two, uses: action:sh, foreach: {items: ['echo a', "
                                            "'echo b']}}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-time", "5",
                  "--jobs", "2", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = parse_json(r.out);
    int ran = 0;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;
        ++ran;
        const auto& o = t.as_object();
        BOOST_TEST(o.at("slurm").at("node").as_string() == c.node, id);
        BOOST_TEST(o.at("slurm").at("worker").as_string() == "worker." + c.node + ":1", id);
        BOOST_TEST(!o.at("slurm").as_object().contains("jobId"), id);
    }
    BOOST_TEST(ran == 2);
    // The allocation was released before agentctl returned.
    auto left = my_active_jobs();
    BOOST_TEST(left.empty(), names_of(left));

    // A request salloc refuses (a time it cannot read): exit 4, nothing ran, nothing left.
    auto refused = cli(
        {"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-time", "1-2-3", wf});
    BOOST_TEST(refused.exit_code == 4, refused.out << refused.err);
    BOOST_TEST(refused.out.find("backend_unavailable") != std::string::npos, refused.out);
    BOOST_TEST(refused.out.find("no Slurm allocation for this run: salloc") != std::string::npos,
               refused.out);
    BOOST_TEST(refused.out.find("Invalid --time") != std::string::npos, refused.out);
    BOOST_TEST(refused.out.find("\"succeeded\"") == std::string::npos, refused.out);
    left = my_active_jobs();
    BOOST_TEST(left.empty(), names_of(left));
    // Inside an allocation, asking for another is refused before salloc.
    auto inside = in_allocation({"run", "--backend", "slurm", "--slurm-nodes", "1", wf});
    BOOST_TEST(inside.exit_code == 4, inside.out << inside.err);
    BOOST_TEST(inside.err.find("already runs inside one") != std::string::npos, inside.err);
    // Options that do not go together are usage errors.
    BOOST_TEST(cli({"run", "--backend", "slurm", "--slurm-time", "5", wf}).exit_code == 2);
    BOOST_TEST(
        cli({"run", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-dispatch", "job", wf}).exit_code ==
        2);
    BOOST_TEST(cli({"run", "--backend", "slurm", "--slurm-nodes", "0", wf}).exit_code == 2);
    BOOST_TEST(
        cli({"run", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-time", "soon", wf}).exit_code == 2);
}

// SIGKILL of agentctl while the tasks run on the allocation it asked for: its watchdog cancels
// the allocation; no process of the run is left after 5 s and the allocation leaves squeue.
BOOST_AUTO_TEST_CASE(sigkill_of_agentctl_cancels_the_allocation_it_asked_for) {
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    auto wf = two_long_tasks(dir, nonce);
    pid_t owner = 0;
    cli_test::command_options o;
    o.poll = [&](pid_t pid) {
        if (!both_tasks_and_the_worker_run(nonce)) return false;
        owner = pid;
        ::kill(pid, SIGKILL);
        return true;
    };
    o.bound = 120s;
    auto r = cli({"run", "--backend", "slurm", "--slurm-nodes", "1", "--jobs", "2", wf}, o);
    BOOST_TEST_REQUIRE(owner != 0, "never saw both tasks running: " << r.out << r.err);
    BOOST_TEST(r.signal == SIGKILL);
    BOOST_TEST(all_gone_within({nonce, worker_command()}, 5s),
               "tasks, the worker or its srun still there 5 s after SIGKILL of agentctl");
    // scancel by the watchdog, then Slurm's own end of the job (measured about 3 s).
    auto until = std::chrono::steady_clock::now() + 30s;
    while (!active_jobs_of(owner).empty() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(100ms);
    auto left = active_jobs_of(owner);
    BOOST_TEST(left.empty(), "the allocation outlived agentctl:" << names_of(left));
}

// A worker killed mid-task: the attempt ends worker_lost, the journal says where it ran, and
// resume takes it for uncertain (it may have had its effect): refused, then run again with
// --rerun-uncertain on a new allocation.
BOOST_AUTO_TEST_CASE(a_lost_workers_attempt_is_uncertain_for_resume) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    std::string mark = dir.path() + "/started";
    std::string script =
        "if [ -e " + mark + " ]; then echo again; else touch " + mark + "; sleep 300; : " + nonce + "; fi";
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                            "    - {id: once, uses: action:sh, foreach: {items: [" +
                                                yaml_quoted(script) + "]}}\n"));
    std::string db = dir.path() + "/journal.db";
    bool killed = false;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        // The script's command line carries the nonce from the moment sh starts, before it
        // has touched the mark: killing the worker then (a loaded machine gets there) kills
        // the task before the mark exists, and the resumed attempt sleeps into its timeout.
        if (!fs::exists(mark) || !cli_test::kill_parent_of(nonce)) return false;
        killed = true;
        return true;
    };
    o.bound = 120s;
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "1", "--db", db, wf}, o);
    BOOST_TEST_REQUIRE(killed, "never saw the task running: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    std::string run_id(v.at("data").at("runId").as_string());
    std::string task;
    for (const auto& [id, t] : v.at("data").at("tasks").as_object())
        if (id.find("--") != std::string::npos) task = id;
    BOOST_TEST(error_code_of(v.at("data").at("tasks").at(task).as_object()) == "worker_lost");
    BOOST_TEST(gone_within(nonce, 10s), "the task outlived its worker");

    auto show = cli({"--output", "json", "runs", "show", run_id, "--task", task, "--db", db});
    BOOST_TEST_REQUIRE(show.exit_code == 0, show.out << show.err);
    json::value shown = parse_json(show.out);
    const auto& attempt = shown.at("data").at("attempts").at(0).as_object();
    BOOST_TEST(attempt.at("node").as_string() == c.node);
    BOOST_TEST(attempt.at("worker").as_string() == "worker." + c.node + ":1");
    BOOST_TEST(attempt.at("uncertain").as_bool());

    auto refused = cli({"--output", "json", "resume", run_id, "--db", db});
    BOOST_TEST(refused.exit_code == 3, refused.out << refused.err);
    BOOST_TEST(refused.err.find("resume_uncertain") != std::string::npos, refused.err);
    auto again = cli({"--output", "json", "resume", run_id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST_REQUIRE(again.exit_code == 0, again.out << again.err);
    json::value resumed = parse_json(again.out);
    const auto& rerun = resumed.at("data").at("tasks").at(task).as_object();
    BOOST_TEST(rerun.at("stdout").as_string() == "again\n");
    BOOST_TEST(rerun.at("slurm").at("node").as_string() == c.node);
    auto left = my_active_jobs_after_the_steps_end();
    BOOST_TEST(left.empty(), names_of(left));
}

// agentctl parallel --slurm-nodes: the jobs run on the worker of the node it asked for (not as
// Slurm jobs: SLURM_JOB_ID is not in their environment), and the allocation is released.
BOOST_AUTO_TEST_CASE(parallel_asks_for_nodes_and_runs_on_their_workers) {
    cli_test::temp_dir dir;
    cli_test::command_options o;
    o.cwd = dir.path();
    auto r = cli({"parallel", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-time", "5", "-k",
                  "--shell", "echo {} job=${SLURM_JOB_ID:-none}", ":::", "a", "b"},
                 o);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    BOOST_TEST(r.out == "a job=none\nb job=none\n", r.out);
    auto left = my_active_jobs();
    BOOST_TEST(left.empty(), names_of(left));
    // Checked as for run: usage errors (parallel's 255) before anything is asked for.
    BOOST_TEST(
        cli({"parallel", "--backend", "slurm", "--slurm-time", "5", "echo", ":::", "a"}, o).exit_code == 255);
    BOOST_TEST(cli({"parallel", "--backend", "slurm", "--slurm-nodes", "1", "--slurm-dispatch", "job", "echo",
                    ":::", "a"},
                   o)
                   .exit_code == 255);
    BOOST_TEST(cli({"parallel", "--slurm-nodes", "1", "echo", ":::", "a"}, o).exit_code == 255);
    // More nodes than the cluster has: the run fails before any job (parallel's 255 for an
    // error that is not a job's), nothing left.
    auto refused = cli({"parallel", "--backend", "slurm", "--slurm-nodes", "3", "echo", ":::", "a"}, o);
    BOOST_TEST(refused.exit_code == 255, refused.out << refused.err);
    BOOST_TEST(refused.out.empty(), refused.out);
    BOOST_TEST(refused.err.find("stays pending (Partition") != std::string::npos, refused.err);
    left = my_active_jobs();
    BOOST_TEST(left.empty(), names_of(left));
}

// A node set DOWN mid-run (issue 28, item 6), the allocation's only node: Slurm ends the
// allocation (NODE_FAIL, --no-kill or not: no node is left) and the worker step with it. The
// running attempt ends worker_lost, and so do the runs sent ahead to the worker and queued
// there (a queued run cannot be told from one whose `started` was lost with the worker:
// docs/WORKER.md, "Pipelining"); a new worker cannot start in an allocation that is gone, so a
// task not sent to any worker yet ends backend_unavailable (nothing of it ran) and the run
// ends, exit 4, instead of waiting for a worker. "The run goes on on the other workers" needs
// a second node: a_node_set_down_ends_its_worker_and_the_run_goes_on_on_the_other
// (test_cli_two_nodes.cpp, slurm-two-nodes).
BOOST_AUTO_TEST_CASE(a_node_set_down_ends_its_attempts_and_the_run) {
    const auto& c = cluster::get();
    cli_test::temp_dir dir;
    std::string nonce = cli_test::make_nonce();
    std::string mark = dir.path() + "/started";
    std::string items = yaml_quoted("touch " + mark + "; sleep 300; : " + nonce) + ", 'echo b', 'echo c'";
    auto wf = dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                            "    - {id: item, uses: action:sh, foreach: {items: [" + items +
                                                "]}, failure: continue}\n"));
    bool downed = false;
    std::string down_said;
    cli_test::command_options o;
    o.poll = [&](pid_t) {
        if (!fs::exists(mark) || cli_test::processes_with(nonce).empty()) return false;
        auto down = slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + c.node,
                                     "state=down", "reason=agentctl-node-down-test"},
                                    slurm_test::client_env(), 20s);
        downed = down.exited && down.code == 0;
        down_said = slurm_test::describe(down);
        return true;
    };
    o.bound = 150s;
    // --jobs 1: the echo items start only after the first one, on a node that is down by then:
    // queued on its worker (sent ahead) or, when the node went down before they were sent,
    // waiting in agentctl. Neither runs.
    auto r =
        cli({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "1", "--jobs", "1", wf}, o);
    // Cleanup first: the node back to service (ReturnToService=2 may have done it already).
    slurm_test::run({slurm_test::tool("scontrol"), "update", "nodename=" + c.node, "state=resume"},
                    slurm_test::client_env(), 20s);
    wait_node_idle();
    BOOST_TEST_REQUIRE(downed, "the node could not be set down: " << down_said << r.out << r.err);
    BOOST_TEST_REQUIRE(!r.timed_out, "the run did not end: " << r.out << r.err);
    BOOST_TEST_REQUIRE(r.exit_code == 4, r.out << r.err);
    json::value v = parse_json(r.out);
    std::map<std::string, std::string> codes;  // by the item's command
    for (const auto& [id, t] : v.at("data").at("tasks").as_object()) {
        if (id.find("--") == std::string::npos) continue;
        const auto& task = t.as_object();
        std::string code = error_code_of(task);
        if (task.at("vars").at("foreachIndex").as_int64() == 0) {
            BOOST_TEST(code == "worker_lost", id << ": " << task);
            BOOST_TEST(task.at("slurm").at("node").as_string() == c.node, task);
        } else {
            BOOST_TEST((code == "worker_lost" || code == "backend_unavailable"), id << ": " << task);
            if (code == "backend_unavailable")
                BOOST_TEST(task.at("error").at("message").as_string().starts_with("no worker is left: "),
                           task);
            BOOST_TEST(task.at("stdout").as_string() == "", task);
        }
        codes[id] = code;
    }
    BOOST_TEST(codes.size() == 3u, r.out);
    BOOST_TEST(gone_within(nonce, 10s), "the task outlived its node");
    auto left = my_active_jobs_after_the_steps_end();
    BOOST_TEST(left.empty(), names_of(left));
}

// --slurm-nodes more than the partition has: Slurm keeps the request pending for ever
// (PartitionConfig or PartitionNodeLimit). One squeue after a few seconds says why, and the run ends: exit 4,
// backend_unavailable, nothing run, the request withdrawn.
BOOST_AUTO_TEST_CASE(an_allocation_that_can_never_be_granted_ends_the_run) {
    cli_test::temp_dir dir;
    auto wf =
        dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                      "    - {id: one, uses: action:sh, foreach: {items: ['echo a']}}\n"));
    auto r = cli({"--output", "json", "run", "--backend", "slurm", "--slurm-nodes", "3", wf});
    BOOST_TEST_REQUIRE(!r.timed_out, "the run waited: " << r.out << r.err);
    BOOST_TEST(r.exit_code == 4, r.out << r.err);
    BOOST_TEST(r.out.find("backend_unavailable") != std::string::npos, r.out);
    // Slurm's reason: PartitionConfig here (PartitionNodeLimit was seen too, in docs/SLURM.md).
    BOOST_TEST(r.out.find("stays pending (Partition") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("\"succeeded\"") == std::string::npos, r.out);
    auto left = my_active_jobs();
    BOOST_TEST(left.empty(), names_of(left));
}

// A request that waits for a node another job holds: after a few seconds a warning says so
// with Slurm's reason (slurm_allocation_pending); SIGINT then withdraws the request.
BOOST_AUTO_TEST_CASE(a_pending_allocation_is_said_and_sigint_withdraws_it) {
    cli_test::temp_dir dir;
    std::string holder = "agentctl-test-holder-" + cli_test::make_nonce();
    auto held = slurm_test::run({slurm_test::tool("salloc"), "--no-shell", "--quiet", "--nodes=1",
                                 "--exclusive", "--time=5", "--job-name=" + holder},
                                slurm_test::client_env(), 60s);
    BOOST_TEST_REQUIRE((held.exited && held.code == 0), "salloc: " << slurm_test::describe(held));
    auto wf =
        dir.write("wf.yaml", workflow("    processAllowlist: [sh]\n", sh_action,
                                      "    - {id: one, uses: action:sh, foreach: {items: ['echo a']}}\n"));
    // agentctl's stderr to a file, to see the warning while it waits.
    std::string err_file = dir.path() + "/stderr";
    bool interrupted = false;
    cli_test::command_options o;
    o.env.push_back("SLURM_CONF=" + cluster::get().conf);
    o.bound = 120s;
    o.poll = [&](pid_t pid) {
        std::ifstream in(err_file);
        std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (said.find("slurm_allocation_pending") == std::string::npos) return false;
        ::kill(pid, SIGINT);
        interrupted = true;
        return true;
    };
    auto r = cli_test::run({"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$ERR\"", cli_test::agentctl_bin(), "run",
                            "--backend", "slurm", "--slurm-nodes", "1", wf},
                           [&] {
                               auto with = o;
                               with.env.push_back("ERR=" + err_file);
                               return with;
                           }());
    std::ifstream in(err_file);
    std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Release the holder before any check can stop the case.
    slurm_test::run({cluster::get().scancel, "--name=" + holder}, slurm_test::client_env(), 30s);
    BOOST_TEST_REQUIRE(interrupted, "no pending warning: " << r.out << err);
    BOOST_TEST(!r.timed_out);
    BOOST_TEST(r.exit_code == 130, r.out << err);  // cancelled, as any run on SIGINT
    BOOST_TEST(err.find("the run was cancelled while salloc waited") != std::string::npos, err);
    // With Slurm's reason: the node is held (Resources; Priority behind another pending job).
    BOOST_TEST(err.find("is still pending after 5 s (") != std::string::npos, err);
    BOOST_TEST(err.find("s ()") == std::string::npos, err);
    BOOST_TEST(r.out.find("echo a") == std::string::npos, r.out);
    // Nothing of the run is left in the queue (the holder is being cancelled: not ours).
    std::vector<queue_entry> ours;
    for (auto& e : my_active_jobs())
        if (e.name != holder) ours.push_back(e);
    BOOST_TEST(ours.empty(), names_of(ours));
}

BOOST_AUTO_TEST_SUITE_END()
