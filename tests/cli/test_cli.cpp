// The CLI end to end: real binary, real processes, exit codes, envelopes, golden JSON.
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cli_test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

/// A workflow whose actions run the probe; `tasks` and extra `actions` are YAML text.
std::string probe_workflow(const std::string& actions, const std::string& tasks, const std::string& extra_spec = "") {
    return "apiVersion: agentctl.dev/v1\n"
           "kind: Workflow\n"
           "metadata: {name: cli-test}\n"
           "spec:\n"
           "  policy: {processAllowlist: [probe, \"true\", sh], approval: never}\n" +
           extra_spec +
           "  actions:\n"
           "    sleep: {kind: builtin.shell.exec, command: " + probe_bin() + ", args: [sleep, \"30\", --nonce, \"${{ with.nonce }}\"]}\n"
           "    ok: {kind: builtin.shell.exec, command: /bin/true}\n"
           "    fail: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"printf '\\\\033[31mred alert\\\\n' >&2; exit 3\"]}\n" +
           actions + "  tasks:\n" + tasks;
}

json::value parse_json(const std::string& text) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    BOOST_REQUIRE_MESSAGE(!ec, "not JSON: " << text);
    return v;
}

bool nothing_left(const std::string& nonce) {
    // The run has returned: nothing tagged with the nonce may still exist.
    return processes_with(nonce).empty();
}

/// The member names of a JSON object, in order.
std::vector<std::string> keys_of(const json::value& v) {
    std::vector<std::string> out;
    for (const auto& m : v.as_object()) out.emplace_back(m.key());
    return out;
}

/// The envelope of a failure (stderr under --output json), as specified.
void check_error_envelope(const std::string& text, int exit_code) {
    json::value v = parse_json(text);
    BOOST_TEST((keys_of(v) == std::vector<std::string>{"apiVersion", "kind", "ok", "error", "diagnostics"}),
               text);
    BOOST_TEST(v.at("apiVersion").as_string() == "agentctl.dev/cli/v1");
    BOOST_TEST(v.at("kind").as_string() == "Error");
    BOOST_TEST(v.at("ok").as_bool() == false);
    BOOST_TEST((keys_of(v.at("error")) == std::vector<std::string>{"message", "exitCode"}), text);
    BOOST_TEST(!v.at("error").at("message").as_string().empty());
    BOOST_TEST(v.at("error").at("exitCode").as_int64() == exit_code);
    BOOST_TEST(v.at("diagnostics").is_array());
}

/// Golden form of a document printed for a workflow in `dir`: digests, the folder and the
/// probe's path replaced (the digests after checking their form).
std::string golden_form(const std::string& text, const temp_dir& dir) {
    json::value v = parse_json(text);
    if (v.is_object() && v.as_object().contains("data") && v.at("data").is_object())
        for (const char* key : {"workflowDigest", "planDigest"})
            if (const auto* d = v.at("data").as_object().if_contains(key)) {
                std::string digest(d->as_string());
                BOOST_TEST(digest.size() == 71u, key << ": " << digest);
                BOOST_TEST(digest.rfind("sha256:", 0) == 0u, key << ": " << digest);
            }
    return normalise_json(text, {"workflowDigest", "planDigest"},
                          {{dir.path(), "<dir>"}, {probe_bin(), "<probe>"}}) +
           "\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(version_in_both_forms) {
    auto human = agentctl({"version"});
    BOOST_TEST(human.exit_code == 0);
    BOOST_TEST(human.out.rfind("agentctl ", 0) == 0u);
    BOOST_TEST(human.out.find('\n') == human.out.size() - 1, human.out);  // one line
    auto machine = agentctl({"--output", "json", "version"});
    BOOST_TEST(machine.exit_code == 0);
    BOOST_TEST(machine.err.empty(), machine.err);
    BOOST_TEST(machine.out.back() == '\n');
    json::value v = parse_json(machine.out);
    // Exactly one document, in the specified envelope.
    BOOST_TEST((keys_of(v) == std::vector<std::string>{"apiVersion", "kind", "ok", "data", "diagnostics"}));
    BOOST_TEST(v.at("apiVersion").as_string() == "agentctl.dev/cli/v1");
    BOOST_TEST(v.at("kind").as_string() == "Version");
    BOOST_TEST(v.at("ok").as_bool());
    BOOST_TEST(v.at("diagnostics").as_array().empty());
    BOOST_TEST(human.out == "agentctl " + std::string(v.at("data").at("version").as_string()) + "\n");
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_and_honour_json) {
    for (auto args : std::vector<std::vector<std::string>>{
             {}, {"frobnicate"}, {"check"}, {"run", "a", "b"}, {"run", "--jobs", "0", "x.yaml"},
             {"check", "--jobs", "4", "x.yaml"}, {"--output", "yaml", "version"}, {"--bogus", "version"}}) {
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 2);
        BOOST_TEST(r.err.find("agentctl:") != std::string::npos, r.err);
        auto j = args;
        j.insert(j.begin(), {"--output", "json"});
        if (std::find(args.begin(), args.end(), "yaml") != args.end()) continue;
        auto rj = agentctl(j);
        BOOST_TEST(rj.exit_code == 2);
        BOOST_TEST(rj.out.empty());
        check_error_envelope(rj.err, 2);
    }
}

