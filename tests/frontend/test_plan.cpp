// The plan compiler, policy rules, plan JSON and text; golden plans; the purity guard.
#include "../support/symbols.hpp"

#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include "../support/child_ids.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace agentctl;

namespace {

action_spec process_action(std::string name, std::string command, std::vector<std::string> args = {}) {
    action_spec a;
    a.name = std::move(name);
    a.command = std::move(command);
    a.args = std::move(args);
    return a;
}

task_spec make_task(std::string id, std::string action = "echo", std::vector<std::string> needs = {}) {
    task_spec t;
    t.id = std::move(id);
    t.uses = "action:" + action;
    t.action = std::move(action);
    t.needs = std::move(needs);
    return t;
}

workflow base_workflow() {
    workflow wf;
    wf.api_version = "agentctl.dev/v1";
    wf.metadata.name = "unit";
    wf.source_digest = "sha256:" + std::string(64, '0');
    wf.policy.process_allowlist = {"echo", "true", "helper"};
    wf.policy.approval = approval_mode::never;
    wf.actions.push_back(process_action("echo", "/bin/echo", {"hi"}));
    return wf;
}

std::string diag_text(const diagnostics& ds) {
    std::string out;
    for (const auto& d : ds.items()) out += d.code + " @" + d.path + ": " + d.message + "\n";
    return out;
}

std::size_t count_code(const diagnostics& ds, std::string_view code) {
    return std::count_if(ds.items().begin(), ds.items().end(),
                         [&](const diagnostic& d) { return d.code == code; });
}

const diagnostic* find_code(const diagnostics& ds, std::string_view code) {
    for (const auto& d : ds.items())
        if (d.code == code) return &d;
    return nullptr;
}

plan must_compile(const workflow& wf, const compile_options& options = {}) {
    auto r = compile(wf, options);
    BOOST_TEST_REQUIRE(r.compiled.has_value(), "compile failed:\n" << diag_text(r.diags));
    return std::move(*r.compiled);
}

diagnostics must_fail(const workflow& wf) {
    auto r = compile(wf);
    BOOST_TEST_REQUIRE(!r.compiled.has_value(), "compile unexpectedly succeeded");
    BOOST_TEST(r.diags.has_errors());
    return r.diags;
}

using test_support::short_id;

std::vector<std::string> order_of(const plan& p) {
    std::vector<std::string> ids;
    for (std::uint32_t i = 0; i < p.size(); ++i) ids.push_back(short_id(p.task_id(i)));
    return ids;
}

// By id, a child also by its short id.
plan_task task_of(const plan& p, std::string_view id) {
    auto i = p.find(id);
    for (std::uint32_t k = 0; !i && k < p.size(); ++k)
        if (short_id(p.task_id(k)) == id) i = k;
    BOOST_TEST_REQUIRE(i.has_value(), "no task " << id);
    return p.task(*i);
}

// What a task waits for: its needs, and an aggregate its children (short ids).
std::vector<std::string> needs_of(const plan& p, std::string_view id) {
    std::vector<std::string> ids;
    plan_task t = task_of(p, id);
    for (auto n : t.needs) ids.push_back(short_id(p.task_id(n)));
    for (std::uint32_t c = 0; c < t.child_count; ++c) ids.push_back(short_id(p.task_id(t.first_child + c)));
    return ids;
}

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_compile)

BOOST_AUTO_TEST_CASE(compiles_a_minimal_workflow) {
    workflow wf = base_workflow();
    wf.tasks.push_back(make_task("a"));
    plan p = must_compile(wf);
    BOOST_TEST(order_of(p) == std::vector<std::string>{"a"});
    BOOST_TEST(p.max_concurrency == 1);
    BOOST_TEST(p.workflow_name == "unit");
    BOOST_TEST(p.workflow_digest == wf.source_digest);
    BOOST_TEST(p.task(0).timeout_ms == 120000);
    BOOST_TEST(!p.task(0).requires_approval);
    BOOST_TEST((p.task(0).kind == plan_task::kind_t::single));
    BOOST_TEST(p.task(0).with.is_object());
    BOOST_TEST(!p.task(0).args.has_value());  // no templates: the action's args are used as they are
    BOOST_TEST_REQUIRE(p.processes.size() == 1u);
    BOOST_TEST(p.processes[0].tasks == std::vector<std::string>{"a"});
    BOOST_TEST(p.processes[0].engines.empty());
    BOOST_TEST(p.plan_digest.starts_with("sha256:"));
}

BOOST_AUTO_TEST_CASE(foreach_children_get_ids_bindings_and_the_parent_needs) {
    workflow wf = base_workflow();
    wf.actions.push_back(
        process_action("per_file", "echo", {"--file", "${{ vars.file }}", "--n=${{ vars.foreachIndex }}"}));
    wf.tasks.push_back(make_task("setup"));
    task_spec fan = make_task("fan", "per_file", {"setup"});
    fan.foreach = foreach_spec{json::parse(R"(["x.txt","y.txt","z.txt"])"), "file", 10};
    fan.with = json::parse(R"({"name":"${{ vars.file }}","i":"${{ vars.foreachIndex }}"})");
    wf.tasks.push_back(fan);
    wf.tasks.push_back(make_task("after", "echo", {"fan"}));
    plan p = must_compile(wf);

    BOOST_TEST(order_of(p) ==
               (std::vector<std::string>{"setup", "fan--0000", "fan--0001", "fan--0002", "fan", "after"}));
    const plan_task child = task_of(p, "fan--0001");
    BOOST_TEST((child.kind == plan_task::kind_t::child));
    BOOST_TEST((child.expansion == plan_task::expansion_t::foreach));
    BOOST_TEST(child.parent == "fan");
    BOOST_TEST(child.expansion_index == 1u);
    BOOST_TEST(json::value(child.vars) == json::parse(R"({"file":"y.txt","foreachIndex":1})"));
    BOOST_TEST(child.with == json::parse(R"({"name":"y.txt","i":1})"));
    BOOST_TEST_REQUIRE(child.args.has_value());
    BOOST_TEST(*child.args == (std::vector<std::string>{"--file", "y.txt", "--n=1"}));
    BOOST_TEST(needs_of(p, "fan--0002") == std::vector<std::string>{"setup"});

    const plan_task aggregate = task_of(p, "fan");
    BOOST_TEST((aggregate.kind == plan_task::kind_t::aggregate));
    BOOST_TEST(needs_of(p, "fan") == (std::vector<std::string>{"fan--0000", "fan--0001", "fan--0002"}));
    BOOST_TEST(aggregate.child_count == 3u);
    BOOST_TEST(needs_of(p, "after") == std::vector<std::string>{"fan"});
    BOOST_TEST(p.processes[0].tasks == (std::vector<std::string>{"setup", "after"}));
    BOOST_TEST(p.processes[1].tasks == std::vector<std::string>{"fan"});
    for (std::uint32_t i = 0; i < p.size(); ++i)
        for (auto n : p.task(i).needs) BOOST_TEST(n < i);
}

// The reference's child ids: PARENT--NNNN-DIGEST, DIGEST the first 12 hex digits of the
// sha256 of the bindings as compact JSON, top-level keys sorted (values as they are written).
// The digests here were computed outside agentctl from those JSON texts.
BOOST_AUTO_TEST_CASE(child_ids_carry_the_digest_of_their_bindings) {
    workflow wf = base_workflow();
    task_spec fan = make_task("fan");
    fan.foreach = foreach_spec{json::parse(R"(["x","y"])"), "item", 10};
    task_spec verify = make_task("verify");
    verify.matrix = matrix_spec{{{"profile", json::parse(R"(["debug","release"])")},
                                 {"platform", json::parse(R"(["linux","macos"])")}},
                                10};
    wf.tasks = {fan, verify};
    plan p = must_compile(wf);
    // {"foreachIndex":1,"item":"y"}
    BOOST_TEST(p.task_id(1) == "fan--0001-7ccc5f4b9d04");
    // {"matrix":{"platform":"linux","profile":"debug"},"matrixIndex":0}, then the last axis fastest
    BOOST_TEST(p.task_id(3) == "verify--0000-c660ad53f743");
    BOOST_TEST(p.task_id(4) == "verify--0001-9db1f8eb7daf");
    BOOST_TEST(p.task_id(6) == "verify--0003-19cbb007d07a");
    // The same ids from the compiled digests and from the bindings alone (a plan by hand).
    plan copy = p;
    for (auto& e : copy.expansions) e.id_digests.clear();
    for (std::uint32_t i = 0; i < p.size(); ++i) BOOST_TEST(copy.task_id(i) == p.task_id(i));
}

BOOST_AUTO_TEST_CASE(child_ids_are_padded_to_the_largest_index) {
    workflow wf = base_workflow();
    task_spec fan = make_task("fan");
    json::array items;
    for (int i = 0; i < 12345; ++i) items.push_back(i);
    fan.foreach = foreach_spec{json::value(items), "n", 20000};
    wf.tasks.push_back(fan);
    plan p = must_compile(wf);
    BOOST_TEST(p.size() == 12346u);
    BOOST_TEST(short_id(p.task_id(0)) == "fan--00000");
    BOOST_TEST(short_id(p.task(12344).id) == "fan--12344");
    BOOST_TEST(p.task(12344).id == p.task_id(12344));
    BOOST_TEST(p.task_id(12345) == "fan");
    auto ids = order_of(p);
    BOOST_TEST(std::is_sorted(ids.begin(), ids.end() - 1));
    // Ids find their task; near misses do not.
    const std::string seventh = p.task_id(7);
    const std::string digest = seventh.substr(seventh.size() - 13);  // "-" and 12 hex digits
    BOOST_TEST(p.find(seventh).value_or(0) == 7u);
    BOOST_TEST(p.find(p.task_id(12344)).value_or(0) == 12344u);
    BOOST_TEST(!p.find("fan--00007"));           // no digest
    BOOST_TEST(!p.find("fan--0007" + digest));   // not the width the plan writes
    BOOST_TEST(!p.find("fan--00008" + digest));  // another item's digest
    BOOST_TEST(!p.find("fan--12345" + digest));  // past the last item
    BOOST_TEST(!p.find("fan-00007" + digest));
    BOOST_TEST(!p.find("nope--00007" + digest));
}

