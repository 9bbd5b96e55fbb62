// The CLI end to end: real binary, real processes, exit codes, envelopes, golden JSON.
#include "../support/child_ids.hpp"
#include "../support/skips.hpp"
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <string.h>
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
std::string golden_form(const std::string& text, const temp_dir& dir, const std::string& nonce = "") {
    json::value v = parse_json(text);
    if (v.is_object() && v.as_object().contains("data") && v.at("data").is_object())
        for (const char* key : {"workflowDigest", "planDigest"})
            if (const auto* d = v.at("data").as_object().if_contains(key)) {
                std::string digest(d->as_string());
                BOOST_TEST(digest.size() == 71u, key << ": " << digest);
                BOOST_TEST(digest.rfind("sha256:", 0) == 0u, key << ": " << digest);
            }
    std::vector<std::pair<std::string, std::string>> replace = {{dir.path(), "<dir>"}, {probe_bin(), "<probe>"}};
    if (!nonce.empty()) replace.emplace_back(nonce, "<nonce>");
    return normalise_json(text, {"workflowDigest", "planDigest"}, replace) + "\n";
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
    // A value that is no number says so, for run and resume alike.
    for (const char* command : {"run", "resume"}) {
        auto r = agentctl({command, "-j", "abc", "x"});
        BOOST_TEST(r.exit_code == 2);
        BOOST_TEST(r.err.find("--jobs abc: not a number") != std::string::npos, r.err);
    }
    BOOST_TEST(agentctl({"run", "-j", "2.5", "x"}).err.find("a whole number between 1 and 4096") !=
               std::string::npos);
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
    check_golden("run.cancelled.json", golden_form(r.out, dir, nonce));
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

BOOST_AUTO_TEST_CASE(binary_streams_go_as_base64_in_json_and_as_text_in_jsonl) {
    temp_dir dir;
    // `bin` prints a NUL byte and a control byte, `text` UTF-8 text: only the first is binary.
    auto wf =
        dir.write("wf.yaml",
                  probe_workflow("    bin: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"printf "
                                 "'a\\\\000b\\\\001'\"]}\n"
                                 "    text: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"printf "
                                 "'h\\\\303\\\\251llo'\"]}\n",
                                 "    - {id: bin, uses: action:bin}\n    - {id: text, uses: action:text}\n"));
    auto r = agentctl({"--output", "json", "run", wf});
    BOOST_TEST(r.exit_code == 0, r.err);
    json::value v = parse_json(r.out);
    const auto& bin = v.at("data").at("tasks").at("bin").as_object();
    BOOST_TEST(bin.at("stdout").is_null(), r.out);
    BOOST_TEST(bin.at("stdoutBase64").as_string() == "YQBiAQ==", r.out);  // "a\0b\1"
    BOOST_TEST(bin.at("stderr").as_string() == "");                       // empty is text
    BOOST_TEST(!bin.contains("stderrBase64"));
    const auto& text = v.at("data").at("tasks").at("text").as_object();
    BOOST_TEST(text.at("stdout").as_string() == "h\xC3\xA9llo", r.out);
    BOOST_TEST(!text.contains("stdoutBase64"), r.out);
    // Once: not in the run's output map either.
    BOOST_TEST(r.out.find("YQBiAQ==") == r.out.rfind("YQBiAQ=="), r.out);

    // jsonl is unchanged: the event and the final envelope carry the text, NUL escaped.
    auto l = agentctl({"--output", "jsonl", "run", wf});
    BOOST_TEST(l.exit_code == 0, l.err);
    BOOST_TEST(l.out.find("Base64") == std::string::npos, l.out);
    BOOST_TEST(l.out.find(R"("stdout":"a\u0000b\u0001")") != std::string::npos, l.out);

    // runs show --output json reads the journal and writes the same form.
    std::string run_id(v.at("data").at("runId").as_string());
    auto show = agentctl({"--output", "json", "runs", "show", run_id, "--task", "bin"});
    BOOST_TEST(show.exit_code == 0, show.err);
    json::value s = parse_json(show.out);
    BOOST_TEST(s.at("data").at("result").at("stdoutBase64").as_string() == "YQBiAQ==", show.out);
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
    BOOST_TEST(v.at("data").at("output").at("e").at("output").at("a").as_string() == "from-file");
    BOOST_TEST(v.at("data").at("output").at("e").at("output").at("b").as_array().size() == 2u);
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

// Captures are read into memory that earlier ones left to the allocator, never zero-filled,
// and mapped in ahead of each read (docs/CAPTURE.md, "Fresh memory"): one task after another,
// longer ones first, each task's stdout is exactly its own bytes, with a journal (read back from
// its files) and without one (from memory).
BOOST_AUTO_TEST_CASE(a_task_never_shows_bytes_of_an_earlier_task) {
    temp_dir dir;
    const std::vector<std::pair<int, char>> outputs = {{900000, 'a'},  {300000, 'b'}, {70000, 'c'},
                                                       {1048575, 'd'}, {65537, 'e'},  {4097, 'f'},
                                                       {1048576, 'g'}, {200000, 'h'}};
    std::string actions, tasks;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        auto [bytes, c] = outputs[i];
        std::string id = std::string("t") + std::to_string(i);
        actions += "    " + id + ": {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"head -c " +
                   std::to_string(bytes) + " /dev/zero | tr '\\\\000' " + c +
                   "\"], stdoutLimitBytes: 1048576}\n";
        tasks += "    - {id: " + id + ", uses: action:" + id +
                 (i ? ", needs: [t" + std::to_string(i - 1) + "]" : "") + "}\n";
    }
    auto wf = dir.write("wf.yaml", probe_workflow(actions, tasks));
    for (bool journal : {true, false}) {
        std::vector<std::string> args = {"--output", "json", "run", "--jobs", "1", wf};
        if (!journal) args.push_back("--no-journal");
        auto r = agentctl(args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        json::value v = parse_json(r.out);
        for (std::size_t i = 0; i < outputs.size(); ++i) {
            auto [bytes, c] = outputs[i];
            std::string id = std::string("t") + std::to_string(i);
            const auto& out = v.at("data").at("tasks").at(id).at("stdout").as_string();
            BOOST_TEST(out.size() == static_cast<std::size_t>(bytes),
                       id << (journal ? " journal" : " no journal"));
            BOOST_TEST(out.find_first_not_of(c) == json::string::npos,
                       id << (journal ? " journal" : " no journal"));
        }
    }
}

// Without a journal, human output keeps no stream of a task that succeeded (nothing would print
// it), and nothing else keeps a copy: not the foreach aggregate nothing reads, not the run's
// output map (docs/CAPTURE.md, "Without a journal"). 64 tasks of 1 MiB at --jobs 8 then peak
// as high as 64 tasks of 1 byte plus what their captures in flight hold: a bound on memory
// (half the 64 MiB a report keeping them would hold), not a timing.
BOOST_AUTO_TEST_CASE(no_journal_memory_is_bounded_by_the_streams_kept) {
    temp_dir dir;
    auto workflow = [&](const std::string& name, int bytes) {
        std::string items = "[";
        for (int i = 0; i < 64; ++i) items += (i ? "," : "") + std::to_string(i);
        return dir.write(
            name,
            "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: mem}\nspec:\n"
            "  policy: {processAllowlist: [head], approval: never}\n"
            "  actions:\n    out: {kind: builtin.shell.exec, command: /usr/bin/head, args: [-c, \"" +
                std::to_string(bytes) +
                "\", /dev/zero], stdoutLimitBytes: 2097152}\n"
                "  tasks:\n    - {id: each, uses: action:out, foreach: {items: " +
                items + "]}}\n");
    };
    command_options o = without_asan_quarantine();
    o.bound = 120s;
    auto quiet = agentctl({"run", "-q", "--no-journal", "--jobs", "8", workflow("quiet.yaml", 1)}, o);
    auto loud = agentctl({"run", "-q", "--no-journal", "--jobs", "8", workflow("loud.yaml", 1 << 20)}, o);
    BOOST_TEST(quiet.exit_code == 0, quiet.err);
    BOOST_TEST(loud.exit_code == 0, loud.err);
    const long printed_kib = 64 * 1024;  // 64 streams of 1 MiB, none kept
    BOOST_TEST_MESSAGE("peak RSS " << loud.max_rss_kib << " KiB after 64 MiB, " << quiet.max_rss_kib
                                   << " KiB after 64 bytes");
    BOOST_TEST(loud.max_rss_kib - quiet.max_rss_kib < printed_kib / 2,
               "peak RSS " << loud.max_rss_kib << " KiB after 64 MiB of streams, " << quiet.max_rss_kib
                           << " KiB after 64 bytes");
    // The aggregate kept nothing, yet the document lists its items, from the children's results.
    auto doc = agentctl({"--output", "json", "run", "--no-journal", workflow("doc.yaml", 3)}, o);
    BOOST_TEST(doc.exit_code == 0, doc.err);
    json::value v = parse_json(doc.out);
    const auto& items = v.at("data").at("tasks").at("each").at("output").at("items").as_array();
    BOOST_TEST(items.size() == 64u);
    const std::string last = child_id_in(doc.out, "each--0063");
    BOOST_TEST(test_support::short_id(std::string(items.at(63).at("taskId").as_string())) == "each--0063");
    BOOST_TEST(items.at(63).at("output").at("exitCode").as_int64() == 0);
    BOOST_TEST(v.at("data").at("output").at("each").at("items").as_array().size() == 64u);
    BOOST_TEST(v.at("data").at("tasks").at(last).at("stdoutBase64").as_string() == "AAAA");
}

// The CLI's heap starts with 64 MiB on transparent huge pages (docs/CAPTURE.md, "Huge pages"):
// `check` of a workflow of 3 000 actions writes ~25 MiB of memory and takes ~6 000 page faults on
// 4 KiB pages, far fewer on 2 MiB ones. A bound on faults counted by the kernel, not a timing.
BOOST_AUTO_TEST_CASE(the_heap_is_on_huge_pages) {
    temp_dir dir;
    std::string actions;
    for (int i = 0; i < 3000; ++i) {
        std::string n = std::to_string(i);
        actions += "    act-" + n + ":\n      kind: builtin.shell.exec\n      description: \"action number " +
                   n + "\"\n      command: echo\n      args: [--flag-" + n + ", \"value with spaces " + n +
                   "\", a, b, c, d, e, f]\n      env: {TOKEN: {value: \"token-" + n +
                   "\"}}\n      timeoutSeconds: 5\n      stdoutLimitBytes: 65536\n";
    }
    auto wf = dir.write("big.yaml",
                        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: big}\nspec:\n"
                        "  policy: {processAllowlist: [echo], environmentAllowlist: [TOKEN], "
                        "approval: never}\n  actions:\n" +
                            actions + "  tasks:\n    - {id: one, uses: action:act-0}\n");
    auto r = agentctl({"check", wf});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    BOOST_TEST_MESSAGE("check: " << r.minor_faults << " minor faults, peak RSS " << r.max_rss_kib << " KiB");
#if defined(__SANITIZE_ADDRESS__)
    // The sanitizer's allocator replaces glibc's: there is no glibc heap to put on huge pages.
    BOOST_TEST_MESSAGE("AddressSanitizer build: its allocator, not glibc's; checked in the plain build");
#else
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    if (modes.find("[never]") != std::string::npos || modes.empty()) {
        test_support::cannot_check("transparent huge pages are off on this host (" + modes + ")");
        return;
    }
    // 4 KiB pages: ~6 000 (25 MiB); 2 MiB pages: ~700, the binary's own pages most of them.
    BOOST_TEST(r.minor_faults < 2500, r.minor_faults << " minor faults: the heap is on 4 KiB pages");
#endif
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

namespace {

/// Field `n` (1-based, as in proc(5)) of /proc/PID/stat; empty if the process is gone.
std::string stat_field(pid_t pid, int n) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) return "";
    std::istringstream fields(line.substr(close + 2));
    std::string field;
    for (int i = 3; i <= n && fields >> field;) ++i;
    return field;
}

std::string sleepers_workflow(const temp_dir& dir, const std::string& nonce) {
    return dir.write("wf.yaml",
                     probe_workflow("",
                                    "    - {id: done, uses: action:ok}\n"
                                    "    - id: sleepers\n      uses: action:sleep\n      needs: [done]\n"
                                    "      with: {nonce: " +
                                        nonce +
                                        "}\n"
                                        "      foreach: {items: [1, 2, 3, 4]}\n"));
}

/// The outcome of one cancellation: the finished task kept, every sleeper cancelled by
/// agentctl (SIGKILL, killGraceSeconds being 0), none dead of a signal of its own.
void check_cancelled_sleepers(const json::value& v) {
    BOOST_TEST(v.at("data").at("state").as_string() == "cancelled");
    const auto& tasks = v.at("data").at("tasks").as_object();
    BOOST_TEST(tasks.at("done").at("state").as_string() == "succeeded");
    int sleepers = 0;
    for (const auto& t : tasks) {
        if (!t.key().starts_with("sleepers--")) continue;
        ++sleepers;
        BOOST_TEST(t.value().at("state").as_string() == "cancelled", t.key());
        BOOST_TEST(t.value().at("signal").as_string() == "SIGKILL", t.key());
        BOOST_TEST(t.value().at("error").at("code").as_string() == "cancelled", t.key());
    }
    BOOST_TEST(sleepers == 4);
}

}  // namespace

