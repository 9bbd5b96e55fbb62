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

BOOST_AUTO_TEST_SUITE_END()
