// `agentctl doctor` in the reference's contract: check names (process:ACTION:command, :script,
// :cwd, :env:NAME), statuses, what it leaves unverified, its scope, exit 6 when not ready.
#include "command.hpp"
#include "json_output.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>

using namespace cli_test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// One process action `host` of `kind` running `command` with `args`, and `extra` action lines.
std::string host_workflow(const std::string& command, const std::string& args, const std::string& extra = "",
                          const std::string& policy = "") {
    std::string base = command.substr(command.rfind('/') + 1);
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: doctor-host}\nspec:\n"
           "  policy: {processAllowlist: [" +
           base + "], approval: never" + policy +
           "}\n"
           "  actions:\n    host:\n      kind: builtin.shell.exec\n      command: " +
           command + "\n      args: " + args + "\n" + extra +
           "  tasks:\n    - {id: host, uses: action:host}\n";
}

struct doctor_result {
    int exit_code = -1;
    json::value data;
    std::string human;
};

doctor_result doctor(const std::string& wf) {
    doctor_result r;
    auto j = agentctl({"--output", "json", "doctor", wf});
    r.exit_code = j.exit_code;
    json::value v = parse_json(j.out);
    BOOST_TEST(v.at("kind") == "DoctorResult");
    r.data = v.at("data");
    BOOST_TEST(r.data.at("ready").as_bool() == (j.exit_code == 0), j.out);
    BOOST_TEST(r.data.at("scope").as_string().find("does not establish workflow execution readiness") !=
               std::string::npos);
    auto h = agentctl({"--color", "never", "doctor", wf});
    BOOST_TEST(h.exit_code == j.exit_code);
    r.human = h.out;
    return r;
}

const json::value* check_named(const doctor_result& r, const std::string& name) {
    for (const auto& c : r.data.at("checks").as_array())
        if (c.at("check") == name.c_str()) return &c;
    return nullptr;
}

std::string status_of(const doctor_result& r, const std::string& name) {
    const json::value* c = check_named(r, name);
    BOOST_TEST_REQUIRE(c != nullptr, name << " is not among " << json::serialize(r.data.at("checks")));
    return std::string(c->at("status").as_string());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(doctor_cli)

BOOST_AUTO_TEST_CASE(a_missing_command_is_not_ready_with_exit_6) {
    temp_dir dir;
    auto r = doctor(dir.write("wf.yaml", host_workflow(dir.path() + "/missing-tool", "[]")));
    BOOST_TEST(r.exit_code == 6);
    BOOST_TEST(status_of(r, "process:host:command") == "missing_or_not_executable");
    BOOST_TEST(r.human.find("process:host:command: missing_or_not_executable") != std::string::npos, r.human);
    BOOST_TEST(r.human.find("execution readiness unverified") != std::string::npos, r.human);
    // A bare name is looked up in PATH, as a run looks it up.
    auto bare = doctor(dir.write("wf.yaml", host_workflow("no-such-tool-here", "[]")));
    BOOST_TEST(bare.exit_code == 6);
    BOOST_TEST(status_of(bare, "process:host:command") == "missing_or_not_executable");
}

BOOST_AUTO_TEST_CASE(an_interpreters_script_is_checked_in_the_actions_folder) {
    temp_dir dir;
    fs::create_directories(dir.path() + "/helpers");
    // The interpreter is looked at, never run: any executable under its name does.
    fs::copy_file("/bin/true", dir.path() + "/python3");
    auto wf = dir.write(
        "wf.yaml", host_workflow(dir.path() + "/python3", "[analyze.py, --flag]", "      cwd: helpers\n"));
    auto missing = doctor(wf);
    BOOST_TEST(missing.exit_code == 6);
    BOOST_TEST(status_of(missing, "process:host:command") == "present");
    BOOST_TEST(status_of(missing, "process:host:script") == "missing_or_not_file");
    BOOST_TEST(status_of(missing, "process:host:cwd") == "present");

    dir.write("helpers/analyze.py", "PRIVATE_CONTENT_SENTINEL");
    auto present = doctor(wf);
    BOOST_TEST(present.exit_code == 0, present.human);
    BOOST_TEST(status_of(present, "process:host:script") == "present");
    const auto& unverified = present.data.at("unverified").as_array();
    BOOST_REQUIRE(unverified.size() == 1u);
    BOOST_TEST(unverified[0].at("status") == "unchecked");
    BOOST_TEST(unverified[0].at("detail").as_string().find("helper-internal") != std::string::npos);
    BOOST_TEST(json::serialize(present.data).find("PRIVATE_CONTENT_SENTINEL") == std::string::npos);
    BOOST_TEST(present.human.find("PRIVATE_CONTENT_SENTINEL") == std::string::npos);

    // A folder where the script should be is not a script.
    fs::remove(dir.path() + "/helpers/analyze.py");
    fs::create_directories(dir.path() + "/helpers/analyze.py");
    BOOST_TEST(status_of(doctor(wf), "process:host:script") == "missing_or_not_file");
}

BOOST_AUTO_TEST_CASE(modules_are_unverified_and_not_imported) {
    temp_dir dir;
    fs::copy_file("/bin/true", dir.path() + "/python3");
    auto r = doctor(dir.write("wf.yaml", host_workflow(dir.path() + "/python3", "[-m, missing.module]")));
    BOOST_TEST(r.exit_code == 0, r.human);
    BOOST_TEST(r.data.at("checks").as_array().size() == 1u, json::serialize(r.data.at("checks")));
    BOOST_TEST(r.data.at("unverified").as_array()[0].at("detail").as_string().find("modules") !=
               std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_cwd_and_a_missing_environment_source) {
    temp_dir dir;
    auto no_cwd = doctor(dir.write("wf.yaml", host_workflow("/bin/true", "[]", "      cwd: missing\n")));
    BOOST_TEST(no_cwd.exit_code == 6);
    BOOST_TEST(status_of(no_cwd, "process:host:cwd") == "missing_or_denied");
    auto no_env = doctor(dir.write(
        "wf.yaml", host_workflow("/bin/true", "[]", "      env: {TOKEN: {env: AGENTCTL_DOCTOR_TEST_UNSET}}\n",
                                 ", environmentAllowlist: [TOKEN, AGENTCTL_DOCTOR_TEST_UNSET]")));
    BOOST_TEST(no_env.exit_code == 6);
    BOOST_TEST(status_of(no_env, "process:host:env:TOKEN") == "missing");
    BOOST_TEST(!check_named(no_env, "process:host:cwd"), "no cwd declared, none checked");
}

BOOST_AUTO_TEST_CASE(a_workflow_without_prerequisites_is_ready) {
    temp_dir dir;
    auto r = doctor(dir.write("wf.yaml",
                              "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: pure}\nspec:\n"
                              "  actions: {set: {kind: builtin.assign}}\n"
                              "  tasks: [{id: set, uses: action:set, with: {value: 1}}]\n"));
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.data.at("checks").as_array().empty());
    BOOST_TEST(r.data.at("workflow") == "pure");
    BOOST_TEST(r.data.at("planDigest").as_string().rfind("sha256:", 0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