// T-SIG-07: SIGTERM, and SIGHUP (its terminal closed), cancel the run as SIGINT does: what had
// finished keeps its result, the running tasks are cancelled and their trees are gone, and
// agentctl exits 130 (README and man page: "130 cancelled").
BOOST_AUTO_TEST_CASE(sigterm_and_sighup_cancel_like_sigint) {
    for (int sig : {SIGTERM, SIGHUP}) {
        temp_dir dir;
        std::string nonce = make_nonce();
        auto wf = sleepers_workflow(dir, nonce);
        bool sent = false;
        command_options o;
        o.bound = 30s;
        o.poll = [&](pid_t pid) {
            if (processes_with(nonce).size() < 4) return false;  // all four are running
            ::kill(pid, sig);
            sent = true;
            return true;
        };
        auto r = agentctl({"--output", "json", "run", "--jobs", "4", wf}, o);
        BOOST_TEST(sent, sigabbrev_np(sig));
        BOOST_TEST(!r.timed_out);
        BOOST_TEST(r.signal == 0, sigabbrev_np(sig) << ": agentctl died of signal " << r.signal);
        BOOST_TEST(r.exit_code == 130, sigabbrev_np(sig) << ": " << r.err);
        check_cancelled_sleepers(parse_json(r.out));
        BOOST_TEST(nothing_left(nonce), sigabbrev_np(sig));
    }
}

