// The behaviour the Slurm launcher will rely on, against the real Slurm of
// tools/slurm-fixture: the commands src/runner/slurm builds, run as they are (docs/SLURM.md).
#include "slurm_names.hpp"
#include "spawn.hpp"

#include "runner/slurm/classify.hpp"
#include "runner/slurm/command.hpp"
#include "runner/slurm/job.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace agentctl::slurm;
using namespace slurm_test;

namespace {

// Paths and names from the fixture's environment; fails loudly outside it.
struct cluster {
    std::string srun, squeue, scancel, scontrol, sinfo;
    std::string probe, partition, partition2, node, fixture, dir;
    std::string run_id;
    job_owner owner;

    static const cluster& get() {
        static const cluster c = make();
        return c;
    }

private:
    static cluster make() {
        cluster c;
        BOOST_TEST_REQUIRE(
            !env_or_empty("SLURM_CONF").empty(),
            "SLURM_CONF is not set: run this suite through tools/slurm-fixture (meson test slurm)");
        c.srun = tool("srun");
        c.squeue = tool("squeue");
        c.scancel = tool("scancel");
        c.scontrol = tool("scontrol");
        c.sinfo = tool("sinfo");
        c.probe = env_or_empty("AGENTCTL_PROBE");
        BOOST_TEST_REQUIRE(fs::exists(c.probe), "AGENTCTL_PROBE is not the probe: " << c.probe);
        c.partition = env_or_empty("AGENTCTL_SLURM_PARTITION");
        c.partition2 = env_or_empty("AGENTCTL_SLURM_PARTITION2");
        c.node = env_or_empty("AGENTCTL_SLURM_NODE");
        c.fixture = env_or_empty("AGENTCTL_SLURM_FIXTURE");
        c.dir = env_or_empty("AGENTCTL_SLURM_DIR");
        BOOST_TEST_REQUIRE(!c.partition.empty());
        BOOST_TEST_REQUIRE(!c.node.empty());
        c.run_id = "run-live" + std::to_string(::getpid());
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        std::ifstream stat("/proc/self/stat");
        std::string line;
        std::getline(stat, line);
        auto at = line.rfind(')');
        for (int field = 2; at != std::string::npos && field < 22; ++field) at = line.find(' ', at + 1);
        c.owner = job_owner{job_name_host(host), static_cast<long>(::getpid()),
                            line.substr(at + 1, line.find(' ', at + 1) - at - 1)};
        return c;
    }
};

int attempt_counter = 0;

// One attempt of the probe: a unique task id per call.
srun_request probe_attempt(const std::string& task, std::vector<std::string> args,
                           std::vector<std::string> env_names = {}) {
    const auto& c = cluster::get();
    srun_request r;
    r.srun = c.srun;
    r.run_id = c.run_id;
    r.owner = c.owner;
    r.task_id = task;
    r.attempt = static_cast<std::uint32_t>(++attempt_counter);
    r.executable = c.probe;
    r.args = std::move(args);
    r.cwd = "/tmp";
    r.env_names = std::move(env_names);
    return r;
}

std::vector<std::string> argv_of(const srun_request& r) {
    auto a = srun_argv(r);
    BOOST_TEST_REQUIRE(bool(a), a.error);
    return a.argv;
}

std::string name_of(const srun_request& r) {
    std::string error;
    auto n = job_name(r.run_id, r.owner, r.task_id, r.attempt, error);
    BOOST_TEST_REQUIRE(n.has_value(), error);
    return *n;
}

// One batched squeue over every name; name -> entry.
std::map<std::string, queue_entry> query(const std::vector<std::string>& names) {
    std::map<std::string, queue_entry> found;
    for (const auto& cmd : squeue_by_names(cluster::get().squeue, names)) {
        auto o = run(cmd, client_env(), 20s);
        BOOST_TEST_REQUIRE((o.exited && o.code == 0), "squeue: " << describe(o));
        for (auto& e : parse_squeue(o.out)) found[e.name] = e;
    }
    return found;
}

std::optional<queue_entry> entry(const std::string& name) {
    auto q = query({name});
    auto it = q.find(name);
    if (it == q.end()) return std::nullopt;
    return it->second;
}

// Polls squeue (Slurm's state has no event to wait on) until `ok` holds or `bound` passes.
template <typename Pred>
bool poll_until(Pred ok, milliseconds bound, milliseconds step = 50ms) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    for (;;) {
        if (ok()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        pause(step);
    }
}

bool active(const std::string& name) {
    auto e = entry(name);
    return e && is_active(e->state);
}

// Waits until the job is listed (any state) and returns it.
queue_entry wait_listed(const std::string& name, milliseconds bound = 20s) {
    std::optional<queue_entry> e;
    BOOST_TEST_REQUIRE(poll_until([&] { return (e = entry(name)).has_value(); }, bound),
                       name << " never appeared in squeue");
    return *e;
}

// Listed, and past COMPLETING (which a loaded node can show for seconds after srun returned).
queue_entry wait_settled(const std::string& name, milliseconds bound = 30s) {
    std::optional<queue_entry> e;
    BOOST_TEST_REQUIRE(
        poll_until([&] { return (e = entry(name)) && e->state != job_state::completing; }, bound),
        name << " did not settle; last seen: " << (e ? e->state_text : "not listed"));
    return *e;
}

// Every name listed and past COMPLETING, from one squeue per poll.
std::map<std::string, queue_entry> wait_all_settled(const std::vector<std::string>& names,
                                                    milliseconds bound = 30s) {
    std::map<std::string, queue_entry> jobs;
    auto settled = [&] {
        jobs = query(names);
        if (jobs.size() != names.size()) return false;
        for (const auto& [name, e] : jobs)
            if (e.state == job_state::completing) return false;
        return true;
    };
    BOOST_TEST_REQUIRE(poll_until(settled, bound), "of " << names.size() << " jobs, " << jobs.size()
                                                         << " listed, not all past COMPLETING");
    return jobs;
}

queue_entry wait_running(const std::string& name, milliseconds bound = 30s) {
    std::optional<queue_entry> e;
    BOOST_TEST_REQUIRE(poll_until([&] { return (e = entry(name)) && e->state == job_state::running; }, bound),
                       name << " did not start running; last seen: " << (e ? e->state_text : "not listed"));
    return *e;
}

bool wait_file(const std::string& path, milliseconds bound = 30s) {
    return poll_until([&] { return fs::exists(path); }, bound, 20ms);
}

job_record show_job(std::uint64_t id) {
    auto o = run(scontrol_show_job(cluster::get().scontrol, id), client_env(), 20s);
    BOOST_TEST_REQUIRE((o.exited && o.code == 0), describe(o));
    auto jobs = parse_scontrol_jobs(o.out);
    BOOST_TEST_REQUIRE(jobs.size() == 1u, o.out);
    return jobs[0];
}

attempt_end classify_outcome(const outcome& o, const queue_entry& e, std::optional<exit_pair> job_exit = {},
                             bool stopped = false) {
    end_evidence ev;
    if (o.exited)
        ev.srun_exit = o.code;
    else
        ev.srun_signal = o.signal;
    ev.stderr_tail = o.err;
    ev.state = e.state;
    ev.job_exit = job_exit;
    ev.stopped_by_agentctl = stopped;
    return classify_end(ev);
}

void wait_node_idle() {
    const auto& c = cluster::get();
    std::string state;
    bool idle = poll_until(
        [&] {
            auto o = run({c.sinfo, "--noheader", "--nodes=" + c.node, "--format=%T"}, client_env(), 20s);
            state = o.out;
            while (!state.empty() && state.back() == '\n') state.pop_back();
            return state == "idle";
        },
        30s, 100ms);
    BOOST_TEST_REQUIRE(idle, "the node is not idle: " << state);
}

// A folder under the temporary directory, removed at the end of the test whatever happens.
struct temp_folder {
    explicit temp_folder(const std::string& tag)
        : path((fs::temp_directory_path() / ("agentctl-slurm-" + tag + "-" + std::to_string(::getpid())))
                   .string()) {
        fs::create_directories(path);
    }
    ~temp_folder() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    temp_folder(const temp_folder&) = delete;
    temp_folder& operator=(const temp_folder&) = delete;
    const std::string path;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(live)

BOOST_AUTO_TEST_CASE(exit_codes_and_signals_come_back) {
    struct row {
        std::vector<std::string> args;
        int srun_status;
        end_kind kind;
        std::optional<int> exit_code, signal;
        job_state state;
    };
    const std::vector<row> rows = {
        {{"exit", "0"}, 0, end_kind::succeeded, 0, {}, job_state::completed},
        {{"exit", "3"}, 3, end_kind::exit_nonzero, 3, {}, job_state::failed},
        {{"exit", "137"}, 137, end_kind::exit_nonzero, 137, {}, job_state::failed},
        {{"signal-self", "KILL"}, 137, end_kind::signaled, {}, 9, job_state::failed},
        {{"signal-self", "SEGV"}, 139, end_kind::signaled, {}, 11, job_state::failed},
        {{"signal-self", "TERM"}, 143, end_kind::signaled, {}, 15, job_state::failed},
    };
    std::vector<std::string> names;
    std::vector<outcome> outcomes;
    for (const auto& r : rows) {
        auto req = probe_attempt("exit", r.args);
        req.timeout_ms = 2000;  // --time=2
        names.push_back(name_of(req));
        outcomes.push_back(run(argv_of(req), client_env(), 30s));
    }
    // One squeue for all of them; a job can show COMPLETING for a while after srun returned.
    auto jobs = wait_all_settled(names);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        const auto& o = outcomes[i];
        const std::string what = r.args[0] + " " + r.args[1] + ": " + describe(o);
        BOOST_TEST(o.exited, what);
        BOOST_TEST(o.code == r.srun_status, what);
        const auto& e = jobs.at(names[i]);
        BOOST_TEST((e.state == r.state), what << "; state " << e.state_text);
        BOOST_TEST(e.nodes == cluster::get().node);
        auto rec = show_job(e.job_id);
        BOOST_TEST(*rec.get("JobName") == names[i]);
        BOOST_TEST(*rec.get("TimeLimit") == "00:02:00");  // a 2 s timeout, rounded up, plus a minute
        auto end = classify_outcome(o, e, rec.exit_code());
        BOOST_TEST((end.kind == r.kind),
                   what << "; classified " << error_code(end.kind) << ": " << end.message);
        BOOST_TEST((end.exit_code == r.exit_code), what);
        BOOST_TEST((end.signal == r.signal), what);
        BOOST_TEST(end.from_job_state);
        // Without the controller's record, srun's status and lines alone agree.
        end_evidence bare;
        bare.srun_exit = o.code;
        bare.stderr_tail = o.err;
        BOOST_TEST((classify_end(bare).kind == r.kind), what);
    }
}

// The task's environment is the declared names that are set, plus Slurm's own variables
// (slurm_names.hpp: `SLURM_*`, `SLURMD_*`, TMPDIR), and nothing else; the variables that name
// the job carry this job's values, never agentctl's own.
BOOST_AUTO_TEST_CASE(environment_is_the_declared_names_plus_slurms) {
    const std::string secret = "value with spaces, commas and = signs";
    // agentctl's own SLURM_* variables must not reach srun: client_environment keeps SLURM_CONF only.
    auto host = [](std::string_view name) -> std::optional<std::string> {
        if (name == "SLURM_CONF") return env_or_empty("SLURM_CONF");
        if (name == "SLURM_JOB_ID") return std::string("999999");
        return std::nullopt;
    };
    auto env = client_environment(host, {"FOO=" + secret, "EMPTY="});
    BOOST_TEST_REQUIRE(env.size() == 3u);
    auto names_of = [](const std::string& out) {
        std::map<std::string, std::string> seen;
        std::istringstream lines(out);
        for (std::string line; std::getline(lines, line);)
            seen[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
        std::set<std::string> names;
        for (const auto& [k, v] : seen) names.insert(k);
        return std::make_pair(seen, names);
    };
    auto req = probe_attempt("env", {"report-env"}, {"FOO", "EMPTY", "UNSET_ONE"});
    auto o = run(argv_of(req), env, 30s);
    BOOST_TEST_REQUIRE((o.exited && o.code == 0), describe(o));
    BOOST_TEST(o.err.empty(), o.err);
    auto [seen, names] = names_of(o.out);
    const std::set<std::string> declared = {"FOO", "EMPTY"};  // UNSET_ONE is declared but not set: absent
    std::string problems = environment_problems(names, declared, {});
    BOOST_TEST(problems.empty(), problems);
    BOOST_TEST(!names.count("UNSET_ONE"));
    if (auto d = differences_from_the_usual(names, declared); !d.empty()) slurm_test::record_difference(d);
    BOOST_TEST(seen["FOO"] == secret);
    BOOST_TEST(seen["EMPTY"] == "");
    BOOST_TEST(seen["SLURM_JOB_NAME"] == name_of(req));
    BOOST_TEST(seen["SLURM_JOB_ID"] != "999999");
    BOOST_TEST(seen["SLURM_JOB_PARTITION"] == cluster::get().partition);
    BOOST_TEST(seen["SLURMD_NODENAME"] == cluster::get().node);

    // No names declared: --export=NONE gives Slurm's own alone.
    auto bare = probe_attempt("env-none", {"report-env"});
    auto b = run(argv_of(bare), client_env(), 30s);
    BOOST_TEST_REQUIRE((b.exited && b.code == 0), describe(b));
    BOOST_TEST(b.err.empty(), b.err);
    auto [bare_seen, bare_names] = names_of(b.out);
    std::string bare_problems = environment_problems(bare_names, {}, {});
    BOOST_TEST(bare_problems.empty(), bare_problems);
    if (auto d = differences_from_the_usual(bare_names, {}); !d.empty()) slurm_test::record_difference(d);
    BOOST_TEST(bare_seen["SLURM_JOB_NAME"] == name_of(bare));
    BOOST_TEST(bare_seen["SLURM_JOB_PARTITION"] == cluster::get().partition);
}

BOOST_AUTO_TEST_CASE(cwd_stdin_and_argument_passing) {
    temp_folder folder("cwd dir");
    const std::string& dir = folder.path;  // a space in the path
    auto req = probe_attempt("cwd", {"report-cwd"});
    req.cwd = dir;
    auto o = run(argv_of(req), client_env(), 30s);
    BOOST_TEST_REQUIRE((o.exited && o.code == 0), describe(o));
    BOOST_TEST(o.out == dir + "\n");

    auto in = probe_attempt("stdin", {"read-stdin"});
    auto i = run(argv_of(in), client_env(), 30s);
    BOOST_TEST_REQUIRE((i.exited && i.code == 0), describe(i));
    BOOST_TEST(i.out == "0\n");  // --input=none: end-of-file at once

    // Arguments that look like srun options are the program's.
    auto args = probe_attempt("argv", {"report-argv", "--time=5", "-n2", "--export=ALL", "--", ""});
    auto a = run(argv_of(args), client_env(), 30s);
    BOOST_TEST_REQUIRE((a.exited && a.code == 0), describe(a));
    auto hex = [](const std::string& s) {
        std::string h;
        char b[3];
        for (unsigned char ch : s) {
            std::snprintf(b, sizeof b, "%02x", ch);
            h += b;
        }
        return h + "\n";
    };
    BOOST_TEST(a.out == hex(cluster::get().probe) + hex("report-argv") + hex("--time=5") + hex("-n2") +
                            hex("--export=ALL") + hex("--") + "\n");
}

BOOST_AUTO_TEST_CASE(node_side_failures_are_told_apart) {
    auto cd = probe_attempt("chdir", {"report-cwd"});
    cd.cwd = "/nonexistent/agentctl-slurm-test";
    auto o = run(argv_of(cd), client_env(), 30s);
    BOOST_TEST(o.exited);
    BOOST_TEST(o.code == 0);        // Slurm ran it anyway...
    BOOST_TEST(o.out == "/tmp\n");  // ...in /tmp
    auto e = wait_listed(name_of(cd));
    auto end = classify_outcome(o, e);
    BOOST_TEST((end.kind == end_kind::cwd_unavailable), end.message);

    auto ex = probe_attempt("exec", {});
    ex.executable = "/nonexistent/agentctl-slurm-exe";
    auto x = run(argv_of(ex), client_env(), 30s);
    BOOST_TEST(x.exited);
    BOOST_TEST(x.code == 2, describe(x));  // errno ENOENT, not the program's
    auto xe = wait_listed(name_of(ex));
    auto xend = classify_outcome(x, xe);
    BOOST_TEST((xend.kind == end_kind::executable_not_found), xend.message);
}

BOOST_AUTO_TEST_CASE(secret_values_never_appear_in_any_argv) {
    const std::string secret = "agentctl-secret-" + std::to_string(::getpid()) + "-x9";
    temp_folder folder("secret");
    const std::string& dir = folder.path;
    std::string marker = dir + "/ready";
    auto req = probe_attempt("secret", {"trap-term", "exit", "0", "--marker", marker}, {"SECRET_TOKEN"});
    auto argv = argv_of(req);
    child c(argv, client_env({"SECRET_TOKEN=" + secret}));
    BOOST_TEST_REQUIRE(wait_file(marker), "the program never started");
    auto cmd = cmdline_of(c.pid());
    BOOST_TEST_REQUIRE(cmd.has_value());
    BOOST_TEST(cmd->find("--export=SECRET_TOKEN") != std::string::npos);
    BOOST_TEST(cmd->find(secret) == std::string::npos);
    // Nor in any process on the machine: srun's helper, slurmstepd, the task.
    std::size_t scanned = 0;
    for (pid_t pid : all_pids()) {
        if (auto line = cmdline_of(pid)) {
            ++scanned;
            BOOST_TEST(line->find(secret) == std::string::npos,
                       "pid " << pid << " has the secret in its argv");
        }
    }
    BOOST_TEST(scanned > 5u);
    auto e = wait_running(name_of(req));
    auto rc = run(scancel_jobs(cluster::get().scancel, {e.job_id}), client_env(), 20s);
    BOOST_TEST(rc.exited);
    auto o = c.wait(30s);
    BOOST_TEST(!o.timed_out, describe(o));
    BOOST_TEST(poll_until([&] { return !active(name_of(req)); }, 10s));
}

BOOST_AUTO_TEST_CASE(scancel_removes_jobs_within_bounds) {
    const auto& c = cluster::get();
    temp_folder folder("cancel");
    const std::string& dir = folder.path;
    // Plain scancel: SIGTERM; the probe dies of it. The scancel waits for the program to have
    // started: a job listed RUNNING may not have launched its step yet, and a scancel then
    // revokes the step's credential (srun exits 168, "Job credential revoked"; the job is
    // still CANCELLED, which the unit test `cancellations` covers).
    {
        const std::string pids = dir + "/sleep-pids";
        fs::create_directory(pids);
        auto req = probe_attempt("cancel", {"sleep", "300", "--pidfile-dir", pids});
        child srun(argv_of(req), client_env());
        BOOST_TEST_REQUIRE(poll_until([&] { return !fs::is_empty(pids); }, 30s, 20ms),
                           "the program never started");
        auto e = wait_running(name_of(req));
        auto start = std::chrono::steady_clock::now();
        run(scancel_jobs(c.scancel, {e.job_id}), client_env(), 20s);
        BOOST_TEST(poll_until([&] { return !active(name_of(req)); }, 5s), "still active 5 s after scancel");
        auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
        BOOST_TEST_MESSAGE("scancel: gone after " << took.count() << " ms");
        auto o = srun.wait(20s);
        BOOST_TEST((o.exited && o.code == 143), describe(o));
        auto fin = wait_listed(name_of(req));
        BOOST_TEST((fin.state == job_state::cancelled), fin.state_text);
        BOOST_TEST((classify_outcome(o, fin).kind == end_kind::cancelled));
        BOOST_TEST((classify_outcome(o, fin, {}, true).kind == end_kind::stopped));
    }
    // scancel --signal=TERM: a signal to the program, which exits 7; the job fails with that.
    {
        std::string marker = dir + "/term-ready";
        auto req = probe_attempt("term", {"trap-term", "exit", "7", "--marker", marker});
        child srun(argv_of(req), client_env());
        BOOST_TEST_REQUIRE(wait_file(marker));
        auto e = wait_running(name_of(req));
        run(scancel_signal(c.scancel, e.job_id, "TERM"), client_env(), 20s);
        auto o = srun.wait(10s);
        BOOST_TEST((o.exited && o.code == 7), describe(o));
        BOOST_TEST(poll_until([&] { return !active(name_of(req)); }, 5s));
        auto fin = wait_listed(name_of(req));
        BOOST_TEST((fin.state == job_state::failed), fin.state_text);
        BOOST_TEST(show_job(fin.job_id).exit_code()->status == 7);
    }
    // A program that ignores SIGTERM: SIGKILL to the step ends it at once, where scancel
    // alone would wait KillWait (10 s here).
    {
        std::string marker = dir + "/ignore-ready";
        auto req = probe_attempt("kill", {"trap-term", "ignore", "--marker", marker});
        child srun(argv_of(req), client_env());
        BOOST_TEST_REQUIRE(wait_file(marker));
        auto e = wait_running(name_of(req));
        run(scancel_kill_step(c.scancel, e.job_id), client_env(), 20s);
        run(scancel_jobs(c.scancel, {e.job_id}), client_env(), 20s);
        BOOST_TEST(poll_until([&] { return !active(name_of(req)); }, 3s), "still active 3 s after the KILL");
        auto o = srun.wait(10s);
        BOOST_TEST((o.exited && o.code == 137), describe(o));
    }
    // scancel's status says nothing: an unknown job is "cancelled" too.
    auto unknown = run(scancel_jobs(c.scancel, {99999999}), client_env(), 20s);
    BOOST_TEST((unknown.exited && unknown.code == 0), describe(unknown));
}

BOOST_AUTO_TEST_CASE(killing_the_srun_client_is_not_the_job_gone) {
    temp_folder folder("client");
    const std::string& dir = folder.path;
    std::string marker = dir + "/ready";
    auto req = probe_attempt("client", {"trap-term", "exit", "0", "--marker", marker});
    const std::string name = name_of(req);
    {
        child srun(argv_of(req), client_env());
        BOOST_TEST_REQUIRE(wait_file(marker));
        wait_running(name);
        // What a tree kill does: srun and its helper die together.
        ::kill(-srun.pid(), SIGKILL);
        auto o = srun.wait(10s);
        BOOST_TEST((!o.exited && o.signal == SIGKILL), describe(o));
    }
    // Three seconds on, the job is still running (it would run to its time limit).
    pause(3s);
    auto e = entry(name);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->state == job_state::running), e->state_text);
    run(scancel_jobs(cluster::get().scancel, {e->job_id}), client_env(), 20s);
    BOOST_TEST(poll_until([&] { return !active(name); }, 10s), "still active 10 s after scancel");

