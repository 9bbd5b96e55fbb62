// Unit tests of the YAML parser: the model it fills, defaults, locations, strictness.
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>

#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include "../support/scratch_dir.hpp"

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

using namespace agentctl;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

const std::string digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

const std::string minimal = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: minimal
spec:
  actions:
    noop:
      kind: builtin.assign
  tasks:
    - id: only
      uses: action:noop
)";

parse_result parse(const std::string& text) {
    return parse_workflow(text, "wf.yaml");
}

bool has(const parse_result& r, std::string_view code, int line = 0) {
    return std::any_of(r.diags.items().begin(), r.diags.items().end(), [&](const diagnostic& d) {
        return d.code == code && (line == 0 || d.location.line == line);
    });
}

const diagnostic* find(const parse_result& r, std::string_view code) {
    for (const auto& d : r.diags.items())
        if (d.code == code) return &d;
    return nullptr;
}

std::string codes(const parse_result& r) {
    std::string out;
    for (const auto& d : r.diags.items())
        out += d.code + "@" + std::to_string(d.location.line) + ":" + d.path + " " + d.message + "\n";
    return out;
}

// A document whose spec.inputs is `inputs` (indented YAML lines).
std::string with_inputs(const std::string& inputs) {
    std::string text = minimal;
    text.replace(text.find("spec:\n") + 6, 0, "  inputs:\n" + inputs);
    return text;
}

// A document with one process action `a` whose extra fields are `fields`.
std::string with_action(const std::string& fields, const std::string& kind = "builtin.shell.exec") {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  actions:\n    a:\n"
           "      kind: " +
           kind + "\n" + fields + "  tasks:\n    - id: t\n      uses: action:a\n";
}

using test_support::scratch_dir;

}  // namespace

BOOST_AUTO_TEST_CASE(minimal_document_gets_defaults) {
    auto r = parse(minimal);
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    BOOST_TEST(r.diags.empty());
    const workflow& wf = *r.document;
    BOOST_TEST(wf.api_version == "agentctl.dev/v1");
    BOOST_TEST(wf.metadata.name == "minimal");
    BOOST_TEST(wf.policy.workspace_root == ".");
    BOOST_TEST((wf.policy.approval == approval_mode::mutations));
    BOOST_TEST(wf.policy.process_allowlist.empty());
    BOOST_TEST(!wf.runtime.max_concurrency.has_value());
    BOOST_TEST(wf.runtime.default_timeout_ms == 120000);
    BOOST_TEST(wf.runtime.kill_grace_seconds == 0);
    BOOST_TEST(!wf.runtime.budgets.max_tasks.has_value());
    BOOST_TEST_REQUIRE(wf.actions.size() == 1u);
    BOOST_TEST((wf.actions[0].kind == action_kind::assign));
    BOOST_TEST(wf.actions[0].with.is_null());
    BOOST_TEST_REQUIRE(wf.tasks.size() == 1u);
    const task_spec& t = wf.tasks[0];
    BOOST_TEST(t.id == "only");
    BOOST_TEST(t.uses == "action:noop");
    BOOST_TEST(t.action == "noop");
    BOOST_TEST(t.needs.empty());
    BOOST_TEST(t.with.is_null());
    BOOST_TEST(!t.timeout_ms.has_value());
    BOOST_TEST(t.retry.max_attempts == 1);
    BOOST_TEST(t.retry.backoff_ms == 0);
    BOOST_TEST((t.retry.on == std::vector<retry_reason>{retry_reason::spawn_error}));
    BOOST_TEST((t.failure == failure_mode::stop));
    BOOST_TEST(!t.when.has_value());
    BOOST_TEST(!t.foreach.has_value());
    BOOST_TEST(!t.matrix.has_value());
    BOOST_TEST(wf.source_digest == sha256_digest(minimal));
    BOOST_TEST(wf.find_action("noop") == &wf.actions[0]);
    BOOST_TEST(wf.find_action("missing") == nullptr);
}

BOOST_AUTO_TEST_CASE(every_field_is_read) {
    const std::string text = R"(apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata:
  name: full
  description: every field
  labels: {team: infra, tier: "1"}
spec:
  inputs:
    files: [a.txt, b.txt]
    level: 3
  policy:
    workspaceRoot: repo
    writableRoots: [out]
    processAllowlist: [git, worker]
    environmentAllowlist: [TOKEN, PATH]
    secretFileRoots: [secrets]
    secretProcessAllowlist: [vault]
    approval: never
  runtime:
    maxConcurrency: 8
    defaultTimeoutSeconds: 30
    killGraceSeconds: 5
    budgets: {maxProcessOutputBytes: 1000, maxWallTimeSeconds: 60, maxTasks: 500, maxExpansionItems: 400}
  actions:
    status:
      kind: builtin.shell.exec
      description: git status
      command: /usr/bin/git
      args: [status, "--short", "", "${{ with.path }}"]
      cwd: repo
      env:
        TOKEN: {env: TOKEN}
        KEY: {file: secrets/key}
        PASS:
          process: {command: vault, args: [read, pass], timeoutSeconds: 7, outputLimitBytes: 100}
        MODE: {value: fast}
        EMPTY: {value: ""}
      timeoutSeconds: 10
      stdoutLimitBytes: 100
      stderrLimitBytes: 200
      combinedOutputLimitBytes: 300
      with: {path: .}
    boxed:
      kind: builtin.shell.exec
      command: worker
      isolation: container
      container:
        image: registry.example/worker@sha256:)" +
                             digest + R"(
        runtime: podman
        memoryLimitBytes: 33554432
        cpuLimitMillis: 500
        pidsLimit: 16
    ext:
      kind: extension.process
      command: /opt/ext
      protocolVersion: agentctl.dev/process-extension/v1
      idempotency: at_most_once
      inputSchema: {type: object, required: [x]}
      outputSchema: true
      capabilities: [read, write]
  tasks:
    - id: status
      uses: action:status
      needs: []
      with: {path: sub}
      timeoutSeconds: 30
      retry: {maxAttempts: 3, backoffMs: 250, on: [spawn_error, exit_nonzero, timeout]}
      failure: continue
      when: "tasks.x.output.exitCode == 0"
    - id: each
      uses: action:boxed
      needs: [status]
      foreach: {items: "${{ inputs.files }}", as: file, maxItems: 50}
    - id: grid
      uses: action:ext
      matrix:
        axes: {os: [linux, mac], level: "${{ inputs.levels }}"}
        maxItems: 8
  outputs: {summary: "${{ tasks.status.output.stdout }}"}
)";
    auto r = parse(text);
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    const workflow& wf = *r.document;
    BOOST_TEST(wf.api_version == "agentctl.dev/v1alpha1");
    BOOST_TEST(wf.metadata.description == "every field");
    BOOST_TEST_REQUIRE(wf.metadata.labels.size() == 2u);
    BOOST_TEST(wf.metadata.labels[1].first == "tier");
    BOOST_TEST(wf.metadata.labels[1].second == "1");
    BOOST_TEST(json::serialize(wf.inputs) == R"({"files":["a.txt","b.txt"],"level":3})");

    BOOST_TEST(wf.policy.workspace_root == "repo");
    BOOST_TEST((wf.policy.writable_roots == std::vector<std::string>{"out"}));
    BOOST_TEST((wf.policy.process_allowlist == std::vector<std::string>{"git", "worker"}));
    BOOST_TEST((wf.policy.environment_allowlist == std::vector<std::string>{"TOKEN", "PATH"}));
    BOOST_TEST((wf.policy.secret_file_roots == std::vector<std::string>{"secrets"}));
    BOOST_TEST((wf.policy.secret_process_allowlist == std::vector<std::string>{"vault"}));
    BOOST_TEST((wf.policy.approval == approval_mode::never));

    BOOST_TEST(wf.runtime.max_concurrency.value() == 8);
    BOOST_TEST(wf.runtime.default_timeout_ms == 30000);
    BOOST_TEST(wf.runtime.kill_grace_seconds == 5);
    BOOST_TEST(wf.runtime.budgets.max_process_output_bytes.value() == 1000u);
    BOOST_TEST(wf.runtime.budgets.max_wall_time_seconds.value() == 60u);
    BOOST_TEST(wf.runtime.budgets.max_tasks.value() == 500u);
    BOOST_TEST(wf.runtime.budgets.max_expansion_items.value() == 400u);

    BOOST_TEST_REQUIRE(wf.actions.size() == 3u);
    const action_spec& s = wf.actions[0];
    BOOST_TEST(s.name == "status");
    BOOST_TEST((s.kind == action_kind::shell_exec));
    BOOST_TEST(s.description == "git status");
    BOOST_TEST(s.command == "/usr/bin/git");
    BOOST_TEST((s.args == std::vector<std::string>{"status", "--short", "", "${{ with.path }}"}));
    BOOST_TEST(s.cwd.value() == "repo");
    BOOST_TEST_REQUIRE(s.env.size() == 5u);
    BOOST_TEST(s.env[0].name == "TOKEN");
    BOOST_TEST((s.env[0].source.kind == env_source::kind_t::env));
    BOOST_TEST(s.env[0].source.text == "TOKEN");
    BOOST_TEST((s.env[1].source.kind == env_source::kind_t::file));
    BOOST_TEST(s.env[1].source.text == "secrets/key");
    BOOST_TEST((s.env[2].source.kind == env_source::kind_t::process));
    BOOST_TEST(s.env[2].source.process.command == "vault");
    BOOST_TEST((s.env[2].source.process.args == std::vector<std::string>{"read", "pass"}));
    BOOST_TEST(s.env[2].source.process.timeout_seconds == 7);
    BOOST_TEST(s.env[2].source.process.output_limit_bytes == 100u);
    BOOST_TEST((s.env[3].source.kind == env_source::kind_t::value));
    BOOST_TEST(s.env[3].source.text == "fast");
    BOOST_TEST(!s.env[3].source.is_secret());
    BOOST_TEST(s.env[4].source.text == "");
    BOOST_TEST(s.timeout_ms.value() == 10000);
    BOOST_TEST(s.stdout_limit_bytes == 100u);
    BOOST_TEST(s.stderr_limit_bytes == 200u);
    BOOST_TEST(s.combined_output_limit_bytes == 300u);
    BOOST_TEST((s.isolation == isolation_mode::process));
    BOOST_TEST(!s.container.has_value());
    BOOST_TEST(!s.extension.has_value());
    BOOST_TEST(json::serialize(s.with) == R"({"path":"."})");

    const action_spec& b = wf.actions[1];
    BOOST_TEST((b.isolation == isolation_mode::container));
    BOOST_TEST_REQUIRE(b.container.has_value());
    BOOST_TEST(b.container->image == "registry.example/worker@sha256:" + digest);
    BOOST_TEST((b.container->runtime == engine_choice::podman));
    BOOST_TEST(b.container->memory_limit_bytes == 33554432u);
    BOOST_TEST(b.container->cpu_limit_millis == 500u);
    BOOST_TEST(b.container->pids_limit == 16u);

    const action_spec& e = wf.actions[2];
    BOOST_TEST((e.kind == action_kind::extension_process));
    BOOST_TEST_REQUIRE(e.extension.has_value());
    BOOST_TEST(e.extension->protocol_version == "agentctl.dev/process-extension/v1");
    BOOST_TEST((e.extension->idempotency_class == idempotency::at_most_once));
    BOOST_TEST(json::serialize(e.extension->input_schema) == R"({"type":"object","required":["x"]})");
    BOOST_TEST(e.extension->output_schema == json::value(true));
    BOOST_TEST((e.extension->capabilities == std::vector<std::string>{"read", "write"}));

    BOOST_TEST_REQUIRE(wf.tasks.size() == 3u);
    const task_spec& t0 = wf.tasks[0];
    BOOST_TEST(json::serialize(t0.with) == R"({"path":"sub"})");
    BOOST_TEST(t0.timeout_ms.value() == 30000);
    BOOST_TEST(t0.retry.max_attempts == 3);
    BOOST_TEST(t0.retry.backoff_ms == 250);
    BOOST_TEST(t0.retry.on.size() == 3u);
    BOOST_TEST((t0.failure == failure_mode::continue_run));
    BOOST_TEST(t0.when.value() == "tasks.x.output.exitCode == 0");
    const task_spec& t1 = wf.tasks[1];
    BOOST_TEST((t1.needs == std::vector<std::string>{"status"}));
    BOOST_TEST_REQUIRE(t1.foreach.has_value());
    BOOST_TEST(t1.foreach->items == json::value("${{ inputs.files }}"));
    BOOST_TEST(t1.foreach->as == "file");
    BOOST_TEST(t1.foreach->max_items == 50u);
    const task_spec& t2 = wf.tasks[2];
    BOOST_TEST_REQUIRE(t2.matrix.has_value());
    BOOST_TEST_REQUIRE(t2.matrix->axes.size() == 2u);
    BOOST_TEST(t2.matrix->axes[0].first == "os");
    BOOST_TEST(json::serialize(t2.matrix->axes[0].second) == R"(["linux","mac"])");
    BOOST_TEST(t2.matrix->axes[1].second == json::value("${{ inputs.levels }}"));
    BOOST_TEST(t2.matrix->max_items == 8u);
    BOOST_TEST(json::serialize(wf.outputs) == R"({"summary":"${{ tasks.status.output.stdout }}"})");
}

