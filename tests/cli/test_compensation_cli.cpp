// `agentctl compensate` end to end (docs/CONTROL_FLOW.md, "Compensation"): the plan, the
// linked compensation run, the reconciliations the source shows, a second plan, automatic
// compensation of a failed run, and agentctl SIGKILLed while an undo runs, then `resume`.
// Workflows of our own.
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace cli_test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

const std::string head = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: comp}\nspec:\n";

// `provision` writes a file, its undo writes `compensated` there; `validate` then fails.
std::string provision_then_fail(const std::string& on_failure) {
    return head + "  compensation: {onFailure: " + on_failure +
           "}\n"
           "  policy: {workspaceRoot: ., writableRoots: [artifacts], approval: never}\n"
           "  actions:\n    write: {kind: builtin.write}\n    assert: {kind: builtin.assert}\n"
           "  tasks:\n"
           "    - id: provision\n      uses: action:write\n"
           "      with: {path: artifacts/resource.txt, content: provisioned}\n"
           "      compensate:\n        uses: action:write\n"
           "        with: {path: \"${{ tasks.provision.output.path }}\", content: compensated}\n"
           "    - id: validate\n      uses: action:assert\n      needs: [provision]\n"
           "      with: {that: false, message: expected failure}\n";
}

std::string run_id_of(const command_result& r) {
    auto v = parse_json(r.out);
    return std::string(v.at("data").at("runId").as_string());
}

// Three shell tasks a -> b -> c, then `fail`. Each undo appends its letter to `log`; b's undo
// fails when `fail_b`; a's undo first sleeps (a probe tagged `nonce`) while `gate` is missing.
// Runs provision_then_fail("manual") into the journal `db`: it fails after provisioning.
std::string failed_provision_run(temp_dir& dir, const std::string& db) {
    auto wf = dir.write("wf.yaml", provision_then_fail("manual"));
    auto run = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST_REQUIRE(run.exit_code == 4, run.err);
    return run_id_of(run);
}

std::string three_undos(const std::string& log, bool fail_b, const std::string& gate = "",
                        const std::string& nonce = "") {
    std::string a_undo = "echo a >> " + log;
    if (!gate.empty())
        a_undo = "if [ ! -e " + gate + " ]; then touch " + gate + "; " + probe_bin() + " sleep 300 --nonce " +
                 nonce + "; fi; " + a_undo;
    return head +
           "  policy: {processAllowlist: [sh], approval: never}\n"
           "  actions:\n"
           "    do: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'true']}\n"
           "    undo_a: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, '" +
           a_undo +
           "']}\n"
           "    undo_b: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo b >> " +
           log + (fail_b ? "; exit 7" : "") +
           "']}\n"
           "    undo_c: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'echo c >> " +
           log +
           "']}\n"
           "    fail: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, 'exit 1']}\n"
           "  tasks:\n"
           "    - {id: a, uses: action:do, compensate: {uses: action:undo_a}}\n"
           "    - {id: b, uses: action:do, needs: [a], compensate: {uses: action:undo_b}}\n"
           "    - {id: c, uses: action:do, needs: [b], compensate: {uses: action:undo_c}}\n"
           "    - {id: f, uses: action:fail, needs: [c]}\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compensation_cli)

BOOST_AUTO_TEST_CASE(compensate_plans_runs_links_and_does_not_repeat) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string id = failed_provision_run(dir, db);
    BOOST_TEST(read_file(dir.path() + "/artifacts/resource.txt") == "provisioned");

    auto plan = agentctl({"--output", "json", "compensate", id, "--plan", "--db", db});
    BOOST_TEST_REQUIRE(plan.exit_code == 0, plan.err);
    auto pv = parse_json(plan.out);
    BOOST_TEST(pv.at("kind").as_string() == "CompensationPlan");
    BOOST_TEST(pv.at("data").at("executable").as_bool());
    BOOST_TEST(pv.at("data").at("tasks").at(0).at("sourceTaskId").as_string() == "provision");
    BOOST_TEST(read_file(dir.path() + "/artifacts/resource.txt") == "provisioned", "--plan ran something");

    auto comp = agentctl({"--output", "json", "compensate", id, "--db", db});
    BOOST_TEST_REQUIRE(comp.exit_code == 0, comp.err);
    auto cv = parse_json(comp.out);
    const auto& d = cv.at("data");
    BOOST_TEST(d.at("state").as_string() == "succeeded");
    BOOST_TEST(d.at("mode").as_string() == "compensation");
    BOOST_TEST(d.at("sourceRunId").as_string() == id);
    BOOST_TEST(json::serialize(d.at("compensatedTasks")) == R"(["provision"])");
    BOOST_TEST(read_file(dir.path() + "/artifacts/resource.txt") == "compensated");
    std::string comp_id(d.at("runId").as_string());
    BOOST_TEST(comp_id == id + "-compensation-1");

    // The compensation run is in the journal, linked; the source lists what was undone.
    auto shown = parse_json(agentctl({"--output", "json", "runs", "show", comp_id, "--db", db}).out);
    BOOST_TEST(shown.at("data").at("mode").as_string() == "compensation");
    BOOST_TEST(shown.at("data").at("sourceRunId").as_string() == id);
    auto source = parse_json(agentctl({"--output", "json", "runs", "show", id, "--db", db}).out);
    const auto& rec = source.at("data").at("effectReconciliations").at(0);
    BOOST_TEST(rec.at("status").as_string() == "compensated");
    BOOST_TEST(rec.at("sourceTaskId").as_string() == "provision");
    BOOST_TEST(rec.at("compensationRunId").as_string() == comp_id);
    BOOST_TEST(rec.at("compensationEffectId").as_string() == comp_id + ":compensate-provision:1");

    // Again: nothing left to undo.
    auto again = parse_json(agentctl({"--output", "json", "compensate", id, "--plan", "--db", db}).out);
    BOOST_TEST(!again.at("data").at("executable").as_bool());
    BOOST_TEST(again.at("data").at("alreadyCompensatedEffects").as_array().size() == 1u);
    auto noop = agentctl({"compensate", id, "--db", db});
    BOOST_TEST(noop.exit_code == 0, noop.err);
    BOOST_TEST(noop.out.find("nothing to compensate") != std::string::npos, noop.out);

    // A resume of the source never reuses the compensated task: it runs again.
    auto dry = agentctl({"resume", id, "--db", db, "--dry-run", "--retry-failed"});
    BOOST_TEST(dry.out.find("provision: its effect was compensated by run " + comp_id) != std::string::npos,
               dry.out);

    // A compensation run is not compensated itself; an unknown run is a journal error.
    BOOST_TEST(agentctl({"compensate", comp_id, "--db", db}).exit_code == 2);
    BOOST_TEST(agentctl({"compensate", "run-nope", "--db", db}).exit_code == 5);
}