    // srun alone (its helper survives): the helper cancels the job.
    fs::remove(marker);
    auto alone = probe_attempt("client-alone", {"trap-term", "exit", "0", "--marker", marker});
    {
        child srun(argv_of(alone), client_env());
        BOOST_TEST_REQUIRE(wait_file(marker));
        wait_running(name_of(alone));
        ::kill(srun.pid(), SIGKILL);
        srun.wait(10s);
        BOOST_TEST(poll_until([&] { return !active(name_of(alone)); }, 10s));
    }
}

BOOST_AUTO_TEST_CASE(one_squeue_answers_for_many_names) {
    constexpr int n = 6;  // more than the node's CPUs here: some wait PENDING
    std::vector<std::unique_ptr<child>> sruns;
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
        auto req = probe_attempt("batch-" + std::to_string(i), {"sleep", "1"});
        names.push_back(name_of(req));
        sruns.push_back(std::make_unique<child>(argv_of(req), client_env()));
    }
    // A job is listed from its submission (about 10 ms after srun starts).
    std::map<std::string, queue_entry> seen;
    BOOST_TEST(poll_until([&] { return (seen = query(names)).size() == names.size(); }, 10s),
               "one query listed " << seen.size() << " of " << n);
    std::set<std::uint64_t> ids;
    for (const auto& [name, e] : seen) {
        ids.insert(e.job_id);
        BOOST_TEST(is_active(e.state), name << " " << e.state_text);
        if (e.state == job_state::pending) BOOST_TEST(e.nodes.empty());
    }
    BOOST_TEST(ids.size() == static_cast<std::size_t>(n));
    // --name is exact: the run's prefix matches nothing.
    auto prefix =
        run({cluster::get().squeue, "--noheader", "--states=all", "--name=agentctl:" + cluster::get().run_id},
            client_env(), 20s);
    BOOST_TEST(prefix.out.empty());
    for (auto& s : sruns) {
        auto o = s->wait(60s);
        BOOST_TEST((o.exited && o.code == 0), describe(o));
    }
    // Ended jobs stay listed with --states=all, in their final state, by name and by id.
    auto after = wait_all_settled(names);
    for (const auto& [name, e] : after)
        BOOST_TEST((e.state == job_state::completed), name << " " << e.state_text);
    std::vector<std::uint64_t> id_list(ids.begin(), ids.end());
    auto by_id = run(squeue_by_ids(cluster::get().squeue, id_list).at(0), client_env(), 20s);
    BOOST_TEST(parse_squeue(by_id.out).size() == ids.size());
    // And our names come back whole.
    for (const auto& [name, e] : after) BOOST_TEST(parse_job_name(e.name)->run_id == cluster::get().run_id);
}