BOOST_AUTO_TEST_CASE(nested_defaults) {
    auto r =
        parse(with_action("      command: w\n      isolation: container\n      container: {image: sha256:" +
                          digest + "}\n      env:\n        K:\n          process: {command: vault}\n"));
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    const action_spec& a = r.document->actions[0];
    BOOST_TEST(a.stdout_limit_bytes == limits::default_stdout_limit_bytes);
    BOOST_TEST(a.combined_output_limit_bytes == limits::default_combined_limit_bytes);
    BOOST_TEST((a.container->runtime == engine_choice::auto_select));
    BOOST_TEST(a.container->memory_limit_bytes == limits::default_memory_bytes);
    BOOST_TEST(a.container->cpu_limit_millis == limits::default_cpu_millis);
    BOOST_TEST(a.container->pids_limit == limits::default_pids);
    BOOST_TEST(a.env[0].source.process.timeout_seconds == limits::default_secret_process_timeout_seconds);
    BOOST_TEST(a.env[0].source.process.output_limit_bytes == limits::default_secret_process_output_bytes);

    auto f = parse(with_action("", "builtin.assign") + "      foreach: {items: [1, 2]}\n");
    BOOST_TEST_REQUIRE(f.document.has_value(), codes(f));
    BOOST_TEST(f.document->tasks[0].foreach->as == "item");
    BOOST_TEST(f.document->tasks[0].foreach->max_items == limits::default_max_items);
}

BOOST_AUTO_TEST_CASE(json_values_follow_the_core_schema) {
    auto r = parse(with_inputs(R"(    n: ~
    n2: null
    n3:
    t: true
    f: false
    yes_word: yes
    capital: True
    i: -42
    plus: +7
    big: 18446744073709551615
    d: 1.5
    e: 2e3
    q: "10"
    s: '010'
    hex: 0x10
    list: [1, "a", [b], {c: d}]
    order: {z: 1, a: 2, m: 3}
    str: !!str 12
)"));
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    BOOST_TEST(
        json::serialize(r.document->inputs) ==
        R"({"n":null,"n2":null,"n3":null,"t":true,"f":false,"yes_word":"yes","capital":"True","i":-42,)"
        R"("plus":7,"big":18446744073709551615,"d":1.5E0,"e":2E3,"q":"10","s":"010","hex":"0x10",)"
        R"("list":[1,"a",["b"],{"c":"d"}],"order":{"z":1,"a":2,"m":3},"str":"12"})");
    BOOST_TEST(r.document->inputs.at("big").is_uint64());
    BOOST_TEST(r.document->inputs.at("i").is_int64());
}

BOOST_AUTO_TEST_CASE(numbers_json_cannot_hold_are_refused) {
    auto ok = parse(with_inputs("    a: .5\n    b: 1.\n    c: -2.5e3\n"));
    BOOST_TEST_REQUIRE(ok.document.has_value(), codes(ok));
    BOOST_TEST(json::serialize(ok.document->inputs) == R"({"a":5E-1,"b":1E0,"c":-2.5E3})");
    auto r =
        parse(with_inputs("    a: .inf\n    b: -.Inf\n    c: .nan\n    d: 1e400\n    e: 1e-400\n"
                          "    f: -9223372036854775809\n"));
    BOOST_TEST(has(r, "invalid_value", 7));
    BOOST_TEST(has(r, "invalid_value", 8));
    BOOST_TEST(has(r, "invalid_value", 9));
    BOOST_TEST(has(r, "out_of_range", 10));
    BOOST_TEST(has(r, "out_of_range", 11));
    BOOST_TEST(has(r, "out_of_range", 12));
    BOOST_TEST(r.diags.size() == 6u, codes(r));
}

BOOST_AUTO_TEST_CASE(locations_of_keys_and_items) {
    auto r = parse(minimal + "    - id: second\n      uses: action:noop\n      needs: [only, \"x\"]\n");
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    const workflow& wf = *r.document;
    BOOST_TEST(wf.locations.file() == "wf.yaml");
    auto needs1 = wf.where("spec.tasks[1].needs[1]");
    BOOST_TEST(needs1.file == "wf.yaml");
    BOOST_TEST(needs1.line == 14);
    BOOST_TEST(needs1.column == 21);
    auto task1 = wf.where("spec.tasks[1]");
    BOOST_TEST(task1.line == 12);
    BOOST_TEST(task1.column == 7);
    auto kind = wf.where("spec.actions.noop.kind");
    BOOST_TEST(kind.line == 8);
    BOOST_TEST(kind.column == 7);
    // An unrecorded path falls back to its nearest recorded ancestor.
    auto deeper = wf.where("spec.tasks[1].needs[1].nothing[3]");
    BOOST_TEST(deeper.line == 14);
    BOOST_TEST(deeper.column == 21);
    BOOST_TEST(wf.where("spec.tasks[9]").line == wf.where("spec.tasks").line);
}

BOOST_AUTO_TEST_CASE(locations_inside_json_data) {
    auto r = parse(with_inputs("    files:\n      - a\n      - {deep: [x, y]}\n"));
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    auto y = r.document->where("spec.inputs.files[1].deep[1]");
    BOOST_TEST(y.line == 9);
    BOOST_TEST(y.column == 20);
}

BOOST_AUTO_TEST_CASE(diagnostic_has_code_path_location_and_help) {
    auto r = parse(with_action("      command: git\n      timoutSeconds: 10\n"));
    BOOST_TEST(!r.document.has_value());
    const diagnostic* d = find(r, "unknown_key");
    BOOST_TEST_REQUIRE(d != nullptr, codes(r));
    BOOST_TEST((d->level == severity::error));
    BOOST_TEST(d->path == "spec.actions.a.timoutSeconds");
    BOOST_TEST(d->location.file == "wf.yaml");
    BOOST_TEST(d->location.line == 9);
    BOOST_TEST(d->location.column == 7);
    BOOST_TEST(d->help == "did you mean \"timeoutSeconds\"?");
    BOOST_TEST(r.diags.exit_code() == 2);
}

BOOST_AUTO_TEST_CASE(all_problems_are_reported_in_one_pass) {
    const std::string text = R"(apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: x}
spec:
  runtime: {maxConcurrency: 0, defaultTimeoutSeconds: "5"}
  actions:
    one:
      kind: builtin.shell.exec
      command: git
      timeoutSeconds: 0
      stdoutLimitBytes: 1.5
    two:
      kind: builtin.shell
      command: bin/x
  tasks:
    - id: A
      uses: agent:x
    - id: b
      uses: action:one
      retry: {maxAttempts: 99}
)";
    auto r = parse(text);
    BOOST_TEST(!r.document.has_value());
    BOOST_TEST(has(r, "out_of_range", 5));
    BOOST_TEST(has(r, "invalid_type", 5));
    BOOST_TEST(has(r, "out_of_range", 10));
    BOOST_TEST(has(r, "invalid_type", 11));
    BOOST_TEST(has(r, "invalid_value", 13));
    BOOST_TEST(has(r, "invalid_command", 14));
    BOOST_TEST(has(r, "invalid_task_id", 16));
    BOOST_TEST(has(r, "unsupported_feature", 17));
    BOOST_TEST(has(r, "out_of_range", 20));
    BOOST_TEST(r.diags.size() == 9u, codes(r));
    // Reported top to bottom.
    BOOST_TEST(std::is_sorted(
        r.diags.items().begin(), r.diags.items().end(),
        [](const diagnostic& a, const diagnostic& b) { return a.location.line < b.location.line; }));
}

BOOST_AUTO_TEST_CASE(strict_scalar_types) {
    struct probe {
        std::string value;
        std::string code;
    };
    for (const auto& p : std::vector<probe>{{"\"10\"", "invalid_type"},
                                            {"1.2345", "out_of_range"},
                                            {"0.0001", "out_of_range"},
                                            {"1e3", "out_of_range"},
                                            {".nan", "out_of_range"},
                                            {"5sec", "invalid_type"},
                                            {"0x10", "invalid_type"},
                                            {"true", "invalid_type"},
                                            {"[10]", "invalid_type"},
                                            {"{s: 1}", "invalid_type"},
                                            {"", "invalid_type"},
                                            {"0", "out_of_range"},
                                            {"86401", "out_of_range"},
                                            {"-1", "out_of_range"},
                                            {"99999999999999999999", "out_of_range"}}) {
        BOOST_TEST_CONTEXT("timeoutSeconds: " << p.value) {
            auto r = parse(with_action("      command: git\n      timeoutSeconds: " + p.value + "\n"));
            BOOST_TEST(!r.document.has_value());
            BOOST_TEST(has(r, p.code, 9), codes(r));
        }
    }
    for (const auto& ok : {"1", "86400", "+5", "007", "0.2", "1.5", "0.001"}) {
        auto r = parse(with_action("      command: git\n      timeoutSeconds: " + std::string(ok) + "\n"));
        BOOST_TEST(r.document.has_value(), ok << "\n" << codes(r));
    }
    // A plain scalar in a string field is its text, as the reference reads it; null is not.
    auto n = parse(with_action("      command: git\n      args: [-n, 5, \"5\", true, 1.50]\n"));
    BOOST_TEST_REQUIRE(n.document.has_value(), codes(n));
    BOOST_TEST(n.document->actions[0].args == (std::vector<std::string>{"-n", "5", "5", "true", "1.50"}),
               boost::test_tools::per_element());
    auto null = parse(with_action("      command: git\n      args: [-n, null]\n"));
    BOOST_TEST(has(null, "invalid_type", 9));
    BOOST_TEST(null.diags.size() == 1u, codes(null));
}

