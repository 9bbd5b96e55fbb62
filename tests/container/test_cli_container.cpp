// The CLI end to end with `isolation: container`: run and doctor, human-free JSON.
#include "harness.hpp"

#include <boost/json.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

using namespace ctr_test;
namespace bdata = boost::unit_test::data;
namespace json = boost::json;

namespace {

const std::vector<std::string> engines = {"docker", "podman"};

json::value parse_json(const std::string& text) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    BOOST_REQUIRE_MESSAGE(!ec, "not JSON: " << text);
    return v;
}

cli_test::command_result cli(const std::vector<std::string>& args) {
    cli_test::command_options options;
    options.env = fixture_env();
    options.bound = std::chrono::seconds(120);
    return cli_test::agentctl(args, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_container)

// agentctl parallel --container IMAGE: each job in a container of the pinned image, with the
// image's own PATH (agentctl never sets PATH, HOME or TMPDIR in a container).
BOOST_AUTO_TEST_CASE(parallel_runs_each_job_in_a_container) {
    temp_dir dir;
    cli_test::command_options options;
    options.env = fixture_env();  // agentctl's own PATH is the tests' /usr/local/bin:/usr/bin:/bin
    options.cwd = dir.path();
    options.bound = std::chrono::seconds(120);
    auto r = cli_test::agentctl({"parallel", "--container", image(), "-k", "/bin/echo", ":::", "a", "b c"},
                                options);
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.out == "a\nb c\n");
    auto shell = cli_test::agentctl(
        {"parallel", "--container", image(), "--shell", "echo {}:$PATH", ":::", "x"}, options);
    BOOST_TEST(shell.exit_code == 0, shell.err);
    BOOST_TEST(shell.out.rfind("x:/", 0) == 0u, shell.out);
    BOOST_TEST(shell.out != "x:/usr/local/bin:/usr/bin:/bin\n", "agentctl's PATH went into the container");
    // A job that fails counts, as with parallel.
    auto failed = cli_test::agentctl(
        {"parallel", "--container", image(), "--shell", "exit {}", ":::", "0", "3"}, options);
    BOOST_TEST(failed.exit_code == 1, failed.err);
}