BOOST_AUTO_TEST_CASE(time_limit_ends_the_job_as_timeout) {
    // --time=1, Slurm's smallest; the controller enforces it 60-90 s after the start.
    auto req = probe_attempt("time-limit", {"sleep", "300"});
    auto argv = argv_of(req);
    argv.insert(std::find(argv.begin(), argv.end(), "--"), "--time=1");
    auto o = run(argv, client_env(), 180s);
    BOOST_TEST_MESSAGE("time limit: srun ended after " << o.wall.count() << " ms");
    BOOST_TEST(!o.timed_out, describe(o));
    BOOST_TEST((o.exited && o.code == 143), describe(o));
    BOOST_TEST(o.wall >= 60s);
    // srun usually prints slurmstepd's "*** ... DUE TO TIME LIMIT ***", but not always (seen
    // once with only "task 0: Terminated"): the controller's TIMEOUT state is what decides.
    BOOST_TEST_MESSAGE(
        "srun said DUE TO TIME LIMIT: " << (o.err.find("DUE TO TIME LIMIT") != std::string::npos));
    auto e = wait_settled(name_of(req));
    BOOST_TEST((e.state == job_state::timeout), e.state_text);
    auto end = classify_outcome(o, e);
    BOOST_TEST((end.kind == end_kind::time_limit), end.message);
    BOOST_TEST(error_code(end.kind) == "slurm_time_limit");
}