// A plan stores no child: an expansion is its children's template, its items and its
// aggregate however many children it has, and each child is rendered when asked for
// (docs/DESIGN.md, "Plan").
BOOST_AUTO_TEST_CASE(a_plan_stores_no_child) {
    workflow wf = base_workflow();
    wf.actions.push_back(process_action("per_item", "echo", {"--n=${{ vars.n }}"}));
    task_spec fan = make_task("fan", "per_item");
    json::array items;
    for (int i = 0; i < 100000; ++i) items.push_back(i);
    fan.foreach = foreach_spec{json::value(items), "n", 100000};
    wf.tasks = {make_task("first"), fan, make_task("last", "echo", {"fan"})};
    plan p = must_compile(wf);
    BOOST_TEST(p.size() == 100003u);
    BOOST_TEST(p.nodes.size() == 4u);  // first, the children's template, fan, last
    BOOST_TEST(p.node_starts == (std::vector<std::uint32_t>{0, 1, 100001, 100002}));
    BOOST_TEST_REQUIRE(p.expansions.size() == 1u);
    BOOST_TEST(p.expansions[0].items.size() == 100000u);
    BOOST_TEST(p.node(50000).id.empty());  // a template, not a child
    plan_task last = p.task(100000);
    BOOST_TEST(short_id(last.id) == "fan--99999");
    BOOST_TEST(last.parent == "fan");
    BOOST_TEST(last.expansion_index == 99999u);
    BOOST_TEST_REQUIRE(last.args.has_value());
    BOOST_TEST(*last.args == std::vector<std::string>{"--n=99999"});
    BOOST_TEST(needs_of(p, "last") == std::vector<std::string>{"fan"});
}

BOOST_AUTO_TEST_CASE(foreach_items_come_from_inputs_and_empty_lists_expand_to_nothing) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"files":["a","b"],"none":[]})").as_object();
    task_spec fan = make_task("fan");
    fan.foreach = foreach_spec{json::value("${{ inputs.files }}"), "f", 10};
    task_spec empty = make_task("empty");
    empty.foreach = foreach_spec{json::value("${{ inputs.none }}"), "f", 10};
    wf.tasks = {fan, empty, make_task("last", "echo", {"empty"})};
    plan p = must_compile(wf);
    BOOST_TEST(order_of(p) == (std::vector<std::string>{"fan--0000", "fan--0001", "fan", "empty", "last"}));
    BOOST_TEST(task_of(p, "empty").child_count == 0u);

    // Overridden inputs drive the expansion.
    compile_options options;
    options.input_overrides.emplace_back("files", json::parse(R"(["p","q","r"])"));
    plan q = must_compile(wf, options);
    BOOST_TEST(task_of(q, "fan").child_count == 3u);
    BOOST_TEST(task_of(q, "fan--0002").vars.at("f") == json::value("r"));
}

BOOST_AUTO_TEST_CASE(matrix_cells_are_ordered_by_axis_name_then_value_order) {
    workflow wf = base_workflow();
    task_spec m = make_task("build");
    matrix_spec spec;
    spec.axes = {{"os", json::parse(R"(["linux","mac"])")},
                 {"arch", json::parse(R"(["x86","arm","riscv"])")}};
    m.matrix = spec;
    m.with = json::parse(R"({"target":"${{ vars.matrix.arch }}-${{ vars.matrix.os }}"})");
    wf.tasks.push_back(m);
    plan p = must_compile(wf);
    std::vector<std::string> targets;
    for (std::uint32_t i = 0; i < p.size(); ++i)
        if (p.node(i).kind == plan_task::kind_t::child)
            targets.emplace_back(p.task(i).with.at("target").as_string());
    BOOST_TEST(targets == (std::vector<std::string>{"x86-linux", "x86-mac", "arm-linux", "arm-mac",
                                                    "riscv-linux", "riscv-mac"}));
    const plan_task cell = task_of(p, "build--0003");
    BOOST_TEST((cell.expansion == plan_task::expansion_t::matrix));
    BOOST_TEST(json::value(cell.vars) ==
               json::parse(R"({"matrix":{"arch":"arm","os":"mac"},"matrixIndex":3})"));
}

BOOST_AUTO_TEST_CASE(declaration_order_breaks_ties_in_the_topological_order) {
    workflow wf = base_workflow();
    wf.tasks = {make_task("c", "echo", {"a"}), make_task("a"), make_task("b"),
                make_task("d", "echo", {"c", "b"})};
    plan p = must_compile(wf);
    // a and b are ready first: a was declared before b. Then c (declared first) beats b.
    BOOST_TEST(order_of(p) == (std::vector<std::string>{"a", "c", "b", "d"}));
}

BOOST_AUTO_TEST_CASE(cycles_are_reported_once_each_with_their_path) {
    workflow wf = base_workflow();
    wf.tasks = {make_task("a", "echo", {"b"}), make_task("b", "echo", {"c"}), make_task("c", "echo", {"a"}),
                make_task("d", "echo", {"e"}), make_task("e", "echo", {"d"}), make_task("f", "echo", {"f"}),
                make_task("g", "echo", {"a"})};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "dependency_cycle") == 3u, diag_text(ds));
    std::set<std::string> messages;
    for (const auto& d : ds.items())
        if (d.code == "dependency_cycle") messages.insert(d.message);
    BOOST_TEST(messages.count("dependency cycle: a -> b -> c -> a") == 1u, diag_text(ds));
    BOOST_TEST(messages.count("dependency cycle: d -> e -> d") == 1u, diag_text(ds));
    BOOST_TEST(messages.count("dependency cycle: f -> f") == 1u, diag_text(ds));
    BOOST_TEST(find_code(ds, "dependency_cycle")->path == "spec.tasks[5].needs[0]");
}

BOOST_AUTO_TEST_CASE(timeouts_follow_the_fallback_chain) {
    workflow wf = base_workflow();
    wf.runtime.default_timeout_ms = 45000;
    wf.actions.push_back(process_action("fixed", "true"));
    wf.actions.back().timeout_ms = 10000;
    task_spec both = make_task("both", "fixed");
    both.timeout_ms = 30000;
    task_spec task_only = make_task("task_only");
    task_only.timeout_ms = 30000;
    wf.tasks = {both, task_only, make_task("neither")};
    plan p = must_compile(wf);
    BOOST_TEST(task_of(p, "both").timeout_ms == 10000);
    BOOST_TEST(task_of(p, "task_only").timeout_ms == 30000);
    BOOST_TEST(task_of(p, "neither").timeout_ms == 45000);

    // The command line's (--timeout, --retries) over all of them.
    compile_options options;
    options.task_timeout_ms = 2500;
    options.task_attempts = 4;
    auto r = compile(wf, options);
    BOOST_TEST_REQUIRE(r.compiled.has_value());
    for (const char* id : {"both", "task_only", "neither"}) {
        BOOST_TEST(task_of(*r.compiled, id).timeout_ms == 2500, id);
        BOOST_TEST(task_of(*r.compiled, id).retry.max_attempts == 4, id);
        BOOST_TEST(task_of(*r.compiled, id).retry.on.size() == 3u, id);
    }
    BOOST_TEST(r.compiled->plan_digest != p.plan_digest);
}

BOOST_AUTO_TEST_CASE(task_outputs_defer_rendering_to_run_time) {
    workflow wf = base_workflow();
    wf.actions.push_back(process_action("show", "echo", {"${{ with.msg }}"}));
    wf.actions.push_back(process_action("direct", "echo", {"${{ tasks.a.output.stdout }}"}));
    wf.actions.back().cwd = "out/${{ inputs.dir }}";
    wf.inputs = json::parse(R"({"dir":"d1"})").as_object();
    task_spec deferred = make_task("deferred", "show", {"a"});
    deferred.with = json::parse(R"({"msg":"${{ tasks.a.output.stdout }}"})");
    task_spec static_with = make_task("static_with", "show");
    static_with.with = json::parse(R"({"msg":"${{ inputs.dir }}"})");
    wf.tasks = {make_task("a"), deferred, static_with, make_task("direct", "direct", {"a"})};
    plan p = must_compile(wf);

    const plan_task& d = task_of(p, "deferred");
    BOOST_TEST(d.with_deferred);
    BOOST_TEST(d.with == json::parse(R"({"msg":"${{ tasks.a.output.stdout }}"})"));
    BOOST_TEST(d.argv_deferred);  // its args use `with.`, which is only known at run time
    BOOST_TEST(!d.args.has_value());

    const plan_task& s = task_of(p, "static_with");
    BOOST_TEST(!s.with_deferred);
    BOOST_TEST(!s.argv_deferred);
    BOOST_TEST_REQUIRE(s.args.has_value());
    BOOST_TEST(*s.args == std::vector<std::string>{"d1"});

    const plan_task& direct = task_of(p, "direct");
    BOOST_TEST(!direct.with_deferred);
    BOOST_TEST(direct.argv_deferred);

    // The JSON shows the template text and says what is deferred.
    json::value doc = json::parse(plan_json(p));
    const json::object& dt = doc.at("tasks").at("deferred").as_object();
    BOOST_TEST(dt.at("deferred") == json::parse(R"(["with","argv"])"));
    BOOST_TEST(dt.at("args") == json::parse(R"(["${{ with.msg }}"])"));
    BOOST_TEST(doc.at("tasks").at("direct").at("cwd") == json::value("out/${{ inputs.dir }}"));
    BOOST_TEST(doc.at("tasks").at("static_with").at("args") == json::parse(R"(["d1"])"));
    BOOST_TEST(!doc.at("tasks").at("static_with").as_object().contains("deferred"));
}

// The engine may drop a finished task's output once recorded, unless this says it is read.
BOOST_AUTO_TEST_CASE(plan_tasks_say_whether_their_output_is_read_later) {
    const std::string text = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: refs}
