// The reference's workflow keys beyond tasks and process actions (docs/COMPATIBILITY.md):
// variables and their layers, budgets and pricing, the rest of the policy, spec.output, and
// plain YAML scalars read as strings. Small workflows of our own, loaded from files.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include "../support/scratch_dir.hpp"

#include <string>

using namespace agentctl;
namespace json = boost::json;

namespace {

using test_support::scratch_dir;

std::string diag_text(const diagnostics& ds) {
    std::string out;
    for (const auto& d : ds.items()) out += d.code + " at " + d.path + ": " + d.message + "\n";
    return out;
}

std::size_t count_code(const diagnostics& ds, std::string_view code) {
    std::size_t n = 0;
    for (const auto& d : ds.items()) n += d.code == code;
    return n;
}

const std::string head = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: lang}\nspec:\n";

// One builtin.assign task `a`, for documents about the rest of the spec.
const std::string one_assign_task =
    "  actions:\n    set: {kind: builtin.assign}\n  tasks:\n    - {id: a, uses: action:set}\n";

parse_result parse(const std::string& spec_body) {
    return parse_workflow(head + spec_body, "wf.yaml");
}

}  // namespace

// Low to high: spec.varsFiles in order, spec.vars, the task's varsFiles, the task's vars, the
// command line. Each layer replaces whole top-level keys; inline layers may read inputs.
BOOST_AUTO_TEST_CASE(variables_take_the_reference_layers_in_order) {
    scratch_dir dir;
    dir.write("base.yaml", "region: eu\nsize: small\ntier: {name: bronze, level: 1}\nkept: base\n");
    dir.write("override.json", R"({"size": "large", "tier": {"name": "gold"}})");
    dir.write("task.yaml", "size: task-file\nonly_task_file: true\n");
    std::string file = dir.write("wf.yaml", head + R"(  inputs: {env: staging}
  varsFiles: [base.yaml, override.json]
  vars:
    region: us
    target: "${{ inputs.env }}"
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: plain
      uses: action:set
      with: {size: "${{ vars.size }}"}
    - id: layered
      uses: action:set
      varsFiles: [task.yaml]
      vars: {tier: inline, region: "${{ inputs.env }}-task"}
      with: {size: "${{ vars.size }}"}
)");
    parse_result parsed = load_workflow(file);
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    compile_result r = compile(*parsed.document);
    BOOST_TEST_REQUIRE(r.compiled.has_value(), diag_text(r.diags));
    const plan& p = *r.compiled;
    // tier comes whole from the later file: no deep merge.
    BOOST_TEST(json::serialize(p.task(0).vars) ==
               R"({"region":"us","size":"large","tier":{"name":"gold"},"kept":"base","target":"staging"})");
    json::object layered = p.task(1).vars;
    BOOST_TEST(layered.at("size").as_string() == "task-file");
    BOOST_TEST(layered.at("only_task_file").as_bool());
    BOOST_TEST(layered.at("tier").as_string() == "inline");
    BOOST_TEST(layered.at("region").as_string() == "staging-task");
    BOOST_TEST(layered.at("kept").as_string() == "base");
    BOOST_TEST(json::serialize(p.task(1).with) == R"({"size":"task-file"})");

    // --var (and --vars-file) above every layer of every task.
    compile_options options;
    options.var_overrides = {{"size", json::value("cli")}};
    compile_result over = compile(*parsed.document, options);
    BOOST_TEST_REQUIRE(over.compiled.has_value(), diag_text(over.diags));
    BOOST_TEST(over.compiled->task(0).vars.at("size").as_string() == "cli");
    BOOST_TEST(over.compiled->task(1).vars.at("size").as_string() == "cli");
    BOOST_TEST(json::serialize(over.compiled->task(1).with) == R"({"size":"cli"})");
}

// A name the engine binds itself (foreachIndex, matrix, ...) is no variable's.
BOOST_AUTO_TEST_CASE(reserved_variable_names_are_refused) {
    auto parsed = parse(
        "  vars: {foreachIndex: 1}\n  actions:\n    set: {kind: builtin.assign}\n"
        "  tasks:\n    - {id: a, uses: action:set, vars: {matrix: 2}}\n");
    BOOST_TEST(parsed.diags.has_errors());
    BOOST_TEST(diag_text(parsed.diags).find("foreachIndex") != std::string::npos, diag_text(parsed.diags));
    BOOST_TEST(diag_text(parsed.diags).find("matrix") != std::string::npos, diag_text(parsed.diags));
    std::string key;
    json::value value;
    diagnostics ds;
    BOOST_TEST(!parse_var_assignment("matrixIndex=1", key, value, ds));
    BOOST_TEST(parse_var_assignment("env=\"qa\"", key, value, ds));
    BOOST_TEST(key == "env");
    BOOST_TEST(value.as_string() == "qa");
}