BOOST_AUTO_TEST_CASE(limit_boundaries) {
    auto accepts = [](const std::string& fields) { return parse(with_action(fields)).document.has_value(); };
    BOOST_TEST(accepts("      command: git\n      stdoutLimitBytes: 16777216\n"));
    BOOST_TEST(!accepts("      command: git\n      stdoutLimitBytes: 16777217\n"));
    BOOST_TEST(accepts("      command: git\n      combinedOutputLimitBytes: 1\n"));
    auto container = [&](const std::string& more) {
        return accepts(
            "      command: w\n      isolation: container\n      container:\n        image: sha256:" +
            digest + "\n" + more);
    };
    BOOST_TEST(container("        memoryLimitBytes: 16777216\n"));
    BOOST_TEST(container("        memoryLimitBytes: 17179869184\n"));
    BOOST_TEST(!container("        memoryLimitBytes: 17179869185\n"));
    BOOST_TEST(!container("        memoryLimitBytes: -1\n"));
    BOOST_TEST(container("        cpuLimitMillis: 64000\n"));
    BOOST_TEST(!container("        cpuLimitMillis: 64001\n"));
    BOOST_TEST(container("        pidsLimit: 1\n"));
    BOOST_TEST(!container("        pidsLimit: 0\n"));
}

BOOST_AUTO_TEST_CASE(image_references) {
    auto check = [](const std::string& image) {
        auto r = parse(
            with_action("      command: w\n      isolation: container\n      container:\n        image: \"" +
                        image + "\"\n"));
        return r.document.has_value() ? std::string("ok") : r.diags.items().at(0).code;
    };
    BOOST_TEST(check("sha256:" + digest) == "ok");
    BOOST_TEST(check("registry.example:5000/team/worker@sha256:" + digest) == "ok");
    // Docker and Podman resolve NAME:TAG@DIGEST by the digest; the tag is ignored.
    BOOST_TEST(check("alpine:3.20@sha256:" + digest) == "ok");
    const std::vector<std::string> bad_references = {"alpine",
                                                     "alpine:3.20",
                                                     ":latest",
                                                     "sha256:",
                                                     "alpine@sha256:" + digest.substr(1),
                                                     "alpine@sha256:" + digest + "0",
                                                     "alpine@sha256:" + digest.substr(0, 60) + "ABCD",
                                                     "alpine@sha512:" + digest,
                                                     "alpine@",
                                                     "@sha256:" + digest,
                                                     "-v/:/host@sha256:" + digest,
                                                     "a@b@sha256:" + digest,
                                                     "alpine@sha256:" + digest + "@sha256:" + digest,
                                                     "al pine@sha256:" + digest,
                                                     "alpine\\n@sha256:" + digest,
                                                     "alpine@sha256:" + digest + " ",
                                                     "sha256:" + digest.substr(0, 63) + "G"};
    for (const auto& bad : bad_references) {
        BOOST_TEST(check(bad) == "invalid_image_reference", bad);
    }
}

BOOST_AUTO_TEST_CASE(env_names) {
    auto env = [](const std::string& name) {
        auto r = parse(with_action("      command: git\n      env:\n        \"" + name + "\": {value: x}\n"));
        return r.document.has_value() ? std::string("ok") : r.diags.items().at(0).code;
    };
    BOOST_TEST(env("_A1") == "ok");
    BOOST_TEST(env(std::string(256, 'A')) == "ok");
    BOOST_TEST(env(std::string(257, 'A')) == "invalid_env_name");
    for (const std::string bad : {"", "=", "A=B", "A=B=C", "1ABC", "A B", "A\\nB", "A-B", "\\u00e9"})
        BOOST_TEST(env(bad) == "invalid_env_name", bad);
    auto src = parse(with_action("      command: git\n      env:\n        A: {env: \"PATH=/x\"}\n"));
    BOOST_TEST(has(src, "invalid_env_name", 10));
}

BOOST_AUTO_TEST_CASE(env_sources_may_pass_a_host_variable_through) {
    auto source = [](const std::string& text) {
        auto r = parse(with_action("      command: git\n      env:\n        A: " + text + "\n"));
        return r;
    };
    auto plain = source("{env: PATH}");
    BOOST_TEST_REQUIRE(plain.document.has_value(), codes(plain));
    BOOST_TEST(plain.document->actions[0].env[0].source.is_secret());
    auto through = source("{env: PATH, secret: false}");
    BOOST_TEST_REQUIRE(through.document.has_value(), codes(through));
    const env_source& s = through.document->actions[0].env[0].source;
    BOOST_TEST((s.kind == env_source::kind_t::env));
    BOOST_TEST(s.text == "PATH");
    BOOST_TEST(!s.is_secret());
    auto explicit_secret = source("{env: PATH, secret: true}");
    BOOST_TEST_REQUIRE(explicit_secret.document.has_value(), codes(explicit_secret));
    BOOST_TEST(explicit_secret.document->actions[0].env[0].source.is_secret());
    BOOST_TEST(source("{value: x}").document->actions[0].env[0].source.is_secret() == false);
    // Only a boolean, only on env sources.
    auto quoted = source("{env: PATH, secret: \"false\"}");
    BOOST_TEST(has(quoted, "invalid_type", 10), codes(quoted));
    BOOST_TEST(find(quoted, "invalid_type")->path == "spec.actions.a.env.A.secret");
    BOOST_TEST(has(source("{env: PATH, secret: no}"), "invalid_type", 10));
    auto file = source("{file: secrets/x, secret: false}");
    BOOST_TEST(has(file, "invalid_value", 10), codes(file));
    BOOST_TEST(find(file, "invalid_value")->message.find("always secrets") != std::string::npos);
    BOOST_TEST(has(source("{value: x, secret: true}"), "invalid_value", 10));
    BOOST_TEST(has(source("{secret: false}"), "invalid_value", 10));
}

BOOST_AUTO_TEST_CASE(container_rules) {
    auto engine = parse(with_action(
        "      command: w\n      env:\n        HOME: {value: /tmp}\n        OK: {value: x}\n"
        "        PATH: {env: PATH}\n      isolation: container\n      container: {image: sha256:" +
        digest + "}\n"));
    BOOST_TEST(has(engine, "engine_variable_not_allowed", 10));
    BOOST_TEST(has(engine, "engine_variable_not_allowed", 12));
    BOOST_TEST(engine.diags.size() == 2u, codes(engine));
    // The same names are fine on a host process action.
    auto host = parse(with_action("      command: w\n      env:\n        HOME: {value: /tmp}\n"));
    BOOST_TEST(host.document.has_value(), codes(host));

    auto assign = parse(with_action("      isolation: container\n      container: {image: sha256:" + digest +
                                        "}\n      timeoutSeconds: 5\n",
                                    "builtin.assign"));
    BOOST_TEST(has(assign, "isolation_not_allowed", 8));
    BOOST_TEST(has(assign, "isolation_not_allowed", 9));
    BOOST_TEST(has(assign, "limits_not_allowed", 10));
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_errors) {
    auto r = parse(with_inputs("    a: 1\n    b: {x: 1, x: 2}\n    a: 3\n"));
    BOOST_TEST(has(r, "duplicate_key", 8));
    BOOST_TEST(has(r, "duplicate_key", 9));
    // Large mappings take another path through the duplicate check.
    std::string many;
    for (int i = 0; i < 100; ++i) many += "    k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
    auto big = parse(with_inputs(many + "    k42: again\n"));
    BOOST_TEST(has(big, "duplicate_key", 107), codes(big));
    BOOST_TEST(big.diags.size() == 1u);
}

BOOST_AUTO_TEST_CASE(aliases_expand_within_a_budget) {
    auto ok = parse(with_inputs("    base: &b {retries: 2, tags: [x, y]}\n    copy: *b\n"));
    BOOST_TEST_REQUIRE(ok.document.has_value(), codes(ok));
    BOOST_TEST(ok.document->inputs.at("copy") == ok.document->inputs.at("base"));
    BOOST_TEST(ok.document->where("spec.inputs.copy.tags[1]").line > 0);

    std::string bomb = "    l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n";
    for (int i = 1; i < 9; ++i) {
        std::string prev = "*l" + std::to_string(i - 1);
        bomb += "    l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
        for (int k = 0; k < 10; ++k) bomb += (k ? ", " : "") + prev;
        bomb += "]\n";
    }
    auto r = parse(with_inputs(bomb));
    BOOST_TEST(!r.document.has_value());
    BOOST_TEST(has(r, "yaml_alias_limit"), codes(r));
    BOOST_TEST(r.diags.size() == 1u);

    auto loop = parse(with_inputs("    a: &a [x, *a]\n"));
    BOOST_TEST(has(loop, "yaml_alias_limit", 7), codes(loop));
}

BOOST_AUTO_TEST_CASE(deep_nesting_is_refused) {
    std::string deep = "    x: " + std::string(150, '[') + std::string(150, ']') + "\n";
    auto r = parse(with_inputs(deep));
    BOOST_TEST(has(r, "yaml_syntax", 7), codes(r));
    // Aliases cannot build depth that the text does not have.
    std::string chain = "    a0: &a0 " + std::string(60, '[') + std::string(60, ']') + "\n";
    chain += "    a1: &a1 " + std::string(59, '[') + "*a0" + std::string(59, ']') + "\n";
    auto c = parse(with_inputs(chain));
    BOOST_TEST(has(c, "yaml_alias_limit", 8), codes(c));
}

BOOST_AUTO_TEST_CASE(bytes_are_checked_before_parsing) {
    std::string text = minimal + "# trailing";
    text += '\0';
    text += "comment\n";
    auto r = parse(text);
    BOOST_TEST(has(r, "nul_byte", 12), codes(r));
    BOOST_TEST(r.diags.items().at(0).location.column == 11);

    auto bell = parse(minimal + "# ring \a\n");
    BOOST_TEST(has(bell, "yaml_syntax", 12), codes(bell));
    auto eot = parse(minimal + "# end \x04 here\n");
    BOOST_TEST(has(eot, "yaml_syntax", 12), codes(eot));
    auto latin1 = parse(minimal + "# caf\xe9\n");
    BOOST_TEST(has(latin1, "yaml_syntax", 12), codes(latin1));
    auto utf8 = parse(minimal + "# caf\xc3\xa9 \xe2\x82\xac\n");
    BOOST_TEST(utf8.document.has_value(), codes(utf8));
    auto escape = parse(with_inputs("    s: \"a\\0b\"\n    t: \"\\x00\"\n"));
    BOOST_TEST(has(escape, "nul_byte", 7));
    BOOST_TEST(has(escape, "nul_byte", 8));
}