BOOST_AUTO_TEST_CASE(check_valid_and_invalid_documents) {
    temp_dir dir;
    auto good = dir.write("good.yaml", probe_workflow("", "    - {id: a, uses: action:ok}\n"));
    auto r = agentctl({"check", good});
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out == "valid: cli-test (1 task)\n");
    BOOST_TEST(r.err.empty(), r.err);
    auto j = agentctl({"--output", "json", "check", good});
    BOOST_TEST(j.exit_code == 0);
    check_golden("check.valid.json", golden_form(j.out, dir));

    // Two problems at once, each located.
    auto bad = dir.write("bad.yaml", probe_workflow("", "    - {id: a, uses: action:ok, timeoutSecond: 5}\n"
                                                        "    - {id: b, uses: action:nope}\n"));
    auto rb = agentctl({"check", bad});
    BOOST_TEST(rb.exit_code == 2);
    BOOST_TEST(rb.err.find("bad.yaml:12:") != std::string::npos, rb.err);
    BOOST_TEST(rb.err.find("unknown_key") != std::string::npos);
    BOOST_TEST(rb.err.find("did you mean \"timeoutSeconds\"") != std::string::npos, rb.err);
    BOOST_TEST(rb.err.find("unknown_action") != std::string::npos);
    auto jb = agentctl({"--output", "json", "check", bad});
    BOOST_TEST(jb.exit_code == 2);
    BOOST_TEST(jb.out.empty());
    check_error_envelope(jb.err, 2);
    // Both problems, each with every specified member, and nothing else.
    json::value e = parse_json(jb.err);
    BOOST_TEST(e.at("diagnostics").as_array().size() == 2u);
    for (const auto& d : e.at("diagnostics").as_array())
        BOOST_TEST((keys_of(d) == std::vector<std::string>{"code", "severity", "message", "file", "line",
                                                           "column", "path", "help"}));
    check_golden("check.invalid.json", golden_form(jb.err, dir));
}

BOOST_AUTO_TEST_CASE(policy_violation_exits_3) {
    temp_dir dir;
    std::string wf = probe_workflow("    cat: {kind: builtin.shell.exec, command: /bin/cat}\n",
                                    "    - {id: a, uses: action:cat}\n");
    auto path = dir.write("wf.yaml", wf);
    auto r = agentctl({"check", path});
    BOOST_TEST(r.exit_code == 3);
    BOOST_TEST(r.err.find("policy_process_not_allowed") != std::string::npos, r.err);
    auto j = agentctl({"--output", "json", "check", path});
    BOOST_TEST(j.exit_code == 3);
    BOOST_TEST(j.out.empty());
    check_error_envelope(j.err, 3);
    check_golden("check.policy.json", golden_form(j.err, dir));
}

BOOST_AUTO_TEST_CASE(plan_json_is_byte_stable) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", probe_workflow("", "    - {id: a, uses: action:ok}\n    - {id: b, uses: action:ok, needs: [a]}\n"));
    auto one = agentctl({"--output", "json", "plan", wf});
    auto two = agentctl({"--output", "json", "plan", wf});
    BOOST_TEST(one.exit_code == 0);
    BOOST_TEST(one.out == two.out);
    json::value v = parse_json(one.out);
    BOOST_TEST(v.at("kind").as_string() == "Plan");
    BOOST_TEST(v.at("data").at("order").as_array().size() == 2u);
    auto human = agentctl({"plan", wf});
    BOOST_TEST(human.out.find("order (2 tasks): a -> b") != std::string::npos, human.out);
}