// Every budget of the reference is accepted; those counting model usage are kept as written,
// since no model runs here. Zero is refused, as there.
BOOST_AUTO_TEST_CASE(every_budget_of_the_reference_is_accepted) {
    auto parsed = parse(R"(  runtime:
    budgets:
      maxProviderRequests: 3
      maxTurns: 4
      maxToolCalls: 5
      maxInputTokens: 6
      maxOutputTokens: 7
      maxTotalTokens: 8
      maxWallTimeSeconds: 9
      maxProcessOutputBytes: 10485760
      maxArtifactBytes: 11
      maxTasks: 12
      maxExpansionItems: 13
      maxLoopIterations: 14
      maxCostMicrousd: 15
    pricing:
      version: "2026-01"
      models:
        openai/gpt-5-mini: {inputMicrousdPerMillionTokens: 250000, outputMicrousdPerMillionTokens: 2000000}
)" + one_assign_task);
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    const budgets_spec& b = parsed.document->runtime.budgets;
    BOOST_TEST(b.max_wall_time_seconds.value_or(0) == 9u);
    BOOST_TEST(b.max_process_output_bytes.value_or(0) == 10485760u);
    BOOST_TEST(b.max_artifact_bytes.value_or(0) == 11u);
    BOOST_TEST(b.max_tasks.value_or(0) == 12u);
    BOOST_TEST(b.max_expansion_items.value_or(0) == 13u);
    BOOST_TEST(b.max_loop_iterations.value_or(0) == 14u);
    BOOST_TEST_REQUIRE(b.model_usage.size() == 7u);
    BOOST_TEST(b.model_usage.front().first == "maxProviderRequests");
    BOOST_TEST(b.model_usage.back().first == "maxCostMicrousd");
    BOOST_TEST(b.model_usage.back().second == 15u);
    BOOST_TEST(
        json::serialize(parsed.document->runtime.pricing) ==
        R"({"version":"2026-01","models":{"openai/gpt-5-mini":{"inputMicrousdPerMillionTokens":250000,)"
        R"("outputMicrousdPerMillionTokens":2000000}}})");
    // The plan shows every budget; those on model usage as written, and as never reached.
    compile_result r = compile(*parsed.document);
    BOOST_TEST_REQUIRE(r.compiled.has_value(), diag_text(r.diags));
    json::value budgets = json::parse(plan_json(*r.compiled)).at("budgets");
    BOOST_TEST(
        json::serialize(budgets) ==
        R"({"maxProcessOutputBytes":10485760,"maxWallTimeSeconds":9,"maxTasks":12,"maxExpansionItems":13,)"
        R"("maxArtifactBytes":11,"maxLoopIterations":14,"maxProviderRequests":3,"maxTurns":4,)"
        R"("maxToolCalls":5,"maxInputTokens":6,"maxOutputTokens":7,"maxTotalTokens":8,"maxCostMicrousd":15})");
    std::string text = plan_text(*r.compiled);
    BOOST_TEST(text.find("maxArtifactBytes 11 B, maxLoopIterations 14") != std::string::npos, text);
    BOOST_TEST(
        text.find("  model budgets maxProviderRequests 3, maxTurns 4, maxToolCalls 5, maxInputTokens 6, "
                  "maxOutputTokens 7, maxTotalTokens 8, maxCostMicrousd 15 (no model runs here: never "
                  "reached)\n") != std::string::npos,
        text);

    auto zero = parse("  runtime: {budgets: {maxTurns: 0, maxArtifactBytes: 0}}\n" + one_assign_task);
    BOOST_TEST(zero.diags.size() == 2u, diag_text(zero.diags));
    BOOST_TEST(zero.diags.has_errors());
    auto typo = parse("  runtime: {budgets: {maxTokens: 5}}\n" + one_assign_task);
    BOOST_TEST(count_code(typo.diags, "unknown_key") == 1u, diag_text(typo.diags));
}