spec:
  policy: {processAllowlist: [echo], approval: never}
  actions:
    set: {kind: builtin.assign}
    show: {kind: builtin.shell.exec, command: echo, args: ["${{ tasks.by-args.output.output.text }}"]}
  tasks:
    - {id: by-with, uses: action:set}
    - {id: by-args, uses: action:set, with: {text: a}}
    - {id: by-when, uses: action:set, with: {x: 1}}
    - {id: by-outputs, uses: action:set}
    - {id: unread, uses: action:set}
    - {id: fan, uses: action:set, foreach: {items: [1, 2, 3]}}
    - {id: other-fan, uses: action:set, foreach: {items: [1, 2, 3]}}
    - id: reader
      uses: action:set
      needs: [by-with, by-when, unread, fan]
      with: {a: "${{ tasks.by-with.output }}", all: "${{ tasks.fan.output.items }}"}
      when: "tasks.by-when.output.output.x == 1"
    - {id: argv, uses: action:show, needs: [by-args]}
  outputs:
    one: "${{ tasks.by-outputs.output }}"
    child: "text ${{ tasks.other-fan--0001-9cba6023fbb3.output.x }}"
)";
    auto parsed = parse_workflow(text, "wf.yaml");
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    plan p = must_compile(*parsed.document);
    auto read = [&](std::string_view id) { return task_of(p, id).output_referenced; };
    BOOST_TEST(read("by-with"));     // a dependant's with
    BOOST_TEST(read("by-args"));     // a dependant's args, through its action
    BOOST_TEST(read("by-when"));     // a dependant's when
    BOOST_TEST(read("by-outputs"));  // spec.outputs
    BOOST_TEST(read("fan"));         // the aggregate...
    for (auto id : {"fan--0000", "fan--0001", "fan--0002"})
        BOOST_TEST(read(id), id);         // ...holds its children
    BOOST_TEST(read("other-fan--0001"));  // one child named by spec.outputs
    BOOST_TEST(!read("other-fan--0000"));
    BOOST_TEST(!read("other-fan--0002"));
    BOOST_TEST(!read("other-fan"));
    BOOST_TEST(!read("unread"));  // needed, but its output is never read
    BOOST_TEST(!read("reader"));
    BOOST_TEST(!read("argv"));
    // Internal only: the plan JSON does not carry it.
    BOOST_TEST(plan_json(p).find("eferenced") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(action_with_is_a_default_under_the_task_with) {
    workflow wf = base_workflow();
    wf.actions[0].with = json::parse(R"({"level":1,"name":"default"})");
    task_spec t = make_task("t");
    t.with = json::parse(R"({"name":"mine"})");
    wf.tasks = {t, make_task("u")};
    plan p = must_compile(wf);
    BOOST_TEST(task_of(p, "t").with == json::parse(R"({"level":1,"name":"mine"})"));
    BOOST_TEST(task_of(p, "u").with == json::parse(R"({"level":1,"name":"default"})"));
}

BOOST_AUTO_TEST_CASE(rendered_cwd_is_checked_again) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"dirs":["ok","..","/abs"]})").as_object();
    wf.actions[0].cwd = "${{ vars.d }}";
    task_spec fan = make_task("fan");
    fan.foreach = foreach_spec{json::value("${{ inputs.dirs }}"), "d", 10};
    wf.tasks.push_back(fan);
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "policy_path_escape") == 1u, diag_text(ds));
    BOOST_TEST(count_code(ds, "invalid_cwd") == 0u, diag_text(ds));  // one cwd diagnostic per task
    BOOST_TEST(find_code(ds, "policy_path_escape")->message.find("fan--0001") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"x":1})").as_object();
    task_spec t1 = make_task("t1", "nope", {"ghost", "t2"});
    t1.with =
        json::parse(R"({"a":"${{ inputs.missing }}","b":"${{ tasks.t3.output }}","c":"${{ with.x }}"})");
    task_spec t2 = make_task("t2");
    t2.when = "tasks.t1.output.ok";
    task_spec t3 = make_task("t3");
    t3.with = json::parse(R"({"bad":"${{ inputs.x"})");
    task_spec dup = make_task("t2");
    wf.tasks = {t1, t2, t3, dup};
    wf.outputs = json::parse(R"({"o":"${{ tasks.nothere.output }}"})").as_object();
    diagnostics ds = must_fail(wf);
    for (auto code :
         {"unknown_action", "unknown_need", "template_missing_path", "template_missing_need",
          "template_unknown_root", "template_syntax", "duplicate_task_id", "template_unknown_task"})
        BOOST_TEST(count_code(ds, code) >= 1u, code << " missing in:\n" << diag_text(ds));
    BOOST_TEST(count_code(ds, "template_missing_need") == 2u, diag_text(ds));
    BOOST_TEST(ds.exit_code() == 2);
}

// check_document: a parse error hides the semantic findings it could have caused, and no
// other. Each case: a document with one parse error and the semantic codes still expected.
BOOST_AUTO_TEST_CASE(parse_errors_hide_only_what_they_explain) {
    const std::string head =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n"
        "  inputs: {n: [1, 2]}\n  policy: {processAllowlist: [echo], approval: never}\n"
        "  actions:\n    run: {kind: builtin.shell.exec, command: ls}\n    set: {kind: builtin.assign}\n"
        "  tasks:\n";
    struct example {
        std::string what;
        std::string tasks;
        std::string extra;               // replaces the inputs and policy lines when set
        std::vector<std::string> codes;  // every code, in order of position
    };
    const std::vector<example> examples = {
        {"an unrelated field of the task",
         "    - {id: a, uses: action:set, needs: [ghost], timeoutSeconds: x}\n",
         "",
         {"policy_process_not_allowed", "unknown_need", "invalid_type"}},
        {"the task's needs: its template findings could be repeats",
         "    - {id: a, uses: action:set}\n"
         "    - {id: b, uses: action:set, needs: [a, [5]], with: {x: \"${{ tasks.a.output }}\"}}\n",
         "",
         {"policy_process_not_allowed", "invalid_type"}},
        {"the task's foreach: vars are unknown then",
         "    - {id: a, uses: action:set, foreach: {items: [1], as: [7]}, with: {x: \"${{ vars.item }}\"}}\n",
         "",
         {"policy_process_not_allowed", "invalid_type"}},
        {"another task's fields",
         "    - {id: a, uses: action:set, retry: {maxAttempts: 0}}\n"
         "    - {id: b, uses: action:nope, needs: [a]}\n",
         "",
         {"policy_process_not_allowed", "out_of_range", "unknown_action"}},
        {"an invalid id is kept, so needs still find it",
         "    - {id: A, uses: action:set}\n    - {id: b, uses: action:set, needs: [A, ghost]}\n",
         "",
         {"policy_process_not_allowed", "invalid_task_id", "unknown_need"}},
        {"a missing id hides the graph",
         "    - {uses: action:set}\n    - {id: b, uses: action:set, needs: [ghost]}\n",
         "",
         {"policy_process_not_allowed", "missing_field"}},
        {"the policy section hides policy findings only",
         "    - {id: a, uses: action:run, needs: [ghost]}\n",
         "  inputs: {}\n  policy: {processAllowlist: echo, approval: never}\n",
         {"invalid_type", "unknown_need"}},
        {"inputs hide rendering, not the graph",
         "    - {id: a, uses: action:set, needs: [ghost], with: {x: \"${{ inputs.m }}\"}}\n",
         "  inputs: {n: .inf}\n  policy: {processAllowlist: [ls], approval: never}\n",
         {"invalid_value", "unknown_need"}},
    };
    for (const auto& e : examples) {
        std::string text = head + e.tasks;
        if (!e.extra.empty()) {
            auto at = text.find("  inputs:");
            auto end = text.find('\n', text.find("  policy:")) + 1;
            text.replace(at, end - at, e.extra);
        }
        auto r = check_document(parse_workflow(text, "wf.yaml"));
        std::vector<std::string> codes;
        for (const auto& d : r.diags.items()) codes.push_back(d.code);
        BOOST_TEST_CONTEXT(e.what << "\n" << diag_text(r.diags)) {
            BOOST_TEST(!r.compiled.has_value());
            BOOST_TEST(codes == e.codes, boost::test_tools::per_element());
        }
    }
}

BOOST_AUTO_TEST_CASE(vars_must_be_bound_and_paths_must_exist) {
    workflow wf = base_workflow();
    task_spec t = make_task("t");
    t.with = json::parse(R"({"v":"${{ vars.item }}"})");
    task_spec fan = make_task("fan");
    fan.foreach = foreach_spec{json::parse(R"([{"a":1},{"b":2}])"), "item", 10};
    fan.with = json::parse(R"({"a":"${{ vars.item.a }}"})");
    wf.tasks = {t, fan};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "template_missing_path") == 2u, diag_text(ds));
    BOOST_TEST(diag_text(ds).find("fan--0001") != std::string::npos, diag_text(ds));
    BOOST_TEST(diag_text(ds).find("are: (none)") == std::string::npos);  // that is in the help
    bool help_found = false;
    for (const auto& d : ds.items())
        help_found = help_found || d.help.find("the variables of task `t` are: (none)") != std::string::npos;
    BOOST_TEST(help_found);
}

// vars.jobSlot is bound when an attempt starts: args and cwd holding it render then (a single
// task too); in `with` or `when` it is a missing path that says where it may be used.
BOOST_AUTO_TEST_CASE(the_job_slot_is_bound_in_args_at_dispatch) {
    workflow wf = base_workflow();
    wf.actions.push_back(
        process_action("slotted", "/bin/echo", {"gpu-${{ vars.jobSlot }}", "${{ vars.item }}"}));
    task_spec fan = make_task("fan", "slotted");
    fan.foreach = foreach_spec{json::parse(R"(["a", "b"])"), "item", 10};
    task_spec one = make_task("one", "slotted");
    one.foreach = foreach_spec{json::parse(R"(["c"])"), "item", 10};
    wf.tasks = {fan, one};
    plan p = must_compile(wf);
    BOOST_TEST(task_of(p, "fan--0001").argv_deferred);
    BOOST_TEST(!task_of(p, "fan--0001").args.has_value());  // left to the engine
    BOOST_TEST(task_of(p, "one--0000").argv_deferred);

    workflow bad = base_workflow();
    task_spec t = make_task("t");
    t.with = json::parse(R"({"slot":"${{ vars.jobSlot }}"})");
    bad.tasks = {t};
    diagnostics ds = must_fail(bad);
    const diagnostic* d = find_code(ds, "template_missing_path");
    BOOST_TEST_REQUIRE(d != nullptr, diag_text(ds));
    BOOST_TEST(d->help.find("action args and cwd") != std::string::npos, d->help);
}

