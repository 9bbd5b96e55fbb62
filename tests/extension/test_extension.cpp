// extension.process end to end: the engine, the built-in runner and the sample extension
// (examples/extensions/textstats.cpp) as a real process, on the host and in a container.
//
// The extension writes marker files (--marker-dir) when its handshake or invoke mode starts,
// so a test can prove what ran and what did not; a grandchild's pid file lets a test prove
// the tree is gone after a timeout or cancellation. No sleeps: waits are inotify watches.
#include "harness.hpp"

#include "../support/deadline.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/wire.hpp>
#include <agentctl/json.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
namespace utf = boost::unit_test;
using namespace agentctl;
using namespace std::chrono_literals;

namespace agentctl {
std::ostream& operator<<(std::ostream& os, task_state s) {
    return os << to_string(s);
}
std::ostream& operator<<(std::ostream& os, run_state s) {
    return os << to_string(s);
}
}  // namespace agentctl

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

const std::string& textstats_path() {
    static const std::string path = [] {
        std::string p = env_or_empty("AGENTCTL_TEXTSTATS");
        if (p.empty()) throw std::runtime_error("AGENTCTL_TEXTSTATS is not set (run through meson test)");
        return p;
    }();
    return path;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string quoted(const std::string& s) {
    return json::serialize(json::value(s));
}

/// The schemas agentctl-textstats declares, as YAML.
const char* const schemas_yaml = R"(      protocolVersion: agentctl.dev/process-extension/v1
      idempotency: pure
      capabilities: [text.count]
      inputSchema:
        type: object
        required: [text]
        additionalProperties: false
        properties:
          text: {type: string}
      outputSchema:
        type: object
        required: [words, lines, bytes, longest]
        additionalProperties: false
        properties:
          words: {type: integer, minimum: 0}
          lines: {type: integer, minimum: 0}
          bytes: {type: integer, minimum: 0}
          longest: {type: string}
)";

/// One workflow with one `textstats` action and one task `t`.
struct workflow_text {
    std::string command;
    std::vector<std::string> args;
    std::string action_extra;  ///< more action fields, each line indented by 6 spaces
    std::string policy_extra;  ///< more policy members, ", key: value"
    std::string with = R"({text: "the quick brown fox"})";

    std::string yaml() const {
        std::string a = "[";
        for (std::size_t i = 0; i < args.size(); ++i) a += (i ? ", " : "") + quoted(args[i]);
        a += "]";
        std::string base = command.substr(command.rfind('/') + 1);
        return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: ext}\nspec:\n"
               "  policy: {processAllowlist: [" +
               base + "], approval: never" + policy_extra +
               "}\n"
               "  actions:\n    textstats:\n      kind: extension.process\n      command: " +
               command + "\n" + "      args: " + a + "\n" + schemas_yaml + action_extra +
               "  tasks:\n    - id: t\n      uses: action:textstats\n      with: " + with + "\n";
    }
};