// The policy keys the reference has beyond processes: approval when unattended, the network,
// capabilities; spec.output. All read and kept; their meaning here is in docs/COMPATIBILITY.md.
BOOST_AUTO_TEST_CASE(the_rest_of_the_policy_and_spec_output_are_read) {
    auto parsed = parse(R"(  policy:
    approval: always
    nonInteractive: deny_approval
    networkAllowlist: [api.example.com, "*.example.org"]
    network: {allowedSchemes: [https], allowedPorts: [443], connectTimeoutSeconds: 5}
    toolsAllow: [filesystem.read]
    toolsDeny: [filesystem.write]
  output: {verbose: true, showDiff: false}
)" + one_assign_task);
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    const workflow& wf = *parsed.document;
    BOOST_TEST((wf.policy.approval == approval_mode::always));
    BOOST_TEST((wf.policy.non_interactive == non_interactive_mode::deny_approval));
    BOOST_TEST((wf.policy.network_allowlist == std::vector<std::string>{"api.example.com", "*.example.org"}));
    BOOST_TEST_REQUIRE(wf.policy.network.has_value());
    BOOST_TEST((wf.policy.network->allowed_ports == std::vector<std::uint32_t>{443}));
    BOOST_TEST((wf.policy.tools_allow == std::vector<std::string>{"filesystem.read"}));
    BOOST_TEST((wf.policy.tools_deny == std::vector<std::string>{"filesystem.write"}));
    BOOST_TEST(wf.output_verbose);
    BOOST_TEST(!wf.output_show_diff);

    auto bad = parse("  policy: {nonInteractive: ask}\n  output: {colour: true}\n" + one_assign_task);
    BOOST_TEST(bad.diags.size() == 2u, diag_text(bad.diags));
    BOOST_TEST(count_code(bad.diags, "unknown_key") == 1u, diag_text(bad.diags));
}

// Where a string is expected, a plain scalar is its text, as the reference reads it: an
// unquoted `true` in processAllowlist is the program named "true".
BOOST_AUTO_TEST_CASE(plain_scalars_are_strings_where_strings_are_expected) {
    auto parsed = parse(
        "  policy: {processAllowlist: [true, 1.5], approval: never}\n  actions:\n"
        "    ok: {kind: builtin.shell.exec, command: true, args: [yes, 10, off]}\n"
        "  tasks:\n    - {id: a, uses: action:ok}\n");
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    BOOST_TEST((parsed.document->policy.process_allowlist == std::vector<std::string>{"true", "1.5"}));
    BOOST_TEST(parsed.document->actions[0].command == "true");
    BOOST_TEST((parsed.document->actions[0].args == std::vector<std::string>{"yes", "10", "off"}));
}

// Container actions run with no network: an allowlist cannot give them any, and check says so.
// Host processes are not sandboxed (nothing to enforce, nothing to warn about).
BOOST_AUTO_TEST_CASE(a_network_allowlist_beside_container_actions_is_a_warning) {
    const std::string image = "img@sha256:" + std::string(64, 'a');
    auto check = [&](const std::string& isolation) {
        return check_document(
            parse("  policy: {processAllowlist: [curl], approval: never, networkAllowlist: "
                  "[api.example.com]}\n  actions:\n    fetch: {kind: builtin.shell.exec, "
                  "command: curl" +
                  isolation + "}\n  tasks:\n    - {id: a, uses: action:fetch}\n"));
    };
    auto boxed = check(", isolation: container, container: {image: \"" + image + "\"}");
    BOOST_TEST_REQUIRE(boxed.compiled.has_value(), diag_text(boxed.diags));
    BOOST_TEST_REQUIRE(boxed.diags.size() == 1u, diag_text(boxed.diags));
    const diagnostic& d = boxed.diags.items()[0];
    BOOST_TEST(d.code == "network_unavailable");
    BOOST_TEST((d.level == severity::warning));
    BOOST_TEST(d.path == "spec.policy.networkAllowlist");
    BOOST_TEST(d.message.find("`fetch`") != std::string::npos, d.message);
    auto host = check("");
    BOOST_TEST(host.compiled.has_value(), diag_text(host.diags));
    BOOST_TEST(host.diags.empty(), diag_text(host.diags));
}