BOOST_AUTO_TEST_CASE(expansion_sizes_and_budgets_are_enforced) {
    workflow wf = base_workflow();
    task_spec big = make_task("big");
    json::array items;
    for (int i = 0; i < 20; ++i) items.push_back(i);
    big.foreach = foreach_spec{json::value(items), "n", 10};
    wf.tasks = {big};
    BOOST_TEST(count_code(must_fail(wf), "expansion_too_large") == 1u);

    wf.tasks[0].foreach->max_items = 100;
    wf.runtime.budgets.max_expansion_items = 5;
    BOOST_TEST(count_code(must_fail(wf), "expansion_too_large") == 1u);

    wf.runtime.budgets.max_expansion_items.reset();
    wf.runtime.budgets.max_tasks = 20;
    BOOST_TEST(must_compile(wf).size() == 21u);  // 20 children run; the aggregate does not count
    wf.tasks.push_back(make_task("one_more"));
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "budget_max_tasks") == 1u, diag_text(ds));

    // A matrix product that would overflow is refused, not allocated.
    workflow m = base_workflow();
    task_spec cube = make_task("cube");
    matrix_spec spec;
    json::array axis;
    for (int i = 0; i < 1000; ++i) axis.push_back(i);
    spec.axes = {{"a", json::value(axis)}, {"b", json::value(axis)}, {"c", json::value(axis)}};
    spec.max_items = limits::max_max_items;
    cube.matrix = spec;
    m.tasks = {cube};
    BOOST_TEST(count_code(must_fail(m), "expansion_too_large") == 1u);
}

BOOST_AUTO_TEST_CASE(foreach_items_must_be_an_array) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"n":3})").as_object();
    task_spec a = make_task("a");
    a.foreach = foreach_spec{json::value("${{ inputs.n }}"), "x", 10};
    task_spec b = make_task("b");
    b.foreach = foreach_spec{json::value("list: ${{ inputs.n }}"), "x", 10};
    task_spec c = make_task("c", "echo", {"a"});
    c.foreach = foreach_spec{json::value("${{ tasks.a.output.items }}"), "x", 10};
    wf.tasks = {a, b, c};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "foreach_items_not_array") == 2u, diag_text(ds));
    BOOST_TEST(count_code(ds, "template_unknown_root") == 1u, diag_text(ds));
}

BOOST_AUTO_TEST_CASE(inputs_merge_defaults_and_overrides_in_order) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"a":1,"b":2})").as_object();
    wf.tasks = {make_task("t")};
    compile_options options;
    options.input_overrides = {{"b", json::value(3)}, {"zz", json::value("x")}, {"b", json::value(4)}};
    auto r = compile(wf, options);
    BOOST_TEST_REQUIRE(r.compiled.has_value());
    BOOST_TEST(json::value(r.compiled->inputs) == json::parse(R"({"a":1,"b":4,"zz":"x"})"));
    BOOST_TEST(count_code(r.diags, "undeclared_input") == 1u);
    BOOST_TEST((find_code(r.diags, "undeclared_input")->level == severity::warning));
    BOOST_TEST(r.compiled->warnings.size() == 1u);
}

// The reference's rule by effect: `mutations` covers process execution and workspace writes,
// `high_risk` process execution only (the only high-risk effect here), `always` every effect
// (reads too); builtin.assign and builtin.assert are pure and never need approval.
BOOST_AUTO_TEST_CASE(approval_follows_the_effect_of_each_action_kind) {
    workflow wf = base_workflow();
    wf.policy.writable_roots = {"out"};
    for (auto [name, kind] :
         {std::pair{"set", action_kind::assign}, std::pair{"check", action_kind::assert_that},
          std::pair{"load", action_kind::read}, std::pair{"save", action_kind::write}}) {
        action_spec a;
        a.name = name;
        a.kind = kind;
        wf.actions.push_back(a);
    }
    wf.tasks = {make_task("run"), make_task("set", "set"), make_task("check", "check"),
                make_task("load", "load"), make_task("save", "save")};
    auto needing = [&](approval_mode mode) {
        wf.policy.approval = mode;
        plan p = must_compile(wf);
        std::vector<std::string> ids;
        for (const auto& id : {"run", "set", "check", "load", "save"})
            if (task_of(p, id).requires_approval) ids.push_back(id);
        return ids;
    };
    BOOST_TEST(needing(approval_mode::never).empty());
    BOOST_TEST((needing(approval_mode::mutations) == std::vector<std::string>{"run", "save"}));
    BOOST_TEST((needing(approval_mode::high_risk) == std::vector<std::string>{"run"}));
    BOOST_TEST((needing(approval_mode::always) == std::vector<std::string>{"run", "load", "save"}));
    BOOST_TEST(must_compile(wf).processes.size() == 1u);  // only the shell action is a process
}

// `run` refuses a plan whose process tasks need approval unless it is interactive; `check`
// (and `doctor`, which compiles the same way) say so first, as a warning.
BOOST_AUTO_TEST_CASE(check_warns_when_approval_would_block_an_unattended_run) {
    auto check = [](const std::string& policy,
                    const std::string& action = "builtin.shell.exec, command: echo") {
        std::string text = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n" +
                           policy + "  actions:\n    a: {kind: " + action +
                           "}\n  tasks:\n    - {id: one, uses: action:a}\n"
                           "    - {id: two, uses: action:a}\n";
        return check_document(parse_workflow(text, "wf.yaml"));
    };
    auto absent = check("  policy:\n    processAllowlist: [echo]\n");
    BOOST_TEST_REQUIRE(absent.compiled.has_value(), diag_text(absent.diags));  // a warning, not an error
    BOOST_TEST_REQUIRE(absent.diags.size() == 1u, diag_text(absent.diags));
    const diagnostic& d = absent.diags.items()[0];
    BOOST_TEST(d.code == "approval_blocks_unattended_run");
    BOOST_TEST((d.level == severity::warning));
    BOOST_TEST(d.path == "spec.policy");
    BOOST_TEST(d.location.line == 5);
    BOOST_TEST(d.message.find("(the default)") != std::string::npos, d.message);
    BOOST_TEST(d.message.find("2 process tasks") != std::string::npos, d.message);
    BOOST_TEST(d.help.find("approval: never") != std::string::npos, d.help);

    auto written = check("  policy:\n    processAllowlist: [echo]\n    approval: always\n");
    BOOST_TEST_REQUIRE(written.diags.size() == 1u, diag_text(written.diags));
    BOOST_TEST(written.diags.items()[0].path == "spec.policy.approval");
    BOOST_TEST(written.diags.items()[0].location.line == 7);
    BOOST_TEST(written.diags.items()[0].message.find("\"always\"") != std::string::npos);

    // Nothing to say: approval never, or no process task.
    BOOST_TEST(check("  policy:\n    processAllowlist: [echo]\n    approval: never\n").diags.empty());
    BOOST_TEST(check("  policy:\n    approval: mutations\n", "builtin.assign").diags.empty());
    // Said about runnable plans only: with errors, those come first.
    auto broken = check("  policy:\n    processAllowlist: [ls]\n");
    BOOST_TEST(!broken.compiled.has_value());
    BOOST_TEST(count_code(broken.diags, "approval_blocks_unattended_run") == 0u);
}

BOOST_AUTO_TEST_CASE(processes_describe_sources_and_engines_never_values) {
    workflow wf = base_workflow();
    wf.policy.environment_allowlist = {"TOKEN", "PATH", "KEY", "MODE", "HELP"};
    wf.policy.secret_file_roots = {"secrets"};
    wf.policy.secret_process_allowlist = {"vault"};
    action_spec boxed = process_action("boxed", "/usr/bin/echo", {"x"});
    boxed.isolation = isolation_mode::container;
    boxed.container = container_spec{"sha256:" + std::string(64, 'a')};
    env_entry token{"TOKEN", {env_source::kind_t::env, "PATH", {}}};
    env_entry key{"KEY", {env_source::kind_t::file, "secrets/key", {}}};
    env_entry mode{"MODE", {env_source::kind_t::value, "super-secret-looking-literal", {}}};
    env_entry help{"HELP", {env_source::kind_t::process, "", {"/usr/bin/vault", {"read"}, 5, 1024}}};
    boxed.env = {token, key, mode, help};
    wf.actions.push_back(boxed);
    wf.actions.push_back(process_action("podman_only", "echo"));
    wf.actions.back().isolation = isolation_mode::container;
    wf.actions.back().container = container_spec{"sha256:" + std::string(64, 'b'), engine_choice::podman};
    wf.tasks = {make_task("a", "boxed"), make_task("b", "podman_only")};
    plan p = must_compile(wf);
    BOOST_TEST_REQUIRE(p.processes.size() == 3u);
    BOOST_TEST(p.processes[1].engines == (std::vector<std::string>{"docker", "podman"}));
    BOOST_TEST(p.processes[2].engines == std::vector<std::string>{"podman"});
    std::string text = plan_json(p);
    BOOST_TEST(text.find("super-secret-looking-literal") == std::string::npos);
    json::value doc = json::parse(text);
    const json::array& env = doc.at("processes").at(1).at("env").as_array();
    BOOST_TEST(env.at(0) == json::parse(R"({"name":"TOKEN","source":"env:PATH"})"));
    BOOST_TEST(env.at(1) == json::parse(R"({"name":"KEY","source":"file:secrets/key"})"));
    BOOST_TEST(env.at(2) == json::parse(R"({"name":"MODE","source":"value"})"));
    BOOST_TEST(env.at(3) == json::parse(R"({"name":"HELP","source":"process:/usr/bin/vault"})"));
    const json::value& c = doc.at("processes").at(1).at("container");
    BOOST_TEST(c.at("engines") == json::parse(R"(["docker","podman"])"));
    BOOST_TEST(c.at("memoryLimitBytes") == json::value(268435456));
    BOOST_TEST(c.at("controls").as_array().size() == fixed_container_controls().size());
    BOOST_TEST(plan_text(p).find("super-secret-looking-literal") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(outputs_may_name_any_plan_task_but_not_vars) {
    workflow wf = base_workflow();
    task_spec fan = make_task("fan");
    fan.foreach = foreach_spec{json::parse("[1,2]"), "n", 10};
    wf.tasks = {fan};
    wf.outputs =
        json::parse(
            R"({"all":"${{ tasks.fan.output.items }}","one":"${{ tasks.fan--0001-f969c39d71b3.output }}"})")
            .as_object();
    must_compile(wf);
    wf.outputs["bad"] = "${{ vars.n }}";
    BOOST_TEST(count_code(must_fail(wf), "template_unknown_root") == 1u);
}

BOOST_AUTO_TEST_CASE(conditions_are_checked_at_compile_time) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"on":true})").as_object();
    task_spec good = make_task("good");
    good.when = "inputs.on";
    task_spec bad = make_task("bad");
    bad.when = "inputs.on ~ 1";
    task_spec missing = make_task("missing");
    missing.when = "not inputs.off";
    wf.tasks = {good, bad, missing};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "invalid_condition") == 1u, diag_text(ds));
    BOOST_TEST(count_code(ds, "template_missing_path") == 1u, diag_text(ds));
}