BOOST_AUTO_TEST_CASE(preflight_sees_partitions_and_a_live_controller) {
    const auto& c = cluster::get();
    auto ping = run(scontrol_ping(c.scontrol), client_env(), 20s);
    BOOST_TEST((ping.exited && ping.code == 0), describe(ping));
    BOOST_TEST(ping_says_up(ping.out));
    for (const auto& [partition, is_default] :
         std::vector<std::pair<std::string, bool>>{{c.partition, true}, {c.partition2, false}}) {
        auto s = run(sinfo_partition(c.sinfo, partition), client_env(), 20s);
        auto p = parse_partition(s.out, partition);
        BOOST_TEST(p.found, partition << ": " << s.out);
        BOOST_TEST(p.up);
        BOOST_TEST(p.is_default == is_default);
    }
    auto nope = run(sinfo_partition(c.sinfo, "nope"), client_env(), 20s);
    BOOST_TEST((nope.exited && nope.code == 0));           // sinfo does not fail...
    BOOST_TEST(!parse_partition(nope.out, "nope").found);  // ...it lists nothing

    // The second partition runs jobs too.
    auto second = probe_attempt("second", {"exit", "0"});
    second.resources.partition = c.partition2;
    auto s2 = run(argv_of(second), client_env(), 30s);
    BOOST_TEST((s2.exited && s2.code == 0), describe(s2));

    auto req = probe_attempt("bad-partition", {"exit", "0"});
    req.resources.partition = "nope";
    auto o = run(argv_of(req), client_env(), 30s);
    BOOST_TEST((o.exited && o.code == 1), describe(o));
    BOOST_TEST(o.wall < 2s);
    BOOST_TEST(!entry(name_of(req)).has_value());
    end_evidence ev;
    ev.srun_exit = o.code;
    ev.stderr_tail = o.err;
    BOOST_TEST((classify_end(ev).kind == end_kind::launch_failed), o.err);
}

