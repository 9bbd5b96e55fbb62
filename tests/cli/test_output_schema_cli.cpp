// A task's outputSchema at run time: each succeeded output is checked; a mismatch fails the
// task with output_invalid and stops what needs it; a preview (--check) checks nothing.
#include "command.hpp"
#include "json_output.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

using namespace cli_test;
namespace json = boost::json;

namespace {

// `good` assigns an integer where its schema wants one, `bad` a string; each foreach child of
// `each` is checked against the declared task's schema; `after` needs `bad`.
const char* workflow_text =
    "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: contracts}\nspec:\n"
    "  policy: {approval: never}\n"
    "  actions:\n    set: {kind: builtin.assign}\n"
    "  tasks:\n"
    "    - id: good\n      uses: action:set\n      with: {n: 1}\n"
    "      outputSchema: {type: object, required: [output],\n"
    "                     properties: {output: {type: object, properties: {n: {type: integer}}}}}\n"
    "    - id: bad\n      uses: action:set\n      with: {n: one}\n"
    "      outputSchema: {type: object, properties: {output: {properties: {n: {type: integer}}}}}\n"
    "    - id: each\n      uses: action:set\n      with: {n: \"${{ vars.item }}\"}\n"
    "      foreach: {items: [1, two], as: item}\n"
    "      outputSchema: {properties: {output: {properties: {n: {type: integer}}}}}\n"
    "      failure: continue\n"
    "    - id: after\n      uses: action:set\n      needs: [bad]\n      with: {}\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(output_schema_cli)

BOOST_AUTO_TEST_CASE(outputs_are_checked_against_their_task_schema) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", workflow_text);
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal", "--keep-going"});
    BOOST_TEST(r.exit_code == 4, r.err << r.out);
    json::value v = parse_json(r.out);
    const auto& tasks = v.at("data").at("tasks").as_object();
    BOOST_TEST(tasks.at("good").at("state") == "succeeded");
    BOOST_TEST(tasks.at("bad").at("state") == "failed");
    BOOST_TEST(tasks.at("bad").at("error").at("code") == "output_invalid");
    BOOST_TEST(
        tasks.at("bad").at("error").at("message").as_string().find("at /output/n: ") != std::string::npos,
        tasks.at("bad").at("error").at("message"));
    BOOST_TEST(tasks.at("bad").at("output").at("output").at("n") == "one", "the failed output is kept");
    BOOST_TEST(tasks.at("after").at("state") == "skipped");
    const auto& items = tasks.at("each").at("output").at("items").as_array();
    BOOST_REQUIRE(items.size() == 2u);
    BOOST_TEST(items[0].at("state") == "succeeded");
    BOOST_TEST(items[1].at("state") == "failed");
    BOOST_TEST(items[1].at("error").at("code") == "output_invalid");

    // The plan shows each task's schema.
    auto plan = agentctl({"--output", "json", "plan", wf});
    BOOST_TEST(plan.exit_code == 0, plan.err);
    BOOST_TEST(parse_json(plan.out).at("data").at("tasks").at("good").as_object().contains("outputSchema"));

    auto preview = agentctl({"--output", "json", "run", wf, "--no-journal", "--check"});
    BOOST_TEST(preview.exit_code == 0, preview.err << preview.out);
}

BOOST_AUTO_TEST_SUITE_END()