// A bounded loop is a static graph (docs/CONTROL_FLOW.md, "Bounded loops"): every iteration is
// a task of the plan, iteration k needs k-1, each is guarded by the loop's `while`, and the
// aggregate keeps the task's id. The ids were computed outside agentctl from the bindings
// {"loopIndex":k,"loopPrevious":...} (compact JSON, keys sorted).
BOOST_AUTO_TEST_CASE(a_loop_compiles_to_every_iteration_and_an_aggregate) {
    workflow wf = base_workflow();
    action_spec assign;
    assign.name = "assign";
    assign.kind = action_kind::assign;
    wf.actions.push_back(assign);
    wf.tasks.push_back(make_task("setup"));
    task_spec refine = make_task("refine", "assign", {"setup"});
    refine.loop = loop_spec{3, "${{ vars.loopIndex < 2 }}", json::parse(R"({"value":"seed"})")};
    refine.with =
        json::parse(R"({"previous":"${{ vars.loopPrevious }}","iteration":"${{ vars.loopIndex }}"})");
    wf.tasks.push_back(refine);
    wf.tasks.push_back(make_task("after", "echo", {"refine"}));
    plan p = must_compile(wf);

    const std::vector<std::string> ids = {"refine--0000-ce12bbac409d", "refine--0001-d1e11b2f41fc",
                                          "refine--0002-4f7df97973fa"};
    BOOST_TEST(order_of(p) == (std::vector<std::string>{"setup", "refine--0000", "refine--0001",
                                                        "refine--0002", "refine", "after"}));
    for (std::uint32_t k = 0; k < 3; ++k) BOOST_TEST(p.task_id(1 + k) == ids[k]);
    BOOST_TEST(!p.previous_iteration(1).has_value());
    BOOST_TEST(p.previous_iteration(2).value_or(0) == 1u);
    BOOST_TEST(!p.previous_iteration(4).has_value(), "the aggregate is no iteration");

    const plan_task first = p.task(1);
    BOOST_TEST((first.expansion == plan_task::expansion_t::loop));
    BOOST_TEST(json::value(first.vars) == json::parse(R"({"loopIndex":0,"loopPrevious":{"value":"seed"}})"));
    BOOST_TEST_REQUIRE(first.when.has_value());
    BOOST_TEST(first.when->expression == "${{ vars.loopIndex < 2 }}");
    BOOST_TEST(first.with_deferred, "with reads loopPrevious: rendered when the iteration starts");
    const plan_task second = p.task(2);
    BOOST_TEST(json::value(second.vars) == json::parse(R"({"loopIndex":1})"));
    BOOST_TEST(json::value(second.vars_deferred) ==
               json::parse(R"({"loopPrevious":"${{ tasks.)" + ids[0] + R"(.output }}"})"));
    BOOST_TEST(p.output_referenced(2), "the next iteration reads it");
    BOOST_TEST(needs_of(p, "refine") ==
               (std::vector<std::string>{"refine--0000", "refine--0001", "refine--0002"}));
    BOOST_TEST(needs_of(p, "after") == std::vector<std::string>{"refine"});

    json::value doc = json::parse(plan_json(p));
    const auto& tasks = doc.at("tasks");
    BOOST_TEST(tasks.at("refine").at("uses").at("kind").as_string() == "loop_aggregate");
    BOOST_TEST(json::serialize(tasks.at("refine").at("uses").at("name").at("children")) ==
               "[\"" + ids[0] + "\",\"" + ids[1] + "\",\"" + ids[2] + "\"]");
    BOOST_TEST(tasks.at("refine").at("expansion").at("maxIterations").as_int64() == 3);
    BOOST_TEST(json::serialize(tasks.at(ids[1]).at("needs")) == R"(["setup",")" + ids[0] + R"("])");
    std::string text = plan_text(p);
    BOOST_TEST(text.find("refine  loop maxIterations 3 while ${{ vars.loopIndex < 2 }}") != std::string::npos,
               text);
    for (const auto& id : ids) BOOST_TEST(text.find("    " + id + "  loopIndex") != std::string::npos, text);
}

// `while` is checked as `when` is: its roots, its task references against needs, its paths;
// `loop.output` is the reference's other name for `vars.loopPrevious`.
BOOST_AUTO_TEST_CASE(a_loops_while_is_checked_like_a_condition) {
    workflow wf = base_workflow();
    task_spec ok = make_task("ok");
    ok.loop = loop_spec{2, "${{ loop.output.exitCode != 1 }}", json::parse(R"({"exitCode":0})")};
    wf.tasks = {ok};
    must_compile(wf);
    task_spec unknown = make_task("unknown");
    unknown.loop = loop_spec{2, "${{ vars.nothing }}", nullptr};
    task_spec unneeded = make_task("unneeded");
    unneeded.loop = loop_spec{2, "${{ tasks.ok.output.iterations == 0 }}", nullptr};
    wf.tasks = {ok, unknown, unneeded};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(ds.items().size() == 2u, diag_text(ds));
    const diagnostic* missing = find_code(ds, "template_missing_path");
    BOOST_TEST_REQUIRE(missing, diag_text(ds));
    BOOST_TEST(missing->path == "spec.tasks[1].loop.while");
    BOOST_TEST(missing->help.find("vars.loopIndex") != std::string::npos, missing->help);
    const diagnostic* need = find_code(ds, "template_missing_need");
    BOOST_TEST_REQUIRE(need, diag_text(ds));
    BOOST_TEST(need->path == "spec.tasks[2].loop.while");
}

// A router (docs/CONTROL_FLOW.md, "Routers") is a pure node: no action, its decision read by
// the tasks it guards (so kept), each destination carrying a guard that names it; the plan
// JSON writes it as the reference does (uses.kind router, routeGuards).
BOOST_AUTO_TEST_CASE(a_router_compiles_to_a_pure_node_that_guards_its_destinations) {
    auto parsed = parse_workflow(R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: t}
spec:
  policy: {processAllowlist: [echo], approval: never}
  actions:
    assign: {kind: builtin.assign}
    say: {kind: builtin.shell.exec, command: echo, args: ["${{ vars.item }}"]}
  tasks:
    - {id: decide, uses: action:assign, with: {route: ship}}
    - id: route
      uses: router
      needs: [decide]
      route:
        select: "${{ tasks.decide.output.output.route }}"
        cases:
          - {equals: ship, tasks: [ship]}
          - {equals: 1, tasks: [fan]}
        default: [hold]
    - {id: ship, uses: action:assign, needs: [route]}
    - {id: fan, uses: action:say, needs: [route], foreach: {items: [a, b]}}
    - {id: hold, uses: action:assign, needs: [route]}
)",
                                 "wf.yaml");
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    plan p = must_compile(*parsed.document);
    const plan_task router = task_of(p, "route");
    BOOST_TEST_REQUIRE(router.route.has_value());
    BOOST_TEST(router.route->cases.at(1).equals == json::value(1));
    BOOST_TEST(p.output_referenced(*p.find("route")), "its guards read the decision");
    BOOST_TEST(needs_of(p, "route") == std::vector<std::string>{"decide"});
    BOOST_TEST(task_of(p, "ship").route_guards == std::vector<std::string>{"route"});
    BOOST_TEST(task_of(p, "hold").route_guards == std::vector<std::string>{"route"});
    BOOST_TEST(task_of(p, "fan").route_guards == std::vector<std::string>{"route"});
    BOOST_TEST(p.task(*p.find("fan") - 2).route_guards == std::vector<std::string>{"route"}, "every child");
    BOOST_TEST(task_of(p, "decide").route_guards.empty());
    BOOST_TEST(p.processes.size() == 1u);
    BOOST_TEST(p.processes[0].tasks == std::vector<std::string>{"fan"}, "a router is no process");

    json::value doc = json::parse(plan_json(p));
    const auto& tasks = doc.at("tasks");
    BOOST_TEST(tasks.at("route").at("uses").at("kind").as_string() == "router");
    BOOST_TEST(
        tasks.at("route").at("uses").at("name") ==
        json::parse(
            R"({"select":"${{ tasks.decide.output.output.route }}","cases":[{"equals":"ship","tasks":["ship"]},{"equals":1,"tasks":["fan"]}],"default":["hold"]})"));
    BOOST_TEST(!tasks.at("route").as_object().contains("args"));
    BOOST_TEST(tasks.at("ship").at("routeGuards") == json::parse(R"([{"router":"route"}])"));
    BOOST_TEST(tasks.at("fan").at("routeGuards") == json::parse(R"([{"router":"route"}])"));
    BOOST_TEST(!tasks.at("decide").as_object().contains("routeGuards"));
    std::string text = plan_text(p);
    BOOST_TEST(
        text.find("route   router ${{ tasks.decide.output.output.route }}  \"ship\" -> ship  1 -> fan  "
                  "default -> hold  needs decide") != std::string::npos,
        text);
    BOOST_TEST(text.find("action:assign  routed by route  needs route") != std::string::npos, text);
}