plan compile_yaml(const std::string& yaml) {
    parse_result parsed = parse_workflow(yaml, "ext.yaml");
    for (const auto& d : parsed.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(parsed.document);
    compile_result compiled = compile(*parsed.document);
    for (const auto& d : compiled.diags.items())
        BOOST_TEST_MESSAGE(d.code << " " << d.path << ": " << d.message);
    BOOST_REQUIRE(compiled.compiled);
    return std::move(*compiled.compiled);
}

/// A workspace with a marker folder, and runs of one plan on a fresh io_context.
struct extension_fixture {
    exec_test::temp_dir dir;
    std::string markers = dir.path + "/markers";
    std::map<std::string, std::string> host_env;
    std::string search_path = "/usr/bin:/bin";

    extension_fixture() { fs::create_directories(markers); }

    bool marker(const std::string& name) const { return fs::exists(markers + "/" + name); }

    workflow_text host_workflow(std::vector<std::string> extra_args = {}) const {
        workflow_text w;
        w.command = textstats_path();
        w.args = {"--marker-dir", markers};
        w.args.insert(w.args.end(), extra_args.begin(), extra_args.end());
        return w;
    }

    run_settings options() const {
        run_settings o;
        o.run_id = "run-1";
        o.base_dir = dir.path;
        o.search_path = search_path;
        auto env = host_env;
        o.host_env = [env](std::string_view name) -> std::optional<std::string> {
            auto it = env.find(std::string(name));
            if (it == env.end()) return std::nullopt;
            return it->second;
        };
        return o;
    }

    /// What `during` sets up on the run's io_context; destroyed before it.
    using keeper = std::unique_ptr<exec_test::file_watch>;

    /// Runs `p`; `during` may arrange cancellation on the io_context. Fails after `bound`.
    run_report run(const plan& p, run_settings o,
                   const std::function<keeper(asio::io_context&, asio::cancellation_signal&)>& during = {},
                   std::chrono::seconds bound = 60s) {
        asio::io_context io;
        asio::cancellation_signal signal;
        std::optional<run_report> report;
        async_run(io.get_executor(), p, std::move(o),
                  asio::bind_cancellation_slot(signal.slot(), [&](run_report r) { report = std::move(r); }));
        keeper kept = during ? during(io, signal) : nullptr;
        bool done = agentctl::test::run_with_deadline(io, bound, [&] { return report.has_value(); });
        BOOST_REQUIRE_MESSAGE(done, "the run did not finish within " << bound.count() << " s");
        return std::move(*report);
    }

    run_report run(const workflow_text& w) { return run(compile_yaml(w.yaml()), options()); }
};

const task_result& only_task(const run_report& r) {
    BOOST_REQUIRE_EQUAL(r.tasks.size(), 1u);
    return r.tasks[0];
}

std::string code_of(const task_result& t) {
    return t.error ? std::string(to_string(t.error->code)) : "";
}
std::string error_message(const task_result& t) {
    return t.error ? t.error->message : "";
}

std::string report_json(const plan& p, const run_report& r) {
    string_sink sink;
    json_writer w(sink);
    write_run_report(w, p, r);
    w.flush();
    return sink.text;
}

bool has_image() {
    return !env_or_empty("AGENTCTL_TEST_IMAGE").empty();
}

// Container cases need the fixture's image (tools/container-fixture run --extension ...).
struct container_precondition {
    boost::test_tools::assertion_result operator()(utf::test_unit_id) const {
        if (has_image()) return true;
        boost::test_tools::assertion_result r(false);
        r.message()
            << "AGENTCTL_TEST_IMAGE is not set: container extension cases SKIPPED; run them with "
               "tools/container-fixture run --extension build/examples/extensions/agentctl-textstats -- "
               "build/tests/extension/test_extension --run_test=extension_container";
        return r;
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(extension)

BOOST_FIXTURE_TEST_CASE(success_returns_the_extension_output, extension_fixture) {
    auto w = host_workflow();
    run_report r = run(w);
    const task_result& t = only_task(r);
    BOOST_TEST(r.state == run_state::succeeded);
    BOOST_TEST(t.state == task_state::succeeded, error_message(t));
    BOOST_TEST(t.output == json::parse(R"({"words":4,"lines":0,"bytes":19,"longest":"quick"})"));
    BOOST_TEST(t.exit_code.value_or(-1) == 0);
    BOOST_TEST(t.isolation == "process");
    BOOST_TEST(t.command == textstats_path());
    BOOST_TEST(marker("handshake"));
    BOOST_TEST(marker("invoke"));
    // effectId: <runId>:<taskId>:<attempt>
    BOOST_TEST(read_text(markers + "/effect-id") == "run-1:t:1");
    // The stored stdout is the response itself.
    json::value response = json::parse(std::string(stdout_of(t)));
    BOOST_TEST(response.at("effectId") == "run-1:t:1");
}

BOOST_FIXTURE_TEST_CASE(handshake_mismatch_never_invokes, extension_fixture) {
    run_report r = run(host_workflow({"--test-mode", "wrong-handshake"}));
    const task_result& t = only_task(r);
    BOOST_TEST(r.state == run_state::failed);
    BOOST_TEST(t.state == task_state::failed);
    BOOST_TEST(code_of(t) == "handshake_mismatch");
    BOOST_TEST(error_message(t).find("handshake: ") == 0u, error_message(t));
    BOOST_TEST(error_message(t).find("outputSchema differs at /properties/words/type: declared \"integer\", "
                                     "handshake \"string\"") != std::string::npos,
               error_message(t));
    BOOST_TEST(t.output.at("phase") == "handshake");
    BOOST_TEST(marker("handshake"));
    BOOST_TEST(!marker("invoke"));
}

// The workflow declares the action under another name than the extension's own: the
// handshake's `name` is the extension's, never compared (as the reference), so it runs.
BOOST_FIXTURE_TEST_CASE(the_handshake_name_is_the_extensions_own, extension_fixture) {
    std::string yaml = host_workflow().yaml();
    auto replace_all = [&](const std::string& from, const std::string& to) {
        for (auto at = yaml.find(from); at != std::string::npos; at = yaml.find(from, at + to.size()))
            yaml.replace(at, from.size(), to);
    };
    replace_all("textstats:", "counter:");
    replace_all("action:textstats", "action:counter");
    run_report r = run(compile_yaml(yaml), options());
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::succeeded, error_message(t));
    BOOST_TEST(marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(a_handshake_without_a_name_is_a_mismatch, extension_fixture) {
    run_report r = run(host_workflow({"--test-mode", "nameless"}));
    const task_result& t = only_task(r);
    BOOST_TEST(code_of(t) == "handshake_mismatch");
    BOOST_TEST(error_message(t).find("name is missing") != std::string::npos, error_message(t));
    BOOST_TEST(!marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(declaration_differences_are_all_named, extension_fixture) {
    // The extension is right; the workflow declares another capability.
    auto w = host_workflow();
    std::string yaml = w.yaml();
    yaml.replace(yaml.find("capabilities: [text.count]"), 26, "capabilities: [text.count, net]");
    run_report r = run(compile_yaml(yaml), options());
    const task_result& t = only_task(r);
    BOOST_TEST(code_of(t) == "handshake_mismatch");
    BOOST_TEST(error_message(t).find("name") == std::string::npos, error_message(t));
    BOOST_TEST(error_message(t).find("capabilities differs at /1: declared \"net\", handshake (missing)") !=
                   std::string::npos,
               error_message(t));
    BOOST_TEST(!marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(invalid_input_runs_nothing, extension_fixture) {
    auto w = host_workflow();
    w.with = "{text: 5, extra: true}";
    run_report r = run(w);
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::failed);
    BOOST_TEST(code_of(t) == "input_invalid");
    BOOST_TEST(error_message(t).find("at /text: ") != std::string::npos, error_message(t));
    BOOST_TEST(t.output.at("phase") == "input");
    bool text_pointer = false;
    for (const auto& e : t.output.at("errors").as_array()) text_pointer |= e.at("pointer") == "/text";
    BOOST_TEST(text_pointer);
    BOOST_TEST(!marker("handshake"));
    BOOST_TEST(!marker("invoke"));
    BOOST_TEST(t.command.empty());
}

BOOST_FIXTURE_TEST_CASE(protocol_failures_have_distinct_codes, extension_fixture) {
    struct row {
        const char* mode;
        const char* code;
        const char* says;
    };
    const row rows[] = {
        {"bad-json", "bad_json", "invoke: stdout is not one JSON document"},
        {"wrong-effect-id", "identity_mismatch", "effectId is \"run-1:t:1-other\", expected \"run-1:t:1\""},
        {"invalid-output", "output_invalid", "at /words: "},
        {"exit", "exit_nonzero", "invoke: exited with status 3"},
    };
    for (const auto& row : rows) {
        fs::remove_all(markers);
        fs::create_directories(markers);
        run_report r = run(host_workflow({"--test-mode", row.mode}));
        const task_result& t = only_task(r);
        BOOST_TEST(r.state == run_state::failed, row.mode);
        BOOST_TEST(t.state == task_state::failed, row.mode);
        BOOST_TEST(code_of(t) == row.code, row.mode);
        BOOST_TEST(error_message(t).find(row.says) != std::string::npos,
                   row.mode << ": " << error_message(t));
        BOOST_TEST(t.output.at("phase") == "invoke", row.mode);
        BOOST_TEST(marker("invoke"), row.mode);
    }
}

BOOST_FIXTURE_TEST_CASE(failed_handshake_process_is_reported_as_such, extension_fixture) {
    auto w = host_workflow({"--no-such-option"});
    run_report r = run(w);
    const task_result& t = only_task(r);
    BOOST_TEST(code_of(t) == "exit_nonzero");
    BOOST_TEST(error_message(t) == "handshake: exited with status 2");
    BOOST_TEST(std::string(stderr_of(t)).find("unknown argument --no-such-option") != std::string::npos, std::string(stderr_of(t)));
    BOOST_TEST(!marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(timeout_kills_the_tree, extension_fixture) {
    auto w = host_workflow({"--test-mode", "sleep"});
    w.action_extra = "      timeoutSeconds: 0.5\n";
    run_report r = run(w);
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::timed_out);
    BOOST_TEST(code_of(t) == "timeout");
    BOOST_TEST(error_message(t).find("invoke: timed out after") == 0u, error_message(t));
    std::istringstream in(read_text(markers + "/grandchild"));
    exec_test::pid_record g{};
    BOOST_TEST_REQUIRE(static_cast<bool>(in >> g.pid >> g.start));
    BOOST_TEST(!exec_test::alive(g));
}

BOOST_FIXTURE_TEST_CASE(output_limit_is_enforced, extension_fixture) {
    auto w = host_workflow({"--test-mode", "flood"});
    w.action_extra = "      stdoutLimitBytes: 4096\n";
    run_report r = run(w);
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::output_limit_exceeded);
    BOOST_TEST(code_of(t) == "output_limit_exceeded");
    BOOST_TEST(t.limit_stream == "stdout");
    BOOST_TEST(t.limit_bytes == 4096u);
    BOOST_TEST(std::string(stdout_of(t)).size() == 4096u);
    BOOST_TEST(error_message(t).find("invoke: ") == 0u, error_message(t));
}

BOOST_FIXTURE_TEST_CASE(secrets_are_redacted_everywhere, extension_fixture) {
    const std::string secret = "s3cr3t-t0ken-value";
    host_env["SECRET_TOKEN"] = secret;
    auto w = host_workflow({"--env", "SECRET_TOKEN"});
    w.policy_extra = ", environmentAllowlist: [SECRET_TOKEN]";
    w.action_extra = "      env: {SECRET_TOKEN: {env: SECRET_TOKEN}}\n";
    plan p = compile_yaml(w.yaml());
    run_report r = run(p, options());
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::succeeded, error_message(t));
    BOOST_TEST(t.output.at("longest") == "[REDACTED]");
    BOOST_TEST(std::string(stderr_of(t)).find("SECRET_TOKEN=[REDACTED]") != std::string::npos, std::string(stderr_of(t)));
    std::string all = report_json(p, r);
    BOOST_TEST(all.find(secret) == std::string::npos, all);
}

BOOST_FIXTURE_TEST_CASE(secrets_are_redacted_from_failures, extension_fixture) {
    const std::string secret = "an0ther-s3cret";
    host_env["SECRET_TOKEN"] = secret;
    for (const char* mode : {"exit", "invalid-output", "bad-json"}) {
        auto w = host_workflow({"--env", "SECRET_TOKEN", "--test-mode", mode});
        w.policy_extra = ", environmentAllowlist: [SECRET_TOKEN]";
        w.action_extra = "      env: {SECRET_TOKEN: {env: SECRET_TOKEN}}\n";
        plan p = compile_yaml(w.yaml());
        run_report r = run(p, options());
        const task_result& t = only_task(r);
        BOOST_TEST(t.state == task_state::failed, mode);
        BOOST_TEST(std::string(stderr_of(t)).find("SECRET_TOKEN=[REDACTED]") != std::string::npos,
                   mode << ": " << std::string(stderr_of(t)));
        std::string all = report_json(p, r);
        BOOST_TEST(all.find(secret) == std::string::npos, mode << ": " << all);
    }
}

BOOST_FIXTURE_TEST_CASE(cancellation_kills_the_invoke_tree, extension_fixture) {
    auto w = host_workflow({"--test-mode", "sleep"});
    plan p = compile_yaml(w.yaml());
    run_report r = run(p, options(), [&](asio::io_context& io, asio::cancellation_signal& signal) {
        return std::make_unique<exec_test::file_watch>(
            io, markers + "/grandchild", [&signal] { signal.emit(asio::cancellation_type::total); });
    });
    const task_result& t = only_task(r);
    BOOST_TEST(r.state == run_state::cancelled);
    BOOST_TEST(t.state == task_state::cancelled);
    BOOST_TEST(error_message(t).find("invoke: cancelled") == 0u, error_message(t));
    std::istringstream in(read_text(markers + "/grandchild"));
    exec_test::pid_record g{};
    BOOST_TEST_REQUIRE(static_cast<bool>(in >> g.pid >> g.start));
    BOOST_TEST(!exec_test::alive(g));
}

BOOST_FIXTURE_TEST_CASE(cancellation_during_the_handshake_never_invokes, extension_fixture) {
    // The handshake is cancelled as soon as it starts (its marker appears).
    auto w = host_workflow();
    plan p = compile_yaml(w.yaml());
    run_report r = run(p, options(), [&](asio::io_context& io, asio::cancellation_signal& signal) {
        return std::make_unique<exec_test::file_watch>(
            io, markers + "/handshake", [&signal] { signal.emit(asio::cancellation_type::terminal); });
    });
    const task_result& t = only_task(r);
    BOOST_TEST(r.state == run_state::cancelled);
    BOOST_TEST(t.state == task_state::cancelled, code_of(t) << ": " << error_message(t));
    BOOST_TEST(!marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(container_mode_fails_closed_without_the_image, extension_fixture) {
    auto w = host_workflow();
    w.command = "/usr/local/bin/agentctl-textstats";
    w.action_extra =
        "      isolation: container\n      container: {image: \"sha256:" + std::string(64, '0') + "\"}\n";
    plan p = compile_yaml(w.yaml());
    run_report r = run(p, options());
    BOOST_TEST(r.state == run_state::failed);
    std::string code = r.error ? std::string(to_string(r.error->code)) : code_of(only_task(r));
    BOOST_TEST(code == "isolation_unavailable");
    BOOST_TEST(!marker("handshake"));
    BOOST_TEST(!marker("invoke"));
}

BOOST_FIXTURE_TEST_CASE(the_example_workflow_runs, extension_fixture) {
    std::string root = env_or_empty("AGENTCTL_SOURCE_ROOT");
    BOOST_TEST_REQUIRE(!root.empty(), "AGENTCTL_SOURCE_ROOT is not set (run through meson test)");
    parse_result parsed = load_workflow(root + "/examples/extensions/textstats.yaml");
    BOOST_REQUIRE(parsed.document);
    compile_result compiled = compile(*parsed.document);
    for (const auto& d : compiled.diags.items()) BOOST_TEST_MESSAGE(d.code << ": " << d.message);
    BOOST_REQUIRE(compiled.compiled);
    search_path = fs::path(textstats_path()).parent_path().string();
    run_report r = run(*compiled.compiled, options());
    BOOST_TEST(r.state == run_state::succeeded);
    const json::array& items = r.output.at("counts").as_array();
    BOOST_TEST_REQUIRE(items.size() == 2u);
    BOOST_TEST(items[0].at("output") == json::parse(R"({"words":4,"lines":0,"bytes":19,"longest":"quick"})"));
    BOOST_TEST(items[1].at("output").at("words") == 5);
}

BOOST_AUTO_TEST_SUITE_END()

// Inside the fixture's busybox image: the same protocol, stdin passed to the container.
BOOST_AUTO_TEST_SUITE(extension_container, *utf::precondition(container_precondition()))

namespace {

workflow_text container_workflow(std::vector<std::string> args = {}, const std::string& engine = "auto") {
    workflow_text w;
    w.command = "/usr/local/bin/agentctl-textstats";
    w.args = std::move(args);
    w.action_extra = "      isolation: container\n      container: {image: \"" +
                     env_or_empty("AGENTCTL_TEST_IMAGE") + "\", runtime: " + engine + "}\n";
    return w;
}

run_settings container_options(extension_fixture& f) {
    run_settings o = f.options();
    o.search_path = env_or_empty("PATH");
    o.host_env = [](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str());
        if (!v) return std::nullopt;
        return std::string(v);
    };
    return o;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(container_success_in_both_engines, extension_fixture) {
    for (const char* engine : {"docker", "podman"}) {
        plan p = compile_yaml(container_workflow({}, engine).yaml());
        run_report r = run(p, container_options(*this), {}, 120s);
        const task_result& t = only_task(r);
        BOOST_TEST(t.state == task_state::succeeded,
                   engine << ": " << code_of(t) << ": " << error_message(t) << " " << std::string(stderr_of(t)));
        BOOST_TEST(t.isolation == "container");
        BOOST_TEST(t.engine == engine);
        BOOST_TEST(t.output == json::parse(R"({"words":4,"lines":0,"bytes":19,"longest":"quick"})"), engine);
        BOOST_TEST(r.state == run_state::succeeded, engine);
    }
}

BOOST_FIXTURE_TEST_CASE(container_failures_keep_their_codes, extension_fixture) {
    struct row {
        const char* mode;
        const char* code;
    };
    for (const auto& row :
         {row{"wrong-handshake", "handshake_mismatch"}, row{"invalid-output", "output_invalid"},
          row{"wrong-effect-id", "identity_mismatch"}, row{"exit", "exit_nonzero"}}) {
        plan p = compile_yaml(container_workflow({"--test-mode", row.mode}).yaml());
        run_report r = run(p, container_options(*this), {}, 120s);
        const task_result& t = only_task(r);
        BOOST_TEST(code_of(t) == row.code, row.mode << ": " << error_message(t));
        BOOST_TEST(t.isolation == "container", row.mode);
    }
}

BOOST_FIXTURE_TEST_CASE(container_timeout, extension_fixture) {
    auto w = container_workflow({"--test-mode", "sleep"});
    w.action_extra += "      timeoutSeconds: 2\n";
    plan p = compile_yaml(w.yaml());
    run_report r = run(p, container_options(*this), {}, 120s);
    const task_result& t = only_task(r);
    BOOST_TEST(t.state == task_state::timed_out, code_of(t) << ": " << error_message(t));
}

BOOST_AUTO_TEST_SUITE_END()