// Stops the controller (and restarts it).
BOOST_AUTO_TEST_CASE(a_stopped_controller_fails_fast) {
    const auto& c = cluster::get();
    BOOST_TEST_REQUIRE(!c.fixture.empty(), "AGENTCTL_SLURM_FIXTURE is not set");
    auto stop = run({"/bin/sh", c.fixture, "controller", "stop"},
                    {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "AGENTCTL_FIXTURE_DIR=" + c.dir,
                     "SLURM_CONF=" + env_or_empty("SLURM_CONF")},
                    30s);
    BOOST_TEST_REQUIRE((stop.exited && stop.code == 0), describe(stop));
    auto ping = run(scontrol_ping(c.scontrol), client_env(), 20s);
    BOOST_TEST((ping.exited && ping.code != 0), describe(ping));
    BOOST_TEST(!ping_says_up(ping.out));
    BOOST_TEST(ping.wall < 2s, "scontrol ping took " << ping.wall.count() << " ms");
    auto req = probe_attempt("no-controller", {"exit", "0"});
    auto o = run(argv_of(req), client_env(), 30s);
    BOOST_TEST_MESSAGE("srun without a controller: " << describe(o));
    BOOST_TEST((o.exited && o.code == 1), describe(o));
    BOOST_TEST(o.wall < 15s);  // 9 s measured: the clients retry for MessageTimeout
    end_evidence ev;
    ev.srun_exit = o.code;
    ev.stderr_tail = o.err;
    auto end = classify_end(ev);
    BOOST_TEST((end.kind == end_kind::launch_failed), end.message);
    BOOST_TEST(end.message.find("Unable to contact slurm controller") != std::string::npos, end.message);
    auto q = run(squeue_by_names(c.squeue, {name_of(req)}).at(0), client_env(), 30s);
    BOOST_TEST((q.exited && q.code != 0), describe(q));
    BOOST_TEST(q.wall < 15s);

    auto start = run({"/bin/sh", c.fixture, "controller", "start"},
                     {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "AGENTCTL_FIXTURE_DIR=" + c.dir,
                      "SLURM_CONF=" + env_or_empty("SLURM_CONF")},
                     60s);
    BOOST_TEST_REQUIRE((start.exited && start.code == 0), describe(start));
    BOOST_TEST(ping_says_up(run(scontrol_ping(c.scontrol), client_env(), 20s).out));
    wait_node_idle();
}

