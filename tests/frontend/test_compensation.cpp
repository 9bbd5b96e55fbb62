// Compensation at compile time (docs/CONTROL_FLOW.md, "Compensation"): `compensate` must name
// a declared action with an effect, its `with` may read only tasks that have run when its task
// has, and the plan carries it (JSON and text). Workflows of our own.
#include <agentctl/compensation.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

using namespace agentctl;
namespace json = boost::json;

namespace {

const std::string head =
    "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: comp}\nspec:\n"
    "  compensation: {onFailure: automatic, approval: never}\n"
    "  inputs: {name: r1}\n"
    "  actions:\n    write: {kind: builtin.write}\n    check: {kind: builtin.assert}\n"
    "  tasks:\n"
    "    - id: first\n      uses: action:write\n      with: {path: a.txt, content: one}\n"
    "    - id: other\n      uses: action:write\n      with: {path: b.txt, content: two}\n";

// A task `second` that needs `first`, with `compensate` as given.
compile_result compile_with(const std::string& compensate) {
    parse_result parsed =
        parse_workflow(head +
                           "    - id: second\n      uses: action:write\n      needs: [first]\n"
                           "      with: {path: c.txt, content: three}\n      compensate: " +
                           compensate + "\n",
                       "wf.yaml");
    return check_document(parsed);
}

std::string codes(const compile_result& r) {
    std::string out;
    for (const auto& d : r.diags.items())
        if (d.level == severity::error)
            out += d.code + "@" + std::to_string(d.location.line) + ":" + d.path + "\n";
    return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_compensation_reads_its_task_and_what_it_needs) {
    auto r = compile_with(
        "{uses: action:write, with: {path: \"${{ tasks.second.output.path }}\", content: "
        "\"${{ tasks.first.output.path }}-${{ inputs.name }}\"}, retry: {maxAttempts: 2}}");
    BOOST_TEST(codes(r) == "");
    BOOST_TEST_REQUIRE(r.compiled.has_value());
    const plan& p = *r.compiled;
    const plan_task& t = p.node(*p.find("second"));
    BOOST_TEST_REQUIRE(t.compensate.has_value());
    BOOST_TEST(t.compensate->action == "write");
    BOOST_TEST((p.compensation.on_failure == compensation_spec::trigger::automatic));
    json::value v = json::parse(plan_json(p));
    const json::object& task = v.at("tasks").at("second").as_object();
    BOOST_TEST(json::serialize(task.at("compensate").at("uses")) == "\"action:write\"");
    BOOST_TEST(task.at("compensate").at("retry").at("maxAttempts").as_int64() == 2);
    BOOST_TEST(json::serialize(v.at("compensation")) == R"({"onFailure":"automatic","approval":"never"})");
    BOOST_TEST(!v.as_object().contains("mode"));
    BOOST_TEST(plan_text(p).find("compensate action:write") != std::string::npos, plan_text(p));
}

BOOST_AUTO_TEST_CASE(plans_without_compensation_are_unchanged) {
    parse_result parsed = parse_workflow(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: plain}\nspec:\n"
        "  actions:\n    write: {kind: builtin.write}\n  tasks:\n    - {id: a, uses: action:write}\n",
        "wf.yaml");
    auto r = check_document(parsed);
    BOOST_TEST_REQUIRE(r.compiled.has_value());
    json::value v = json::parse(plan_json(*r.compiled));
    BOOST_TEST(!v.as_object().contains("compensation"));
    BOOST_TEST(!v.at("tasks").at("a").as_object().contains("compensate"));
}

BOOST_AUTO_TEST_CASE(a_compensation_needs_a_declared_action_with_an_effect) {
    BOOST_TEST(codes(compile_with("{uses: action:check, with: {that: true}}")) ==
               "compensation_without_effect@21:spec.tasks[2].compensate.uses\n");
    BOOST_TEST(codes(compile_with("{uses: action:undo}")) ==
               "unknown_action@21:spec.tasks[2].compensate.uses\n");
}

BOOST_AUTO_TEST_CASE(a_compensation_that_reads_a_task_that_may_not_have_run_is_refused) {
    // `other` is not needed by `second`: it may not have run (or not yet) when `second` did.
    BOOST_TEST(
        codes(compile_with("{uses: action:write, with: {path: \"${{ tasks.other.output.path }}\"}}")) ==
        "compensation_reads_unrun_task@21:spec.tasks[2].compensate.with.path\n");
    BOOST_TEST(codes(compile_with("{uses: action:write, with: {path: \"${{ tasks.nope.output.path }}\"}}")) ==
               "template_unknown_task@21:spec.tasks[2].compensate.with.path\n");
    BOOST_TEST(codes(compile_with("{uses: action:write, with: {path: \"${{ with.x }}\"}}")) ==
               "template_unknown_root@21:spec.tasks[2].compensate.with.path\n");
    BOOST_TEST(codes(compile_with("{uses: action:write, with: {path: \"${{ tasks.first }}\"}}"))
                   .find("spec.tasks[2].compensate.with.path") != std::string::npos);
}

// The compensation run's document: one task per undo, in the order given, each `failure:
// continue`, one at a time, no outputs; `approval: never` of spec.compensation is its policy's.
BOOST_AUTO_TEST_CASE(the_compensation_run_compiles_its_selection) {
    parse_result parsed =
        parse_workflow(head +
                           "    - id: second\n      uses: action:write\n      needs: [first]\n"
                           "      compensate: {uses: action:write, with: {path: c.txt}}\n"
                           "  outputs: {x: \"${{ tasks.first.output.path }}\"}\n",
                       "wf.yaml");
    BOOST_TEST_REQUIRE(parsed.document.has_value());
    compensation_request request;
    request.source_run_id = "run-1";
    request.items.push_back({"second", "second", json::parse(R"({"path":"c.txt","content":"undone"})")});
    diagnostics d;
    workflow wf = compensation_workflow(*parsed.document, request, d);
    BOOST_TEST(d.items().empty());
    auto r = compile(wf);
    BOOST_TEST_REQUIRE(r.compiled.has_value());
    const plan& p = *r.compiled;
    BOOST_TEST(p.size() == 1u);
    BOOST_TEST(p.task_id(0) == "compensate-second");
    BOOST_TEST(p.node(0).source_task_id == "second");
    BOOST_TEST((p.node(0).failure == failure_mode::continue_run));
    BOOST_TEST(p.max_concurrency == 1);
    BOOST_TEST(p.source_run_id == "run-1");
    BOOST_TEST((p.policy.approval == approval_mode::never));
    json::value v = json::parse(plan_json(p));
    BOOST_TEST(v.at("mode").as_string() == "compensation");
    BOOST_TEST(v.at("tasks").at("compensate-second").at("sourceTaskId").as_string() == "second");

    // A selection naming a task without `compensate` is refused.
    request.items[0].declared_task_id = "first";
    diagnostics bad;
    compensation_workflow(*parsed.document, request, bad);
    BOOST_TEST(bad.has_errors());
}