BOOST_AUTO_TEST_CASE(quickstart_runs_and_matches_its_golden_outcome) {
    std::string wf = data_dir() + "/../../examples/quickstart.yaml";
    auto r = agentctl({"--output", "json", "run", wf});
    BOOST_TEST(r.exit_code == 0, r.err);
    check_golden("quickstart.run.json", normalise_run_json(r.out) + "\n");
    auto human = agentctl({"run", wf});
    BOOST_TEST(human.exit_code == 0);
    BOOST_TEST(human.err.find("succeeded in") != std::string::npos, human.err);
    BOOST_TEST(human.out.find("outputs:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(failed_task_exits_4_and_shows_escaped_stderr_tail) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", probe_workflow("", "    - {id: broken, uses: action:fail}\n    - {id: after, uses: action:ok, needs: [broken]}\n"));
    auto r = agentctl({"--color", "never", "run", wf});
    BOOST_TEST(r.exit_code == 4);
    BOOST_TEST(r.err.find("failed broken: exited with status 3") != std::string::npos, r.err);
    // The probe wrote ANSI escapes to stderr: the terminal must only ever see them escaped.
    BOOST_TEST(r.err.find("\x1b[") == std::string::npos);
    BOOST_TEST(r.err.find("\\x1b[") != std::string::npos, r.err);
    auto j = agentctl({"--output", "json", "run", wf});
    BOOST_TEST(j.exit_code == 4);
    check_golden("run.failed.json", golden_form(j.out, dir));
}

BOOST_AUTO_TEST_CASE(approval_required_stops_before_any_effect) {
    temp_dir dir;
    std::string marker = dir.path() + "/touched";
    std::string wf = probe_workflow(
        "    touch: {kind: builtin.shell.exec, command: " + probe_bin() + ", args: [write-file, " + marker + ", \"1\"]}\n",
        "    - {id: first, uses: action:touch}\n    - {id: second, uses: action:ok}\n");
    wf.replace(wf.find("approval: never"), 15, "approval: mutations");
    auto path = dir.write("wf.yaml", wf);
    auto r = agentctl({"run", path});
    BOOST_TEST(r.exit_code == 3);
    BOOST_TEST(r.err.find("first, second") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("approval: never") != std::string::npos, r.err);
    BOOST_TEST(!std::filesystem::exists(marker));
    auto j = agentctl({"--output", "json", "run", path});
    BOOST_TEST(j.exit_code == 3);
    BOOST_TEST(j.out.empty());
    check_error_envelope(j.err, 3);
    check_golden("run.approval.json", golden_form(j.err, dir));
    // --interactive without a terminal is refused too, before anything runs.
    auto i = agentctl({"run", "--interactive", path});
    BOOST_TEST(i.exit_code == 3);
    BOOST_TEST(!std::filesystem::exists(marker));
}

BOOST_AUTO_TEST_CASE(timeout_seconds_cancels_the_run_with_130) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = dir.write("wf.yaml", probe_workflow("", "    - {id: done, uses: action:ok}\n"
                                                      "    - {id: long, uses: action:sleep, needs: [done], with: {nonce: " + nonce + "}}\n"));
    auto r = agentctl({"--output", "json", "run", "--timeout-seconds", "0.5", wf});
    BOOST_TEST(r.exit_code == 130);
    BOOST_TEST(r.wall < 20s);  // not the sleeper's 30 s
    // The finished task's result, the cancelled one's (SIGKILL: killGraceSeconds is 0).
    check_golden("run.cancelled.json", golden_form(r.out, dir));
    BOOST_TEST(nothing_left(nonce));
}