// Last: the step of a node-failed job keeps retrying its completion message to the
// controller, and outlived a controller restart once (docs/SLURM.md, 7).
BOOST_AUTO_TEST_CASE(a_node_failure_is_not_a_success) {
    const auto& c = cluster::get();
    auto req = probe_attempt("node-fail", {"sleep", "300"});
    child srun(argv_of(req), client_env());
    auto e = wait_running(name_of(req));
    auto down = run({c.scontrol, "update", "nodename=" + c.node, "state=down", "reason=agentctl-test"},
                    client_env(), 20s);
    BOOST_TEST_REQUIRE((down.exited && down.code == 0), describe(down));
    auto o = srun.wait(30s);
    // srun says success when the step had started; when the node went down first (the job
    // RUNNING, its step not yet launched), it fails with "Job credential revoked" or "Unable
    // to create step for job N: Job/step already completing or completed" (each seen once
    // under load). Either way the job's NODE_FAIL decides.
    bool launched = o.err.find("Job credential revoked") == std::string::npos &&
                    o.err.find("Unable to create step") == std::string::npos;
    BOOST_TEST_MESSAGE("node failure: the step " << (launched ? "had started" : "had not started"));
    BOOST_TEST((o.exited && (launched ? o.code == 0 : o.code != 0)), describe(o));
    auto fin = wait_listed(name_of(req));
    BOOST_TEST((fin.state == job_state::node_fail), fin.state_text);
    auto end = classify_outcome(o, fin);
    BOOST_TEST((end.kind == end_kind::node_failure), end.message);
    BOOST_TEST(show_job(e.job_id).get("Reason").value_or("") == "NodeDown");
    // ReturnToService=2 brings the node back once slurmd answers; resume it if not.
    if (!poll_until(
            [&] {
                auto s = run({c.sinfo, "--noheader", "--nodes=" + c.node, "--format=%T"}, client_env(), 20s);
                return s.out == "idle\n";
            },
            5s, 100ms))
        run({c.scontrol, "update", "nodename=" + c.node, "state=resume"}, client_env(), 20s);
    wait_node_idle();
}