// The reference's examples/v1/subworkflow.yaml, written again here: a sub-workflow with its
// schemas, invoked once.
const char* const summarize_workflow = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: t}
spec:
  inputs: {message: durable}
  outputs: {result: "${{ tasks.summary.output.result }}"}
  policy: {approval: never}
  actions:
    assign: {kind: builtin.assign}
  subworkflows:
    summarize:
      version: 1.0.0
      inputSchema:
        type: object
        required: [message]
        properties: {message: {type: string}}
      outputSchema: {type: object, required: [result]}
      outputs: {result: "${{ tasks.finish.output.output.result }}"}
      tasks:
        - {id: prepare, uses: action:assign, with: {value: "${{ inputs.message }}"}}
        - id: finish
          uses: action:assign
          needs: [prepare]
          when: "${{ inputs.message != \"skip\" }}"
          with: {result: "${{ tasks.prepare.output.output.value }}"}
  tasks:
    - {id: summary, uses: workflow:summarize, with: {message: "${{ inputs.message }}"}}
)";

plan compile_text(const std::string& text) {
    auto parsed = parse_workflow(text, "wf.yaml");
    BOOST_TEST_REQUIRE(parsed.document.has_value(), diag_text(parsed.diags));
    return must_compile(*parsed.document);
}

diagnostics check_text(const std::string& text) {
    auto r = check_document(parse_workflow(text, "wf.yaml"));
    BOOST_TEST(!r.compiled.has_value());
    return std::move(r.diags);
}

// A sub-workflow (docs/CONTROL_FLOW.md, "Sub-workflows") is flattened into the static graph:
// an input boundary `summary--inputs-H` (H: the first 8 hex digits of sha256("summarize@1.0.0"),
// computed outside agentctl), each local task under `summary--`, its templates renamed, and the
// aggregate keeping the invocation's id; the plan JSON writes them as the reference does.
BOOST_AUTO_TEST_CASE(a_subworkflow_is_flattened_into_namespaced_tasks) {
    plan p = compile_text(summarize_workflow);
    const std::string boundary = "summary--inputs-4d45e657";
    BOOST_TEST(order_of(p) ==
               (std::vector<std::string>{boundary, "summary--prepare", "summary--finish", "summary"}));
    const plan_task input = task_of(p, boundary);
    BOOST_TEST_REQUIRE(input.subworkflow.has_value());
    BOOST_TEST((input.subworkflow->role == plan_subworkflow::role_t::input));
    BOOST_TEST(input.with == json::parse(R"({"message":"durable"})"), "rendered at compile time");
    BOOST_TEST(input.output_schema.has_value(), "the inputSchema checks the boundary's output");
    const plan_task prepare = task_of(p, "summary--prepare");
    BOOST_TEST(needs_of(p, "summary--prepare") == std::vector<std::string>{boundary});
    BOOST_TEST(prepare.with == json::parse(R"({"value":"${{ tasks.)" + boundary + R"(.output.message }}"})"));
    const plan_task finish = task_of(p, "summary--finish");
    BOOST_TEST(needs_of(p, "summary--finish") == (std::vector<std::string>{"summary--prepare", boundary}));
    BOOST_TEST_REQUIRE(finish.when.has_value());
    BOOST_TEST(finish.when->expression == "${{ tasks." + boundary + ".output.message != \"skip\" }}");
    BOOST_TEST(finish.with ==
               json::parse(R"({"result":"${{ tasks.summary--prepare.output.output.value }}"})"));
    const plan_task aggregate = task_of(p, "summary");
    BOOST_TEST_REQUIRE(aggregate.subworkflow.has_value());
    BOOST_TEST(aggregate.subworkflow->children ==
               (std::vector<std::string>{"summary--prepare", "summary--finish"}));
    BOOST_TEST(needs_of(p, "summary") ==
               (std::vector<std::string>{boundary, "summary--prepare", "summary--finish"}));
    BOOST_TEST(aggregate.with ==
               json::parse(R"({"result":"${{ tasks.summary--finish.output.output.result }}"})"));
    BOOST_TEST(p.processes.empty(), "the boundary and the aggregate are no processes");

    json::value doc = json::parse(plan_json(p));
    const auto& tasks = doc.at("tasks");
    BOOST_TEST(tasks.at("summary").at("uses") ==
               json::parse(R"({"kind":"subworkflow_aggregate","name":{"name":"summarize","version":"1.0.0",)"
                           R"("children":["summary--prepare","summary--finish"]}})"));
    BOOST_TEST(tasks.at(boundary).at("uses") ==
               json::parse(R"({"kind":"subworkflow_input","name":{"name":"summarize","version":"1.0.0"}})"));
    BOOST_TEST(!tasks.at("summary").as_object().contains("args"));
    std::string text = plan_text(p);
    BOOST_TEST(text.find(boundary + "  workflow:summarize 1.0.0 inputs  with {\"message\":\"durable\"}") !=
                   std::string::npos,
               text);
    BOOST_TEST(
        text.find("workflow:summarize 1.0.0 outputs of 2 tasks  needs " + boundary) != std::string::npos,
        text);
}

// Nested invocations expand recursively (`outer--inner--t`); one definition invoked twice gets
// two namespaces; an invocation's needs become its boundary's, and a router inside routes to
// the renamed tasks.
BOOST_AUTO_TEST_CASE(nested_subworkflows_get_nested_namespaces) {
    plan p = compile_text(R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: t}
spec:
  policy: {approval: never}
  actions:
    assign: {kind: builtin.assign}
  subworkflows:
    inner:
      version: 2.0.0
      inputSchema: {type: object}
      outputSchema: {type: object}
      outputs: {got: "${{ inputs.value }}"}
      tasks:
        - {id: t, uses: action:assign, with: {value: "${{ inputs.value }}"}}
    outer:
      version: 1.0.0
      inputSchema: {type: object}
      outputSchema: {type: object}
      outputs: {inner: "${{ tasks.call.output.got }}"}
      tasks:
        - {id: pick, uses: router, route: {select: "${{ inputs.lane }}", cases: [{equals: a, tasks: [call]}]}}
        - {id: call, uses: workflow:inner, needs: [pick], with: {value: "${{ inputs.lane }}"}}
  tasks:
    - {id: start, uses: action:assign}
    - {id: one, uses: workflow:outer, needs: [start], with: {lane: a}}
    - {id: two, uses: workflow:outer, with: {lane: b}}
)");
    for (std::string_view id : {"one--pick", "one--call", "one--call--t", "two--call--t", "two"})
        BOOST_TEST(p.find(id).has_value(), id);
    // The digests: sha256("outer@1.0.0") and sha256("inner@2.0.0"), computed outside agentctl.
    const std::string outer_in = "one--inputs-bce86493";
    BOOST_TEST(needs_of(p, outer_in) == std::vector<std::string>{"start"}, "the invocation's needs");
    const plan_task t = task_of(p, "one--call--t");
    BOOST_TEST(t.with == json::parse(R"({"value":"${{ tasks.one--call--inputs-c9f69299.output.value }}"})"));
    const plan_task pick = task_of(p, "one--pick");
    BOOST_TEST_REQUIRE(pick.route.has_value());
    BOOST_TEST(pick.route->cases.at(0).tasks == std::vector<std::string>{"one--call"});
    // The inner invocation is a destination: it and its boundary are guarded by the router.
    BOOST_TEST(task_of(p, "one--call").route_guards == std::vector<std::string>{"one--pick"});
    const std::string inner_boundary = "one--call--inputs-c9f69299";
    BOOST_TEST(needs_of(p, "one--call--t") == std::vector<std::string>{inner_boundary});
    BOOST_TEST(task_of(p, inner_boundary).route_guards == std::vector<std::string>{"one--pick"});
    BOOST_TEST(needs_of(p, inner_boundary) == (std::vector<std::string>{"one--pick", outer_in}));
}

// Check-time diagnostics of sub-workflows, each at the place written in the document.
BOOST_AUTO_TEST_CASE(subworkflow_problems_are_reported_where_they_are_written) {
    auto one = [](const diagnostics& ds) {
        BOOST_TEST(ds.items().size() == 1u, diag_text(ds));
        return ds.items().empty() ? std::string() : ds.items()[0].code + " @" + ds.items()[0].path;
    };
    std::string text = summarize_workflow;
    auto replaced = [&](std::string_view from, std::string_view to) {
        std::string t = text;
        auto at = t.find(from);
        BOOST_TEST_REQUIRE(at != std::string::npos, from);
        return t.replace(at, from.size(), to);
    };
    // An unknown definition: located, with the name it may have meant.
    diagnostics ds = check_text(replaced("uses: workflow:summarize", "uses: workflow:summarise"));
    BOOST_TEST(one(ds) == "unknown_subworkflow @spec.tasks[0].uses");
    BOOST_TEST(ds.items().at(0).help.find("workflow:summarize") != std::string::npos);
    BOOST_TEST(ds.items().at(0).location.line == 27u);
    // A schema that is no JSON Schema.
    ds = check_text(replaced("outputSchema: {type: object, required: [result]}",
                             "outputSchema: {type: 12, required: [result]}"));
    BOOST_TEST(one(ds).rfind("invalid_schema @spec.subworkflows.summarize.outputSchema", 0) == 0u, one(ds));
    // A local need that names no local task (not even a task of the caller).
    ds = check_text(replaced("needs: [prepare]", "needs: [prepare, summary]"));
    BOOST_TEST(one(ds) == "unknown_need @spec.subworkflows.summarize.tasks[1].needs[1]");
    // A local task whose namespaced id is the boundary's.
    ds = check_text(replaced("id: prepare,", "id: inputs-4d45e657,"));
    BOOST_TEST(count_code(ds, "duplicate_task_id") == 1u, diag_text(ds));
    BOOST_TEST(
        find_code(ds, "duplicate_task_id")->path.rfind("spec.subworkflows.summarize.tasks[0]", 0) == 0u,
        diag_text(ds));
    // A namespaced id that collides with a task of the caller.
    text = replaced("  tasks:\n    - {id: summary,",
                    "  tasks:\n    - {id: summary--prepare, uses: action:assign}\n    - {id: summary,");
    ds = check_text(text);
    BOOST_TEST(count_code(ds, "duplicate_task_id") == 1u, diag_text(ds));
    // Definitions that invoke one another (a -> b -> a): once, where the cycle closes.
    std::string cycle = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: t}