BOOST_AUTO_TEST_CASE(sigint_mid_run_leaves_nothing_behind) {
    temp_dir dir;
    std::string nonce = make_nonce();
    std::string tasks = "    - id: sleepers\n      uses: action:sleep\n      with: {nonce: " + nonce + "}\n"
                        "      foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8]}\n";
    auto wf = dir.write("wf.yaml", probe_workflow("", tasks));
    bool sent = false;
    command_options o;
    o.bound = 30s;
    o.poll = [&](pid_t pid) {
        if (processes_with(nonce).size() < 8) return false;  // all eight are running
        ::kill(pid, SIGINT);
        sent = true;
        return true;
    };
    auto r = agentctl({"--output", "json", "run", "--jobs", "8", wf}, o);
    BOOST_TEST(sent);
    BOOST_TEST(r.exit_code == 130, r.err);
    BOOST_TEST(!r.timed_out);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("state").as_string() == "cancelled");
    for (const auto& t : v.at("data").at("tasks").as_object())
        if (t.key() != "sleepers") BOOST_TEST(t.value().at("state").as_string() == "cancelled");
    BOOST_TEST(nothing_left(nonce));
}

BOOST_AUTO_TEST_CASE(jsonl_streams_events_then_the_outcome) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", probe_workflow("", "    - {id: a, uses: action:ok}\n    - {id: b, uses: action:ok, needs: [a]}\n"));
    auto r = agentctl({"--output", "jsonl", "run", wf});
    BOOST_TEST(r.exit_code == 0);
    // One JSON document per line: the events in order, then the outcome.
    std::string normalised;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) normalised += golden_form(line, dir);
    check_golden("run.events.jsonl", normalised);
}