// T-CAN-03: Ctrl-C on agentctl's terminal. The terminal sends SIGINT to its whole foreground
// process group; every task runs in a session of its own without a controlling terminal, so
// agentctl alone gets it, and the outcome is that of one SIGINT: exit 130, the tasks cancelled
// by agentctl (not dead of SIGINT), nothing left.
BOOST_AUTO_TEST_CASE(ctrl_c_on_the_terminal_is_one_cancellation) {
    temp_dir dir;
    std::string nonce = make_nonce();
    auto wf = sleepers_workflow(dir, nonce);
    std::string out = dir.path() + "/out.json";
    // sh execs agentctl: it is then the terminal's session leader and foreground group, its
    // stdout in a file, its stderr on the terminal.
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "exec \"$0\" --output json run --jobs 4 \"$1\" > \"$2\"", agentctl_bin(), wf, out};
    bool sent = false;
    std::vector<std::string> problems;
    auto r = run_on_terminal(argv, {}, 30s, [&](pid_t agentctl_pid) -> std::string {
        if (sent) return "";
        auto children = processes_with(nonce);
        if (children.size() < 4) return "";
        for (pid_t c : children) {
            if (stat_field(c, 6) == std::to_string(agentctl_pid)) problems.push_back("in agentctl's session");
            if (stat_field(c, 7) != "0") problems.push_back("has a controlling terminal");
        }
        sent = true;
        return "\x03";  // the interrupt character
    });
    BOOST_TEST(sent);
    BOOST_TEST(problems.empty(), "a task " << (problems.empty() ? "" : problems.front()));
    BOOST_TEST(!r.timed_out, r.out);
    BOOST_TEST(r.exit_code == 130, r.out);
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check_cancelled_sleepers(parse_json(text));
    BOOST_TEST(nothing_left(nonce));
}