BOOST_AUTO_TEST_CASE(yaml_syntax_errors_carry_the_mark) {
    auto r = parse("apiVersion: agentctl.dev/v1\nkind: [Workflow\nmetadata: {name: x}\n");
    BOOST_TEST_REQUIRE(r.diags.size() == 1u, codes(r));
    BOOST_TEST(r.diags.items()[0].code == "yaml_syntax");
    BOOST_TEST(r.diags.items()[0].location.line > 1);
    BOOST_TEST(r.diags.items()[0].location.column > 0);
    auto two = parse(minimal + "---\na: 1\n");
    BOOST_TEST(has(two, "yaml_syntax", 12), codes(two));
    auto empty = parse("# nothing here\n");
    BOOST_TEST(has(empty, "not_a_mapping", 1));
    auto scalar = parse("just text\n");
    BOOST_TEST(has(scalar, "not_a_mapping", 1));
}

// yaml-cpp recurses once per nesting level: the depth is checked before it sees the text,
// however the levels are written.
BOOST_AUTO_TEST_CASE(deep_nesting_never_reaches_the_yaml_library) {
    // Root, spec and inputs are three levels; the 98th bracket is the 101st level.
    for (char open : {'[', '{'}) {
        auto r = parse(with_inputs("    x: " + std::string(100000, open) + "\n"));
        BOOST_TEST_REQUIRE(r.diags.size() == 1u, codes(r));
        BOOST_TEST(r.diags.items()[0].code == "yaml_syntax");
        BOOST_TEST(r.diags.items()[0].location.line == 7);
        BOOST_TEST(r.diags.items()[0].location.column == 8 + 97);
        BOOST_TEST(r.diags.items()[0].message.find("deeper than 100 levels") != std::string::npos);
    }
    std::string mixed;
    for (int i = 0; i < 50000; ++i) mixed += i % 2 ? "{a: " : "[";
    BOOST_TEST(has(parse(with_inputs("    x: " + mixed + "\n")), "yaml_syntax", 7));

    // Block sequences: compact on one line, and one level per line, more indented each time.
    std::string compact;
    for (int i = 0; i < 100000; ++i) compact += "- ";
    auto c = parse(with_inputs("    x:\n      " + compact + "leaf\n"));
    BOOST_TEST(has(c, "yaml_syntax", 8), codes(c));
    BOOST_TEST(c.diags.size() == 1u);
    std::string stairs;
    for (int i = 0; i < 400; ++i) stairs += std::string(6 + 2 * i, ' ') + "-\n";
    auto s = parse(with_inputs("    x:\n" + stairs));
    BOOST_TEST(has(s, "yaml_syntax", 8 + 97), codes(s));
    std::string maps;
    for (int i = 0; i < 400; ++i) maps += std::string(6 + 2 * i, ' ') + "k:\n";
    BOOST_TEST(has(parse(with_inputs("    x:\n" + maps)), "yaml_syntax", 8 + 97));

    // Exactly 100 levels are accepted, written any way; brackets in quotes, comments and
    // block scalars are not nesting.
    auto flow100 = parse(with_inputs("    x: " + std::string(97, '[') + std::string(97, ']') + "\n"));
    BOOST_TEST(flow100.document.has_value(), codes(flow100));
    std::string block100;
    for (int i = 0; i < 97; ++i) block100 += std::string(6 + 2 * i, ' ') + "-\n";
    auto b100 = parse(with_inputs("    x:\n" + block100));
    BOOST_TEST(b100.document.has_value(), codes(b100));
    std::string noise = "    q: \"" + std::string(200, '[') + "\"\n    r: '" + std::string(200, '{') + "'\n" +
                        "    # " + std::string(200, '[') + "\n    s: |\n      " + std::string(200, '[') +
                        "\n      - - - " + std::string(200, '{') + "\n    t: a[b{c\n";
    auto n = parse(with_inputs(noise));
    BOOST_TEST(n.document.has_value(), codes(n));
    BOOST_TEST(n.document->inputs.at("t") == json::value("a[b{c"));
}

BOOST_AUTO_TEST_CASE(huge_scalars_are_read_whole) {
    const std::size_t size = limits::max_document_bytes - 4096;
    const std::string big(size, 'x');
    for (std::string form : {"plain", "double", "single", "literal"}) {
        std::string value = form == "plain"    ? big
                            : form == "double" ? "\"" + big + "\""
                            : form == "single" ? "'" + big + "'"
                                               : "|\n      " + big;
        auto r = parse(with_inputs("    big: " + value + "\n"));
        BOOST_TEST_CONTEXT(form) {
            BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
            std::size_t expected = form == "literal" ? size + 1 : size;  // the literal keeps its newline
            BOOST_TEST(r.document->inputs.at("big").as_string().size() == expected);
        }
    }
}

// Where yaml-cpp accepts text that is not valid YAML, or words a problem its own way, the
// user sees our diagnostic.
BOOST_AUTO_TEST_CASE(what_yaml_cpp_would_accept_is_refused) {
    // A quoted scalar left open at the end of the text (yaml-cpp reads it as closed).
    auto dq = parse(with_inputs("    s: \"open\n"));
    BOOST_TEST(has(dq, "yaml_syntax", 7), codes(dq));
    BOOST_TEST(dq.diags.items().at(0).location.column == 8);
    BOOST_TEST(dq.diags.items().at(0).message.find("never closed") != std::string::npos);
    auto sq = parse(with_inputs("    s: 'it''s\n"));
    BOOST_TEST(has(sq, "yaml_syntax", 7), codes(sq));
    auto tagged = parse(with_inputs("    s: !!str \"open\n"));
    BOOST_TEST(has(tagged, "yaml_syntax", 7), codes(tagged));
    // A last line without `:` in a block mapping (yaml-cpp reads a key with a null value;
    // elsewhere in the document it is a syntax error of its own).
    auto colon = parse(minimal + "      stray\n");
    BOOST_TEST_REQUIRE(colon.diags.size() == 1u, codes(colon));
    BOOST_TEST(has(colon, "yaml_syntax", 12));
    BOOST_TEST(colon.diags.items()[0].location.column == 7);
    BOOST_TEST(colon.diags.items()[0].message == "expected `:` after this key");
    BOOST_TEST(has(parse(minimal + "stray\n"), "yaml_syntax", 12));
    BOOST_TEST(has(parse(with_inputs("    a: 1\n    b\n    c: 3\n")), "yaml_syntax", 9));
    // ...but an explicit key without a value, an empty value and a flow entry are fine.
    auto fine = parse(with_inputs("    ? a\n    b:\n    c: {d, e: 1}\n"));
    BOOST_TEST_REQUIRE(fine.document.has_value(), codes(fine));
    BOOST_TEST(json::serialize(fine.document->inputs) == R"({"a":null,"b":null,"c":{"d":null,"e":1}})");
    // Text after the document that yaml-cpp reads as a second document without `---`.
    auto after_list = parse("- a\nb: 1\n");
    BOOST_TEST_REQUIRE(after_list.diags.size() == 1u, codes(after_list));
    BOOST_TEST(has(after_list, "yaml_syntax", 2));
    BOOST_TEST(after_list.diags.items()[0].message == "this line does not continue the document above");
    BOOST_TEST(has(parse("{a: 1}\nb: 2\n"), "yaml_syntax", 2));
    BOOST_TEST(has(parse(minimal + "...\nmore: 1\n"), "yaml_syntax", 13));
    // A lone carriage return is a line end to some parsers and text to others.
    auto cr = parse("apiVersion: agentctl.dev/v1\rkind: Workflow\n");
    BOOST_TEST_REQUIRE(cr.diags.size() == 1u, codes(cr));
    BOOST_TEST(cr.diags.items()[0].code == "yaml_syntax");
    BOOST_TEST(cr.diags.items()[0].location.column == 28);
    BOOST_TEST(cr.diags.items()[0].help == "end lines with LF or CRLF");
    auto crlf = minimal;
    for (std::size_t i = crlf.find('\n'); i != std::string::npos; i = crlf.find('\n', i + 2))
        crlf.insert(i, "\r");
    BOOST_TEST(parse(crlf).document.has_value());
    // Escapes that are not Unicode characters.
    BOOST_TEST(has(parse(with_inputs("    s: \"\\ud800\"\n")), "yaml_syntax", 7));
    BOOST_TEST(has(parse(with_inputs("    s: \"\\U00110000\"\n")), "yaml_syntax", 7));
    auto escapes = parse(with_inputs("    s: \"\\u00e9\\U0001F600\\x41\"\n"));
    BOOST_TEST_REQUIRE(escapes.document.has_value(), codes(escapes));
    BOOST_TEST(escapes.document->inputs.at("s") == json::value("\xc3\xa9\xf0\x9f\x98\x80"
                                                               "A"));
}

BOOST_AUTO_TEST_CASE(syntax_errors_are_worded_by_us) {
    struct example {
        std::string text;
        int line;
        int column;
        std::string message;
    };
    const std::vector<example> examples = {
        {"a: [1, 2\n", 2, 1, "invalid YAML: a `[` list is not closed"},
        {"a: {x: 1\n", 2, 1, "invalid YAML: a `{` mapping is not closed"},
        {"a: [1, 2]]\n", 1, 10, "invalid YAML: this `]` or `}` closes nothing"},
        {"a: b: c\n", 1, 5, "invalid YAML: a `:` mapping value is not allowed here"},
        {"a:   - b\n", 1, 6, "invalid YAML: a `- ` list item is not allowed here"},
        {"a: \"x\" y\n", 1, 8, "invalid YAML: this does not continue the mapping above"},
        {"a: @x\n", 1, 4, "invalid YAML: no YAML value can start with this character"},
        {"a: \"\\q\"\n", 1, 7, "invalid YAML: an unknown escape in a double-quoted string"},
        {"a: &x &y 1\n", 1, 7, "invalid YAML: a node may have one tag and one anchor; an alias has neither"},
        {"a: *\n", 1, 5, "invalid YAML: an anchor or alias without a valid name"},
        {"a: *nowhere\n", 1, 4, "unknown alias *nowhere"},
        {"%YAML 2.0\n---\na: 1\n", 1, 1, "invalid YAML: an invalid %YAML or %TAG directive"},
        {"a:\n  - 1\n  b: 2\n", 3, 3, "invalid YAML: this does not continue the mapping above"},
        {"caf\xc3\xa9: [x, \xc3\xa9]]\n", 1, 13, "invalid YAML: this `]` or `}` closes nothing"},
    };
    for (const auto& e : examples) {
        auto r = parse(e.text);
        BOOST_TEST_CONTEXT(e.text) {
            BOOST_TEST_REQUIRE(r.diags.size() == 1u, codes(r));
            const diagnostic& d = r.diags.items()[0];
            BOOST_TEST(d.code == "yaml_syntax");
            BOOST_TEST(d.location.line == e.line);
            BOOST_TEST(d.location.column == e.column);
            BOOST_TEST(d.message == e.message);
            BOOST_TEST(!d.help.empty());
        }
    }
    // Columns count characters, as in the byte checks: `!!int` after a two-byte character.
    auto tag = parse(with_inputs("    caf\xc3\xa9: {\xc3\xa9: !!int 3}\n"));
    const diagnostic* t = find(tag, "invalid_type");
    BOOST_TEST_REQUIRE(t != nullptr, codes(tag));
    BOOST_TEST(t->location.column == 12);
}