BOOST_AUTO_TEST_CASE(inputs_from_file_and_flags_in_order) {
    temp_dir dir;
    std::string wf = probe_workflow(
        "    echo: {kind: builtin.assign}\n",
        "    - {id: e, uses: action:echo, with: {a: \"${{ inputs.a }}\", b: \"${{ inputs.b }}\"}}\n",
        "  inputs: {a: 1, b: 2}\n");
    auto path = dir.write("wf.yaml", wf);
    auto inputs = dir.write("inputs.yaml", "a: from-file\nb: from-file\n");
    auto r = agentctl({"--output", "json", "run", path, "--inputs-file", inputs, "--input", "b=[1, 2]"});
    BOOST_TEST(r.exit_code == 0, r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("output").at("e").at("a").as_string() == "from-file");
    BOOST_TEST(v.at("data").at("output").at("e").at("b").as_array().size() == 2u);
    auto bad = agentctl({"run", path, "--input", "novalue"});
    BOOST_TEST(bad.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(two_thousand_real_processes_at_jobs_64) {
    temp_dir dir;
    std::string tasks = "    - id: many\n      uses: action:ok\n      foreach: {items: \"${{ inputs.n }}\"}\n";
    std::string items = "[";
    for (int i = 0; i < 2000; ++i) items += (i ? "," : "") + std::to_string(i);
    items += "]";
    auto wf = dir.write("wf.yaml", probe_workflow("", tasks, "  inputs: {n: " + items + "}\n"));
    command_options o;
    o.bound = 120s;
    auto r = agentctl({"--output", "json", "run", "--jobs", "64", wf}, o);
    BOOST_TEST(r.exit_code == 0, r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(v.at("data").at("tasks").as_object().size() == 2001u);
    std::size_t succeeded = 0;
    for (const auto& t : v.at("data").at("tasks").as_object())
        succeeded += t.value().at("state").as_string() == "succeeded";
    BOOST_TEST(succeeded == 2001u);
}

BOOST_AUTO_TEST_CASE(low_fd_limit_lowers_jobs_with_a_warning) {
    temp_dir dir;
    std::string tasks = "    - id: many\n      uses: action:ok\n      foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n";
    auto wf = dir.write("wf.yaml", probe_workflow("", tasks));
    // prlimit sets both limits for the child: 128 descriptors cannot hold 4096 jobs.
    auto r = run({"/usr/bin/prlimit", "--nofile=128:128", agentctl_bin(), "run", "--jobs", "4096", wf});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("jobs_lowered_to_fit_fd_limit") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(interactive_approval_asks_per_task_on_a_terminal) {
    temp_dir dir;
    std::string tasks, actions;
    for (std::string name : {"one", "two", "three", "four"}) {
        actions += "    " + name + ": {kind: builtin.shell.exec, command: " + probe_bin() + ", args: [write-file, " +
                   dir.path() + "/" + name + ", \"1\"]}\n";
        tasks += "    - {id: " + name + ", uses: action:" + name + ", failure: continue}\n";
    }
    std::string wf = probe_workflow(actions, tasks);
    wf.replace(wf.find("approval: never"), 15, "approval: always");
    auto path = dir.write("wf.yaml", wf);
    // yes, no, then all (which also covers "four" without asking).
    auto r = run_on_terminal({agentctl_bin(), "run", "--jobs", "1", "--interactive", path},
                             {{"approve task \"one\"", "y\n"}, {"approve task \"two\"", "n\n"},
                              {"approve task \"three\"", "a\n"}});
    BOOST_TEST(!r.timed_out, r.out);
    BOOST_TEST(r.exit_code == 3, r.out);
    BOOST_TEST(std::filesystem::exists(dir.path() + "/one"));
    BOOST_TEST(!std::filesystem::exists(dir.path() + "/two"));
    BOOST_TEST(std::filesystem::exists(dir.path() + "/three"));
    BOOST_TEST(std::filesystem::exists(dir.path() + "/four"));
    BOOST_TEST(r.out.find("approve task \"four\"") == std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(terminal_progress_is_redrawn_not_flooded) {
    temp_dir dir;
    std::string tasks = "    - id: nap\n      uses: action:nap\n      foreach: {items: \"${{ inputs.n }}\"}\n";
    std::string items = "[";
    for (int i = 0; i < 40; ++i) items += (i ? "," : "") + std::to_string(i);
    auto wf = dir.write("wf.yaml", probe_workflow("    nap: {kind: builtin.shell.exec, command: " + probe_bin() +
                                                      ", args: [sleep, \"0.1\"]}\n",
                                                  tasks, "  inputs: {n: " + items + "]}\n"));
    auto r = run_on_terminal({agentctl_bin(), "run", "--jobs", "4", wf}, {});
    BOOST_TEST(r.exit_code == 0, r.out);
    BOOST_TEST(r.out.find(" running · ") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("40 tasks (40 succeeded)") != std::string::npos, r.out);
    // ~1 s of work redrawn every 200 ms: a handful of redraws, never one line per task.
    std::size_t redraws = 0;
    for (std::size_t at = 0; (at = r.out.find("\r\x1b[2K", at)) != std::string::npos; ++at) ++redraws;
    BOOST_TEST(redraws >= 2u);
    BOOST_TEST(redraws < 40u, r.out);
}

BOOST_AUTO_TEST_CASE(second_sigint_kills_at_once) {
    temp_dir dir;
    std::string nonce = make_nonce();
    // Children that answer SIGTERM by taking 60 s to exit, under a 30 s kill grace.
    std::string actions = "    stubborn: {kind: builtin.shell.exec, command: " + probe_bin() +
                          ", args: [trap-term, slow-exit, \"60\", --nonce, " + nonce + ", --marker, \"" + dir.path() +
                          "/ready-${{ vars.item }}\", --term-marker, \"" + dir.path() + "/term-${{ vars.item }}\"]}\n";
    std::string tasks = "    - {id: s, uses: action:stubborn, foreach: {items: [1, 2, 3]}}\n";
    auto wf = dir.write("wf.yaml", probe_workflow(actions, tasks, "  runtime: {killGraceSeconds: 30}\n"));
    int stage = 0;
    command_options o;
    o.bound = 50s;
    auto all = [&](const char* prefix) {
        for (int i = 1; i <= 3; ++i)
            if (!std::filesystem::exists(dir.path() + "/" + prefix + std::to_string(i))) return false;
        return true;
    };
    o.poll = [&](pid_t pid) {
        if (stage == 0 && all("ready-")) {
            ::kill(pid, SIGINT);  // graceful: SIGTERM, which they handle slowly
            stage = 1;
        } else if (stage == 1 && all("term-")) {
            ::kill(pid, SIGINT);  // the second one must not wait for the grace
            stage = 2;
            return true;
        }
        return false;
    };
    auto r = agentctl({"--output", "json", "run", "--jobs", "3", wf}, o);
    BOOST_TEST(stage == 2);
    BOOST_TEST(r.exit_code == 130, r.err);
    BOOST_TEST(r.wall < 20s);  // neither the 30 s grace nor the 60 s slow exit
    BOOST_TEST(parse_json(r.out).at("data").at("state").as_string() == "cancelled");
    BOOST_TEST(nothing_left(nonce));
}
