// Environment sources and redaction, with real files and helper processes.
#include "runner/secrets.hpp"

#include "../support/deadline.hpp"
#include "../support/error_text.hpp"

#include <agentctl/engine.hpp>
#include <agentctl/parse.hpp>
#include <agentctl/plan.hpp>
#include <agentctl/wire.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace agentctl;
using namespace std::chrono_literals;

namespace {

struct workspace {
    workspace() {
        char tmpl[] = "/tmp/agentctl-secrets-XXXXXX";
        path = ::mkdtemp(tmpl);
        auto opened = exec::directory::open(path);
        BOOST_REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message));
        root = std::move(*opened);
        fs::create_directories(path + "/secrets");
    }
    ~workspace() { fs::remove_all(path); }
    void write(const std::string& name, const std::string& content) const {
        std::ofstream(path + "/" + name, std::ios::binary) << content;
    }
    std::string path;
    std::optional<exec::directory> root;
};

resolved_environment resolve(const std::vector<env_entry>& entries, const policy_spec& policy, const workspace& ws,
                             std::function<std::optional<std::string>(std::string_view)> host_env = {}) {
    asio::io_context io;
    environment_context ctx;
    ctx.policy = &policy;
    ctx.workspace = &*ws.root;
    ctx.search_path = "/usr/bin:/bin";
    ctx.host_env = std::move(host_env);
    std::optional<resolved_environment> out;
    asio::co_spawn(io, resolve_environment(entries, ctx), [&](std::exception_ptr e, resolved_environment r) {
        BOOST_TEST(!e, "resolving the environment threw");
        out = std::move(r);
    });
    bool done = agentctl::test::run_with_deadline(io, 20s, [&] { return out.has_value(); });
    BOOST_REQUIRE_MESSAGE(done, "resolution did not complete");
    return std::move(*out);
}

env_entry from_file(std::string name, std::string path) {
    env_entry e{std::move(name), {}};
    e.source.kind = env_source::kind_t::file;
    e.source.text = std::move(path);
    return e;
}

env_entry from_process(std::string name, std::string command, std::vector<std::string> args, int timeout = 5,
                       std::uint64_t limit = 16384) {
    env_entry e{std::move(name), {}};
    e.source.kind = env_source::kind_t::process;
    e.source.process.command = std::move(command);
    e.source.process.args = std::move(args);
    e.source.process.timeout_seconds = timeout;
    e.source.process.output_limit_bytes = limit;
    return e;
}

bool mentions(const resolved_environment& r, const std::string& text) {
    return r.error && r.error->message.find(text) != std::string::npos;
}

// The error's code ("" when none) and message, as the tests read them.
std::string code_of(const resolved_environment& r) { return r.error ? std::string(to_string(r.error->code)) : ""; }
std::string message_of(const resolved_environment& r) { return r.error ? r.error->message : ""; }

// A workflow of one task that prints its environment: TOKEN from secrets/token, then `more`
// (each a line `NAME: {value: ...}`), all of them allowed.
std::string printenv_workflow(const std::string& name, const std::vector<std::string>& more) {
    std::string allowed = "TOKEN", env;
    for (const auto& line : more) {
        allowed += ", " + line.substr(0, line.find(':'));
        env += "        " + line + "\n";
    }
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: " + name +
           "}\nspec:\n  policy:\n    processAllowlist: [printenv]\n    environmentAllowlist: [" + allowed +
           "]\n    secretFileRoots: [secrets]\n    approval: never\n  actions:\n    show:\n"
           "      kind: builtin.shell.exec\n      command: printenv\n      env:\n"
           "        TOKEN: {file: secrets/token}\n" +
           env + "  tasks:\n    - {id: show, uses: action:show}\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(value_and_env_sources) {
    workspace ws;
    policy_spec policy;
    env_entry literal{"MODE", {}};
    literal.source.kind = env_source::kind_t::value;
    literal.source.text = "fast=yes";
    env_entry token{"TOKEN", {}};
    token.source.kind = env_source::kind_t::env;
    token.source.text = "HOST_TOKEN";
    auto host = [](std::string_view name) -> std::optional<std::string> {
        if (name == "HOST_TOKEN") return std::string("s3cr3t");
        return std::nullopt;
    };
    auto r = resolve({literal, token}, policy, ws, host);
    BOOST_TEST(code_of(r).empty());
    BOOST_TEST((r.entries == std::vector<std::string>{"MODE=fast=yes", "TOKEN=s3cr3t"}));
    BOOST_TEST((r.secrets == std::vector<std::string>{"s3cr3t"}));  // a {value} is not a secret

    token.source.text = "MISSING";
    auto missing = resolve({token}, policy, ws, host);
    BOOST_TEST(code_of(missing) == "secret_unavailable");
    BOOST_TEST(mentions(missing, "MISSING is not set"));
}

