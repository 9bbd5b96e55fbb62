// src/runner/slurm without Slurm: names, argv, parsers, the end classification, and purity.
#include "runner/slurm/classify.hpp"
#include "runner/slurm/command.hpp"
#include "runner/slurm/job.hpp"
#include "slurm_names.hpp"

#include "../support/symbols.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace agentctl::slurm;

namespace {

const job_owner owner{"vm", 4242, "123456"};

srun_request basic_request() {
    srun_request r;
    r.srun = "/usr/bin/srun";
    r.run_id = "run-0123456789abcdef";
    r.owner = owner;
    r.task_id = "build--0003";
    r.attempt = 2;
    r.executable = "/usr/bin/make";
    r.args = {"--time=5", "-n2", "all"};
    r.cwd = "/work/space";
    r.env_names = {"FOO", "BAR"};
    r.timeout_ms = 2000;
    return r;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(units)

// The rule the live environment cases check (slurm_names.hpp): Slurm may set one of its own
// variables or not (one run on a fresh machine got 41 of the usual 42), but nothing except
// the declared names and Slurm's own reaches a task.
BOOST_AUTO_TEST_CASE(the_environment_rule_allows_slurms_own_and_nothing_else) {
    using namespace slurm_test;
    const std::set<std::string> declared = {"FOO", "TOKEN"};
    std::set<std::string> usual = slurm_names;
    usual.insert(declared.begin(), declared.end());
    BOOST_TEST(environment_problems(usual, declared, {"SLURM_MY_OWN"}).empty());
    for (const auto& name : slurm_names) {
        auto fewer = usual;
        fewer.erase(name);
        bool names_the_job = slurm_job_names.count(name) != 0;
        BOOST_TEST(environment_problems(fewer, declared, {}).empty() == !names_the_job, name);
        BOOST_TEST(differences_from_the_usual(fewer, declared) == " -" + name);
    }
    auto more = usual;
    more.insert("SLURM_RESTART_COUNT");  // Slurm's own, after a requeue
    BOOST_TEST(environment_problems(more, declared, {}).empty());
    for (const std::string leak : {"PATH", "HOME", "OTHER", "AGENTCTL_TEST_TOKEN"}) {
        auto leaked = usual;
        leaked.insert(leak);
        BOOST_TEST(environment_problems(leaked, declared, {}) == leak + " is neither declared nor Slurm's");
    }
    auto canary = usual;
    canary.insert("SLURM_MY_OWN");
    BOOST_TEST(environment_problems(canary, declared, {"SLURM_MY_OWN"}) ==
               "SLURM_MY_OWN is agentctl's own, not Slurm's");
    auto undeclared = usual;
    undeclared.erase("TOKEN");
    BOOST_TEST(environment_problems(undeclared, declared, {}) == "declared TOKEN is missing");
}

BOOST_AUTO_TEST_CASE(job_name_round_trip) {
    std::string error;
    auto name = job_name("run-0123456789abcdef", owner, "build--0003", 1, error);
    BOOST_TEST_REQUIRE(name.has_value(), error);
    BOOST_TEST(*name == "agentctl:run-0123456789abcdef:vm:4242:123456:build--0003:1");
    auto f = parse_job_name(*name);
    BOOST_TEST_REQUIRE(f.has_value());
    BOOST_TEST(f->run_id == "run-0123456789abcdef");
    BOOST_TEST(f->owner.host == "vm");
    BOOST_TEST(f->owner.pid == 4242);
    BOOST_TEST(f->owner.start_time == "123456");
    BOOST_TEST(f->task == "build--0003");
    BOOST_TEST(f->attempt == 1u);
    // Safe for --name lists and the squeue format: no separator, blank or control character.
    BOOST_TEST(name->find_first_of(",| \t\n\r=") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(job_name_refuses_bad_fields) {
    std::string error;
    BOOST_TEST(!job_name("", owner, "t", 1, error));
    BOOST_TEST(!error.empty());
    BOOST_TEST(!job_name("run:1", owner, "t", 1, error));
    BOOST_TEST(!job_name("run,1", owner, "t", 1, error));
    BOOST_TEST(!job_name(std::string(65, 'r'), owner, "t", 1, error));
    BOOST_TEST(job_name(std::string(64, 'r'), owner, "t", 1, error).has_value());
    BOOST_TEST(!job_name("run", job_owner{"vm", 0, "1"}, "t", 1, error));
    BOOST_TEST(!job_name("run", job_owner{"vm", 5, ""}, "t", 1, error));
    BOOST_TEST(!job_name("run", job_owner{"vm", 5, "12a"}, "t", 1, error));
    BOOST_TEST(!job_name("run", owner, "t", 0, error));
}

BOOST_AUTO_TEST_CASE(job_name_host_and_task_are_made_safe) {
    BOOST_TEST(job_name_host("node-1.example.org") == "node-1.example.org");
    BOOST_TEST(job_name_host("we:ird host|x") == "we_ird_host_x");
    BOOST_TEST(job_name_host("") == "unknown");
    BOOST_TEST(job_name_host(std::string(100, 'h')).size() == max_host_length);
    BOOST_TEST(job_name_task("a:b,c") == "a_b_c");
    std::string long_id(500, 'x');
    std::string t = job_name_task(long_id);
    BOOST_TEST(t.size() == max_task_length);
    BOOST_TEST(t[183] == '~');
    // Two long ids with the same head differ in the hash.
    BOOST_TEST(job_name_task(long_id + "y") != t);
    BOOST_TEST(job_name_task(long_id) == t);  // stable
    std::string error;
    auto name = job_name("run", job_owner{"we:ird", 7, "9"}, long_id, 3, error);
    BOOST_TEST_REQUIRE(name.has_value());
    BOOST_TEST(name->size() < 1024u);  // Slurm refuses longer names
    auto f = parse_job_name(*name);
    BOOST_TEST_REQUIRE(f.has_value());
    BOOST_TEST(f->owner.host == "we_ird");
    BOOST_TEST(f->task == t);
}

BOOST_AUTO_TEST_CASE(parse_job_name_rejects_foreign_names) {
    for (std::string_view bad :
         {"", "sh", "agentctl", "agentctl:", "agentctl:r:h:1:2:t", "agentctl:r:h:1:2:t:0",
          "agentctl:r:h:0:2:t:1", "agentctl:r:h:x:2:t:1", "agentctl:r:h:1::t:1", "agentctl:r:h:1:2:t:1:extra",
          "agentctl:r r:h:1:2:t:1", "Agentctl:r:h:1:2:t:1", "agentctl:r:h:1:2:t:1x", "agentctl:r:h|x:1:2:t:1",
          "agentctl:r:h:99999999999:2:t:1"})
        BOOST_TEST(!parse_job_name(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(owner_liveness) {
    job_owner o{"vm", 4242, "100"};
    auto gone = [](long) -> std::optional<std::string> { return std::nullopt; };
    auto same = [](long) -> std::optional<std::string> { return std::string("100"); };
    auto reused = [](long) -> std::optional<std::string> { return std::string("200"); };
    auto hidden = [](long) -> std::optional<std::string> { return std::string(); };
    BOOST_TEST(owner_is_dead(o, "vm", gone));
    BOOST_TEST(owner_is_dead(o, "vm", reused));
    BOOST_TEST(!owner_is_dead(o, "vm", same));
    BOOST_TEST(!owner_is_dead(o, "vm", hidden));
    BOOST_TEST(!owner_is_dead(o, "other", gone));  // another host's pids mean nothing here
}

BOOST_AUTO_TEST_CASE(srun_argv_shape) {
    auto r = srun_argv(basic_request());
    BOOST_TEST_REQUIRE(bool(r), r.error);
    const std::vector<std::string> expected = {
        "/usr/bin/srun",
        "--quiet",
        "--ntasks=1",
        "--nodes=1",
        "--job-name=agentctl:run-0123456789abcdef:vm:4242:123456:build--0003:2",
        "--input=none",
        "--unbuffered",
        "--mpi=none",
        "--chdir=/work/space",
        "--export=FOO,BAR",
        "--time=2",
        "--",
        "/usr/bin/make",
        "--time=5",
        "-n2",
        "all",
    };
    BOOST_TEST(r.argv == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(srun_argv_options_and_defaults) {
    auto req = basic_request();
    req.env_names.clear();
    req.timeout_ms.reset();
    req.resources.partition = "second";
    req.resources.account = "acct";
    req.resources.qos = "normal";
    req.resources.cpus_per_task = 4;
    req.resources.mem_mib = 512;
    auto r = srun_argv(req);
    BOOST_TEST_REQUIRE(bool(r), r.error);
    BOOST_TEST(has(r.argv, "--export=NONE"));
    auto dashdash = std::find(r.argv.begin(), r.argv.end(), "--");
    BOOST_TEST_REQUIRE((dashdash != r.argv.end()));
    BOOST_TEST(std::none_of(r.argv.begin(), dashdash,
                            [](const std::string& a) { return a.rfind("--time", 0) == 0; }));
    for (const char* flag :
         {"--partition=second", "--account=acct", "--qos=normal", "--cpus-per-task=4", "--mem=512M"})
        BOOST_TEST((std::find(r.argv.begin(), dashdash, flag) != dashdash), flag);
    BOOST_TEST(*(dashdash + 1) == "/usr/bin/make");
}

BOOST_AUTO_TEST_CASE(srun_argv_never_carries_values) {
    auto req = basic_request();
    req.env_names = {"SECRET_TOKEN"};
    auto r = srun_argv(req);
    BOOST_TEST_REQUIRE(bool(r), r.error);
    for (const auto& a : r.argv) BOOST_TEST(a.find("SECRET_TOKEN=") == std::string::npos, a);
    BOOST_TEST(has(r.argv, "--export=SECRET_TOKEN"));
}

BOOST_AUTO_TEST_CASE(srun_argv_refusals) {
    auto refused = [](auto change, const std::string& what) {
        auto req = basic_request();
        change(req);
        auto r = srun_argv(req);
        BOOST_TEST(!r, what);
        BOOST_TEST(r.argv.empty(), what);
        BOOST_TEST(!r.error.empty(), what);
    };
    refused([](srun_request& q) { q.srun = "srun"; }, "relative srun");
    refused([](srun_request& q) { q.executable = "make"; }, "relative executable");
    refused([](srun_request& q) { q.executable = "/usr/bin/ma\nke"; }, "newline in executable");
    refused([](srun_request& q) { q.cwd = "work"; }, "relative cwd");
    refused([](srun_request& q) { q.cwd = ""; }, "empty cwd");
    refused([](srun_request& q) { q.cwd = "/work/a\nb"; }, "newline in cwd");
    refused([](srun_request& q) { q.cwd = std::string("/work/a\0b", 9); }, "NUL in cwd");
    refused([](srun_request& q) { q.cwd = "/work/\x1b[31m"; }, "escape in cwd");
    refused([](srun_request& q) { q.resources.partition = "a\tb"; }, "tab in partition");
    refused([](srun_request& q) { q.resources.account = "a\rb"; }, "CR in account");
    refused([](srun_request& q) { q.resources.qos = "q\x7f"; }, "DEL in qos");
    refused([](srun_request& q) { q.resources.cpus_per_task = 0; }, "zero cpus");
    refused([](srun_request& q) { q.resources.mem_mib = 0; }, "zero mem");
    refused([](srun_request& q) { q.args.push_back(std::string("a\0b", 3)); }, "NUL in an argument");
    refused([](srun_request& q) { q.env_names = {"FOO,BAR"}; }, "comma in a name");
    refused([](srun_request& q) { q.env_names = {"FOO=1"}; }, "value in a name");
    refused([](srun_request& q) { q.env_names = {"all"}; }, "export keyword");
    refused([](srun_request& q) { q.env_names = {"SLURM_PARTITION"}; }, "srun input variable");
    refused([](srun_request& q) { q.run_id = "a:b"; }, "colon in run id");
    refused([](srun_request& q) { q.attempt = 0; }, "attempt 0");
    // Arguments may hold anything else: they follow "--" and the executable.
    auto req = basic_request();
    req.args = {"line\nbreak", "-x", "--export=ALL", ""};
    BOOST_TEST(bool(srun_argv(req)));
}

BOOST_AUTO_TEST_CASE(env_names) {
    for (std::string_view ok : {"FOO", "_x", "a1", "PATH", "HOME", "SLURMX", "SRUNNER", "NONEX", "ALL_"})
        BOOST_TEST(env_name_error(ok).empty(), ok);
    for (std::string_view bad : {"", "1A", "A-B", "A B", "A=B", "A,B", "ALL", "none", "Nil", "SLURM_CONF",
                                 "SLURM_JOB_ID", "SRUN_CPUS_PER_TASK"})
        BOOST_TEST(!env_name_error(bad).empty(), bad);
}

BOOST_AUTO_TEST_CASE(time_limit_rounding) {
    BOOST_TEST(!time_limit_minutes(std::nullopt, 0).has_value());
    BOOST_TEST(*time_limit_minutes(1, 0) == 2u);
    BOOST_TEST(*time_limit_minutes(2000, 0) == 2u);  // a 2 s timeout
    BOOST_TEST(*time_limit_minutes(60000, 0) == 2u);
    BOOST_TEST(*time_limit_minutes(60001, 0) == 3u);
    BOOST_TEST(*time_limit_minutes(50000, 10000) == 2u);
    BOOST_TEST(*time_limit_minutes(50000, 10001) == 3u);
    BOOST_TEST(*time_limit_minutes(0, 0) == 1u);  // never 0, which would be unlimited
    BOOST_TEST(*time_limit_minutes(UINT64_MAX, UINT64_MAX) == 2147483647u);
}

BOOST_AUTO_TEST_CASE(client_environment_is_built_from_nothing) {
    auto host = [](std::string_view name) -> std::optional<std::string> {
        if (name == "SLURM_CONF") return std::string("/etc/x/slurm.conf");
        if (name == "SLURM_JOB_ID" || name == "PATH" || name == "SLURM_PARTITION") return std::string("1");
        return std::nullopt;
    };
    auto env = client_environment(host, {"FOO=secret"});
    BOOST_TEST(env == (std::vector<std::string>{"SLURM_CONF=/etc/x/slurm.conf", "FOO=secret"}),
               boost::test_tools::per_element());
    auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
    BOOST_TEST(client_environment(none, {}).empty());
}

BOOST_AUTO_TEST_CASE(squeue_commands_chunk) {
    std::vector<std::string> names;
    for (int i = 0; i < 1000; ++i) names.push_back("agentctl:run-x:vm:1:2:task-" + std::to_string(i) + ":1");
    auto cmds = squeue_by_names("/usr/bin/squeue", names, 4096);
    BOOST_TEST(cmds.size() > 1u);
    std::set<std::string> seen;
    for (const auto& c : cmds) {
        BOOST_TEST_REQUIRE(c.size() == 5u);
        BOOST_TEST(c[0] == "/usr/bin/squeue");
        BOOST_TEST(c[1] == "--noheader");
        BOOST_TEST(c[2] == "--states=all");
        BOOST_TEST(c[3] == "--format=%i|%T|%r|%N|%j");
        BOOST_TEST(c[4].size() <= 4096u);
        BOOST_TEST_REQUIRE(c[4].rfind("--name=", 0) == 0u);
        std::istringstream list(c[4].substr(7));
        std::string n;
        while (std::getline(list, n, ',')) seen.insert(n);
    }
    BOOST_TEST(seen.size() == names.size());
    BOOST_TEST(squeue_by_names("/usr/bin/squeue", {}).empty());
    auto one = squeue_by_names("/usr/bin/squeue", names);  // default: 64 KiB per argument
    BOOST_TEST(one.size() == 1u);
    auto ids = squeue_by_ids("/usr/bin/squeue", {3, 14, 15});
    BOOST_TEST_REQUIRE(ids.size() == 1u);
    BOOST_TEST(ids[0].back() == "--jobs=3,14,15");
}

BOOST_AUTO_TEST_CASE(cancel_and_probe_commands) {
    BOOST_TEST(scancel_signal("/s", 42, "TERM") == (std::vector<std::string>{"/s", "--signal=TERM", "42"}),
               boost::test_tools::per_element());
    BOOST_TEST(scancel_kill_step("/s", 42) == (std::vector<std::string>{"/s", "--signal=KILL", "42.0"}),
               boost::test_tools::per_element());
    BOOST_TEST(scancel_jobs("/s", {1, 2}) == (std::vector<std::string>{"/s", "1", "2"}),
               boost::test_tools::per_element());
    BOOST_TEST(scontrol_show_job("/c", 7) == (std::vector<std::string>{"/c", "show", "job", "-o", "7"}),
               boost::test_tools::per_element());
    BOOST_TEST(scontrol_ping("/c") == (std::vector<std::string>{"/c", "ping"}),
               boost::test_tools::per_element());
    BOOST_TEST(ping_says_up("Slurmctld(primary) at vm is UP\n"));
    BOOST_TEST(!ping_says_up("Slurmctld(primary) at vm is DOWN\n*****\n"));
    BOOST_TEST(!ping_says_up(""));
    BOOST_TEST(squeue_mine("/q") ==
                   (std::vector<std::string>{"/q", "--noheader", "--me", "--format=%i|%T|%r|%N|%j"}),
               boost::test_tools::per_element());
    auto p = parse_partition("main*|up\nsecond|down\n", "main");
    BOOST_TEST(p.found);
    BOOST_TEST(p.up);
    BOOST_TEST(p.is_default);
    p = parse_partition("main*|up\nsecond|down\n", "second");
    BOOST_TEST(p.found);
    BOOST_TEST(!p.up);
    BOOST_TEST(!p.is_default);
    BOOST_TEST(!parse_partition("", "nope").found);  // what sinfo prints for an unknown partition
    BOOST_TEST(!parse_partition("mainly|up\n", "main").found);
}

BOOST_AUTO_TEST_CASE(stdin_forwarding_leaves_out_input_none) {
    auto r = basic_request();
    r.forward_stdin = true;
    auto a = srun_argv(r);
    BOOST_TEST_REQUIRE(bool(a), a.error);
    BOOST_TEST(!has(a.argv, "--input=none"));
    BOOST_TEST(has(a.argv, "--unbuffered"));
    BOOST_TEST(a.argv.size() + 1 == srun_argv(basic_request()).argv.size());
}

BOOST_AUTO_TEST_CASE(partition_and_name_commands) {
    BOOST_TEST(scancel_by_name("/s", "agentctl:r:h:1:2:t:1") ==
                   (std::vector<std::string>{"/s", "--name=agentctl:r:h:1:2:t:1"}),
               boost::test_tools::per_element());
    BOOST_TEST(sinfo_partitions("/i") == (std::vector<std::string>{"/i", "--noheader", "--format=%P|%a"}),
               boost::test_tools::per_element());
    BOOST_TEST(default_partition("second|up\nmain*|up\n").value_or("") == "main");
    BOOST_TEST(!default_partition("second|up\nmain|up\n").has_value());
    BOOST_TEST(!default_partition("").has_value());
    BOOST_TEST(!default_partition("*|up\n").has_value());
    BOOST_TEST(split_partitions("a,b") == (std::vector<std::string>{"a", "b"}),
               boost::test_tools::per_element());
    BOOST_TEST(split_partitions("a,,b,") == (std::vector<std::string>{"a", "b"}),
               boost::test_tools::per_element());
    BOOST_TEST(split_partitions("").empty());
    BOOST_TEST(split_partitions(",").empty());
}

BOOST_AUTO_TEST_CASE(a_runs_jobs_and_dead_runs_jobs) {
    std::string error;
    auto named = [&](std::string run, const job_owner& o, std::string task, job_state st, std::uint64_t id) {
        queue_entry e;
        e.job_id = id;
        e.state = st;
        e.state_text = std::string(to_string(st));
        e.name = *job_name(run, o, task, 1, error);
        return e;
    };
    const job_owner live{"vm", 100, "5000"};
    const job_owner dead{"vm", 200, "6000"};
    const job_owner reused{"vm", 300, "7000"};
    const job_owner other_host{"elsewhere", 200, "6000"};
    const job_owner unknown{"vm", 400, "8000"};
    // pid 100 lives with its start time, 200 is gone, 300 now has another start time, 400 exists
    // with an unreadable start time.
    start_time_reader start_of = [](long pid) -> std::optional<std::string> {
        if (pid == 100) return std::string("5000");
        if (pid == 300) return std::string("7001");
        if (pid == 400) return std::string();
        return std::nullopt;
    };
    std::vector<queue_entry> entries = {
        named("run-a", live, "t", job_state::running, 1),
        named("run-a", live, "u", job_state::completed, 2),  // final: nothing to cancel
        named("run-b", live, "t", job_state::pending, 3),
        named("run-a", dead, "t", job_state::running, 4),
        named("run-a", reused, "t", job_state::completing, 5),
        named("run-c", other_host, "t", job_state::running, 6),
        named("run-c", unknown, "t", job_state::running, 7),
        named("run-d", dead, "t", job_state::unknown, 8),  // an unknown state counts as active
    };
    queue_entry foreign;
    foreign.job_id = 9;
    foreign.state = job_state::running;
    foreign.name = "somebody-elses-job";
    entries.push_back(foreign);
    auto ids = [](const std::vector<queue_entry>& v) {
        std::vector<std::uint64_t> out;
        for (const auto& e : v) out.push_back(e.job_id);
        return out;
    };
    BOOST_TEST(ids(jobs_of_run(entries, "run-a", live)) == (std::vector<std::uint64_t>{1}),
               boost::test_tools::per_element());
    BOOST_TEST(ids(jobs_of_run(entries, "run-a", dead)) == (std::vector<std::uint64_t>{4}),
               boost::test_tools::per_element());
    BOOST_TEST(jobs_of_run(entries, "run-z", live).empty());
    BOOST_TEST(ids(jobs_of_dead_runs(entries, "vm", start_of)) == (std::vector<std::uint64_t>{4, 5, 8}),
               boost::test_tools::per_element());
    BOOST_TEST(ids(jobs_of_dead_runs(entries, "vm", start_of, {"run-d"})) == (std::vector<std::uint64_t>{8}),
               boost::test_tools::per_element());
    BOOST_TEST(jobs_of_dead_runs(entries, "vm", start_of, {"run-b"}).empty());  // its owner lives
    BOOST_TEST(jobs_of_dead_runs(entries, "vm", nullptr).empty());              // no way to tell: nothing
    // From the other host's point of view, only its own dead owner counts.
    BOOST_TEST(ids(jobs_of_dead_runs(entries, "elsewhere", start_of)) == (std::vector<std::uint64_t>{6}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(job_states) {
    BOOST_TEST((parse_job_state("PENDING") == job_state::pending));
    BOOST_TEST((parse_job_state("CANCELLED by 0") == job_state::cancelled));
    BOOST_TEST((parse_job_state("OUT_OF_MEMORY") == job_state::out_of_memory));
    BOOST_TEST((parse_job_state("OOM") == job_state::out_of_memory));
    BOOST_TEST((parse_job_state("CG") == job_state::completing));
    BOOST_TEST((parse_job_state("NODE_FAIL") == job_state::node_fail));
    BOOST_TEST((parse_job_state("running") == job_state::unknown));  // Slurm prints upper case
    BOOST_TEST((parse_job_state("") == job_state::unknown));
    BOOST_TEST((parse_job_state("SOMETHING_NEW") == job_state::unknown));
    for (auto s : {job_state::pending, job_state::running, job_state::suspended, job_state::completing,
                   job_state::configuring, job_state::requeued, job_state::signaling, job_state::stopped,
                   job_state::unknown})
        BOOST_TEST(is_active(s), to_string(s));
    for (auto s : {job_state::completed, job_state::cancelled, job_state::failed, job_state::timeout,
                   job_state::node_fail, job_state::preempted, job_state::boot_fail, job_state::deadline,
                   job_state::out_of_memory})
        BOOST_TEST(!is_active(s), to_string(s));
    BOOST_TEST(to_string(job_state::node_fail) == "NODE_FAIL");
    BOOST_TEST((parse_job_state(to_string(job_state::resv_del_hold)) == job_state::resv_del_hold));
}

// The pending reasons that end a --slurm-nodes request at once; every other one is waited for.
BOOST_AUTO_TEST_CASE(pending_reasons_never_granted) {
    for (const char* r : {"PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit"})
        BOOST_TEST(never_granted(r), r);
    for (const char* r :
         {"Resources", "Priority", "None", "ReqNodeNotAvail", "BeginTime", "", "partitionnodelimit"})
        BOOST_TEST(!never_granted(r), r);
}

BOOST_AUTO_TEST_CASE(squeue_parsing) {
    // As squeue printed it (pending jobs have no node list); plus lines to skip.
    const std::string out =
        "4|PENDING|Resources||h2\n"
        "3|RUNNING|None|localhost|agentctl:run-1:vm:1:2:t:1\n"
        "60|TIMEOUT|TimeLimit|localhost|tl|with|bars\r\n"
        "123_[1-3]|PENDING|None||array\n"
        "\n"
        "garbage\n"
        "7|SOMETHING_NEW|None|n1|x\n";
    auto e = parse_squeue(out);
    BOOST_TEST_REQUIRE(e.size() == 4u);
    BOOST_TEST(e[0].job_id == 4u);
    BOOST_TEST((e[0].state == job_state::pending));
    BOOST_TEST(e[0].reason == "Resources");
    BOOST_TEST(e[0].nodes.empty());
    BOOST_TEST(e[1].nodes == "localhost");
    BOOST_TEST(e[1].name == "agentctl:run-1:vm:1:2:t:1");
    BOOST_TEST(e[2].name == "tl|with|bars");
    BOOST_TEST((e[2].state == job_state::timeout));
    BOOST_TEST((e[3].state == job_state::unknown));
    BOOST_TEST(e[3].state_text == "SOMETHING_NEW");
    BOOST_TEST(parse_squeue("").empty());
}

BOOST_AUTO_TEST_CASE(scontrol_parsing) {
    // A real line (job 6 of docs/SLURM.md), a WorkDir with a space, and an unknown key.
    const std::string out =
        "JobId=6 JobName=sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901754 Nice=0 "
        "Account=(null) QOS=(null) JobState=FAILED Reason=JobLaunchFailure Dependency=(null) Requeue=1 "
        "Restarts=0 BatchFlag=0 Reboot=0 ExitCode=0:9 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A "
        "AllocNode:Sid=localhost:31417 ReqNodeList=(null) ExcNodeList=(null) NodeList=localhost "
        "BatchHost=localhost NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
        "TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* Command=sh WorkDir=/tmp Power=\n"
        "JobId=7 JobName=agentctl:r:vm:1:2:t:1 JobState=COMPLETED ExitCode=3:0 WorkDir=/work/a b "
        "NewKey2030=x=y NodeList=n[1-2]\n"
        "\n"
        "no job here\n";
    auto jobs = parse_scontrol_jobs(out);
    BOOST_TEST_REQUIRE(jobs.size() == 2u);
    const auto& j = jobs[0];
    BOOST_TEST(*j.job_id() == 6u);
    BOOST_TEST((j.state() == job_state::failed));
    BOOST_TEST_REQUIRE(j.exit_code().has_value());
    BOOST_TEST(j.exit_code()->status == 0);
    BOOST_TEST(j.exit_code()->signal == 9);
    BOOST_TEST(*j.get("NodeList") == "localhost");  // not ReqNodeList or ExcNodeList
    BOOST_TEST(*j.get("TRES") == "cpu=1,node=1,billing=1");
    BOOST_TEST(*j.get("AllocNode:Sid") == "localhost:31417");
    BOOST_TEST(*j.get("CPUs/Task") == "1");
    BOOST_TEST(*j.get("Power") == "");
    BOOST_TEST(!j.get("nodelist").has_value());
    const auto& k = jobs[1];
    BOOST_TEST(*k.get("WorkDir") == "/work/a b");
    BOOST_TEST(*k.get("NewKey2030") == "x=y");
    BOOST_TEST(*k.get("NodeList") == "n[1-2]");
    BOOST_TEST(k.exit_code()->status == 3);
    BOOST_TEST(!parse_exit_pair("3").has_value());
    BOOST_TEST(!parse_exit_pair("a:b").has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(classification)

namespace {

attempt_end classify(std::optional<int> srun_exit, std::string_view tail,
                     std::optional<job_state> state = std::nullopt,
                     std::optional<exit_pair> job_exit = std::nullopt, bool stopped = false,
                     std::optional<int> srun_signal = std::nullopt) {
    end_evidence e;
    e.srun_exit = srun_exit;
    e.srun_signal = srun_signal;
    e.stderr_tail = tail;
    e.state = state;
    e.job_exit = job_exit;
    e.stopped_by_agentctl = stopped;
    return classify_end(e);
}

}  // namespace

// Each case is a row of docs/SLURM.md, section 5, with srun's real output.
BOOST_AUTO_TEST_CASE(program_exits_and_signals) {
    auto ok = classify(0, "", job_state::completed, exit_pair{0, 0});
    BOOST_TEST((ok.kind == end_kind::succeeded));
    BOOST_TEST(ok.from_job_state);
    BOOST_TEST(error_code(ok.kind) == "");
    auto ok2 = classify(0, "");
    BOOST_TEST((ok2.kind == end_kind::succeeded));
    BOOST_TEST(!ok2.from_job_state);

    auto three = classify(3, "srun: error: localhost: task 0: Exited with exit code 3\n");
    BOOST_TEST((three.kind == end_kind::exit_nonzero));
    BOOST_TEST(*three.exit_code == 3);
    BOOST_TEST(error_code(three.kind) == "exit_nonzero");
    auto three_state = classify(3, "srun: error: localhost: task 0: Exited with exit code 3\n",
                                job_state::failed, exit_pair{3, 0});
    BOOST_TEST((three_state.kind == end_kind::exit_nonzero));
    BOOST_TEST(three_state.from_job_state);

    // 137 is both: the line and the controller tell them apart.
    auto exit137 = classify(137, "srun: error: localhost: task 0: Exited with exit code 137\n");
    BOOST_TEST((exit137.kind == end_kind::exit_nonzero));
    BOOST_TEST(*exit137.exit_code == 137);
    auto kill = classify(137, "srun: error: localhost: task 0: Killed\n");
    BOOST_TEST((kill.kind == end_kind::signaled));
    BOOST_TEST(*kill.signal == 9);
    BOOST_TEST(error_code(kill.kind) == "signaled");
    auto kill_state = classify(137, "", job_state::failed, exit_pair{0, 9});
    BOOST_TEST((kill_state.kind == end_kind::signaled));
    BOOST_TEST(*kill_state.signal == 9);
    auto segv = classify(139, "srun: error: localhost: task 0: Segmentation fault\n", job_state::failed,
                         exit_pair{0, 11});
    BOOST_TEST((segv.kind == end_kind::signaled));
    BOOST_TEST(*segv.signal == 11);
    auto term =
        classify(143, "srun: error: localhost: task 0: Terminated\nsrun: Force Terminated StepId=7.0\n");
    BOOST_TEST((term.kind == end_kind::signaled));
    BOOST_TEST(*term.signal == 15);
}

BOOST_AUTO_TEST_CASE(slurm_ends) {
    const std::string time_limit =
        "slurmstepd-localhost: error: *** STEP 60.0 ON localhost CANCELLED AT 2026-12-01T08:09:17 DUE TO "
        "TIME LIMIT "
        "***\nsrun: Job step aborted: Waiting up to 12 seconds for job step to finish.\n"
        "srun: error: localhost: task 0: Terminated\n";
    auto t = classify(143, time_limit, job_state::timeout, exit_pair{0, 15});
    BOOST_TEST((t.kind == end_kind::time_limit));
    BOOST_TEST(error_code(t.kind) == "slurm_time_limit");
    BOOST_TEST(t.from_job_state);
    auto t2 = classify(143, time_limit);
    BOOST_TEST((t2.kind == end_kind::time_limit));
    BOOST_TEST(!t2.from_job_state);

    // A node failure returns 0 from srun.
    const std::string node =
        "srun: error: Node failure on localhost\n"
        "slurmstepd-localhost: error: *** STEP 75.0 ON localhost CANCELLED AT 2026-12-01T08:11:28 DUE TO "
        "NODE "
        "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\nsrun: error: Node failure on localhost\n"
        "srun: Job step aborted: Waiting up to 12 seconds for job step to finish.\n";
    auto n = classify(0, node, job_state::node_fail, exit_pair{0, 0});
    BOOST_TEST((n.kind == end_kind::node_failure));
    BOOST_TEST(error_code(n.kind) == "slurm_node_failure");
    BOOST_TEST((classify(0, node).kind == end_kind::node_failure));
    BOOST_TEST((classify(0, "", job_state::node_fail).kind == end_kind::node_failure));

    // An OOM kill returns 1.
    const std::string oom =
        "srun: error: localhost: task 0: Out Of Memory\n"
        "slurmstepd-localhost: error: Detected 1 oom-kill event(s) in StepId=2.0. Some of your processes may "
        "have "
        "been killed by the cgroup out-of-memory handler.\n";
    auto o = classify(1, oom, job_state::out_of_memory, exit_pair{0, 125});
    BOOST_TEST((o.kind == end_kind::out_of_memory));
    BOOST_TEST(error_code(o.kind) == "oom_killed");
    BOOST_TEST((classify(1, oom).kind == end_kind::out_of_memory));

    BOOST_TEST((classify(143, "", job_state::preempted).kind == end_kind::preempted));
    BOOST_TEST((classify(143,
                         "slurmstepd-n1: error: *** JOB 5 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO "
                         "PREEMPTION ***\n")
                    .kind == end_kind::preempted));
    BOOST_TEST(error_code(end_kind::preempted) == "slurm_preempted");
    BOOST_TEST((classify(1, "", job_state::boot_fail).kind == end_kind::boot_failure));
    BOOST_TEST((classify(1, "", job_state::deadline).kind == end_kind::deadline));
}

BOOST_AUTO_TEST_CASE(cancellations) {
    const std::string cancelled =
        "srun: Job step aborted: Waiting up to 12 seconds for job step to finish.\n"
        "slurmstepd-localhost: error: *** STEP 57.0 ON localhost CANCELLED AT 2026-12-01T08:07:37 ***\n"
        "srun: error: localhost: task 0: Terminated\n";
    // Someone else's scancel.
    auto c = classify(143, cancelled, job_state::cancelled, exit_pair{0, 15});
    BOOST_TEST((c.kind == end_kind::cancelled));
    BOOST_TEST(error_code(c.kind) == "slurm_cancelled");
    BOOST_TEST((classify(143, cancelled).kind == end_kind::cancelled));
    // Ours: the engine's reason (timeout, cancellation, overflow) applies.
    auto ours = classify(143, cancelled, job_state::cancelled, exit_pair{0, 15}, true);
    BOOST_TEST((ours.kind == end_kind::stopped));
    BOOST_TEST(error_code(ours.kind) == "");
    BOOST_TEST(*ours.signal == 15);
    BOOST_TEST((classify(std::nullopt, "", std::nullopt, std::nullopt, true, 9).kind == end_kind::stopped));
    // A scancel between the job's start and its step's launch: srun reports the launch failed,
    // the controller says CANCELLED, and the controller wins.
    const std::string revoked =
        "srun: error: Task launch for StepId=15.0 failed on node localhost: Job credential revoked\n"
        "srun: error: Application launch failed: Job credential revoked\n";
    BOOST_TEST((classify(168, revoked, job_state::cancelled, exit_pair{0, 0}).kind == end_kind::cancelled));
    // scancel --signal=TERM is a signal: the job failed with the program's exit.
    auto sig = classify(7,
                        "slurmstepd-localhost: error: *** STEP 58.0 ON localhost CANCELLED AT "
                        "2026-12-01T08:07:38 ***\nsrun: error: localhost: task 0: Exited with exit code 7\n",
                        job_state::failed, exit_pair{7, 0});
    BOOST_TEST((sig.kind == end_kind::exit_nonzero));
    BOOST_TEST(*sig.exit_code == 7);
}

BOOST_AUTO_TEST_CASE(node_side_failures) {
    auto nf = classify(2,
                       "srun: error: localhost: task 0: Exited with exit code 2\n"
                       "slurmstepd-localhost: error: execve(): /no/such/exe: No such file or directory\n",
                       job_state::failed, exit_pair{2, 0});
    BOOST_TEST((nf.kind == end_kind::executable_not_found));
    BOOST_TEST(nf.message.find("/no/such/exe") != std::string::npos);
    auto pd = classify(13,
                       "srun: error: localhost: task 0: Exited with exit code 13\n"
                       "slurmstepd-localhost: error: execve(): /etc/passwd: Permission denied\n");
    BOOST_TEST((pd.kind == end_kind::permission_denied));
    // The same line with a status that is not errno is the program's own exit.
    auto forged = classify(5,
                           "srun: error: localhost: task 0: Exited with exit code 5\n"
                           "slurmstepd-localhost: error: execve(): /x: No such file or directory\n");
    BOOST_TEST((forged.kind == end_kind::exit_nonzero));
    const std::string chdir =
        "slurmstepd-localhost: error: couldn't chdir to `/nonexistent/x': No such file or directory: going "
        "to /tmp "
        "instead\n";
    auto cd = classify(0, chdir + chdir, job_state::completed, exit_pair{0, 0});
    BOOST_TEST((cd.kind == end_kind::cwd_unavailable));
    BOOST_TEST(error_code(cd.kind) == "cwd_unavailable");
}

BOOST_AUTO_TEST_CASE(launch_failures) {
    auto part = classify(1,
                         "srun: error: invalid partition specified: nope\n"
                         "srun: error: Unable to allocate resources: Invalid partition name specified\n");
    BOOST_TEST((part.kind == end_kind::launch_failed));
    BOOST_TEST(error_code(part.kind) == "slurm_launch_failed");
    BOOST_TEST(part.message.find("Invalid partition") != std::string::npos);
    BOOST_TEST(
        (classify(1,
                  "srun: error: Unable to allocate resources: Unable to contact slurm controller (connect "
                  "failure)\n")
             .kind == end_kind::launch_failed));
    BOOST_TEST(
        (classify(255, "srun: unrecognized option '--no-requeue'\nTry \"srun --help\" for more information\n")
             .kind == end_kind::launch_failed));
    const std::string step =
        "srun: error: Task launch for StepId=78.0 failed on node localhost: Communication connection "
        "failure\n"
        "srun: error: Application launch failed: Communication connection failure\nsrun: Job step aborted\n";
    BOOST_TEST((classify(233, step).kind == end_kind::launch_failed));
    // Even when the controller recorded the job as FAILED with status 0.
    BOOST_TEST((classify(233, step, job_state::failed, exit_pair{0, 0}).kind == end_kind::launch_failed));
}

BOOST_AUTO_TEST_CASE(the_controller_beats_forged_lines) {
    // The program printed srun's node-failure line itself and exited 0.
    auto forged =
        classify(0, "srun: error: Node failure on localhost\n", job_state::completed, exit_pair{0, 0});
    BOOST_TEST((forged.kind == end_kind::succeeded));
    auto forged_oom = classify(1,
                               "srun: error: localhost: task 0: Out Of Memory\n"
                               "srun: error: localhost: task 0: Exited with exit code 1\n",
                               job_state::failed, exit_pair{1, 0});
    BOOST_TEST((forged_oom.kind == end_kind::exit_nonzero));
    // Lines the program wrote without srun's prefix never count.
    auto plain = classify(0, "error: *** STEP 1.0 ON x CANCELLED AT now DUE TO TIME LIMIT ***\n");
    BOOST_TEST((plain.kind == end_kind::succeeded));
    // Status 0 is not a success when the controller says the job failed.
    BOOST_TEST((classify(0, "", job_state::failed, exit_pair{0, 0}).kind == end_kind::unknown));
}

BOOST_AUTO_TEST_CASE(inconclusive) {
    auto u = classify(1, "");
    BOOST_TEST((u.kind == end_kind::unknown));
    BOOST_TEST(error_code(u.kind) == "slurm_unknown_end");
    BOOST_TEST(u.message.find("status 1") != std::string::npos);
    auto s = classify(std::nullopt, "", std::nullopt, std::nullopt, false, 9);
    BOOST_TEST((s.kind == end_kind::unknown));
    BOOST_TEST(s.message.find("signal 9") != std::string::npos);
    // An active state at the end is no verdict: srun's evidence decides.
    BOOST_TEST(
        (classify(3, "srun: error: n: task 0: Exited with exit code 3\n", job_state::completing).kind ==
         end_kind::exit_nonzero));
}

BOOST_AUTO_TEST_CASE(marker_scan) {
    auto m = scan_stderr(
        "program output\n"
        "srun: error: localhost: task 0: Exited with exit code 4\r\n"
        "slurmstepd-localhost: error: *** STEP 1.0 ON localhost CANCELLED AT 2026 ***\n");
    BOOST_TEST(*m.task_exit_code == 4);
    BOOST_TEST(m.cancelled);
    BOOST_TEST(!m.time_limit);
    BOOST_TEST(!m.task_signal_line);
    BOOST_TEST(!scan_stderr("srun: error: localhost: task 0: Completed\n").task_signal_line);
    auto none = scan_stderr("");
    BOOST_TEST(!none.task_exit_code.has_value());
    BOOST_TEST(none.line.empty());
}

BOOST_AUTO_TEST_SUITE_END()

// The pure part of src/runner/slurm (job, command, classify) stays pure: no POSIX or system
// headers, no Asio, no clock, environment or I/O, in its sources and in the symbols of its
// objects.
BOOST_AUTO_TEST_SUITE(purity)

BOOST_AUTO_TEST_CASE(sources_include_nothing_impure) {
    std::string root = env_or_empty("AGENTCTL_SOURCE_ROOT");
    BOOST_TEST_REQUIRE(!root.empty(), "AGENTCTL_SOURCE_ROOT is not set (run through meson test)");
    const fs::path dir = fs::path(root) / "src" / "runner" / "slurm";
    BOOST_TEST_REQUIRE(fs::is_directory(dir), dir.string());
    const std::set<std::string> pure = {"job", "command", "classify", "allocation"};
    // Only these standard headers, the module's own and runner/lines.hpp.
    const std::set<std::string> allowed = {"algorithm",   "array",      "charconv", "climits",
                                           "cstdint",     "functional", "optional", "string",
                                           "string_view", "utility",    "vector"};
    const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
    const std::regex forbidden(
        R"(\b(getenv|setenv|environ|system_clock|steady_clock|popen|fopen|ifstream|ofstream|fstream|)"
        R"(fork|vfork|execve|posix_spawn|kill|socket|asio)\b)");
    const std::regex literal(R"("([^"\\]|\\.)*")");
    std::size_t scanned = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        auto ext = e.path().extension();
        if ((ext != ".cpp" && ext != ".hpp") || !pure.count(e.path().stem().string())) continue;
        ++scanned;
        std::ifstream in(e.path());
        std::string line;
        for (int number = 1; std::getline(in, line); ++number) {
            if (auto comment = line.find("//"); comment != std::string::npos) line.resize(comment);
            std::smatch m;
            if (std::regex_search(line, m, include)) {
                const std::string header = m[2].str();
                bool own = m[1] == "\"" && header.rfind("runner/slurm/", 0) == 0 &&
                           pure.count(fs::path(header).stem().string());
                // The backends' line splitter, itself only <string_view>.
                own = own || (m[1] == "\"" && header == "runner/lines.hpp");
                BOOST_TEST((own || (m[1] == "<" && allowed.count(header))),
                           e.path().filename().string() << ":" << number << ": includes " << header);
            }
            // Calls, not the text of srun's messages ("oom-kill event", "execve(): ...").
            const std::string code = std::regex_replace(line, literal, "\"\"");
            BOOST_TEST(!std::regex_search(code, forbidden), e.path().filename().string()
                                                                << ":" << number << ": " << line);
        }
    }
    BOOST_TEST(scanned >= 8u);
}

BOOST_AUTO_TEST_CASE(objects_call_no_system_function) {
    std::string lib = env_or_empty("AGENTCTL_SLURM_LIB");
    const bool ci = env_or_empty("CI") == "true";
    if (lib.empty() || !fs::exists(lib)) {
        BOOST_TEST(!ci, "AGENTCTL_SLURM_LIB is not set: the symbol check cannot run");
        BOOST_TEST_MESSAGE("AGENTCTL_SLURM_LIB not set: symbol check skipped");
        return;
    }
    auto objects = agentctl::test::undefined_symbols({lib});
    if (!objects) {
        BOOST_TEST(!ci, "nm did not run: the symbol check cannot run");
        BOOST_TEST_MESSAGE("nm did not run: symbol check skipped");
        return;
    }
    // What pure C++ needs: the allocator, string and exception support; nothing that reaches
    // the kernel.
    const std::set<std::string> forbidden = {
        "getenv",  "secure_getenv", "setenv",  "clock_gettime",  "gettimeofday", "time",   "open",
        "open64",  "openat",        "read",    "write",          "close",        "fopen",  "fread",
        "fork",    "vfork",         "execve",  "posix_spawn",    "popen",        "system", "socket",
        "connect", "kill",          "waitpid", "pthread_create", "stat",         "access", "poll",
        "pipe",    "pipe2",         "ioctl"};
    const std::vector<std::string> forbidden_parts = {
        "boost::asio::",       "std::chrono::_V2::", "std::basic_ifstream",
        "std::basic_ofstream", "std::filesystem::",  "std::thread"};
    std::size_t checked = 0;
    for (const auto& [member, names] : *objects) {
        for (const auto& name : names) {
            ++checked;
            BOOST_TEST(!agentctl::test::is_one_of(name, forbidden, forbidden_parts),
                       member << " needs `" << name << "`");
        }
    }
    BOOST_TEST(checked > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