// T-FS-03: the workspace reached through a symlink (as /var -> /private/var elsewhere). The
// root is canonicalised: a cwd beneath it is accepted and the task runs in the real folder; a
// symlink inside that leads out is still refused.
BOOST_AUTO_TEST_CASE(a_workspace_reached_through_a_symlink) {
    temp_dir dir;
    std::filesystem::create_directories(dir.path() + "/real/sub");
    std::filesystem::create_directory_symlink(dir.path() + "/real", dir.path() + "/link");
    std::filesystem::create_directory_symlink("../..", dir.path() + "/real/sub/out");
    std::string actions = "    where: {kind: builtin.shell.exec, command: " + probe_bin() +
                          ", args: [report-cwd], cwd: sub}\n"
                          "    escape: {kind: builtin.shell.exec, command: " +
                          probe_bin() + ", args: [report-cwd], cwd: sub/out}\n";
    auto wf =
        dir.write("wf.yaml", probe_workflow(actions,
                                            "    - {id: where, uses: action:where, failure: continue}\n"
                                            "    - {id: escape, uses: action:escape, failure: continue}\n"));
    auto r = agentctl({"--output", "json", "run", "--workspace", dir.path() + "/link", wf});
    BOOST_TEST(r.exit_code == 4, r.err);
    json::value v = parse_json(r.out);
    const auto& where = v.at("data").at("tasks").at("where");
    BOOST_TEST(where.at("state").as_string() == "succeeded");
    BOOST_TEST(where.at("stdout").as_string() ==
               std::filesystem::canonical(dir.path()).string() + "/real/sub\n");
    const auto& escape = v.at("data").at("tasks").at("escape");
    BOOST_TEST(escape.at("state").as_string() == "spawn_failed");
    BOOST_TEST(escape.at("error").at("code").as_string() == "cwd_unavailable");
    BOOST_TEST(
        escape.at("error").at("message").as_string().find("outside the workspace") != std::string::npos,
        escape.at("error").at("message").as_string());
}