BOOST_AUTO_TEST_CASE(file_sources_are_bounded_and_confined) {
    workspace ws;
    policy_spec policy;
    policy.secret_file_roots = {"secrets"};
    ws.write("secrets/crlf", "value-one\r\n");
    ws.write("secrets/lf2", "two\n\n");
    ws.write("secrets/empty", "\n");
    ws.write("secrets/big", std::string(64 * 1024 + 1, 'x'));
    ws.write("secrets/binary", std::string("\xff\xfe", 2));
    ws.write("outside", "nope");
    fs::create_symlink(ws.path + "/outside", ws.path + "/secrets/escape");
    fs::create_symlink("crlf", ws.path + "/secrets/inside-link");

    auto ok = resolve({from_file("A", "secrets/crlf"), from_file("B", "secrets/lf2"),
                       from_file("C", "secrets/inside-link")},
                      policy, ws);
    BOOST_TEST(code_of(ok).empty(), message_of(ok));
    // Exactly one line ending is stripped.
    BOOST_TEST((ok.entries == std::vector<std::string>{"A=value-one", "B=two\n", "C=value-one"}));

    for (auto [file, why] : std::vector<std::pair<std::string, std::string>>{
             {"secrets/empty", "is empty"},
             {"secrets/big", "larger than 65536"},
             {"secrets/binary", "not valid UTF-8"},
             {"secrets/escape", "outside every policy.secretFileRoots"},
             {"outside", "outside every policy.secretFileRoots"},
             {"secrets/absent", "cannot open"}}) {
        auto r = resolve({from_file("X", file)}, policy, ws);
        BOOST_TEST(code_of(r) == "secret_unavailable", file);
        BOOST_TEST(mentions(r, why), file << ": " << message_of(r));
        BOOST_TEST(message_of(r).find("nope") == std::string::npos);  // never the value
    }
    policy.secret_file_roots.clear();
    auto none = resolve({from_file("A", "secrets/crlf")}, policy, ws);
    BOOST_TEST(code_of(none) == "secret_unavailable");
}

BOOST_AUTO_TEST_CASE(process_sources_are_allowlisted_and_bounded) {
    workspace ws;
    policy_spec policy;
    policy.secret_process_allowlist = {"printf", "sleep", "head", "false"};
    auto ok = resolve({from_process("P", "printf", {"helper-value\\n"})}, policy, ws);
    BOOST_TEST(code_of(ok).empty(), message_of(ok));
    BOOST_TEST((ok.entries == std::vector<std::string>{"P=helper-value"}));
    BOOST_TEST((ok.secrets == std::vector<std::string>{"helper-value"}));

    auto denied = resolve({from_process("P", "cat", {"/etc/hostname"})}, policy, ws);
    BOOST_TEST(code_of(denied) == "policy_secret_process_not_allowed");

    auto begun = std::chrono::steady_clock::now();
    auto slow = resolve({from_process("P", "sleep", {"30"}, 1)}, policy, ws);
    BOOST_TEST(code_of(slow) == "secret_unavailable");
    BOOST_TEST(mentions(slow, "timed out"));
    BOOST_TEST((std::chrono::steady_clock::now() - begun < 10s));

    auto flood = resolve({from_process("P", "head", {"-c", "100", "/dev/zero"}, 5, 4)}, policy, ws);
    BOOST_TEST(code_of(flood) == "secret_unavailable");
    BOOST_TEST(mentions(flood, "exceeded 4 bytes"), message_of(flood));

    auto failing = resolve({from_process("P", "false", {})}, policy, ws);
    BOOST_TEST(code_of(failing) == "secret_unavailable");
    BOOST_TEST(mentions(failing, "exited with status 1"));
}