BOOST_AUTO_TEST_CASE(uses_forms) {
    auto uses = [](const std::string& value) {
        auto r = parse(minimal.substr(0, minimal.find("uses:")) + "uses: \"" + value + "\"\n");
        return r.document.has_value() ? std::string("ok") : r.diags.items().at(0).code;
    };
    BOOST_TEST(uses("action:noop") == "ok");
    BOOST_TEST(uses("action:") == "invalid_uses");
    BOOST_TEST(uses("action:a b") == "invalid_uses");
    BOOST_TEST(uses("noop") == "invalid_uses");
    BOOST_TEST(uses("actions:noop") == "invalid_uses");
    BOOST_TEST(uses("agent:x") == "unsupported_feature");
    BOOST_TEST(uses("workflow:x") == "ok");  // a sub-workflow: whether `x` exists is the plan's
    BOOST_TEST(uses("workflow:pack.x") == "unsupported_feature");
    BOOST_TEST(uses("router") == "missing_field");  // a router needs its `route`
    auto agent = parse(minimal.substr(0, minimal.find("uses:")) + "uses: agent:x\n");
    BOOST_TEST_REQUIRE(find(agent, "unsupported_feature"));
    BOOST_TEST(find(agent, "unsupported_feature")->message.find("runs process workflows only") !=
               std::string::npos);
    // Routers and sub-workflows run (docs/CONTROL_FLOW.md): neither is an unsupported feature.
    auto router = parse(minimal.substr(0, minimal.find("uses:")) + "uses: router\n");
    BOOST_TEST(!find(router, "unsupported_feature"));
    auto invocation = parse(minimal.substr(0, minimal.find("uses:")) + "uses: workflow:x\n");
    BOOST_TEST(!find(invocation, "unsupported_feature"));
}

BOOST_AUTO_TEST_CASE(commands) {
    auto command = [](const std::string& value) {
        auto r = parse(with_action("      command: \"" + value + "\"\n"));
        return r.document.has_value() ? std::string("ok") : r.diags.items().at(0).code;
    };
    BOOST_TEST(command("git") == "ok");
    BOOST_TEST(command("/usr/bin/git") == "ok");
    BOOST_TEST(command("/opt/My Tools/run") == "ok");
    BOOST_TEST(command("") == "empty_value");
    BOOST_TEST(command("./git") == "invalid_command");
    BOOST_TEST(command("bin/git") == "invalid_command");
    BOOST_TEST(command("/usr/bin/") == "invalid_command");
    BOOST_TEST(command("..") == "invalid_command");
    BOOST_TEST(command("git status") == "invalid_command");
    BOOST_TEST(command("${{ inputs.tool }}") == "invalid_command");
    BOOST_TEST(command("g\\0it") == "nul_byte");
}

BOOST_AUTO_TEST_CASE(missing_required_fields_point_at_their_mapping) {
    auto r = parse(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {}\nspec:\n  actions:\n    a: {}\n"
        "  tasks:\n    - {}\n");
    BOOST_TEST(has(r, "missing_field", 3));
    const diagnostic* d = find(r, "missing_field");
    BOOST_TEST_REQUIRE(d != nullptr);
    BOOST_TEST(d->path == "metadata.name");
    auto paths = std::vector<std::string>{};
    for (const auto& x : r.diags.items())
        if (x.code == "missing_field") paths.push_back(x.path);
    BOOST_TEST((paths == std::vector<std::string>{"metadata.name", "spec.actions.a.kind", "spec.tasks[0].id",
                                                  "spec.tasks[0].uses"}));
}

BOOST_AUTO_TEST_CASE(hundred_thousand_item_array) {
    std::string items;
    items.reserve(800000);
    for (int i = 0; i < 100000; ++i) items += (i ? ", " : "") + std::to_string(i);
    auto r = parse(with_inputs("    items: [" + items + "]\n"));
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    const auto& array = r.document->inputs.at("items").as_array();
    BOOST_TEST(array.size() == 100000u);
    BOOST_TEST(array.back() == json::value(99999));
    BOOST_TEST(r.document->where("spec.inputs.items[99999]").line == 7);
}

BOOST_AUTO_TEST_CASE(size_cap) {
    std::string big(limits::max_document_bytes + 1, '#');
    auto r = parse(big);
    BOOST_TEST_REQUIRE(r.diags.size() == 1u);
    BOOST_TEST(r.diags.items()[0].code == "file_too_large");

    scratch_dir dir;
    // A valid document padded with a comment to exactly the cap is accepted.
    std::string exact = minimal + "#";
    exact += std::string(limits::max_document_bytes - exact.size() - 1, 'x') + "\n";
    BOOST_TEST_REQUIRE(exact.size() == limits::max_document_bytes);
    auto ok = load_workflow(dir.write("exact.yaml", exact));
    BOOST_TEST(ok.document.has_value(), codes(ok));
    auto over = load_workflow(dir.write("over.yaml", exact + "\n"));
    BOOST_TEST(!over.document.has_value());
    BOOST_TEST(has(over, "file_too_large"), codes(over));
    BOOST_TEST(over.diags.items().at(0).location.file == (dir.path / "over.yaml").string());
}

BOOST_AUTO_TEST_CASE(unreadable_files) {
    scratch_dir dir;
    auto missing = load_workflow((dir.path / "absent.yaml").string());
    BOOST_TEST(has(missing, "file_unreadable"), codes(missing));
    auto directory = load_workflow(dir.path.string());
    BOOST_TEST(has(directory, "file_unreadable"), codes(directory));
    auto good = load_workflow(dir.write("wf.yaml", minimal));
    BOOST_TEST_REQUIRE(good.document.has_value(), codes(good));
    BOOST_TEST(good.document->locations.file() == (dir.path / "wf.yaml").string());
}

BOOST_AUTO_TEST_CASE(inputs_files) {
    scratch_dir dir;
    auto from_json =
        load_inputs_file(dir.write("in.json", R"({"files": ["a", "b"], "n": 3, "s": "x\u00e9"})"));
    BOOST_TEST_REQUIRE(from_json.inputs.has_value());
    BOOST_TEST(json::serialize(*from_json.inputs) == R"({"files":["a","b"],"n":3,"s":"xé"})");
    auto from_yaml = load_inputs_file(dir.write("in.yaml", "files: [a]\nlevel: 2\n"));
    BOOST_TEST_REQUIRE(from_yaml.inputs.has_value());
    BOOST_TEST(json::serialize(*from_yaml.inputs) == R"({"files":["a"],"level":2})");
    auto list = load_inputs_file(dir.write("list.json", "[1, 2]"));
    BOOST_TEST(!list.inputs.has_value());
    BOOST_TEST(list.diags.items().at(0).code == "not_a_mapping");
    auto dup = load_inputs_file(dir.write("dup.json", R"({"a": 1, "a": 2})"));
    BOOST_TEST(!dup.inputs.has_value());
    BOOST_TEST(dup.diags.items().at(0).code == "duplicate_key");
    // Over the workflow's cap: an inputs file is data.
    auto blank = load_inputs_file(dir.write("blank.yaml", std::string(limits::max_document_bytes + 1, ' ')));
    BOOST_TEST(blank.diags.items().at(0).code == "not_a_mapping");
    auto empty = load_inputs_file(dir.write("empty.json", ""));
    BOOST_TEST(empty.diags.items().at(0).code == "json_syntax");
    auto missing = load_inputs_file((dir.path / "none.json").string());
    BOOST_TEST(missing.diags.items().at(0).code == "file_unreadable");
    auto directory = load_inputs_file(dir.path.string());
    BOOST_TEST(directory.diags.items().at(0).code == "file_unreadable");
}