BOOST_DATA_TEST_CASE(run_and_doctor_through_the_cli, bdata::make(engines), engine) {
    temp_dir dir;
    action_options o;
    o.extra = "      env: {MODE: {value: fast}}\n";
    std::string policy = "    processAllowlist: [probe]\n    environmentAllowlist: [MODE]\n";
    auto wf = dir.write("wf.yaml", make_workflow(policy, container_action("ids", engine, "/usr/local/bin/probe", {"report-ids"}, o),
                                            "    - {id: ids, uses: action:ids, foreach: {items: [1, 2]}}\n"));
    auto r = cli({"--output", "json", "run", "--jobs", "2", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("kind").as_string() == "RunOutcome");
    const auto& data = v.at("data");
    BOOST_TEST(data.at("state").as_string() == "succeeded");
    // ids--0000 and its bindings' digest: {"foreachIndex":0,"item":1}
    const auto& t = data.at("tasks").at("ids--0000-8f9c4658c318").as_object();
    BOOST_TEST(t.at("isolation").as_string() == "container");
    BOOST_TEST(t.at("engine").as_string() == engine);
    BOOST_TEST(t.at("containment").as_string() == "engine");
    BOOST_TEST(t.at("command").as_string() == engine_path(engine));
    BOOST_TEST(t.at("stdout").as_string().subview().find("uid 65532 gid 65532") != std::string_view::npos);
    std::string run_id(data.at("runId").as_string());
    BOOST_TEST(containers_labelled(engine, "agentctl.run=" + run_id).empty());

    auto d = cli({"--output", "json", "doctor", wf});
    BOOST_TEST(d.exit_code == 0, d.out << d.err);
    json::value dv = parse_json(d.out);
    BOOST_TEST(dv.at("kind").as_string() == "DoctorResult");
    BOOST_TEST(dv.at("data").at("ready").as_bool());
    bool engine_ok = false;
    for (const auto& c : dv.at("data").at("checks").as_array())
        engine_ok |= c.at("check").as_string() == "container:ids" && c.at("subject").as_string() == engine &&
                     c.at("status").as_string() == "present";
    BOOST_TEST(engine_ok);

    // The pinned image is not here: doctor says so, run fails closed with exit 4.
    action_options missing = o;
    missing.image_ref = "sha256:" + std::string(64, 'f');
    auto absent = dir.write("absent.yaml", make_workflow(policy, container_action("ids", engine, "/usr/local/bin/probe",
                                                                             {"report-ids"}, missing),
                                                    "    - {id: ids, uses: action:ids}\n"));
    auto da = cli({"--output", "json", "doctor", absent});
    BOOST_TEST(da.exit_code == 6, da.out << da.err);
    BOOST_TEST(!parse_json(da.out).at("data").at("ready").as_bool());
    auto ra = cli({"--output", "json", "run", absent});
    BOOST_TEST(ra.exit_code == 4, ra.out << ra.err);
    json::value av = parse_json(ra.out);
    BOOST_TEST(av.at("data").at("error").at("code").as_string() == "isolation_unavailable");
    BOOST_TEST(av.at("data").at("tasks").at("ids").at("state").as_string() == "skipped");
    auto human = cli({"doctor", absent});
    BOOST_TEST(human.exit_code == 6);
    BOOST_TEST(human.out.find("not ready") != std::string::npos, human.out);
}

// `runs gc` removes what crashed runners left on every engine in the PATH, as a run does on
// the engines it uses, and says so; a live runner's, another host's and an unlabelled
// container stay.
BOOST_DATA_TEST_CASE(runs_gc_removes_dead_owners_containers_on_every_engine, bdata::make(engines), engine) {
    temp_dir state;
    cli_test::command_options o;
    o.env = fixture_env();
    o.env.push_back("AGENTCTL_STATE_DIR=" + state.path());
    o.bound = std::chrono::seconds(120);
    // Any agentctl on this host removes a dead owner's containers on the engines it uses (a
    // suite running beside this one, e.g. cli-parallel's --container runs), so the dead one may
    // be gone before this gc looks. Then it is made again, at most three times in all.
    std::map<std::string, std::string> names;
    cli_test::command_result r;
    json::value v;
    bool reported = false;
    for (int attempt = 0; attempt < 3 && !reported; ++attempt) {
        if (attempt > 0) remove_containers(engine, names);
        names = start_owned_containers(engine);
        r = cli_test::agentctl({"--output", "json", "runs", "gc"}, o);
        BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
        v = parse_json(r.out);
        for (const auto& c : v.at("data").at("leftovers").at("containers").as_array()) {
            BOOST_TEST(c.at("name").as_string() != names["live"]);
            BOOST_TEST(c.at("name").as_string() != names["elsewhere"]);
            BOOST_TEST(c.at("name").as_string() != names["unlabelled"]);
            if (c.at("name").as_string() == names["dead"]) {
                reported = true;
                BOOST_TEST(c.at("engine").as_string() == engine);
                BOOST_TEST(c.at("removed").as_bool());
            }
        }
        if (!reported)
            BOOST_TEST_MESSAGE("attempt " << attempt + 1 << ": the dead container was not reported");
    }
    BOOST_TEST(reported, r.out);
    for (const auto& d : v.at("diagnostics").as_array())
        BOOST_TEST(d.at("code").as_string() != "container_sweep_failed", d.at("message").as_string());
    BOOST_TEST(container_gone(engine, names["dead"]));
    BOOST_TEST(container_exists(engine, names["live"]));
    BOOST_TEST(container_exists(engine, names["elsewhere"]));
    BOOST_TEST(container_exists(engine, names["unlabelled"]));

    // Human output names what it removed.
    auto again = start_owned_containers(engine);
    auto human = cli_test::agentctl({"runs", "gc"}, o);
    BOOST_TEST(human.exit_code == 0, human.out << human.err);
    BOOST_TEST(human.err.find("removed what a dead run left: " + engine + " container " + again["dead"]) !=
                   std::string::npos,
               human.err);
    BOOST_TEST(container_gone(engine, again["dead"]));
    remove_containers(engine, names);
    remove_containers(engine, again);
}

BOOST_AUTO_TEST_SUITE_END()
