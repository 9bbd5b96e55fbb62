// Secret values through the real CLI: a secret cut by a stream's cap, by the combined cap or
// by a kill leaves no part of itself in what is recorded or printed — `--output json`,
// `--output jsonl`, `--show-output`, the journal's files, `runs show` and its --stdout and
// --stderr (docs/SECRETS.md).
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace cli_test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

json::value parse_json(const std::string& text) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    BOOST_REQUIRE_MESSAGE(!ec, "not JSON: " << text.substr(0, 2000));
    return v;
}

// `count` x's on stdout, then `tail` (shell words), from a shell.
std::string xs_then(std::size_t count, const std::string& tail) {
    return "/usr/bin/head -c " + std::to_string(count) + " /dev/zero | /usr/bin/tr \\\\0 x; " + tail;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(secrets_cli)

// The probe of the issue: the 1 MiB-class cap ended inside a 23-byte secret and its first 16
// bytes were stored and printed. Here every cap cuts it, and a kill cuts its write short.
BOOST_AUTO_TEST_CASE(a_secret_cut_by_a_cap_or_a_kill_is_redacted_wherever_output_goes) {
    temp_dir dir;
    const std::string secret = ("Zq" + make_nonce() + "0123456789abcdefghijklmn").substr(0, 23);
    BOOST_REQUIRE(secret.size() == 23u);
    const std::string first8 = secret.substr(0, 8);  // any kept part of 8 bytes or more holds this
    // Task (and its action) → the stream cut, the action's settings, what must be stored.
    struct expectation {
        std::string stream;
        std::string command;
        std::string stored;
    };
    const std::string big(131072 - 16, 'x');  // a stream file of the journal (over 64 KiB)
    std::map<std::string, expectation> tasks = {
        // stdout cap inside the secret, 16 of its bytes kept
        {"stdout16",
         {"stdout",
          "stdoutLimitBytes: 131072, args: [-c, '" + xs_then(big.size(), "printf %s \"$TOKEN\"") + "']",
          big + "[REDACTED]"}},
        // stdout cap after its first byte
        {"stdout1",
         {"stdout", "stdoutLimitBytes: 1024, args: [-c, '" + xs_then(1023, "printf %s \"$TOKEN\"") + "']",
          std::string(1023, 'x') + "[REDACTED]"}},
        // stderr cap, 16 kept
        {"stderr16",
         {"stderr",
          "stderrLimitBytes: 1024, args: [-c, 'exec >&2; " + xs_then(1008, "printf %s \"$TOKEN\"") + "']",
          std::string(1008, 'x') + "[REDACTED]"}},
        // the combined cap, 22 kept
        {"combined22",
         {"stdout",
          "combinedOutputLimitBytes: 1024, args: [-c, '" + xs_then(1002, "printf %s \"$TOKEN\"") + "']",
          std::string(1002, 'x') + "[REDACTED]"}},
        // killed after writing the first 16 bytes
        {"killed16",
         {"stdout", "args: [-c, 'printf \"x%s\" \"${TOKEN%???????}\"; kill -KILL $$']", "x[REDACTED]"}},
    };
    std::string wf =
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: cut-secrets}\nspec:\n"
        "  policy: {processAllowlist: [sh], secretProcessAllowlist: [sh], environmentAllowlist: [TOKEN],"
        " approval: never}\n"
        "  actions:\n";
    for (const auto& [id, t] : tasks)
        wf += "    " + id + ": {kind: builtin.shell.exec, command: /bin/sh, env: {TOKEN: {env: TOKEN}}, " +
              t.command + "}\n";
    wf += "  tasks:\n";
    for (const auto& [id, t] : tasks) wf += "    - {id: " + id + ", uses: 'action:" + id + "'}\n";
    std::string path = dir.write("wf.yaml", wf);
    std::string state = dir.path() + "/state";
    std::string db = state + "/journal.db";
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state, "TOKEN=" + secret};
    o.bound = std::chrono::seconds(120);

    auto check_result = [&](const json::value& result, const std::string& id, const char* where) {
        const expectation& t = tasks.at(id);
        const json::object& r = result.as_object();
        for (const char* stream : {"stdout", "stderr"}) {
            const json::value* got = r.if_contains(stream);
            BOOST_REQUIRE_MESSAGE(got && got->is_string(), where << ": " << id << " has no " << stream);
            std::string text(got->as_string());
            if (t.stream == stream)
                BOOST_TEST(text == t.stored,
                           where << ": " << id << " " << stream << " ends \""
                                 << text.substr(text.size() - std::min<std::size_t>(text.size(), 40))
                                 << "\"");
            BOOST_TEST(text.find(first8) == std::string::npos, where << ": " << id << " " << stream);
        }
        BOOST_TEST(json::serialize(result).find(first8) == std::string::npos, where << ": " << id);
    };

    // --output json
    auto run = agentctl({"--output", "json", "run", path, "--keep-going"}, o);
    BOOST_TEST(run.exit_code == 4, run.err);
    BOOST_TEST(run.out.find(first8) == std::string::npos);
    BOOST_TEST(run.err.find(first8) == std::string::npos);
    json::value outcome = parse_json(run.out);
    for (const auto& [id, t] : tasks)
        check_result(outcome.at("data").at("tasks").at(id), id, "--output json");

    // --output jsonl: each taskFinished event
    auto lines = agentctl({"--output", "jsonl", "run", path, "--keep-going"}, o);
    BOOST_TEST(lines.exit_code == 4, lines.err);
    BOOST_TEST(lines.out.find(first8) == std::string::npos);
    std::size_t finished = 0;
    std::istringstream in(lines.out);
    for (std::string line; std::getline(in, line);) {
        json::value e = parse_json(line);
        if (e.as_object().if_contains("event") && e.at("event") == "taskFinished") {
            check_result(e.at("result"), std::string(e.at("taskId").as_string()), "--output jsonl");
            ++finished;
        }
    }
    BOOST_TEST(finished == tasks.size());

    // --show-output: each task's stdout, then the summary with the tails of stderr
    auto shown = agentctl({"run", path, "--show-output", "--keep-going"}, o);
    BOOST_TEST(shown.exit_code == 4, shown.err);
    BOOST_TEST(shown.out.find(first8) == std::string::npos);
    BOOST_TEST(shown.err.find(first8) == std::string::npos);
    BOOST_TEST(shown.out.find(std::string(1023, 'x') + "[REDACTED]") != std::string::npos, shown.out.size());
    BOOST_TEST(shown.out.find("x[REDACTED]") != std::string::npos);

    // The journal's files: the database, its -wal, the stream files.
    std::size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(state)) {
        if (!e.is_regular_file()) continue;
        ++files;
        BOOST_TEST(read_file(e.path()).find(first8) == std::string::npos, e.path()
                                                                              << " holds part of the secret");
    }
    BOOST_TEST(files >= 2u);

    // runs show: the result of the last run, and each stream raw.
    auto list = agentctl({"--output", "json", "runs", "list", "--db", db, "--limit", "1"}, o);
    BOOST_REQUIRE_MESSAGE(list.exit_code == 0, list.err);
    std::string id(parse_json(list.out).at("data").at("runs").as_array().at(0).at("runId").as_string());
    auto show = agentctl({"--output", "json", "runs", "show", id, "--db", db}, o);
    BOOST_REQUIRE_MESSAGE(show.exit_code == 0, show.err);
    json::value report = parse_json(show.out);
    for (const auto& [task, t] : tasks)
        check_result(report.at("data").at("tasks").at(task), task, "runs show");
    auto human = agentctl({"runs", "show", id, "--db", db}, o);
    BOOST_TEST(human.out.find(first8) == std::string::npos);
    for (const auto& [task, t] : tasks) {
        auto raw = agentctl({"runs", "show", id, "--db", db, "--task", task, "--" + t.stream}, o);
        BOOST_TEST(raw.exit_code == 0, raw.err);
        BOOST_TEST(
            (raw.out == t.stored),
            "runs show --" << t.stream << " of " << task << " ends \""
                           << raw.out.substr(raw.out.size() - std::min<std::size_t>(raw.out.size(), 40))
                           << "\"");
    }
}

BOOST_AUTO_TEST_SUITE_END()
