// The backend choice and the Slurm options as the library reads them (no Slurm needed), and
// what a Slurm result keeps on its way into the journal.
#include "engine/outcome.hpp"
#include "journal/codec.hpp"

#include <agentctl/backend.hpp>

#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

using namespace agentctl;

BOOST_AUTO_TEST_SUITE(backend)

BOOST_AUTO_TEST_CASE(backend_names) {
    BOOST_TEST((backend_from_string("local") == backend_kind::local));
    BOOST_TEST((backend_from_string("slurm") == backend_kind::slurm));
    BOOST_TEST(!backend_from_string("Slurm").has_value());
    BOOST_TEST(!backend_from_string("").has_value());
    BOOST_TEST(to_string(backend_kind::slurm) == "slurm");
    BOOST_TEST(to_string(backend_kind::local) == "local");
}

BOOST_AUTO_TEST_CASE(slurm_options_are_checked) {
    slurm_options o;
    BOOST_TEST(set_slurm_option(o, "partition", "main,second").empty());
    BOOST_TEST(o.partition == "main,second");
    BOOST_TEST(set_slurm_option(o, "account", "physics").empty());
    BOOST_TEST(set_slurm_option(o, "qos", "low").empty());
    BOOST_TEST(set_slurm_option(o, "cpus-per-task", "4").empty());
    BOOST_TEST(set_slurm_option(o, "mem", "2048").empty());
    BOOST_TEST(o.account == "physics");
    BOOST_TEST(o.qos == "low");
    BOOST_TEST(*o.cpus_per_task == 4u);
    BOOST_TEST(*o.mem_mib == 2048u);
    BOOST_TEST(slurm_options_error(o).empty());

    for (auto [name, value] :
         std::vector<std::pair<std::string, std::string>>{{"partition", ""},
                                                          {"partition", ","},
                                                          {"partition", "a\nb"},
                                                          {"account", ""},
                                                          {"qos", "x\ty"},
                                                          {"cpus-per-task", "0"},
                                                          {"cpus-per-task", "-1"},
                                                          {"cpus-per-task", "1.5"},
                                                          {"cpus-per-task", "4x"},
                                                          {"cpus-per-task", ""},
                                                          {"cpus-per-task", "99999999999"},
                                                          {"mem", "0"},
                                                          {"mem", "10G"},
                                                          {"mem", "18446744073709551616"},
                                                          {"nodes", "0"},
                                                          {"nodes", "two"},
                                                          {"nodes", "65537"},
                                                          {"time", ""},
                                                          {"time", "soon"},
                                                          {"gpus", "1"}}) {
        slurm_options before = o;
        std::string why = set_slurm_option(o, name, value);
        BOOST_TEST(!why.empty(), name << "=" << value << " was accepted");
        BOOST_TEST(o.partition == before.partition);
        BOOST_TEST((o.mem_mib == before.mem_mib));
        BOOST_TEST((o.cpus_per_task == before.cpus_per_task));
    }
    slurm_options bad;
    bad.cpus_per_task = 0;
    BOOST_TEST(!slurm_options_error(bad).empty());
    bad = {};
    bad.partition = "a\x01";
    BOOST_TEST(!slurm_options_error(bad).empty());
    BOOST_TEST(slurm_options_error(slurm_options{}).empty());
    // --slurm-time belongs to --slurm-nodes, which asks for workers, not a job per task.
    bad = {};
    BOOST_TEST(set_slurm_option(bad, "time", "1:00:00").empty());
    BOOST_TEST(!slurm_options_error(bad).empty());
    BOOST_TEST(set_slurm_option(bad, "nodes", "2").empty());
    BOOST_TEST(slurm_options_error(bad).empty());
    BOOST_TEST(bad.nodes == 2u);
    bad.dispatch = slurm_dispatch::job;
    BOOST_TEST(!slurm_options_error(bad).empty());
}

BOOST_AUTO_TEST_SUITE_END()

// A result recorded in the journal drops its streams and keeps everything else: the report of
// a journaled run is written from this copy (a Slurm run once lost its job id here).
BOOST_AUTO_TEST_CASE(a_result_without_its_streams_keeps_every_other_member) {
    agentctl::task_result r;
    r.state = agentctl::task_state::failed;
    r.attempts = 2;
    r.exit_code = 3;
    r.stdout_text = "out";
    r.stderr_text = "err";
    r.command = "/bin/x";
    r.argv = {"/bin/x", "a"};
    r.isolation = "process";
    r.containment = "slurm";
    r.backend = "slurm";
    r.slurm_job_id = 42;
    r.slurm_node = "node1";
    r.slurm_state = "FAILED";
    r.descendants_killed = 1;
    r.limit_stream = "stdout";
    r.error = agentctl::task_error{agentctl::error_code::exit_nonzero, "exited with status 3"};
    auto w = agentctl::without_streams(r);
    BOOST_TEST(w.stdout_text.empty());
    BOOST_TEST(w.stderr_text.empty());
    BOOST_TEST((w.state == r.state && w.attempts == 2u && w.exit_code == 3));
    BOOST_TEST(w.command == r.command);
    BOOST_TEST((w.argv == r.argv));
    BOOST_TEST(w.containment == "slurm");
    BOOST_TEST(w.backend == "slurm");
    BOOST_TEST((w.slurm_job_id == std::optional<std::uint64_t>(42)));
    BOOST_TEST(w.slurm_node == "node1");
    BOOST_TEST(w.slurm_state == "FAILED");
    BOOST_TEST(w.descendants_killed == 1u);
    BOOST_TEST(w.limit_stream == "stdout");
    BOOST_TEST((w.error && w.error->code == agentctl::error_code::exit_nonzero));
}

// The journal's final of an attempt that ran: the streams emptied in place, so that its JSON is
// the end's and the journal stores it once (docs/JOURNAL.md, "results").
BOOST_AUTO_TEST_CASE(a_final_without_its_streams_in_place_encodes_as_its_end) {
    agentctl::task_result r;
    r.state = agentctl::task_state::succeeded;
    r.attempts = 1;
    r.exit_code = 0;
    r.output_bytes = 9;
    r.output = boost::json::object{{"status", "changed"}, {"stdout", "printed\n"}, {"stderr", "x"}, {"z", 1}};
    r.streams_in_output = true;  // as the built-in runner keeps them
    auto removed = agentctl::without_streams(r);
    BOOST_TEST(!removed.output.as_object().contains("stdout"));
    BOOST_TEST(agentctl::journal_detail::encode_result(removed) !=
               agentctl::journal_detail::encode_result(r));
    auto in_place = agentctl::without_streams(r, /*in_place=*/true);
    BOOST_TEST(boost::json::serialize(in_place.output) ==
               R"({"status":"changed","stdout":"","stderr":"","z":1})");
    BOOST_TEST(agentctl::journal_detail::encode_result(in_place) ==
               agentctl::journal_detail::encode_result(r));
    r.streams_in_output = false;  // a result whose streams are apart: output is kept whole
    r.stdout_text = "printed\n";
    in_place = agentctl::without_streams(r, true);
    BOOST_TEST(in_place.stdout_text.empty());
    BOOST_TEST(agentctl::journal_detail::encode_result(in_place) ==
               agentctl::journal_detail::encode_result(r));
}