// T-IN-10: agentctl hands an allow-listed program its arguments verbatim, one element each,
// templates included: an option-shaped value stays one argument and nothing interprets it.
// Guarding a program's own options (`--`, `--end-of-options`) is the workflow's job
// (docs/DESIGN.md, "What the allowlist does not do").
BOOST_AUTO_TEST_CASE(option_shaped_arguments_pass_verbatim) {
    temp_dir dir;
    std::string pwn = dir.path() + "/pwn";
    std::string actions = "    argv: {kind: builtin.shell.exec, command: " + probe_bin() +
                          ", args: [report-argv, \"--upload-pack=touch " + pwn +
                          "\", \"${{ inputs.opt }}\", --, \"-\", "
                          "\"--output=" +
                          pwn + " x\", \"\"]}\n";
    auto wf =
        dir.write("wf.yaml", probe_workflow(actions, "    - {id: a, uses: action:argv}\n",
                                            "  inputs: {opt: \"--upload-p=touch " + pwn + "; -rf *\"}\n"));
    auto r = agentctl({"--output", "json", "run", wf});
    BOOST_TEST(r.exit_code == 0, r.err);
    std::vector<std::string> expected = {
        probe_bin(), "report-argv", "--upload-pack=touch " + pwn, "--upload-p=touch " + pwn + "; -rf *",
        "--",        "-",           "--output=" + pwn + " x",     ""};
    std::string hex;
    for (const auto& a : expected) {
        for (unsigned char c : a) {
            static const char* digits = "0123456789abcdef";
            hex += digits[c >> 4];
            hex += digits[c & 15];
        }
        hex += "\n";
    }
    json::value v = parse_json(r.out);
    BOOST_TEST(std::string(v.at("data").at("tasks").at("a").at("stdout").as_string()) == hex);
    BOOST_TEST(!std::filesystem::exists(pwn));
}
