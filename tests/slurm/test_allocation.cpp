// src/runner/slurm/allocation without Slurm: the node list and CPUs per node of an allocation,
// as SLURM_JOB_NODELIST and SLURM_JOB_CPUS_PER_NODE spell them.
#include "runner/slurm/allocation.hpp"
#include "runner/slurm/command.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

using namespace agentctl::slurm;

namespace {

std::vector<std::string> hosts(std::string_view list) {
    auto r = expand_hostlist(list);
    BOOST_TEST_REQUIRE(bool(r), r.error);
    return r.hosts;
}

using names = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(allocation)

BOOST_AUTO_TEST_CASE(host_lists_expand_as_slurm_writes_them) {
    BOOST_TEST(hosts("localhost") == names{"localhost"});
    BOOST_TEST(hosts("a,b") == (names{"a", "b"}));
    BOOST_TEST(hosts("node[1-3]") == (names{"node1", "node2", "node3"}));
    // A range keeps the zero padding of its first number, and grows past it.
    BOOST_TEST(hosts("n[08-10]") == (names{"n08", "n09", "n10"}));
    BOOST_TEST(hosts("n[098-100]") == (names{"n098", "n099", "n100"}));
    BOOST_TEST(hosts("n[9-10]") == (names{"n9", "n10"}));
    // A range at the top of 64 bits ends there.
    BOOST_TEST(hosts("n[18446744073709551614-18446744073709551615]") ==
               (names{"n18446744073709551614", "n18446744073709551615"}));
    // Commas inside brackets do not split entries; several entries and singles mix.
    BOOST_TEST(hosts("cn[01-02,7],gpu3,io[1]") == (names{"cn01", "cn02", "cn7", "gpu3", "io1"}));
    // Text after a bracket, and two brackets multiply from the left.
    BOOST_TEST(hosts("r[1-2]-n[1-2].x") == (names{"r1-n1.x", "r1-n2.x", "r2-n1.x", "r2-n2.x"}));
}

BOOST_AUTO_TEST_CASE(broken_host_lists_are_refused_with_the_reason) {
    for (std::string_view bad : {"", "a,,b", "a,", "n[1-3", "n1-3]", "n[1[2]]", "n[]", "n[3-1]", "n[a-b]",
                                 "n[1-]", "n[-2]", "n[1,,2]"}) {
        auto r = expand_hostlist(bad);
        BOOST_TEST(!r, bad);
        BOOST_TEST(r.hosts.empty(), bad);
        BOOST_TEST(r.error.find(std::string(bad)) != std::string::npos, r.error);
    }
    BOOST_TEST(expand_hostlist("n[3-1]").error.find("backwards") != std::string::npos);
}

// A list that would name millions of hosts is refused before it is made.
BOOST_AUTO_TEST_CASE(host_lists_are_bounded) {
    BOOST_TEST(hosts("n[1-65536]").size() == max_hostlist_hosts);
    BOOST_TEST(!expand_hostlist("n[1-65537]"));
    BOOST_TEST(!expand_hostlist("n[0-18446744073709551615]"));
    BOOST_TEST(!expand_hostlist("a[1-1000]b[1-1000]"));
    BOOST_TEST(!expand_hostlist("n[1-65536],extra"));
}

BOOST_AUTO_TEST_CASE(cpus_per_node_read_as_slurm_writes_them) {
    auto r = parse_cpus_per_node("8(x2),4,16(x1)");
    BOOST_TEST_REQUIRE(bool(r), r.error);
    BOOST_TEST(r.cpus == (std::vector<std::uint32_t>{8, 8, 4, 16}));
    BOOST_TEST(parse_cpus_per_node("2").cpus == std::vector<std::uint32_t>{2});
    for (std::string_view bad :
         {"", "0", "8(x0)", "8(2)", "8(x2", "x", "8,", ",8", "8(x)", "4294967296", "8(x65537)", "-1"}) {
        auto b = parse_cpus_per_node(bad);
        BOOST_TEST(!b, bad);
        BOOST_TEST(b.cpus.empty(), bad);
    }
}

BOOST_AUTO_TEST_CASE(the_allocation_is_read_from_its_environment) {
    std::map<std::string, std::string> vars;
    auto env = [&vars](std::string_view name) -> std::optional<std::string> {
        auto it = vars.find(std::string(name));
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    // Not inside an allocation: nothing, and no error.
    auto none = read_allocation(env);
    BOOST_TEST(!none.found.has_value());
    BOOST_TEST(none.error.empty());
    vars = {{"SLURM_JOB_ID", "42"},
            {"SLURM_JOB_NODELIST", "n[1-2],gpu7"},
            {"SLURM_JOB_CPUS_PER_NODE", "8(x2),4"}};
    auto a = read_allocation(env);
    BOOST_TEST_REQUIRE(a.found.has_value(), a.error);
    BOOST_TEST(a.found->job_id == 42u);
    BOOST_TEST(a.found->nodes == (names{"n1", "n2", "gpu7"}));
    BOOST_TEST(a.found->cpus == (std::vector<std::uint32_t>{8, 8, 4}));
    // Inside one, anything unreadable is an error, never a silent fallback to jobs.
    for (auto [name, value] :
         std::vector<std::pair<std::string, std::string>>{{"SLURM_JOB_ID", "x"},
                                                          {"SLURM_JOB_ID", "0"},
                                                          {"SLURM_JOB_NODELIST", "n[1-"},
                                                          {"SLURM_JOB_CPUS_PER_NODE", "8"}}) {
        auto saved = vars;
        vars[name] = value;
        auto bad = read_allocation(env);
        BOOST_TEST(!bad.found.has_value(), name << "=" << value);
        BOOST_TEST(!bad.error.empty(), name << "=" << value);
        vars = saved;
    }
    vars.erase("SLURM_JOB_CPUS_PER_NODE");
    BOOST_TEST(read_allocation(env).error.find("SLURM_JOB_CPUS_PER_NODE") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_worker_step_is_one_overlapping_task_on_its_node) {
    worker_step_request r;
    r.srun = "/usr/bin/srun";
    r.job_id = 42;
    r.node = "n1";
    r.cpus = 8;
    r.name = "agentctl:run-1:host:10:20:worker.n1:1";
    r.agentctl = "/opt/agentctl/bin/agentctl";
    auto argv = worker_step_argv(r);
    BOOST_TEST_REQUIRE(bool(argv), argv.error);
    BOOST_TEST(argv.argv ==
               (names{"/usr/bin/srun", "--jobid=42", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n1",
                      "--cpus-per-task=8", "--mem=0", "--unbuffered", "--mpi=none", "--kill-on-bad-exit=1",
                      "--quiet", "--export=NONE", "--job-name=agentctl:run-1:host:10:20:worker.n1:1", "--",
                      "/opt/agentctl/bin/agentctl", "worker"}));
    auto refused = [](worker_step_request w) {
        return !worker_step_argv(w) && worker_step_argv(w).argv.empty();
    };
    auto bad = r;
    bad.agentctl = "agentctl";
    BOOST_TEST(refused(bad));
    bad = r;
    bad.node = "n1\n--uid=0";
    BOOST_TEST(refused(bad));
    bad = r;
    bad.job_id = 0;
    BOOST_TEST(refused(bad));
    bad = r;
    bad.name = "";
    BOOST_TEST(refused(bad));
}

// --no-kill: a failed node ends its own worker, not the allocation (docs/WORKER.md, "Failures").
BOOST_AUTO_TEST_CASE(an_allocation_asked_for_is_whole_nodes_found_by_its_name_and_outlives_a_node) {
    salloc_request r;
    r.salloc = "/usr/bin/salloc";
    r.name = "agentctl:run-1:host:10:20:allocation:1";
    r.nodes = 2;
    auto argv = salloc_argv(r);
    BOOST_TEST_REQUIRE(bool(argv), argv.error);
    BOOST_TEST(argv.argv == (names{"/usr/bin/salloc", "--no-shell", "--quiet", "--nodes=2", "--exclusive",
                                   "--no-kill", "--job-name=agentctl:run-1:host:10:20:allocation:1"}));
    r.time = "1:00:00";
    r.partition = "batch";
    r.qos = "short";
    BOOST_TEST(salloc_argv(r).argv ==
               (names{"/usr/bin/salloc", "--no-shell", "--quiet", "--nodes=2", "--exclusive", "--no-kill",
                      "--job-name=agentctl:run-1:host:10:20:allocation:1", "--time=1:00:00",
                      "--partition=batch", "--qos=short"}));
    auto refused = [](salloc_request q) { return !salloc_argv(q) && salloc_argv(q).argv.empty(); };
    auto bad = r;
    bad.salloc = "salloc";
    BOOST_TEST(refused(bad));
    bad = r;
    bad.nodes = 0;
    BOOST_TEST(refused(bad));
    bad = r;
    bad.name = "";
    BOOST_TEST(refused(bad));
    bad = r;
    bad.account = "a\n--uid=0";
    BOOST_TEST(refused(bad));
}

// `scontrol show job -d -o` as the fixture printed it (trimmed), and two node groups.
BOOST_AUTO_TEST_CASE(the_granted_nodes_and_their_cpus_come_from_scontrol_detail) {
    auto one = read_allocation_detail(
        6,
        "JobId=6 JobName=x NodeList=localhost NumNodes=1 NumCPUs=8 JOB_GRES=(null)   Nodes=localhost "
        "CPU_IDs=0-7 Mem=0 GRES= MinCPUsNode=1 WorkDir=/tmp Power=\n");
    BOOST_TEST_REQUIRE(one.found.has_value(), one.error);
    BOOST_TEST(one.found->job_id == 6u);
    BOOST_TEST(one.found->nodes == names{"localhost"});
    BOOST_TEST(one.found->cpus == (std::vector<std::uint32_t>{8}));
    auto two = read_allocation_detail(7,
                                      "JobId=7 Nodes=n[01-02] CPU_IDs=0-3,8-11 Mem=0 GRES= Nodes=n03 "
                                      "CPU_IDs=5 Mem=0");
    BOOST_TEST_REQUIRE(two.found.has_value(), two.error);
    BOOST_TEST(two.found->nodes == (names{"n01", "n02", "n03"}));
    BOOST_TEST(two.found->cpus == (std::vector<std::uint32_t>{8, 8, 1}));
    BOOST_TEST(!read_allocation_detail(8, "JobId=8 NodeList=n1 NumCPUs=8").found);
    BOOST_TEST(!read_allocation_detail(8, "Nodes=n1 CPU_IDs=7-3").found);
    BOOST_TEST(!read_allocation_detail(8, "CPU_IDs=0-3").found);
    BOOST_TEST(read_allocation_detail(8, "Nodes=n[1 CPU_IDs=0").error.find("scontrol show job -d 8") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