BOOST_AUTO_TEST_CASE(secret_values_are_redacted_from_task_output) {
    workspace ws;
    ws.write("secrets/token", "tok-5f3a9c\n");
    auto parsed = parse_workflow(printenv_workflow("redact", {"PLAIN: {value: visible}"}), "redact.yaml");
    BOOST_REQUIRE(parsed.document);
    auto compiled = compile(*parsed.document);
    BOOST_REQUIRE(compiled.compiled);
    asio::io_context io;
    run_settings options;
    options.base_dir = ws.path;
    options.search_path = "/usr/bin:/bin";
    std::optional<run_report> report;
    async_run(io.get_executor(), *compiled.compiled, options, [&](run_report r) { report = std::move(r); });
    BOOST_REQUIRE(agentctl::test::run_with_deadline(io, 20s, [&] { return report.has_value(); }));
    const task_result& t = report->tasks.at(0);
    BOOST_TEST((t.state == task_state::succeeded));
    BOOST_TEST(std::string(stdout_of(t)).find("TOKEN=[REDACTED]") != std::string::npos, std::string(stdout_of(t)));
    BOOST_TEST(std::string(stdout_of(t)).find("PLAIN=visible") != std::string::npos);
    BOOST_TEST(std::string(stdout_of(t)).find("tok-5f3a9c") == std::string::npos);
    BOOST_TEST(to_json(t.output).find("tok-5f3a9c") == std::string::npos);
    // A builtin action's text is kept once, in its output, and reported from there.
    BOOST_TEST(t.streams_in_output);
    BOOST_TEST(t.stdout_text.empty());
    BOOST_TEST(std::string(stdout_of(t)) == t.output.at("stdout").as_string().c_str());
    string_sink sink;
    {
        json_writer w(sink);
        write_task_result(w, *compiled.compiled, 0, t);
    }
    BOOST_TEST(boost::json::parse(sink.text).at("stdout") == t.output.at("stdout"));
}

// Output passed through (run_settings::pass_output) is never read, so it cannot be redacted:
// a run with a secret is refused before anything runs; so is one on a backend without
// agentctl's own descriptors (docs/PARALLEL.md, "Output").
BOOST_AUTO_TEST_CASE(passed_through_output_is_refused_where_it_cannot_be_honest) {
    workspace ws;
    ws.write("secrets/token", "tok-5f3a9c\n");
    auto parsed = parse_workflow(printenv_workflow("passed", {}), "passed.yaml");
    BOOST_REQUIRE(parsed.document);
    auto compiled = compile(*parsed.document);
    BOOST_REQUIRE(compiled.compiled);
    for (backend_kind backend : {backend_kind::local, backend_kind::slurm}) {
        asio::io_context io;
        run_settings options;
        options.base_dir = ws.path;
        options.search_path = "/usr/bin:/bin";
        options.pass_output = true;
        options.backend = backend;
        std::optional<run_report> report;
        async_run(io.get_executor(), *compiled.compiled, options,
                  [&](run_report r) { report = std::move(r); });
        BOOST_REQUIRE(agentctl::test::run_with_deadline(io, 20s, [&] { return report.has_value(); }));
        BOOST_REQUIRE(report->error);
        BOOST_TEST((report->error->code == error_code::invalid_request));
        const std::string says = backend == backend_kind::slurm ? "slurm backend" : "secret";
        BOOST_TEST(report->error->message.find(says) != std::string::npos, report->error->message);
        BOOST_TEST((report->state != run_state::succeeded));
        for (const auto& t : report->tasks) BOOST_TEST(t.attempts == 0u);
    }
}