// --workspace names the folder the undos run in, as for `run` (the reference's drivers pass
// it to `compensate` too); without it they run in the source run's folder.
BOOST_AUTO_TEST_CASE(workspace_names_the_folder_the_undos_run_in) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string id = failed_provision_run(dir, db);
    std::string other = dir.path() + "/other";
    fs::create_directories(other + "/artifacts");

    auto missing = agentctl({"compensate", id, "--db", db, "--workspace", dir.path() + "/missing"});
    BOOST_TEST(missing.exit_code == 2, missing.err);
    BOOST_TEST(missing.err.find("--workspace") != std::string::npos, missing.err);
    auto plan = agentctl({"--output", "json", "compensate", id, "--plan", "--db", db, "--workspace", other});
    BOOST_TEST_REQUIRE(plan.exit_code == 0, plan.err);
    BOOST_TEST(parse_json(plan.out).at("data").at("executable").as_bool());

    auto comp = agentctl({"--output", "json", "compensate", id, "--db", db, "--workspace", other});
    BOOST_TEST_REQUIRE(comp.exit_code == 0, comp.err);
    BOOST_TEST(read_file(other + "/artifacts/resource.txt") == "compensated");
    BOOST_TEST(read_file(dir.path() + "/artifacts/resource.txt") == "provisioned");
    // --workspace stays an option of the commands that take it.
    BOOST_TEST(agentctl({"runs", "list", "--db", db, "--workspace", other}).exit_code == 2);
}

// Reverse order, one at a time; a failed undo does not stop the others, and the next
// `compensate` plans only it.
BOOST_AUTO_TEST_CASE(undos_run_in_reverse_and_a_failed_one_is_planned_again) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string log = dir.path() + "/log";
    auto wf = dir.write("wf.yaml", three_undos(log, true));
    auto run = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST_REQUIRE(run.exit_code == 4, run.err);
    std::string id = run_id_of(run);
    auto plan = parse_json(agentctl({"--output", "json", "compensate", id, "--plan", "--db", db}).out);
    std::string order;
    for (const auto& t : plan.at("data").at("tasks").as_array())
        order += t.at("sourceTaskId").as_string().c_str();
    BOOST_TEST(order == "cba");
    auto comp = agentctl({"--output", "json", "compensate", id, "--db", db});
    BOOST_TEST(comp.exit_code == 4, comp.err);
    BOOST_TEST(read_file(log) == "c\nb\na\n");
    BOOST_TEST(json::serialize(parse_json(comp.out).at("data").at("compensatedTasks")) == R"(["c","a"])");

    auto second = parse_json(agentctl({"--output", "json", "compensate", id, "--plan", "--db", db}).out);
    BOOST_TEST(second.at("data").at("tasks").as_array().size() == 1u);
    BOOST_TEST(second.at("data").at("tasks").at(0).at("sourceTaskId").as_string() == "b");
    BOOST_TEST(second.at("data").at("alreadyCompensatedEffects").as_array().size() == 2u);
    BOOST_TEST(second.at("data").at("runId").as_string() == id + "-compensation-2");
    // --task: that one only.
    auto only =
        parse_json(agentctl({"--output", "json", "compensate", id, "--plan", "--task", "a", "--db", db}).out);
    BOOST_TEST(only.at("data").at("tasks").as_array().empty());
    BOOST_TEST(agentctl({"compensate", id, "--plan", "--task", "f", "--db", db}).exit_code == 2);
}