spec:
  policy: {approval: never}
  actions:
    assign: {kind: builtin.assign}
  subworkflows:
    a:
      version: 1.0.0
      inputSchema: {type: object}
      outputSchema: {type: object}
      tasks:
        - {id: x, uses: action:assign}
        - {id: b, uses: workflow:b}
    b:
      version: 1.0.0
      inputSchema: {type: object}
      outputSchema: {type: object}
      tasks:
        - {id: a, uses: workflow:a}
  tasks:
    - {id: top, uses: workflow:a}
)";
    ds = check_text(cycle);
    BOOST_TEST(one(ds) == "dependency_cycle @spec.subworkflows.b.tasks[0].uses");
    BOOST_TEST(ds.items().at(0).message.find("a -> b -> a") != std::string::npos, ds.items().at(0).message);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_rules)

BOOST_AUTO_TEST_CASE(commands_must_be_allowlisted_and_well_formed) {
    workflow wf = base_workflow();
    wf.actions.push_back(process_action("curl", "/usr/bin/curl"));
    wf.actions.push_back(process_action("rel", "bin/tool"));
    wf.actions.push_back(process_action("tmpl", "${{ inputs.cmd }}"));
    wf.tasks = {make_task("a")};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "policy_process_not_allowed") == 1u, diag_text(ds));
    BOOST_TEST(find_code(ds, "policy_process_not_allowed")->path == "spec.actions.curl.command");
    BOOST_TEST(count_code(ds, "invalid_command") == 1u, diag_text(ds));
    BOOST_TEST(count_code(ds, "template_not_allowed") == 1u, diag_text(ds));
}

BOOST_AUTO_TEST_CASE(environment_names_and_sources_must_be_allowlisted) {
    workflow wf = base_workflow();
    wf.policy.environment_allowlist = {"TOKEN"};
    wf.actions[0].env = {{"TOKEN", {env_source::kind_t::env, "HOME", {}}},
                         {"OTHER", {env_source::kind_t::value, "v", {}}},
                         {"TOKEN2", {env_source::kind_t::value, "${{ inputs.x }}", {}}}};
    wf.tasks = {make_task("a")};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "policy_environment_not_allowed") == 3u, diag_text(ds));
    BOOST_TEST(count_code(ds, "template_not_allowed") == 1u, diag_text(ds));
    BOOST_TEST(ds.items().front().path == "spec.actions.echo.env.TOKEN.env");
}

BOOST_AUTO_TEST_CASE(secret_files_need_roots_and_must_stay_under_them) {
    workflow wf = base_workflow();
    wf.policy.environment_allowlist = {"A", "B", "C", "D"};
    auto file = [](std::string name, std::string path) {
        return env_entry{std::move(name), {env_source::kind_t::file, std::move(path), {}}};
    };
    wf.actions[0].env = {file("A", "secrets/a")};
    wf.tasks = {make_task("t")};
    BOOST_TEST(count_code(must_fail(wf), "policy_secret_file_roots_missing") == 1u);

    wf.policy.secret_file_roots = {"./secrets", "/run/keys"};
    wf.actions[0].env = {file("A", "secrets/a"), file("B", "/run/keys/b"), file("C", "other/c"),
                         file("D", "secrets/../../etc/passwd")};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "policy_secret_file_outside_roots") == 1u, diag_text(ds));
    BOOST_TEST(find_code(ds, "policy_secret_file_outside_roots")->path == "spec.actions.echo.env.C.file");
    BOOST_TEST(count_code(ds, "policy_path_escape") == 1u, diag_text(ds));

    wf.actions[0].env = {file("A", "secrets")};  // the root itself is not a file under it
    BOOST_TEST(count_code(must_fail(wf), "policy_secret_file_outside_roots") == 1u);
}

BOOST_AUTO_TEST_CASE(secret_processes_must_be_allowlisted) {
    workflow wf = base_workflow();
    wf.policy.environment_allowlist = {"A", "B"};
    wf.policy.secret_process_allowlist = {"vault"};
    wf.actions[0].env = {{"A", {env_source::kind_t::process, "", {"/usr/bin/vault", {}, 5, 1024}}},
                         {"B", {env_source::kind_t::process, "", {"pass", {"show"}, 5, 1024}}}};
    wf.tasks = {make_task("t")};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "policy_secret_process_not_allowed") == 1u, diag_text(ds));
    BOOST_TEST(ds.exit_code() == 3);  // policy errors only
}

BOOST_AUTO_TEST_CASE(cwd_and_roots_stay_inside) {
    workflow wf = base_workflow();
    wf.actions.push_back(process_action("abs", "echo"));
    wf.actions.back().cwd = "/tmp";
    wf.actions.push_back(process_action("up", "echo"));
    wf.actions.back().cwd = "a/../../b";
    wf.actions.push_back(process_action("fine", "echo"));
    wf.actions.back().cwd = "./a/b";
    wf.policy.writable_roots = {"out", "../elsewhere"};
    wf.policy.secret_file_roots = {"/abs/ok", "x/.."};
    wf.tasks = {make_task("t")};
    diagnostics ds = must_fail(wf);
    BOOST_TEST(count_code(ds, "invalid_cwd") == 1u, diag_text(ds));
    BOOST_TEST(count_code(ds, "policy_path_escape") == 3u, diag_text(ds));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_output)

BOOST_AUTO_TEST_CASE(plan_json_has_a_fixed_member_order_and_its_digest) {
    workflow wf = base_workflow();
    wf.tasks = {make_task("a")};
    plan p = must_compile(wf);
    std::string text = plan_json(p);
    json::value doc = json::parse(text);
    std::vector<std::string> keys;
    for (const auto& m : doc.as_object()) keys.emplace_back(m.key());
    BOOST_TEST(keys ==
               (std::vector<std::string>{"formatVersion", "workflowName", "workflowDigest", "planDigest",
                                         "maxConcurrency", "killGraceSeconds", "approval", "workspaceRoot",
                                         "budgets", "inputs", "order", "tasks", "processes", "outputs"}));
    std::vector<std::string> task_keys;
    for (const auto& m : doc.at("tasks").at("a").as_object()) task_keys.emplace_back(m.key());
    BOOST_TEST(task_keys == (std::vector<std::string>{"id", "uses", "needs", "with", "timeoutSeconds",
                                                      "retry", "failure", "limits", "requiresApproval"}));

    // planDigest is the digest of the same bytes without the planDigest member.
    std::string member = R"(,"planDigest":")" + p.plan_digest + "\"";
    std::size_t at = text.find(member);
    BOOST_TEST_REQUIRE(at != std::string::npos);
    std::string without = text.substr(0, at) + text.substr(at + member.size());
    BOOST_TEST(sha256_digest(without) == p.plan_digest);
    BOOST_TEST(doc.at("planDigest") == json::value(p.plan_digest));

    // A hand-made plan without a stored digest gets the same one computed.
    plan copy = p;
    copy.plan_digest.clear();
    BOOST_TEST(plan_json(copy) == text);
}

BOOST_AUTO_TEST_CASE(the_digest_follows_the_content) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"level":1})").as_object();
    wf.tasks = {make_task("a")};
    std::string first = must_compile(wf).plan_digest;
    compile_options options;
    options.input_overrides.emplace_back("level", json::value(2));
    BOOST_TEST(must_compile(wf, options).plan_digest != first);
    wf.runtime.max_concurrency = 4;
    BOOST_TEST(must_compile(wf).plan_digest != first);
}

BOOST_AUTO_TEST_CASE(compiling_twice_gives_identical_bytes) {
    workflow wf = base_workflow();
    wf.inputs = json::parse(R"({"files":["a","b","c","d","e"],"z":1,"a":2})").as_object();
    wf.actions.push_back(process_action("per_file", "echo", {"${{ vars.f }}"}));
    task_spec fan = make_task("fan", "per_file", {"first"});
    fan.foreach = foreach_spec{json::value("${{ inputs.files }}"), "f", 10};
    task_spec m = make_task("m", "echo", {"fan"});
    m.matrix = matrix_spec{{{"y", json::parse("[1,2]")}, {"x", json::parse(R"(["p","q"])")}}, 10};
    wf.tasks = {make_task("first"), fan, m};
    plan a = must_compile(wf);
    plan b = must_compile(wf);
    BOOST_TEST(plan_json(a) == plan_json(b));
    BOOST_TEST(plan_text(a) == plan_text(b));
    BOOST_TEST(a.plan_digest == b.plan_digest);
}