BOOST_AUTO_TEST_SUITE_END()

// Needs the fixture's cgroup mode (AGENTCTL_SLURM_CGROUP=v1): meson test slurm-oom.
BOOST_AUTO_TEST_SUITE(oom)

BOOST_AUTO_TEST_CASE(an_oom_kill_is_told_apart) {
    BOOST_TEST_REQUIRE(
        env_or_empty("AGENTCTL_SLURM_CGROUP") == "v1",
        "run through tools/slurm-fixture with AGENTCTL_SLURM_CGROUP=v1 (meson test slurm-oom)");
    auto req = probe_attempt("oom", {"alloc", "200"});
    req.resources.mem_mib = 50;
    auto o = run(argv_of(req), client_env(), 60s);
    BOOST_TEST((o.exited && o.code == 1), describe(o));  // srun: 1, not a signal status
    auto e = wait_listed(name_of(req));
    BOOST_TEST((e.state == job_state::out_of_memory), e.state_text);
    auto end = classify_outcome(o, e, show_job(e.job_id).exit_code());
    BOOST_TEST((end.kind == end_kind::out_of_memory), end.message);
    BOOST_TEST(error_code(end.kind) == "oom_killed");
    // Within the limit the same program succeeds.
    auto fits = probe_attempt("oom-fits", {"alloc", "10"});
    fits.resources.mem_mib = 100;
    auto f = run(argv_of(fits), client_env(), 60s);
    BOOST_TEST((f.exited && f.code == 0), describe(f));
}

BOOST_AUTO_TEST_SUITE_END()