BOOST_AUTO_TEST_CASE(on_failure_automatic_compensates_a_failed_run) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    auto wf = dir.write("wf.yaml", provision_then_fail("automatic"));
    auto run = agentctl({"run", wf, "--db", db});
    BOOST_TEST(run.exit_code == 4, run.err);  // the run failed, whatever its compensation did
    BOOST_TEST(read_file(dir.path() + "/artifacts/resource.txt") == "compensated", run.err);
    auto list = parse_json(agentctl({"--output", "json", "runs", "list", "--db", db}).out);
    const auto& runs = list.at("data").at("runs").as_array();
    BOOST_TEST_REQUIRE(runs.size() == 2u);
    std::string newest(runs[0].at("runId").as_string()), source(runs[1].at("runId").as_string());
    BOOST_TEST(newest == source + "-compensation-1");
    BOOST_TEST(runs[0].at("state").as_string() == "succeeded");

    // A run that succeeds is not compensated.
    auto ok =
        dir.write("ok.yaml", head +
                                 "  compensation: {onFailure: automatic}\n"
                                 "  policy: {workspaceRoot: ., writableRoots: [artifacts], approval: never}\n"
                                 "  actions:\n    write: {kind: builtin.write}\n"
                                 "  tasks:\n    - id: p\n      uses: action:write\n"
                                 "      with: {path: artifacts/ok.txt, content: kept}\n"
                                 "      compensate: {uses: action:write, with: {path: artifacts/ok.txt, "
                                 "content: undone}}\n");
    BOOST_TEST(agentctl({"run", ok, "--db", db}).exit_code == 0);
    BOOST_TEST(read_file(dir.path() + "/artifacts/ok.txt") == "kept");
}

// agentctl dies (SIGKILL) while an undo sleeps: the undo before it is confirmed, the sleeping
// one uncertain. Nothing new starts while the compensation run is unfinished; `resume` refuses
// to send the uncertain undo again silently; with --rerun-uncertain it finishes, and the
// confirmed undo is not run again.
BOOST_AUTO_TEST_CASE(a_compensation_killed_mid_undo_is_finished_by_resume) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    std::string log = dir.path() + "/log";
    std::string gate = dir.path() + "/slept";
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", three_undos(log, false, gate, nonce));
    auto run = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST_REQUIRE(run.exit_code == 4, run.err);
    std::string id = run_id_of(run);

    command_options o;
    bool killed = false;
    o.poll = [&](pid_t pid) {
        // a's undo has passed its gate and sleeps (its shell and the probe carry the nonce).
        if (!fs::exists(gate) || processes_with(nonce).size() < 2) return false;
        ::kill(pid, SIGKILL);
        killed = true;
        return true;
    };
    auto comp = agentctl({"compensate", id, "--db", db}, o);
    BOOST_TEST_REQUIRE(killed, comp.err);
    BOOST_TEST(comp.signal == SIGKILL);
    BOOST_TEST(read_file(log) == "c\nb\n");
    std::string comp_id = id + "-compensation-1";

    auto blocked = agentctl({"--output", "json", "compensate", id, "--db", db});
    BOOST_TEST(blocked.exit_code == 3, blocked.err);
    BOOST_TEST(blocked.err.find("compensation_in_progress") != std::string::npos, blocked.err);
    auto refused = agentctl({"resume", comp_id, "--db", db});
    BOOST_TEST(refused.exit_code == 3, refused.err);
    BOOST_TEST(read_file(log) == "c\nb\n", "an uncertain undo was sent again");

    auto resumed = agentctl({"--output", "json", "resume", comp_id, "--db", db, "--rerun-uncertain"});
    BOOST_TEST(resumed.exit_code == 0, resumed.err);
    BOOST_TEST(read_file(log) == "c\nb\na\n", "a confirmed undo ran again, or a's did not");
    auto v = parse_json(resumed.out);
    BOOST_TEST(json::serialize(v.at("data").at("resume").at("reused")) ==
               R"(["compensate-c","compensate-b"])");
    auto again = parse_json(agentctl({"--output", "json", "compensate", id, "--plan", "--db", db}).out);
    BOOST_TEST(!again.at("data").at("executable").as_bool());
    BOOST_TEST(again.at("data").at("alreadyCompensatedEffects").as_array().size() == 3u);
    for (pid_t p : processes_with(nonce)) ::kill(p, SIGKILL);
}

BOOST_AUTO_TEST_SUITE_END()
