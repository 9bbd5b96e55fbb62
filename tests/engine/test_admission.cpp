// The admission decision on its own: no io_context, no runner, no process.
#include "engine/admission.hpp"

#include "../support/child_ids.hpp"
#include "../support/error_text.hpp"

#include <agentctl/parse.hpp>

#include <boost/test/unit_test.hpp>

#include <map>

using namespace agentctl;

namespace {

plan compile_yaml(const std::string& spec_body) {
    std::string yaml =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: admit}\nspec:\n" + spec_body;
    parse_result parsed = parse_workflow(yaml, "admit.yaml");
    for (const auto& d : parsed.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(parsed.document);
    compile_result compiled = compile(*parsed.document);
    for (const auto& d : compiled.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(compiled.compiled);
    return std::move(*compiled.compiled);
}

/// Final results by task id; everything else has none yet.
struct fake_run {
    explicit fake_run(const plan& p) : p_(p), inputs_(p.inputs) {
        view.compiled = &p_;
        view.inputs = &inputs_;
        view.result_of = [this](std::uint32_t i) -> const task_result* {
            auto it = done.find(p_.task_id(i));
            return it == done.end() ? nullptr : &it->second;
        };
        view.state_of = [this](std::uint32_t i) -> std::optional<task_state> {
            auto it = done.find(p_.task_id(i));
            if (it == done.end()) return std::nullopt;
            return it->second.state;
        };
    }
    // Children may be named by position (`f--0001`).
    void finish(const std::string& id, task_state state, boost::json::value output = nullptr) {
        task_result r;
        r.state = state;
        r.output = std::move(output);
        done[test_support::full_id(p_, id)] = std::move(r);
    }
    admission admit(const std::string& id) {
        return agentctl::admit(view, *p_.find(test_support::full_id(p_, id)));
    }

    const plan& p_;
    boost::json::value inputs_;
    std::map<std::string, task_result> done;
    run_view view;
};

const std::string policy = "  policy: {processAllowlist: [sh], approval: never}\n";
const std::string shell_action =
    "  actions:\n    t: {kind: builtin.shell.exec, command: /bin/sh, args: [\"${{ with.n }}\"]}\n"
    "    set: {kind: builtin.assign}\n";

}  // namespace

BOOST_AUTO_TEST_CASE(a_need_that_did_not_succeed_skips_the_task) {
    plan p = compile_yaml(policy + shell_action +
                          "  tasks:\n    - {id: a, uses: action:t, with: {n: 1}}\n"
                          "    - {id: b, uses: action:t, needs: [a], with: {n: 2}}\n");
    fake_run run(p);
    run.finish("a", task_state::failed);
    admission d = run.admit("b");
    BOOST_TEST((d.kind == admission::kind_t::record));
    BOOST_TEST((d.result.state == task_state::skipped));
    BOOST_TEST(d.result.error->code == "dependency_not_succeeded");
    BOOST_TEST(d.result.error->message == "dependency \"a\" failed");
}

BOOST_AUTO_TEST_CASE(a_ready_process_task_starts_with_its_rendered_request) {
    plan p = compile_yaml(policy + shell_action + "  tasks:\n    - {id: a, uses: action:t, with: {n: 7}}\n");
    fake_run run(p);
    admission d = run.admit("a");
    BOOST_TEST((d.kind == admission::kind_t::start));
    BOOST_TEST((d.request.args == std::vector<std::string>{"7"}));
    BOOST_TEST(d.reservation == p.task(0).limits.combined_bytes);
    BOOST_TEST(!d.needs_approval);
}

BOOST_AUTO_TEST_CASE(an_assign_completes_here_with_its_input) {
    plan p =
        compile_yaml(policy + shell_action + "  tasks:\n    - {id: s, uses: action:set, with: {x: 1}}\n");
    fake_run run(p);
    admission d = run.admit("s");
    BOOST_TEST((d.kind == admission::kind_t::record));
    BOOST_TEST((d.result.state == task_state::succeeded));
    // The reference's shape: the input is both the value held (`after`) and the `output`.
    BOOST_TEST(to_json(d.result.output) ==
               R"({"status":"unchanged","changed":false,"before":null,"after":{"x":1},"diff":null,)"
               R"("output":{"x":1},"predictability":"fully_predictable"})");
}

BOOST_AUTO_TEST_CASE(a_false_condition_skips_and_a_broken_one_fails) {
    plan p = compile_yaml(
        policy + shell_action +
        "  inputs: {flag: false}\n"
        "  tasks:\n    - {id: a, uses: action:set, with: {ok: \"${{ inputs.flag }}\"}}\n"
        "    - {id: b, uses: action:t, needs: [a], with: {n: 1}, when: \"tasks.a.output.output.ok\"}\n"
        // Whether `ok` has members is not known before the run: a missing path is found then.
        "    - {id: c, uses: action:t, needs: [a], with: {n: 1}, when: \"tasks.a.output.output.ok.x == "
        "1\"}\n");
    fake_run run(p);
    run.finish("a", task_state::succeeded,
               boost::json::object{{"output", boost::json::object{{"ok", false}}}});
    admission b = run.admit("b");
    BOOST_TEST((b.result.state == task_state::skipped));
    BOOST_TEST(b.result.error->code == "condition_false");
    // The reference's skip record: its condition and the digest of what it read. The digest is
    // the sha256 of this text, computed outside agentctl:
    // {"inputs":{"flag":false},"vars":{},"memory":{},"tasks":{"a":{"output":{"ok":false}}}}
    BOOST_TEST(
        to_json(b.result.output) ==
        R"({"reason":"when condition was false","condition":{"expression":"tasks.a.output.output.ok",)"
        R"("contextDigest":"sha256:v1:db05dc40d38c7581c31d59eb427461be2216304d19b8eee88ca0de046a2e2c45",)"
        R"("result":false}})");
    admission c = run.admit("c");
    BOOST_TEST((c.result.state == task_state::failed));
    BOOST_TEST(c.result.error->code == "condition_error");
}

BOOST_AUTO_TEST_CASE(an_aggregate_lists_its_children) {
    plan p =
        compile_yaml(policy + shell_action +
                     "  tasks:\n    - {id: f, uses: action:t, with: {n: 1}, foreach: {items: [1, 2]}}\n");
    fake_run run(p);
    run.finish("f--0000", task_state::succeeded, boost::json::object{{"v", 1}});
    run.finish("f--0001", task_state::succeeded, boost::json::object{{"v", 2}});
    admission d = run.admit("f");
    BOOST_TEST((d.kind == admission::kind_t::record));
    BOOST_TEST((d.result.state == task_state::succeeded));
    const auto& items = d.result.output.at("items").as_array();
    BOOST_TEST(items.size() == 2u);
    BOOST_TEST(
        to_json(items[1]) ==
        R"({"index":1,"taskId":"f--0001-9cba6023fbb3","state":"succeeded","output":{"v":2},"error":null})");
}

BOOST_AUTO_TEST_CASE(an_output_budget_that_cannot_cover_the_task_fails_it_unstarted) {
    plan p = compile_yaml(policy + "  runtime: {budgets: {maxProcessOutputBytes: 3000000}}\n" + shell_action +
                          "  tasks:\n    - {id: a, uses: action:t, with: {n: 1}}\n");
    fake_run run(p);
    BOOST_TEST((run.admit("a").kind == admission::kind_t::start));
    run.view.output_reserved = 2000000;
    admission d = run.admit("a");
    BOOST_TEST((d.result.state == task_state::failed));
    BOOST_TEST(d.result.error->code == "budget_exceeded");
}

BOOST_AUTO_TEST_CASE(approval_is_asked_for_process_tasks_only) {
    std::string asking = "  policy: {processAllowlist: [sh], approval: always}\n";
    plan p = compile_yaml(
        asking + shell_action +
        "  tasks:\n    - {id: a, uses: action:t, with: {n: 1}}\n    - {id: s, uses: action:set}\n");
    fake_run run(p);
    BOOST_TEST(run.admit("a").needs_approval);
    BOOST_TEST((run.admit("s").kind == admission::kind_t::record));
}

// policy.toolsDeny and toolsAllow name capabilities (process.exec, filesystem.read,
// filesystem.write): a task whose action's capability is not allowed fails unstarted; pure
// actions have none and always run.
BOOST_AUTO_TEST_CASE(a_capability_the_policy_denies_fails_the_task_unstarted) {
    const std::string tasks =
        "  tasks:\n    - {id: a, uses: action:t, with: {n: 1}}\n"
        "    - {id: s, uses: action:set, with: {x: 1}}\n";
    plan denied =
        compile_yaml("  policy: {processAllowlist: [sh], approval: never, toolsDeny: [process.exec]}\n" +
                     shell_action + tasks);
    fake_run run(denied);
    admission a = run.admit("a");
    BOOST_TEST((a.kind == admission::kind_t::record));
    BOOST_TEST((a.result.state == task_state::failed));
    BOOST_TEST(a.result.error->code == "capability_denied");
    BOOST_TEST(a.result.error->message ==
               "policy denies process.exec (policy.toolsDeny lists it); the task was not started");
    BOOST_TEST((run.admit("s").result.state == task_state::succeeded));

    plan unlisted =
        compile_yaml("  policy: {processAllowlist: [sh], approval: never, toolsAllow: [filesystem.read]}\n" +
                     shell_action + tasks);
    fake_run run2(unlisted);
    admission b = run2.admit("a");
    BOOST_TEST(b.result.error->code == "capability_denied");
    BOOST_TEST(b.result.error->message ==
               "policy denies process.exec (policy.toolsAllow does not list it); the task was not started");

    plan allowed =
        compile_yaml("  policy: {processAllowlist: [sh], approval: never, toolsAllow: [process.exec]}\n" +
                     shell_action + tasks);
    fake_run run3(allowed);
    BOOST_TEST((run3.admit("a").kind == admission::kind_t::start));
}

// builtin.read and builtin.write go to the runner (which does their file I/O), reserving no
// process output; a write asks for approval under `mutations`, except in a preview (--check).
BOOST_AUTO_TEST_CASE(file_actions_start_in_the_runner) {
    plan p = compile_yaml(
        "  policy: {approval: mutations, writableRoots: [out]}\n"
        "  runtime: {budgets: {maxProcessOutputBytes: 1}}\n"
        "  actions:\n    save: {kind: builtin.write}\n    load: {kind: builtin.read}\n"
        "  tasks:\n    - {id: w, uses: action:save, with: {path: out/a.txt, content: x}}\n"
        "    - {id: r, uses: action:load, with: {path: out/a.txt}}\n");
    fake_run run(p);
    admission w = run.admit("w");
    BOOST_TEST((w.kind == admission::kind_t::start));
    BOOST_TEST(w.reservation == 0u);
    BOOST_TEST(w.needs_approval);
    BOOST_TEST(w.request.with.at("content") == "x");
    admission r = run.admit("r");
    BOOST_TEST((r.kind == admission::kind_t::start));
    BOOST_TEST(!r.needs_approval);
    run.view.check = true;
    BOOST_TEST(!run.admit("w").needs_approval);
}

// The scheduler renders children through one child_tasks (run_view::children), which keeps each
// expansion's template node and parsed templates between children: a child must come out as
// plan::task() makes it, whatever was rendered before it (another expansion's child, a later
// sibling, the same child again).
BOOST_AUTO_TEST_CASE(children_rendered_through_one_child_tasks_are_those_plan_task_renders) {
    plan p = compile_yaml(
        "  policy: {processAllowlist: [sh], approval: never}\n"
        "  actions:\n"
        "    t: {kind: builtin.shell.exec, command: /bin/sh,\n"
        "        args: [\"-c\", \"${{ with.n }} ${{ vars.item }}\"]}\n"
        "    u: {kind: builtin.shell.exec, command: /bin/sh, cwd: \"d${{ vars.matrix.os }}\", args: [x]}\n"
        "    set: {kind: builtin.assign}\n"
        "  tasks:\n"
        "    - {id: f, uses: action:t, with: {n: \"${{ vars.item }}\"}, foreach: {items: [a, b, c]}}\n"
        "    - {id: m, uses: action:u, matrix: {axes: {os: [l, w], arch: [x, y]}}}\n"
        "    - id: loop\n"
        "      uses: action:set\n"
        "      loop: {maxIterations: 3, while: \"${{ vars.loopIndex < 3 }}\", initial: {v: 0}}\n"
        "      with: {previous: \"${{ vars.loopPrevious }}\", i: \"${{ vars.loopIndex }}\"}\n");
    fake_run run(p);
    // Loop iterations 0 and 1 are final: 1 and 2 may be admitted.
    run.finish("loop--0000", task_state::succeeded, boost::json::object{{"v", 1}});
    run.finish("loop--0001", task_state::succeeded, boost::json::object{{"v", 2}});
    child_tasks children(p);
    auto both_ways = [&](const std::string& id) {
        const std::uint32_t index = *p.find(test_support::full_id(p, id));
        run.view.children = nullptr;
        admission alone = agentctl::admit(run.view, index);
        run.view.children = &children;
        admission cached = agentctl::admit(run.view, index);
        run.view.children = nullptr;
        BOOST_TEST_CONTEXT(id) {
            BOOST_TEST((cached.kind == alone.kind));
            BOOST_TEST(cached.request.task_id == alone.request.task_id);
            if (cached.kind == admission::kind_t::start)
                BOOST_TEST(cached.request.task_id == test_support::full_id(p, id));
            BOOST_TEST(to_json(cached.request.with) == to_json(alone.request.with));
            BOOST_TEST(cached.request.args == alone.request.args);
            BOOST_TEST((cached.request.cwd == alone.request.cwd));
            BOOST_TEST(to_json(cached.result.output) == to_json(alone.result.output));
        }
        return cached;
    };
    for (const char* id : {"f--0002", "m--0001", "f--0000", "loop--0002", "m--0003", "f--0000", "f--0001",
                           "loop--0001", "m--0000"})
        both_ways(id);
    admission f1 = both_ways("f--0001");
    BOOST_TEST(f1.request.args == (std::vector<std::string>{"-c", "b b"}));
    BOOST_TEST(to_json(both_ways("loop--0002").result.output.at("after")) == R"({"previous":{"v":2},"i":2})");
    BOOST_TEST(*both_ways("m--0003").request.cwd == "dw");
}