BOOST_AUTO_TEST_CASE(inputs_files_in_json_are_checked_like_documents) {
    // Duplicate keys anywhere, located at the second key.
    auto dup = parse_inputs(
        "{\n  \"a\": {\"x\": 1,\n        \"x\": 2},\n  \"b\": [{\"k\": 1, \"k\": 2}]\n}\n", "in.json");
    BOOST_TEST_REQUIRE(dup.diags.size() == 2u);
    BOOST_TEST(!dup.inputs.has_value());
    const auto& d0 = dup.diags.items()[0];
    BOOST_TEST(d0.code == "duplicate_key");
    BOOST_TEST(d0.location.file == "in.json");
    BOOST_TEST(d0.location.line == 3);
    BOOST_TEST(d0.location.column == 9);
    BOOST_TEST(d0.message == "duplicate key `x` in `a`");
    BOOST_TEST(dup.diags.items()[1].location.line == 4);
    BOOST_TEST(dup.diags.items()[1].message == "duplicate key `k` in `b[0]`");
    // Syntax errors in a file named *.json are JSON errors, located; other names fall back
    // to YAML, which reads `"b": }` as a null.
    auto bad = parse_inputs("{\"a\": 1,\n \"b\": }\n", "in.json");
    BOOST_TEST_REQUIRE(bad.diags.size() == 1u);
    BOOST_TEST(bad.diags.items()[0].code == "json_syntax");
    BOOST_TEST(bad.diags.items()[0].location.line == 2);
    BOOST_TEST(bad.diags.items()[0].location.column == 7);
    BOOST_TEST(parse_inputs("{\"a\": 1} x", "in.json").diags.items().at(0).code == "json_syntax");
    auto flow = parse_inputs("{\"a\": 1,\n \"b\": }\n", "in.yaml");
    BOOST_TEST_REQUIRE(flow.inputs.has_value());
    BOOST_TEST(flow.inputs->at("b").is_null());
    // Numbers the documents refuse are refused here too; so are NUL characters.
    auto numbers =
        parse_inputs(R"({"big": 1e400, "tiny": 1e-400, "long": 99999999999999999999, "ok": 1.5,)"
                     R"( "max": 18446744073709551615, "min": -9223372036854775808, "s": "a\u0000b"})",
                     "in.json");
    std::vector<std::string> found;
    for (const auto& d : numbers.diags.items()) found.push_back(d.code);
    BOOST_TEST(
        (found == std::vector<std::string>{"out_of_range", "out_of_range", "out_of_range", "nul_byte"}));
    auto limits_ok =
        parse_inputs(R"({"max": 18446744073709551615, "min": -9223372036854775808, "d": 2.5e-3})", "x");
    BOOST_TEST_REQUIRE(limits_ok.inputs.has_value());
    BOOST_TEST(limits_ok.inputs->at("max").is_uint64());
    BOOST_TEST(limits_ok.inputs->at("min").is_int64());
    // Nesting: the documents' limit of 100 levels.
    std::string deep100 = "{\"x\": " + std::string(99, '[') + std::string(99, ']') + "}";
    BOOST_TEST(parse_inputs(deep100, "x").inputs.has_value());
    std::string deep101 = "{\"x\": " + std::string(100, '[') + std::string(100, ']') + "}";
    auto too_deep = parse_inputs(deep101, "x");
    BOOST_TEST_REQUIRE(!too_deep.diags.empty());
    BOOST_TEST(too_deep.diags.items()[0].message.find("deeper than 100") != std::string::npos);
    // Not JSON: read as YAML, duplicates included.
    auto yaml = parse_inputs("a: 1\nb: {c: 2, c: 3}\n", "in.yaml");
    BOOST_TEST(!yaml.inputs.has_value());
    BOOST_TEST(has(parse_result{std::nullopt, std::nullopt, yaml.diags, {}}, "duplicate_key", 2));
    // Large JSON is fine (the document cap does not apply); large YAML is not read.
    std::string many = "{\"items\": [";
    for (int i = 0; i < 200000; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
    many += "]}";
    BOOST_TEST_REQUIRE(many.size() > limits::max_document_bytes);
    auto large = parse_inputs(many, "big.json");
    BOOST_TEST_REQUIRE(large.inputs.has_value());
    BOOST_TEST(large.inputs->at("items").as_array().size() == 200000u);
    std::string big_yaml = "a: " + std::string(limits::max_yaml_inputs_file_bytes, 'x') + "\n";
    auto refused = parse_inputs(big_yaml, "big.yaml");
    BOOST_TEST_REQUIRE(refused.diags.size() == 1u);
    BOOST_TEST(refused.diags.items()[0].code == "json_syntax");
    BOOST_TEST(refused.diags.items()[0].help.find("YAML inputs files are read up to") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(inputs_file_size_cap) {
    scratch_dir dir;
    // A sparse file: its size is checked before anything is read.
    std::string path = dir.write("huge.json", "{}");
    fs::resize_file(path, limits::max_inputs_file_bytes + 1);
    auto r = load_inputs_file(path);
    BOOST_TEST_REQUIRE(r.diags.size() == 1u);
    BOOST_TEST(r.diags.items()[0].code == "file_too_large");
}

namespace {
// Runs `f` with standard input reading `content`.
template <class F>
auto with_stdin(const scratch_dir& dir, const std::string& content, F f) {
    std::string path = dir.write("stdin", content);
    int saved = ::dup(0);
    BOOST_TEST_REQUIRE(saved >= 0);
    BOOST_TEST_REQUIRE(std::freopen(path.c_str(), "r", stdin) != nullptr);
    auto r = f();
    ::dup2(saved, 0);
    ::close(saved);
    return r;
}

std::string items_text(const items_result& r) {
    return r.items ? json::serialize(*r.items)
                   : "error: " + (r.diags.empty() ? std::string() : r.diags.items()[0].message);
}
}  // namespace

BOOST_AUTO_TEST_CASE(stdin_as_a_file) {
    scratch_dir dir;
    auto inputs = with_stdin(dir, R"({"n": 1})", [] { return load_inputs_file("-"); });
    BOOST_TEST_REQUIRE(inputs.inputs.has_value());
    BOOST_TEST(inputs.inputs->at("n") == json::value(1));
    auto bad = with_stdin(dir, "{\"n\": [}", [] { return load_inputs_file("-"); });
    BOOST_TEST_REQUIRE(!bad.diags.empty());
    BOOST_TEST(bad.diags.items()[0].location.file == "<stdin>");
    auto items = with_stdin(dir, "a\nb\n", [] { return load_items_file("-"); });
    BOOST_TEST(items_text(items) == R"(["a","b"])");
}

BOOST_AUTO_TEST_CASE(items_files) {
    scratch_dir dir;
    auto lines = [&](const std::string& content, item_separator sep = item_separator::line) {
        return items_text(load_items_file(dir.write("items", content), sep));
    };
    BOOST_TEST(lines("a\nb\nc\n") == R"(["a","b","c"])");
    BOOST_TEST(lines("a\nb\nc") == R"(["a","b","c"])");  // a last line without newline counts
    BOOST_TEST(lines("a\r\nb\r\n") == R"(["a","b"])");   // CRLF: the CR is dropped
    BOOST_TEST(lines("a\rb\n") == "[\"a\\rb\"]");        // a CR inside a line is kept
    BOOST_TEST(lines("a\n\nb\n") == R"(["a","","b"])");  // an empty line is an empty item
    BOOST_TEST(lines("\n") == R"([""])");
    BOOST_TEST(lines("") == "[]");
    BOOST_TEST(lines(" spaced  item \n") == R"([" spaced  item "])");
    BOOST_TEST(lines(std::string("a\0b\0", 4), item_separator::nul) == R"(["a","b"])");
    BOOST_TEST(lines(std::string("x y\nz\r\n\0w", 9), item_separator::nul) == "[\"x y\\nz\\r\\n\",\"w\"]");
    BOOST_TEST(lines(std::string("\0", 1), item_separator::nul) == R"([""])");
    // Invalid UTF-8 names its line; every bad line is reported.
    auto bad = load_items_file(dir.write("bad", "ok\nfine\ncaf\xe9\nok\n\xff\n"));
    BOOST_TEST(!bad.items.has_value());
    BOOST_TEST_REQUIRE(bad.diags.size() == 2u);
    BOOST_TEST(bad.diags.items()[0].code == "invalid_utf8");
    BOOST_TEST(bad.diags.items()[0].location.line == 3);
    BOOST_TEST(bad.diags.items()[0].message.find("line 3 of") == 0);
    BOOST_TEST(bad.diags.items()[1].location.line == 5);
    auto nul = load_items_file(dir.write("nul", std::string("a\nb\0c\n", 6)));
    BOOST_TEST_REQUIRE(nul.diags.size() == 1u);
    BOOST_TEST(nul.diags.items()[0].code == "nul_byte");
    BOOST_TEST(nul.diags.items()[0].location.line == 2);
    auto missing = load_items_file((dir.path / "none").string());
    BOOST_TEST(missing.diags.items().at(0).code == "file_unreadable");
    // Streamed: 300 000 items (over the document cap), read in chunks.
    std::string many;
    for (int i = 0; i < 300000; ++i) many += "item-" + std::to_string(i) + "\n";
    auto big = load_items_file(dir.write("many", many));
    BOOST_TEST_REQUIRE(big.items.has_value());
    BOOST_TEST(big.items->size() == 300000u);
    BOOST_TEST(big.items->back() == json::value("item-299999"));
}

BOOST_AUTO_TEST_CASE(items_split_the_same_in_any_chunks) {
    const std::string text = "first\r\nsecond\n\nthird\r\nlast";
    items_splitter whole("f", item_separator::line);
    whole.feed(text);
    const std::string expected = items_text(whole.finish());
    BOOST_TEST(expected == R"(["first","second","","third","last"])");
    for (std::size_t size : {1, 2, 3, 7}) {
        items_splitter split("f", item_separator::line);
        for (std::size_t i = 0; i < text.size(); i += size)
            split.feed(std::string_view(text).substr(i, size));
        BOOST_TEST(items_text(split.finish()) == expected, "chunks of " << size);
    }
}

// An item is at most limits::max_item_bytes (131 071: the longest argument Linux passes), in
// any chunks, either separator, a CRLF line and a last item without separator included; a
// longer one is item_too_long at its line (or number), and a string of an inputs file too.
BOOST_AUTO_TEST_CASE(items_are_at_most_one_argument_long) {
    const std::size_t longest = limits::max_item_bytes;
    BOOST_TEST(longest == 131071u);
    const std::string fits(longest, 'a'), over(longest + 1, 'a');
    struct text_case {
        std::string text;
        item_separator separator;
        int bad_line;  // 0: every item fits
    };
    const std::string n(1, '\0');
    const std::vector<text_case> cases = {
        {"x\n" + fits + "\n", item_separator::line, 0},
        {"x\n" + fits + "\r\n", item_separator::line, 0},
        {"x\n" + fits, item_separator::line, 0},
        {"x\n" + over + "\ny\n", item_separator::line, 2},
        {"x\n" + over + "\r\n", item_separator::line, 2},
        {"x\n" + over, item_separator::line, 2},
        {"x\n" + over + over + "\n", item_separator::line, 2},
        {"x" + n + fits + n, item_separator::nul, 0},
        {"x" + n + fits + "\r" + n, item_separator::nul, 2},  // a CR is data here
        {"x" + n + over, item_separator::nul, 2},
    };
    for (const auto& c : cases)
        for (std::size_t size :
             {std::size_t{1000}, std::size_t{65536}, longest, longest + 1, c.text.size()}) {
            items_splitter split("f", c.separator);
            for (std::size_t i = 0; i < c.text.size(); i += size)
                split.feed(std::string_view(c.text).substr(i, size));
            auto r = split.finish();
            if (c.bad_line == 0) {
                BOOST_TEST_REQUIRE(r.items.has_value(), "chunks of " << size);
                BOOST_TEST(r.items->size() == 2u);
                BOOST_TEST(r.items->at(1).as_string().size() >= longest);
                continue;
            }
            BOOST_TEST(!r.items.has_value(), "chunks of " << size);
            BOOST_TEST_REQUIRE(r.diags.size() == 1u, "chunks of " << size);
            const auto& d = r.diags.items()[0];
            BOOST_TEST(d.code == "item_too_long");
            BOOST_TEST(
                d.message.find(c.separator == item_separator::line ? "line 2 of f" : "item 2 of f") == 0,
                d.message);
            BOOST_TEST(d.message.find("131071 bytes") != std::string::npos, d.message);
            BOOST_TEST(d.location.line == (c.separator == item_separator::line ? 2 : 0));
        }

    // A string of an inputs file: refused at its line and column.
    auto refused_at = [](const inputs_result& r, int line, int column) {
        BOOST_TEST_REQUIRE(r.diags.size() == 1u);
        const auto& d = r.diags.items()[0];
        BOOST_TEST(d.code == "item_too_long");
        BOOST_TEST(d.location.line == line);
        BOOST_TEST(d.location.column == column);
        BOOST_TEST(d.message.find("131072 bytes") != std::string::npos, d.message);
    };
    BOOST_TEST(!parse_inputs(R"({"a": [")" + fits + R"("]})", "in.json").diags.has_errors());
    auto json_over = parse_inputs("{\"a\": [\"x\",\n  \"" + over + "\"]}", "in.json");
    refused_at(json_over, 2, 3);
    BOOST_TEST(json_over.diags.items()[0].message.find("`a[1]` is") == 0, json_over.diags.items()[0].message);
    BOOST_TEST(!parse_inputs("a:\n  - " + fits + "\n", "in.yaml").diags.has_errors());
    refused_at(parse_inputs("a:\n  - x\n  - '" + over + "'\n", "in.yaml"), 3, 5);
}

BOOST_AUTO_TEST_CASE(input_assignments) {
    std::string key;
    json::value value;
    diagnostics diags;
    BOOST_TEST(parse_input_assignment("n=3", key, value, diags));
    BOOST_TEST(key == "n");
    BOOST_TEST(value == json::value(3));
    BOOST_TEST(parse_input_assignment("files=[\"a\",\"b\"]", key, value, diags));
    BOOST_TEST(json::serialize(value) == R"(["a","b"])");
    BOOST_TEST(parse_input_assignment("name=hello world", key, value, diags));
    BOOST_TEST(value == json::value("hello world"));
    BOOST_TEST(parse_input_assignment("zip=01234", key, value, diags));
    BOOST_TEST(value == json::value("01234"));
    BOOST_TEST(parse_input_assignment("expr=a=b", key, value, diags));
    BOOST_TEST(key == "expr");
    BOOST_TEST(value == json::value("a=b"));
    BOOST_TEST(parse_input_assignment("empty=", key, value, diags));
    BOOST_TEST(value == json::value(""));
    BOOST_TEST(diags.empty());
    BOOST_TEST(parse_input_assignment("x=9.333333333333299e+59", key, value, diags));
    BOOST_TEST(value.as_double() == 9.333333333333299e+59);  // exact, unlike Boost.JSON's own
    BOOST_TEST(diags.empty());
    diagnostics dup;
    BOOST_TEST(!parse_input_assignment(R"(m={"a": 1, "a": 2})", key, value, dup));
    BOOST_TEST_REQUIRE(dup.size() == 1u);
    BOOST_TEST(dup.items()[0].message == "--input m: duplicate key `a` in the value");
    BOOST_TEST(!parse_input_assignment("novalue", key, value, diags));
    BOOST_TEST(!parse_input_assignment("=3", key, value, diags));
    BOOST_TEST(diags.size() == 2u);
    BOOST_TEST(diags.items()[0].code == "invalid_input_assignment");
}

BOOST_AUTO_TEST_CASE(names_of_enumerations) {
    BOOST_TEST(to_string(approval_mode::high_risk) == "high_risk");
    BOOST_TEST(to_string(action_kind::shell_exec) == "builtin.shell.exec");
    BOOST_TEST(to_string(action_kind::extension_process) == "extension.process");
    BOOST_TEST(to_string(action_kind::assign) == "builtin.assign");
    BOOST_TEST(to_string(isolation_mode::container) == "container");
    BOOST_TEST(to_string(engine_choice::auto_select) == "auto");
    BOOST_TEST(to_string(idempotency::at_most_once) == "at_most_once");
    BOOST_TEST(to_string(retry_reason::exit_nonzero) == "exit_nonzero");
    BOOST_TEST(to_string(failure_mode::continue_run) == "continue");
}

// A loop as the reference writes it (docs/CONTROL_FLOW.md, "Bounded loops"). Loops are read
// and checked here; until the plan compiles them the document still gets one
// unsupported_feature, so the model is read from the partial document.
namespace {

std::string with_loop(const std::string& task_fields) {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  actions:\n"
           "    assign: {kind: builtin.assign}\n  tasks:\n    - id: up\n      uses: action:assign\n"
           "    - id: refine\n      uses: action:assign\n" +
           task_fields;
}

// The codes other than unsupported_feature, each as code@line:path.
std::string loop_codes(const parse_result& r) {
    std::string out;
    for (const auto& d : r.diags.items())
        if (d.code != "unsupported_feature")
            out += d.code + "@" + std::to_string(d.location.line) + ":" + d.path + "\n";
    return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_loop_is_read_with_its_bound_condition_and_initial_value) {
    auto r = parse(
        with_loop("      loop:\n        maxIterations: 3\n        while: \"${{ vars.loopIndex < 2 }}\"\n"
                  "        initial: {value: seed}\n      with: {i: \"${{ vars.loopIndex }}\"}\n"));
    BOOST_TEST(loop_codes(r) == "");
    BOOST_TEST_REQUIRE(r.document.has_value());
    const task_spec& t = r.document->tasks.at(1);
    BOOST_TEST_REQUIRE(t.loop.has_value());
    BOOST_TEST(t.loop->max_iterations == 3u);
    BOOST_TEST(t.loop->condition == "${{ vars.loopIndex < 2 }}");
    BOOST_TEST(json::serialize(t.loop->initial) == R"({"value":"seed"})");
    // Loops run: the document is whole, with no unsupported_feature.
    BOOST_TEST(find(r, "unsupported_feature") == nullptr);

    auto bare = parse(with_loop("      loop: {maxIterations: 1, while: \"${{ vars.loopIndex < 1 }}\"}\n"));
    BOOST_TEST(loop_codes(bare) == "");
    BOOST_TEST_REQUIRE(bare.document.has_value());
    BOOST_TEST_REQUIRE(bare.document->tasks.at(1).loop.has_value());
    BOOST_TEST(bare.document->tasks.at(1).loop->initial.is_null());
}

BOOST_AUTO_TEST_CASE(a_loop_without_a_bound_or_with_one_out_of_range_is_refused_at_the_bound) {
    auto bound = [](const std::string& n) {
        return loop_codes(parse(with_loop("      loop:\n        maxIterations: " + n +
                                          "\n        while: \"${{ vars.loopIndex < 1 }}\"\n")));
    };
    BOOST_TEST(bound("1") == "");
    BOOST_TEST(bound("64") == "");
    BOOST_TEST(bound("0") == "out_of_range@13:spec.tasks[1].loop.maxIterations\n");
    BOOST_TEST(bound("65") == "out_of_range@13:spec.tasks[1].loop.maxIterations\n");
    BOOST_TEST(bound("-1") == "out_of_range@13:spec.tasks[1].loop.maxIterations\n");
    BOOST_TEST(bound("two") == "invalid_type@13:spec.tasks[1].loop.maxIterations\n");

    auto missing = parse(with_loop("      loop: {while: \"${{ vars.loopIndex < 1 }}\"}\n"));
    BOOST_TEST(loop_codes(missing) == "missing_field@12:spec.tasks[1].loop.maxIterations\n");
    BOOST_TEST(!missing.partial->tasks.at(1).loop.has_value());
}

BOOST_AUTO_TEST_CASE(a_loop_condition_is_one_whole_template) {
    auto cond = [](const std::string& text) {
        return loop_codes(
            parse(with_loop("      loop:\n        maxIterations: 2\n        while: " + text + "\n")));
    };
    BOOST_TEST(cond("\"${{ loop.output.done == false }}\"") == "");
    BOOST_TEST(cond("\"prefix ${{ vars.loopIndex < 1 }}\"") ==
               "invalid_condition@14:spec.tasks[1].loop.while\n");
    BOOST_TEST(cond("\"${{ vars.loopIndex }} and ${{ vars.loopIndex }}\"") ==
               "invalid_condition@14:spec.tasks[1].loop.while\n");
    BOOST_TEST(cond("[a]") == "invalid_type@14:spec.tasks[1].loop.while\n");
    auto missing = parse(with_loop("      loop: {maxIterations: 2}\n"));
    BOOST_TEST(loop_codes(missing) == "missing_field@12:spec.tasks[1].loop.while\n");
    auto unknown = parse(with_loop("      loop: {maxIterations: 2, until: \"${{ vars.loopIndex }}\"}\n"));
    BOOST_TEST(loop_codes(unknown).find("unknown_key@12:spec.tasks[1].loop.until") != std::string::npos,
               loop_codes(unknown));
}

BOOST_AUTO_TEST_CASE(a_loop_is_the_only_expansion_and_guard_of_its_task) {
    const std::string loop = "      loop: {maxIterations: 2, while: \"${{ vars.loopIndex < 1 }}\"}\n";
    BOOST_TEST(loop_codes(parse(with_loop(loop + "      when: \"${{ inputs.go }}\"\n"))) ==
               "loop_conflict@13:spec.tasks[1].when\n");
    BOOST_TEST(loop_codes(parse(with_loop(loop + "      foreach: {items: [1]}\n"))) ==
               "loop_conflict@13:spec.tasks[1].foreach\n");
    BOOST_TEST(loop_codes(parse(with_loop(loop + "      matrix: {axes: {a: [1]}}\n"))) ==
               "loop_conflict@13:spec.tasks[1].matrix\n");
    // loopIndex and loopPrevious are the engine's: a task variable cannot take them.
    BOOST_TEST(loop_codes(parse(with_loop(loop + "      vars: {loopIndex: 1}\n"))) ==
               "reserved_variable@13:spec.tasks[1].vars.loopIndex\n");
    auto router = parse(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  tasks:\n"
        "    - id: r\n      uses: router\n      route: {select: \"${{ inputs.x }}\", cases: [{equals: 1, "
        "tasks: "
        "[a]}]}\n" +
        loop);
    BOOST_TEST(loop_codes(router) == "loop_conflict@7:spec.tasks[0].uses\n");
}

// A router as the reference writes it (docs/CONTROL_FLOW.md, "Routers"): read and checked
// alone here; its destinations and selector against the other tasks are the plan's
// (tests/frontend/invalid/plan-route-*.yaml).
namespace {

std::string with_router(const std::string& route, const std::string& extra = "") {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  tasks:\n"
           "    - id: route\n      uses: router\n" +
           route + extra;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_router_is_read_with_its_typed_cases_and_default) {
    auto r = parse(
        with_router("      route:\n        select: \"${{ tasks.decide.output.route }}\"\n        cases:\n"
                    "          - {equals: ship, tasks: [ship]}\n          - {equals: 1, tasks: [one, uno]}\n"
                    "          - {equals: \"1\", tasks: [text]}\n        default: [hold]\n"));
    BOOST_TEST(loop_codes(r) == "");
    BOOST_TEST_REQUIRE(r.document.has_value(), codes(r));
    const task_spec& t = r.document->tasks.at(0);
    BOOST_TEST_REQUIRE(t.route.has_value());
    BOOST_TEST(t.route->select == "${{ tasks.decide.output.route }}");
    BOOST_TEST_REQUIRE(t.route->cases.size() == 3u);
    BOOST_TEST(t.route->cases[0].equals == json::value("ship"));
    BOOST_TEST(t.route->cases[1].equals == json::value(1));
    BOOST_TEST((t.route->cases[1].tasks == std::vector<std::string>{"one", "uno"}));
    BOOST_TEST(t.route->cases[2].equals == json::value("1"));  // 1 and "1" are different cases
    BOOST_TEST((t.route->otherwise == std::vector<std::string>{"hold"}));
    // Routers run: nothing about the router is unsupported.
    BOOST_TEST(find(r, "unsupported_feature") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_router_problem_is_reported_where_it_is_written) {
    auto route = [](const std::string& text) { return loop_codes(parse(with_router(text))); };
    BOOST_TEST(route("") == "missing_field@6:spec.tasks[0].route\n");
    BOOST_TEST(route("      route: {cases: [{equals: 1, tasks: [a]}]}\n") ==
               "missing_field@8:spec.tasks[0].route.select\n");
    BOOST_TEST(route("      route: {select: \"x ${{ inputs.x }}\", cases: [{equals: 1, tasks: [a]}]}\n") ==
               "invalid_value@8:spec.tasks[0].route.select\n");
    BOOST_TEST(route("      route: {select: \"${{ inputs.x }}\", cases: []}\n") ==
               "empty_value@8:spec.tasks[0].route.cases\n");
    BOOST_TEST(route("      route: {select: \"${{ inputs.x }}\", cases: [{equals: 1, tasks: []}]}\n") ==
               "empty_value@8:spec.tasks[0].route.cases[0].tasks\n");
    BOOST_TEST(route("      route: {select: \"${{ inputs.x }}\", cases: [{tasks: [a]}]}\n") ==
               "missing_field@8:spec.tasks[0].route.cases[0].equals\n");
    BOOST_TEST(route("      route:\n        select: \"${{ inputs.x }}\"\n        cases:\n"
                     "          - {equals: 1, tasks: [a]}\n          - {equals: 1, tasks: [b]}\n") ==
               "duplicate_route_case@12:spec.tasks[0].route.cases[1].equals\n");
    BOOST_TEST(route("      route:\n        select: \"${{ inputs.x }}\"\n        cases:\n"
                     "          - {equals: 1, tasks: [a]}\n        default: [b, a]\n") ==
               "duplicate_route_destination@12:spec.tasks[0].route.default[1]\n");
    BOOST_TEST(
        route("      route: {select: \"${{ inputs.x }}\", cases: [{equals: 1, tasks: [a]}], other: 1}\n")
            .find("unknown_key@8:spec.tasks[0].route.other") != std::string::npos);
    BOOST_TEST(route("      route: {select: \"${{ inputs.x }}\", cases: [{equals: 1, tasks: [a]}]}\n"
                     "      foreach: {items: [1]}\n") == "router_expanded@9:spec.tasks[0].foreach\n");
    // `route` belongs to a router only.
    auto plain = parse(with_action("", "builtin.assign") +
                       "      route: {select: \"${{ inputs.x }}\", cases: [{equals: 1, tasks: [a]}]}\n");
    BOOST_TEST(loop_codes(plain).find("route_without_router@") != std::string::npos, codes(plain));
}

// Compensation as the reference writes it (docs/CONTROL_FLOW.md, "Compensation"): read and
// checked here; the action's existence and effect are the plan's (test_compensation.cpp).
BOOST_AUTO_TEST_CASE(compensation_is_read_with_its_bounds) {
    const std::string head = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n";
    const std::string tasks =
        "  actions:\n    write: {kind: builtin.write}\n  tasks:\n    - id: provision\n      uses: "
        "action:write\n";
    auto r =
        parse(head + "  compensation: {onFailure: automatic, approval: always}\n" + tasks +
              "      compensate:\n        uses: action:write\n        with: {path: a.txt, content: undone}\n"
              "        retry: {maxAttempts: 2, backoffMs: 50}\n        timeoutSeconds: 30\n");
    BOOST_TEST(loop_codes(r) == "");
    BOOST_TEST_REQUIRE(r.document.has_value());  // compensation runs: the document is whole
    BOOST_TEST((r.document->compensation.on_failure == compensation_spec::trigger::automatic));
    BOOST_TEST((r.document->compensation.approval_mode == compensation_spec::approval::always));
    const task_spec& t = r.document->tasks.at(0);
    BOOST_TEST_REQUIRE(t.compensate.has_value());
    BOOST_TEST(t.compensate->action == "write");
    BOOST_TEST(json::serialize(t.compensate->with) == R"({"path":"a.txt","content":"undone"})");
    BOOST_TEST(t.compensate->retry.max_attempts == 2);
    BOOST_TEST(t.compensate->retry.backoff_ms == 50);
    BOOST_TEST((t.compensate->timeout_ms == std::optional<std::int64_t>(30000)));
    BOOST_TEST(find(r, "unsupported_feature") == nullptr);  // compensation runs

    auto defaults = parse(head + "  compensation: {}\n" + tasks);
    BOOST_TEST_REQUIRE(defaults.document.has_value());
    BOOST_TEST((defaults.document->compensation.on_failure == compensation_spec::trigger::manual));
    BOOST_TEST((defaults.document->compensation.approval_mode == compensation_spec::approval::policy));

    auto codes_of = [&](const std::string& compensate) {
        return loop_codes(parse(head + tasks + "      compensate: " + compensate + "\n"));
    };
    BOOST_TEST(codes_of("{with: {}}") == "missing_field@10:spec.tasks[0].compensate.uses\n");
    BOOST_TEST(codes_of("{uses: agent:undo}") == "invalid_uses@10:spec.tasks[0].compensate.uses\n");
    BOOST_TEST(codes_of("{uses: action:write, retry: {maxAttempts: 21}}") ==
               "out_of_range@10:spec.tasks[0].compensate.retry.maxAttempts\n");
    BOOST_TEST(codes_of("{uses: action:write, retry: {backoffMs: 60001}}") ==
               "out_of_range@10:spec.tasks[0].compensate.retry.backoffMs\n");
    BOOST_TEST(codes_of("{uses: action:write, timeoutSeconds: 86401}") ==
               "out_of_range@10:spec.tasks[0].compensate.timeoutSeconds\n");
    BOOST_TEST(
        codes_of("{uses: action:write, undo: true}").find("unknown_key@10:spec.tasks[0].compensate.undo") !=
        std::string::npos);
    BOOST_TEST(loop_codes(parse(head + "  compensation: {onFailure: sometimes}\n" + tasks)) ==
               "invalid_value@5:spec.compensation.onFailure\n");
    BOOST_TEST(loop_codes(parse(head + "  compensation: {approval: mutations}\n" + tasks)) ==
               "invalid_value@5:spec.compensation.approval\n");
}

// Sub-workflows as the reference writes them (docs/CONTROL_FLOW.md, "Sub-workflows"): the
// definitions and invocations are read and checked here; references, cycles and schemas are
// the plan's (test_plan).
namespace {

std::string with_subworkflow(const std::string& definition, const std::string& invocation = "") {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: t}\nspec:\n"
           "  actions:\n    assign: {kind: builtin.assign}\n  subworkflows:\n    summarize:\n" +
           definition + "  tasks:\n    - id: summary\n      uses: workflow:summarize\n" + invocation;
}

const std::string definition =
    "      version: 1.0.0\n      inputs: {style: short}\n"
    "      inputSchema: {type: object}\n      outputSchema: {type: object}\n"
    "      outputs: {result: \"${{ tasks.finish.output.output.result }}\"}\n"
    "      tasks:\n        - {id: finish, uses: action:assign, with: {result: \"${{ inputs.message }}\"}}\n";

}  // namespace

BOOST_AUTO_TEST_CASE(a_subworkflow_and_its_invocation_are_read) {
    auto r = parse(with_subworkflow(definition,
                                    "      needs: []\n      with: {message: durable}\n"
                                    "      failure: continue\n"));
    BOOST_TEST(loop_codes(r) == "");
    BOOST_TEST(find(r, "unsupported_feature") == nullptr, "sub-workflows run");
    BOOST_TEST_REQUIRE(r.document.has_value());
    BOOST_TEST_REQUIRE(r.document->subworkflows.size() == 1u);
    const subworkflow_spec& sw = r.document->subworkflows[0];
    BOOST_TEST(sw.name == "summarize");
    BOOST_TEST(sw.version == "1.0.0");
    BOOST_TEST(json::serialize(sw.inputs) == R"({"style":"short"})");
    BOOST_TEST(json::serialize(sw.input_schema) == R"({"type":"object"})");
    BOOST_TEST(json::serialize(sw.outputs) == R"({"result":"${{ tasks.finish.output.output.result }}"})");
    BOOST_TEST_REQUIRE(sw.tasks.size() == 1u);
    BOOST_TEST(sw.tasks[0].id == "finish");
    BOOST_TEST(sw.tasks[0].action == "assign");
    BOOST_TEST(r.document->tasks.at(0).subworkflow == "summarize");
}

// Names as the reference writes them: `-` is part of a name (`live-agent`); a name that
// starts with neither a letter nor `_` is not one.
BOOST_AUTO_TEST_CASE(a_subworkflow_name_may_hold_hyphens) {
    auto named = [](const std::string& name) {
        std::string text = with_subworkflow(definition);
        for (std::string word : {"    summarize:", "workflow:summarize"}) {
            std::string renamed =
                word.substr(0, word.find("summarize")) + name + word.substr(word.find("summarize") + 9);
            text.replace(text.find(word), word.size(), renamed);
        }
        return loop_codes(parse(text));
    };
    for (const char* ok : {"live-agent", "summarize_2", "_private", "a-b-c"}) BOOST_TEST(named(ok) == "", ok);
    BOOST_TEST(named("2nd") == "invalid_value@8:spec.subworkflows.2nd\ninvalid_uses@18:spec.tasks[0].uses\n");
    BOOST_TEST(named("-lead") ==
               "invalid_value@8:spec.subworkflows.-lead\ninvalid_uses@18:spec.tasks[0].uses\n");
}

BOOST_AUTO_TEST_CASE(a_subworkflow_problem_is_reported_where_it_is_written) {
    auto version = [](const std::string& v) {
        std::string d = definition;
        d.replace(d.find("1.0.0"), 5, v);
        return loop_codes(parse(with_subworkflow(d)));
    };
    for (const char* ok : {"1.0.0", "0.1.2", "10.20.30", "1.0.0-rc.1", "1.0.0-alpha-1", "1.0.0+build.5"})
        BOOST_TEST(version(ok) == "", ok);
    for (const char* bad :
         {"1.0", "1", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "v1.0.0", "1.0.0.0", "a.b.c"})
        BOOST_TEST(version(bad) == "invalid_value@9:spec.subworkflows.summarize.version\n", bad);

    std::string no_schema = definition;
    no_schema.erase(no_schema.find("      outputSchema"),
                    std::string("      outputSchema: {type: object}\n").size());
    BOOST_TEST(loop_codes(parse(with_subworkflow(no_schema))) ==
               "missing_field@8:spec.subworkflows.summarize.outputSchema\n");
    std::string text_schema = definition;
    text_schema.replace(text_schema.find("{type: object}"), 14, "object");
    BOOST_TEST(loop_codes(parse(with_subworkflow(text_schema))) ==
               "invalid_type@11:spec.subworkflows.summarize.inputSchema\n");
    // Its tasks are read as any task, at their own paths.
    std::string bad_task = definition;
    bad_task.replace(bad_task.find("id: finish"), 10, "id: Finish");
    BOOST_TEST(loop_codes(parse(with_subworkflow(bad_task))) ==
               "invalid_task_id@15:spec.subworkflows.summarize.tasks[0].id\n");

    // The invocation takes needs, with and failure only.
    BOOST_TEST(loop_codes(parse(with_subworkflow(definition, "      when: \"${{ inputs.go }}\"\n"))) ==
               "invalid_invocation@19:spec.tasks[0].when\n");
    BOOST_TEST(loop_codes(parse(with_subworkflow(definition, "      retry: {maxAttempts: 2}\n"))) ==
               "invalid_invocation@19:spec.tasks[0].retry\n");
    auto unnamed =
        parse(with_subworkflow(definition)
                  .replace(with_subworkflow(definition).find("workflow:summarize"), 18, "\"workflow:\""));
    BOOST_TEST(loop_codes(unnamed) == "invalid_uses@18:spec.tasks[0].uses\n");
}