BOOST_AUTO_TEST_CASE(reordering_independent_tasks_changes_only_the_tie_order) {
    workflow wf = base_workflow();
    task_spec x = make_task("x");
    x.with = json::parse(R"({"k":"x"})");
    task_spec y = make_task("y");
    y.foreach = foreach_spec{json::parse("[1,2]"), "n", 10};
    wf.tasks = {x, y, make_task("z", "echo", {"x", "y"})};
    workflow swapped = wf;
    std::swap(swapped.tasks[0], swapped.tasks[1]);

    plan a = must_compile(wf);
    plan b = must_compile(swapped);
    BOOST_TEST(order_of(a) == (std::vector<std::string>{"x", "y--0000", "y--0001", "y", "z"}));
    BOOST_TEST(order_of(b) == (std::vector<std::string>{"y--0000", "y--0001", "y", "x", "z"}));
    json::value ja = json::parse(plan_json(a));
    json::value jb = json::parse(plan_json(b));
    BOOST_TEST(ja.at("tasks").as_object().size() == jb.at("tasks").as_object().size());
    for (const auto& m : ja.at("tasks").as_object()) {
        const json::value* other = jb.at("tasks").as_object().if_contains(m.key());
        BOOST_TEST_REQUIRE(other != nullptr);
        BOOST_TEST(json::serialize(m.value()) == json::serialize(*other), "task " << m.key());
    }
    ja.as_object().erase("order");
    jb.as_object().erase("order");
    ja.as_object().erase("planDigest");
    jb.as_object().erase("planDigest");
    ja.as_object().erase("tasks");
    jb.as_object().erase("tasks");
    // processes[].tasks follow the plan order, like `order`.
    BOOST_TEST(ja.at("processes").at(0).at("tasks") == json::parse(R"(["x","y","z"])"));
    BOOST_TEST(jb.at("processes").at(0).at("tasks") == json::parse(R"(["y","x","z"])"));
    ja.at("processes").at(0).as_object().erase("tasks");
    jb.at("processes").at(0).as_object().erase("tasks");
    BOOST_TEST(json::serialize(ja) == json::serialize(jb));
}

BOOST_AUTO_TEST_CASE(plan_text_summarises_large_expansions) {
    workflow wf = base_workflow();
    task_spec fan = make_task("fan", "echo", {"pre"});
    json::array items;
    for (int i = 0; i < 5000; ++i) items.push_back(i);
    fan.foreach = foreach_spec{json::value(items), "n", 10000};
    wf.tasks = {make_task("pre"), fan, make_task("post", "echo", {"fan"})};
    plan p = must_compile(wf);
    std::string text = plan_text(p);
    BOOST_TEST(std::count(text.begin(), text.end(), '\n') < 20, text);
    const std::string first = p.task_id(1), last = p.task_id(5000);
    BOOST_TEST(text.find("fan   foreach \xc3\x97"
                         "5000 over n  " +
                         first + " \xe2\x80\xa6 " + last + "  action:echo") != std::string::npos,
               text);
    BOOST_TEST(text.find("order (5003 tasks): pre -> " + first + " \xe2\x80\xa6 " + last +
                         " (\xc3\x97"
                         "5000) -> fan -> post") != std::string::npos,
               text);
    BOOST_TEST(text.find(p.plan_digest) != std::string::npos);
    BOOST_TEST(text.find("fan--0001") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// Golden plans: every tests/frontend/golden/<name>.yaml compiles to exactly <name>.plan.json
// and <name>.plan.txt. AGENTCTL_UPDATE_GOLDEN=1 rewrites them.
BOOST_AUTO_TEST_CASE(golden_plans) {
    std::string data = env_or_empty("AGENTCTL_TEST_DATA");
    BOOST_TEST_REQUIRE(!data.empty(), "AGENTCTL_TEST_DATA is not set (run through meson test)");
    const fs::path dir = fs::path(data) / "golden";
    const bool update = env_or_empty("AGENTCTL_UPDATE_GOLDEN") == "1";
    std::vector<fs::path> documents;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".yaml") documents.push_back(e.path());
    std::sort(documents.begin(), documents.end());
    BOOST_TEST(documents.size() >= 6u);
    for (const auto& yaml : documents) {
        BOOST_TEST_CONTEXT("golden " << yaml.filename().string()) {
            auto parsed = load_workflow(yaml.string());
            if (!parsed.document) {
                BOOST_ERROR("does not parse:\n" << diag_text(parsed.diags));
                continue;
            }
            auto r = compile(*parsed.document);
            if (!r.compiled) {
                BOOST_ERROR("does not compile:\n" << diag_text(r.diags));
                continue;
            }
            const std::pair<std::string, std::string> outputs[] = {
                {".plan.json", plan_json(*r.compiled) + "\n"},
                {".plan.txt", plan_text(*r.compiled)},
            };
            for (const auto& [suffix, actual] : outputs) {
                fs::path expected_path = yaml;
                expected_path.replace_extension(suffix);
                if (update) {
                    std::ofstream(expected_path, std::ios::binary) << actual;
                    continue;
                }
                std::string expected = fs::exists(expected_path) ? read_file(expected_path) : std::string();
                BOOST_TEST(actual == expected,
                           expected_path.filename().string()
                               << " differs from the compiled plan; if the change is intended, "
                                  "rerun with AGENTCTL_UPDATE_GOLDEN=1 and review the diff");
            }
        }
    }
}

// The front end stays pure: no Asio, threads, clocks, environment, randomness or file access
// (except reading the workflow in src/spec/load.cpp), in its sources and in its symbols.
BOOST_AUTO_TEST_CASE(front_end_purity_guard) {
    std::string root = env_or_empty("AGENTCTL_SOURCE_ROOT");
    BOOST_TEST_REQUIRE(!root.empty(), "AGENTCTL_SOURCE_ROOT is not set (run through meson test)");
    struct rule {
        std::regex pattern;
        std::string what;
        bool file_access;  // allowed in src/spec/load.cpp
    };
    const std::vector<rule> rules = {
        {std::regex(R"(#\s*include\s*<boost/asio)"), "Boost.Asio", false},
        {std::regex(R"(#\s*include\s*<(thread|future|random|ctime|time\.h|unistd\.h|fcntl\.h|sys/[^>]*)>)"),
         "a system, thread, time or random header", false},
        {std::regex(R"(\b(system_clock|steady_clock|high_resolution_clock|file_clock)\b)"), "a clock", false},
        {std::regex(R"(\b(getenv|secure_getenv|setenv|unsetenv|putenv|environ)\b)"), "the environment",
         false},
        {std::regex(R"(\b(time|clock|rand|srand|random|fork|vfork|popen|system|socket|kill)\s*\()"),
         "a clock, randomness or process call", false},
        {std::regex(R"(\b(std::thread|pthread_\w+|random_device|mt19937)\b)"), "threads or randomness",
         false},
        // POSIX open/read need <fcntl.h>/<unistd.h>, refused above; a global `::read(` is caught too.
        {std::regex(R"(#\s*include\s*<(fstream|filesystem)>)"), "a file header", true},
        {std::regex(R"(\b(fopen|freopen|fread|fwrite|fdopen|opendir)\s*\()"), "a file call", true},
        {std::regex(R"((^|[^\w>])::(open|openat|read)\s*\()"), "a file call", true},
        {std::regex(R"(\b(ifstream|ofstream|fstream)\b)"), "a file stream", true},
    };
    std::size_t scanned = 0;
    for (const char* layer : {"src/json", "src/spec", "src/policy", "src/plan", "src/parallel"}) {
        const fs::path dir = fs::path(root) / layer;
        BOOST_TEST_REQUIRE(fs::is_directory(dir), dir.string());
        for (const auto& e : fs::recursive_directory_iterator(dir)) {
            auto ext = e.path().extension();
            if (ext != ".cpp" && ext != ".hpp" && ext != ".h") continue;
            ++scanned;
            const std::string relative = fs::relative(e.path(), root).generic_string();
            const bool reads_files = relative == "src/spec/load.cpp";
            std::ifstream in(e.path());
            std::string line;
            for (int number = 1; std::getline(in, line); ++number) {
                if (auto comment = line.find("//"); comment != std::string::npos) line.resize(comment);
                for (const auto& r : rules) {
                    if (r.file_access && reads_files) continue;
                    BOOST_TEST(
                        !std::regex_search(line, r.pattern),
                        relative << ":" << number << ": " << r.what << " in the pure front end: " << line);
                }
            }
        }
    }
    BOOST_TEST(scanned >= 10u);

    // The library's undefined symbols, when nm is available.
    std::string lib = env_or_empty("AGENTCTL_FRONTEND_LIB");
    if (lib.empty() || !fs::exists(lib)) {
        BOOST_TEST_MESSAGE("AGENTCTL_FRONTEND_LIB not set: symbol check skipped");
        return;
    }
    auto objects = agentctl::test::undefined_symbols({lib});
    if (!objects) {
        BOOST_TEST_MESSAGE("nm did not run: symbol check skipped");
        return;
    }
    const std::set<std::string> forbidden = {
        "getenv", "secure_getenv", "setenv",         "clock_gettime", "gettimeofday", "time",
        "clock",  "rand",          "srand",          "random",        "getrandom",    "fork",
        "vfork",  "execve",        "execv",          "execvp",        "posix_spawn",  "posix_spawnp",
        "popen",  "system",        "socket",         "connect",       "bind",         "listen",
        "accept", "kill",          "pthread_create", "waitpid",
    };
    const std::vector<std::string> forbidden_parts = {"std::chrono::_V2::system_clock::now",
                                                      "std::chrono::_V2::steady_clock::now", "std::thread",
                                                      "boost::asio::", "std::random_device"};
    // File access is allowed in the object that reads the workflow (src/spec/load.cpp) only.
    const std::set<std::string> file_symbols = {"open",  "open64",  "openat", "read",
                                                "fopen", "fopen64", "fread",  "opendir"};
    const std::vector<std::string> file_parts = {"std::basic_ifstream", "std::basic_ofstream",
                                                 "std::basic_fstream", "std::basic_filebuf",
                                                 "std::filesystem::"};
    std::size_t checked = 0;
    for (const auto& [member, names] : *objects) {
        for (const auto& name : names) {
            ++checked;
            BOOST_TEST(!agentctl::test::is_one_of(name, forbidden, forbidden_parts),
                       member << " needs `" << name << "`");
            if (member.find("src_spec_load.cpp") != std::string::npos) continue;
            BOOST_TEST(!agentctl::test::is_one_of(name, file_symbols, file_parts),
                       member << " reads files: `" << name << "`");
        }
    }
    BOOST_TEST(checked > 0u);
}
