// The CLI for someone moving a batch job from GNU parallel or xargs -P: items from files and
// stdin, a missing executable found before anything runs, readable human output.
#include "command.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cli_test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::string workflow(const std::string& allow, const std::string& actions, const std::string& tasks,
                     const std::string& extra_spec = "") {
    return "apiVersion: agentctl.dev/v1\n"
           "kind: Workflow\n"
           "metadata: {name: usability}\n"
           "spec:\n"
           "  policy: {processAllowlist: [" +
           allow + "], approval: never}\n" + extra_spec + "  actions:\n" + actions + "  tasks:\n" + tasks;
}

// A builtin.assign task whose output is the input `files`.
std::string echo_files_workflow() {
    return workflow("probe", "    keep: {kind: builtin.assign}\n",
                    "    - {id: keep, uses: action:keep, with: {files: \"${{ inputs.files }}\"}}\n",
                    "  inputs: {files: []}\n");
}

// A foreach `gz` over the input `files`, empty unless given.
std::string gz_over_files_workflow() {
    return workflow("\"true\"", "    ok: {kind: builtin.shell.exec, command: /bin/true}\n",
                    "    - {id: gz, uses: action:ok, foreach: {items: \"${{ inputs.files }}\"}}\n",
                    "  inputs: {files: []}\n");
}

std::string sh_quoted(const std::string& s) {
    return "'" + s + "'";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(usability)

BOOST_AUTO_TEST_CASE(items_file_fills_an_input_with_one_string_per_line) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", echo_files_workflow());
    auto list = dir.write("list.txt", "a.txt\nb c.txt\r\n\"q\".txt\n");
    auto r = agentctl({"--output", "json", "run", wf, "--items", "files=" + list});
    BOOST_TEST(r.exit_code == 0, r.err);
    json::value v = parse_json(r.out);
    const auto& files = v.at("data").at("output").at("keep").at("output").at("files").as_array();
    BOOST_REQUIRE(files.size() == 3u);
    BOOST_TEST(files[0].as_string() == "a.txt");
    BOOST_TEST(files[1].as_string() == "b c.txt");
    BOOST_TEST(files[2].as_string() == "\"q\".txt");

    // NUL-separated: a newline is part of an item.
    auto nul = dir.write("list0", std::string("x\ny\0z\0", 6));
    auto n = agentctl({"--output", "json", "run", wf, "--null", "--items", "files=" + nul});
    BOOST_TEST(n.exit_code == 0, n.err);
    json::value nv = parse_json(n.out);
    const auto& two = nv.at("data").at("output").at("keep").at("output").at("files").as_array();
    BOOST_REQUIRE(two.size() == 2u);
    BOOST_TEST(two[0].as_string() == "x\ny");

    // Malformed uses are usage errors, before anything is read.
    BOOST_TEST(agentctl({"run", wf, "--items", "files"}).exit_code == 2);
    BOOST_TEST(agentctl({"run", wf, "--items", "=" + list}).exit_code == 2);
    BOOST_TEST(agentctl({"run", wf, "--null"}).exit_code == 2);
    BOOST_TEST(agentctl({"run", wf, "--items", "files=-", "--inputs-file", "-"}).exit_code == 2);
    auto missing = agentctl({"run", wf, "--items", "files=" + dir.path() + "/none"});
    BOOST_TEST(missing.exit_code == 2);
    BOOST_TEST(missing.err.find("none") != std::string::npos, missing.err);
}

// An item is at most 131 071 bytes (limits::max_item_bytes: the longest argument Linux passes
// to a program, MAX_ARG_STRLEN with its NUL). The longest reaches the program whole, as one
// argument; one byte more, in an items file or a string of an inputs file, is exit 2 naming
// its line, before anything runs or is recorded. The bytes of a longer line are dropped as
// they are read: a 64 MiB line costs `check` and `run` no more memory than a short one.
BOOST_AUTO_TEST_CASE(an_item_longer_than_one_argument_is_refused_where_it_is_read) {
    temp_dir dir;
    auto wf = dir.write(
        "wf.yaml", workflow("sh",
                            "    count: {kind: builtin.shell.exec, command: /bin/sh,"
                            " args: [-c, 'printf %s \"$1\" | wc -c', sh, \"${{ vars.item }}\"]}\n",
                            "    - {id: n, uses: action:count, foreach: {items: \"${{ inputs.files }}\"}}\n",
                            "  inputs: {files: []}\n"));
    const std::size_t longest = 131071;
    std::string db = dir.path() + "/j.db";
    auto fits = dir.write("fits.txt", "x\n" + std::string(longest, 'a') + "\r\n");
    auto r = agentctl({"--output", "json", "run", wf, "--db", db, "--items", "files=" + fits});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err.substr(0, 2000));
    BOOST_TEST(
        parse_json(r.out).at("data").at("tasks").at(child_id_in(r.out, "n--0001")).at("stdout").as_string() ==
        "131071\n");
    fs::remove(db);

    auto refused = [&](const std::vector<std::string>& args, const std::string& where) {
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 2, r.err.substr(0, 2000));
        BOOST_TEST(r.err.find(where + ": error: ") != std::string::npos, r.err.substr(0, 2000));
        BOOST_TEST(r.err.find("131071 bytes") != std::string::npos, r.err.substr(0, 2000));
        BOOST_TEST(r.err.find("[item_too_long]") != std::string::npos, r.err.substr(0, 2000));
        BOOST_TEST(!fs::exists(db), "a journal was created");
        return r;
    };
    auto one_more = dir.write("one-more.txt", "x\n" + std::string(longest + 1, 'a') + "\n");
    refused({"check", wf, "--items", "files=" + one_more}, one_more + ":2:0");
    refused({"run", wf, "--db", db, "--items", "files=" + one_more}, one_more + ":2:0");
    auto nul = dir.write("one-more.0", "x" + std::string(1, '\0') + std::string(longest + 1, 'a'));
    refused({"run", wf, "--db", db, "--null", "--items", "files=" + nul}, nul);
    auto json_inputs =
        dir.write("inputs.json", "{\"files\": [\"x\", \"" + std::string(longest + 1, 'a') + "\"]}");
    refused({"run", wf, "--db", db, "--inputs-file", json_inputs}, json_inputs + ":1:17");
    auto yaml_inputs = dir.write("inputs.yaml", "files:\n  - x\n  - " + std::string(longest + 1, 'a') + "\n");
    refused({"run", wf, "--db", db, "--inputs-file", yaml_inputs}, yaml_inputs + ":3:5");

    // Memory: against the same commands with a short line.
    // Written in pieces: this process's own memory stays small (command_result::max_rss_kib).
    auto huge = dir.path() + "/huge.txt";
    {
        std::ofstream out(huge, std::ios::binary);
        std::string mebibyte(1 << 20, 'a');
        out << "x\n";
        for (int i = 0; i < 64; ++i) out << mebibyte;
        out << "\ny\n";
    }
    auto small = dir.write("small.txt", "x\ny\n");
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"check", wf}, std::vector<std::string>{"run", wf, "--db", db}}) {
        auto with = [&](const std::string& items) {
            auto args = command;
            args.insert(args.end(), {"--items", "files=" + items});
            return args;
        };
        auto base = agentctl(with(small));
        fs::remove(db);
        auto big = refused(with(huge), huge + ":2:0");
        BOOST_TEST_MESSAGE(command[0] << ": peak RSS " << big.max_rss_kib << " KiB with a 64 MiB line, "
                                      << base.max_rss_kib << " KiB without");
        BOOST_TEST(big.max_rss_kib - base.max_rss_kib < 24 * 1024,
                   command[0] << ": peak RSS " << big.max_rss_kib << " KiB with a 64 MiB line, "
                              << base.max_rss_kib << " KiB without");
    }
}

BOOST_AUTO_TEST_CASE(items_from_stdin_beyond_the_argument_list_limit) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", echo_files_workflow());
    // 30 000 paths of ~100 bytes: 3 MB, far past what one --input argument can carry.
    std::string text;
    for (int i = 0; i < 30000; ++i)
        text += "/data/batch/" + std::string(80, 'p') + "/file-" + std::to_string(i) + ".txt\n";
    auto list = dir.write("list.txt", text);
    auto r = run({"/bin/sh", "-c",
                  "cat " + sh_quoted(list) + " | " + sh_quoted(agentctl_bin()) + " --output json run " +
                      sh_quoted(wf) + " --items files=-"});
    BOOST_TEST(r.exit_code == 0, r.err.substr(0, 2000));
    json::value v = parse_json(r.out);
    const auto& files = v.at("data").at("output").at("keep").at("output").at("files").as_array();
    BOOST_REQUIRE(files.size() == 30000u);
    BOOST_TEST(files[29999].as_string().subview().find("file-29999.txt") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(inputs_file_from_stdin_and_larger_than_a_mebibyte) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", echo_files_workflow());
    std::string text = "{\"files\": [";
    for (int i = 0; i < 18000; ++i)
        text += (i ? "," : "") + std::string("\"") + std::string(90, 'f') + std::to_string(i) + "\"";
    text += "]}";
    BOOST_REQUIRE(text.size() > 1600000u);
    auto inputs = dir.write("inputs.json", text);
    auto r = agentctl({"--output", "json", "run", wf, "--inputs-file", inputs});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(
        parse_json(r.out).at("data").at("output").at("keep").at("output").at("files").as_array().size() ==
        18000u);
    auto s = run({"/bin/sh", "-c",
                  "cat " + sh_quoted(inputs) + " | " + sh_quoted(agentctl_bin()) + " --output json run " +
                      sh_quoted(wf) + " --inputs-file -"});
    BOOST_TEST(s.exit_code == 0, s.err);
    BOOST_TEST(
        parse_json(s.out).at("data").at("output").at("keep").at("output").at("files").as_array().size() ==
        18000u);
}

BOOST_AUTO_TEST_CASE(a_missing_executable_fails_once_before_anything_runs) {
    temp_dir dir;
    std::string marker = dir.path() + "/first-ran";
    std::string actions =
        "    first: {kind: builtin.shell.exec, command: " + probe_bin() + ", args: [write-file, " + marker +
        ", \"1\"]}\n"
        "    gz: {kind: builtin.shell.exec, command: gzipx-not-here, args: [\"${{ vars.item }}\"]}\n";
    std::string tasks =
        "    - {id: first, uses: action:first}\n"
        "    - {id: gz, uses: action:gz, needs: [first], foreach: {items: [a, b, c, d, e, f, g, h, i, j]}}\n";
    auto wf = dir.write("wf.yaml", workflow("probe, gzipx-not-here", actions, tasks));
    auto count = [](const std::string& text, const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
        return n;
    };
    std::string db = dir.path() + "/j.db";
    auto r = agentctl({"--color", "never", "run", "--jobs", "1", wf, "--db", db});
    BOOST_TEST(r.exit_code == 4, r.err);
    BOOST_TEST(!std::filesystem::exists(marker));
    // One diagnostic naming the command, the PATH said once, not per task, and the way out.
    BOOST_TEST(count(r.err, "command 'gzipx-not-here' was not found in PATH") == 1u, r.err);
    BOOST_TEST(count(r.err + r.out, "/usr/local/bin:/usr/bin:/bin") == 1u, r.err + r.out);
    BOOST_TEST(r.err.find("); use an absolute path or add its folder to PATH; nothing was run or recorded") !=
                   std::string::npos,
               r.err);
    // No run: nothing to list or resume.
    BOOST_TEST(!std::filesystem::exists(db), "a run was recorded");
    auto j = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST(j.exit_code == 4);
    BOOST_TEST(j.out.empty(), j.out);
    json::value v = parse_json(j.err);
    BOOST_TEST(v.at("kind").as_string() == "Error");
    BOOST_TEST(v.at("error").at("exitCode").as_int64() == 4);
    BOOST_TEST(v.at("diagnostics").at(0).at("code").as_string() == "executable_not_found");
    BOOST_TEST(count(j.err, "/usr/local/bin:/usr/bin:/bin") == 2u, j.err);  // the message, its diagnostic
    BOOST_TEST(!std::filesystem::exists(marker));
    BOOST_TEST(!std::filesystem::exists(db), "a run was recorded");
    // The program beside the workflow (`command: proc.sh` for ./proc.sh) is pointed to.
    dir.write("gzipx-not-here", "#!/bin/sh\n");
    auto beside = agentctl({"--color", "never", "run", wf, "--db", db});
    BOOST_TEST(beside.exit_code == 4);
    BOOST_TEST(beside.err.find("add its folder to PATH (" + std::filesystem::canonical(dir.path()).string() +
                               "/gzipx-not-here is in the workspace root)") != std::string::npos,
               beside.err);
    // doctor says so too.
    auto d = agentctl({"--color", "never", "doctor", wf});
    BOOST_TEST(d.exit_code == 6, d.out + d.err);
    BOOST_TEST((d.out + d.err).find("command 'gzipx-not-here' was not found in PATH") != std::string::npos,
               d.out + d.err);
}

BOOST_AUTO_TEST_CASE(failures_with_a_path_name_the_workspace_root) {
    temp_dir dir;
    std::string actions =
        "    c: {kind: builtin.shell.exec, command: /bin/cat, args: [data/a.txt]}\n"
        "    d: {kind: builtin.shell.exec, command: /bin/cat, cwd: sub, args: [x]}\n";
    std::string tasks =
        "    - {id: c, uses: action:c, failure: continue}\n"
        "    - {id: d, uses: action:d, failure: continue}\n";
    auto wf = dir.write("project/wf.yaml", workflow("cat", actions, tasks));
    std::string root = std::filesystem::canonical(dir.path() + "/project").string();
    command_options elsewhere;
    elsewhere.cwd = "/";
    auto r = agentctl({"--color", "never", "run", wf.substr(1)}, elsewhere);  // relative to /
    BOOST_TEST(r.exit_code == 4, r.err);
    // Said once, before the first failure: not after a screenful of them.
    const std::string said = "agentctl: tasks run in the workspace root " + root +
                             ", not in the current folder: relative paths start there (--workspace DIR sets "
                             "its base)\n";
    auto at = r.err.find(said);
    BOOST_TEST(at != std::string::npos, r.err);
    BOOST_TEST(at < r.err.find("✗ "), r.err);
    BOOST_TEST(r.err.find("workspace root " + root + ", not", at + said.size()) == std::string::npos, r.err);
    // Run from the workspace root itself, relative paths start where one expects: nothing to say.
    command_options inside;
    inside.cwd = root;
    auto here = agentctl({"--color", "never", "run", "wf.yaml"}, inside);
    BOOST_TEST(here.exit_code == 4, here.err);
    BOOST_TEST(here.err.find("not in the current folder") == std::string::npos, here.err);
    BOOST_TEST(r.err.find("working directory 'sub' does not exist (beneath the workspace root " + root +
                          ")") != std::string::npos,
               r.err);
    auto j = agentctl({"--output", "json", "run", wf});
    BOOST_TEST(
        parse_json(j.out).at("data").at("tasks").at("d").at("error").at("message").as_string().subview().find(
            "workspace root " + root) != std::string::npos,
        j.out);
    // plan shows it absolute, also with --workspace.
    auto p = agentctl({"plan", wf.substr(1)}, elsewhere);
    BOOST_TEST(p.exit_code == 0, p.err);
    BOOST_TEST(p.out.find("workspace " + root + "\n") != std::string::npos, p.out);
    auto pw = agentctl({"plan", "--workspace", dir.path(), wf});
    BOOST_TEST(pw.out.find("workspace " + std::filesystem::canonical(dir.path()).string() + "\n") !=
                   std::string::npos,
               pw.out);
}

BOOST_AUTO_TEST_CASE(secrets_too_short_to_redact_are_warned_about) {
    temp_dir dir;
    dir.write("secrets/tok", "ab");
    std::string actions =
        "    s:\n      kind: builtin.shell.exec\n      command: /bin/echo\n      args: [\"8 9 10\"]\n"
        "      env: {DEBUG: {env: DEBUG}, TOK: {file: secrets/tok}, LONG: {env: LONG}, PLAIN: {env: DEBUG, "
        "secret: "
        "false}}\n";
    std::string wf = workflow("echo", actions, "    - {id: s, uses: action:s}\n");
    wf.replace(
        wf.find("approval: never"), 15,
        "approval: never, environmentAllowlist: [DEBUG, TOK, LONG, PLAIN], secretFileRoots: [secrets]");
    auto path = dir.write("wf.yaml", wf);
    command_options env;
    env.env = {"DEBUG=1", "LONG=a-long-enough-secret"};
    // check: what the environment alone tells (the file is not read).
    auto c = agentctl({"--color", "never", "check", path}, env);
    BOOST_TEST(c.exit_code == 0, c.err);
    BOOST_TEST(c.err.find("secret_too_short_to_redact") != std::string::npos, c.err);
    BOOST_TEST(c.err.find("DEBUG from {env: DEBUG} is 1 byte") != std::string::npos, c.err);
    BOOST_TEST(c.err.find("LONG") == std::string::npos, c.err);
    BOOST_TEST(c.err.find("TOK") == std::string::npos, c.err);
    auto cj = agentctl({"--output", "json", "check", path}, env);
    BOOST_TEST(parse_json(cj.out).at("diagnostics").as_array().size() == 1u, cj.out);
    // doctor: the same, as a non-blocking check.
    auto d = agentctl({"--color", "never", "doctor", path}, env);
    BOOST_TEST(d.exit_code == 0, d.out);
    BOOST_TEST(d.out.find(":env:DEBUG: weak") != std::string::npos, d.out);
    // run: every source, the file's too, before anything runs.
    auto r = agentctl({"--color", "never", "run", path}, env);
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("the secret TOK from {file: secrets/tok} (2 bytes)") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("the secret DEBUG from {env: DEBUG} (1 byte)") != std::string::npos, r.err);
    // Without short secrets: silence.
    env.env = {"DEBUG=long-enough", "LONG=a-long-enough-secret"};
    dir.write("secrets/tok", "abcd");
    auto quiet = agentctl({"--color", "never", "run", path}, env);
    BOOST_TEST(quiet.err.find("secret_too_short_to_redact") == std::string::npos, quiet.err);
}

BOOST_AUTO_TEST_CASE(show_output_groups_each_task_and_tags_it) {
    temp_dir dir;
    // Each task writes its first line and a marker, then waits (30 s at most) for all three
    // markers before its second line: at --jobs 3 the tasks' lines are certain to interleave.
    std::string markers = dir.path() + "/markers";
    std::string actions =
        "    two: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"echo a-$0; : > $1/$0; i=0; "
        "until [ -e $1/f1.txt ] && [ -e $1/f2.txt ] && [ -e $1/f3.txt ] || [ $i -ge 3000 ]; do sleep "
        "0.01; i=$((i+1)); done; echo b-$0\", \"${{ vars.file }}\", " +
        markers + "]}\n";
    std::string tasks =
        "    - {id: gz, uses: action:two, foreach: {items: [f1.txt, f2.txt, f3.txt], as: file}}\n";
    auto wf = dir.write("wf.yaml", workflow("sh", actions, tasks));
    auto fresh_markers = [&] {
        std::filesystem::remove_all(markers);
        std::filesystem::create_directory(markers);
    };
    fresh_markers();
    auto plain = agentctl({"--color", "never", "run", "--jobs", "3", wf});
    BOOST_TEST(plain.exit_code == 0, plain.err);
    BOOST_TEST(plain.out.find("a-f1.txt\nb-f1.txt") == std::string::npos, plain.out);
    fresh_markers();
    auto shown = agentctl({"--color", "never", "run", "--jobs", "3", "--show-output", wf});
    BOOST_TEST(shown.exit_code == 0, shown.err);
    for (std::string f : {"f1.txt", "f2.txt", "f3.txt"})
        BOOST_TEST(shown.out.find("a-" + f + "\nb-" + f + "\n") != std::string::npos, shown.out);
    fresh_markers();
    auto tagged = agentctl({"--color", "never", "run", "--jobs", "3", "--tag", wf});
    BOOST_TEST(tagged.exit_code == 0, tagged.err);
    for (std::string f : {"f1.txt", "f2.txt", "f3.txt"})
        BOOST_TEST(tagged.out.find(f + "\ta-" + f + "\n" + f + "\tb-" + f + "\n") != std::string::npos,
                   tagged.out);
    BOOST_TEST(agentctl({"check", "--show-output", wf}).exit_code == 2);
}

// What tasks print is data (the journal, --output json), not agentctl's stdout: a run that
// printed none of it says where it went, so `agentctl run wf.yaml > out.txt` leaving out.txt
// empty is explained on stderr.
BOOST_AUTO_TEST_CASE(task_output_that_was_not_printed_is_pointed_to) {
    temp_dir dir;
    std::string actions =
        "    e: {kind: builtin.shell.exec, command: /bin/echo, args: [\"${{ vars.item }}\"]}\n"
        "    q: {kind: builtin.shell.exec, command: /bin/true}\n";
    auto wf = dir.write("wf.yaml", workflow("echo, \"true\"", actions,
                                            "    - {id: e, uses: action:e, foreach: {items: [a, b, c]}}\n"));
    std::string db = dir.path() + "/j.db";
    auto r = agentctl({"--color", "never", "run", wf, "--db", db});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.out.empty(), r.out);
    std::string id = r.err.substr(r.err.rfind("run run-") + 4, 20);
    BOOST_TEST(
        r.err.find("3 tasks wrote 6 bytes to stdout, not printed: --show-output prints each task's as it "
                   "ends; agentctl runs show " +
                   id + " --task ID --stdout prints one\n") != std::string::npos,
        r.err);
    auto n = agentctl({"--color", "never", "run", wf, "--no-journal"});
    BOOST_TEST(
        n.err.find("not printed: --show-output prints each task's as it ends; --output json has them") !=
            std::string::npos,
        n.err);
    // Printed, or quiet, or nothing written: nothing to say.
    auto shown = agentctl({"--color", "never", "run", wf, "--show-output", "--db", db});
    BOOST_TEST(shown.out == "a\nb\nc\n");
    BOOST_TEST(shown.err.find("not printed") == std::string::npos, shown.err);
    BOOST_TEST(agentctl({"-q", "run", wf, "--db", db}).err.find("not printed") == std::string::npos);
    auto silent = dir.write("silent.yaml", workflow("\"true\"", actions, "    - {id: q, uses: action:q}\n"));
    BOOST_TEST(agentctl({"run", silent, "--db", db}).err.find("not printed") == std::string::npos);
    // A workflow that declares its outputs prints them: those are its stdout.
    std::ofstream(wf, std::ios::app) << "  outputs: {n: \"${{ tasks.e.output.items }}\"}\n";
    auto declared = agentctl({"--color", "never", "run", wf, "--db", db});
    BOOST_TEST(declared.exit_code == 0, declared.err);
    BOOST_TEST(declared.out.find("outputs:") == 0u, declared.out);
    BOOST_TEST(declared.err.find("not printed") == std::string::npos, declared.err);
}

BOOST_AUTO_TEST_CASE(outputs_are_readable_and_failures_name_their_vars) {
    temp_dir dir;
    std::string actions =
        "    lines: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"printf "
        "'one\\\\ntwo\\\\nthree\\\\n'\"]}\n"
        "    bad: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"exit 1\", \"${{ vars.file "
        "}}\"]}\n";
    std::string tasks =
        "    - {id: lines, uses: action:lines}\n"
        "    - {id: gz, uses: action:bad, failure: continue, foreach: {items: [f12.txt, f13.txt], as: "
        "file}}\n";
    std::string extra =
        "  outputs:\n    text: \"${{ tasks.lines.output.stdout }}\"\n"
        "    words: [" +
        std::string(40, 'w') + ", " + std::string(300, 'x') + "]\n";
    auto wf = dir.write("wf.yaml", workflow("sh", actions, tasks, "") + "");
    // spec.outputs goes after the tasks: append it.
    std::ofstream(wf, std::ios::app) << extra;
    auto r = agentctl({"--color", "never", "run", "--keep-going", wf});
    BOOST_TEST(r.exit_code == 4, r.err);
    BOOST_TEST(r.out.find("  text: |\n") == std::string::npos, r.out);  // the key says it is text
    BOOST_TEST(r.out.find("  text:\n    one\n    two\n    three\n") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("  words:\n    - " + std::string(40, 'w') + "\n    - " + std::string(300, 'x') +
                          "\n") != std::string::npos,
               r.out);
    BOOST_TEST(r.out.find("bytes)") == std::string::npos, r.out);  // nothing cut
    BOOST_TEST(r.out.find("[\"") == std::string::npos, r.out);     // no JSON blob
    BOOST_TEST(r.err.find("✗ " + child_id_in(r.err, "gz--0001") +
                          " failed (file=f13.txt): exited with status 1") != std::string::npos,
               r.err);
    BOOST_TEST(r.err.find("failed " + child_id_in(r.err, "gz--0000") +
                          " (file=f12.txt): exited with status 1") != std::string::npos,
               r.err);
}

BOOST_AUTO_TEST_CASE(progress_fits_the_terminal_and_shows_elapsed_and_percent) {
    temp_dir dir;
    std::string tasks = "    - {id: nap, uses: action:nap, foreach: {items: [" + [] {
        std::string items;
        for (int i = 0; i < 24; ++i) items += (i ? ", " : "") + std::to_string(i);
        return items;
    }() + "]}}\n";
    auto wf = dir.write("wf.yaml", workflow("probe",
                                            "    nap: {kind: builtin.shell.exec, command: " + probe_bin() +
                                                ", args: [sleep, \"0.1\"]}\n",
                                            tasks));
    auto r = run_on_terminal({agentctl_bin(), "run", "--jobs", "4", wf}, {}, 60s, {}, 40);
    BOOST_TEST(r.exit_code == 0, r.out);
    std::size_t redraws = 0;
    for (std::size_t at = 0; (at = r.out.find("\r\x1b[2K", at)) != std::string::npos;) {
        at += 5;
        std::size_t end = r.out.find_first_of("\r\n", at);
        std::string line = r.out.substr(at, end - at);
        if (line.find("/24 done") == std::string::npos) continue;  // the summary after the last clear
        std::size_t chars = 0;
        for (unsigned char c : line) chars += (c & 0xc0) != 0x80;
        BOOST_TEST(chars < 40u, "a redraw of " << chars << " characters: " << line);
        ++redraws;
    }
    BOOST_TEST(redraws >= 2u, r.out);
    // Wide enough: all of it, with the percentage and the elapsed time.
    auto wide = run_on_terminal({agentctl_bin(), "run", "--jobs", "4", wf}, {}, 60s, {}, 200);
    BOOST_TEST(wide.exit_code == 0, wide.out);
    BOOST_TEST(wide.out.find("%) · ") != std::string::npos, wide.out);
    BOOST_TEST(wide.out.find(" failed · ") != std::string::npos, wide.out);  // then the elapsed time
    BOOST_TEST(wide.out.find("/24 done (") != std::string::npos, wide.out);
}

BOOST_AUTO_TEST_CASE(approval_prompt_clears_the_progress_line_and_shows_the_command_line) {
    temp_dir dir;
    std::string actions = "    touch: {kind: builtin.shell.exec, command: " + probe_bin() +
                          ", args: [write-file, \"" + dir.path() + "/one file\", \"${{ vars.item }}\"]}\n";
    std::string wf =
        workflow("probe", actions, "    - {id: one, uses: action:touch, foreach: {items: [x1]}}\n");
    wf.replace(wf.find("approval: never"), 15, "approval: always");
    auto path = dir.write("wf.yaml", wf);
    auto r =
        run_on_terminal({agentctl_bin(), "run", "--interactive", path}, {{"[a]ll: ", "y\n"}}, 60s, {}, 200);
    BOOST_TEST(r.exit_code == 0, r.out);
    auto at = r.out.find("approve task \"" + child_id_in(r.out, "one--0000") + "\" (item=x1)");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, r.out);
    // Nothing of the progress line is left in front of the question.
    BOOST_TEST((at == 0 || r.out.compare(at - 4, 4, "\x1b[2K") == 0 || r.out[at - 1] == '\n'), r.out);
    BOOST_TEST(
        r.out.find(probe_bin() + " write-file '" + dir.path() + "/one file' x1", at) != std::string::npos,
        r.out);
}

BOOST_AUTO_TEST_CASE(cancellation_says_why_and_sums_up_unstarted_tasks) {
    temp_dir dir;
    std::string nonce = make_nonce();
    std::string actions = "    sleep: {kind: builtin.shell.exec, command: " + probe_bin() +
                          ", args: [sleep, \"30\", --nonce, " + nonce + "]}\n";
    std::string tasks = "    - {id: s, uses: action:sleep, foreach: {items: [1, 2, 3, 4, 5, 6, 7, 8]}}\n";
    auto wf = dir.write("wf.yaml", workflow("probe", actions, tasks));
    auto r = agentctl({"--color", "never", "run", "--jobs", "2", "--timeout-seconds", "0.5", wf});
    BOOST_TEST(r.exit_code == 130, r.err);
    BOOST_TEST(r.err.find("the run was cancelled (run timeout 0.5 s reached") != std::string::npos, r.err);
    std::string unstarted = "6 tasks not started: ";
    for (const char* id : {"s--0002", "s--0003", "s--0004", "s--0005", "s--0006"})
        unstarted += child_id_in(r.err, id) + ", ";
    BOOST_TEST(r.err.find(unstarted + "…") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("not started: the run was cancelled") == std::string::npos,
               r.err);  // not one line each
    auto j = agentctl({"--output", "json", "run", "--jobs", "2", "--timeout-seconds", "0.5", wf});
    BOOST_TEST(j.exit_code == 130);
    bool said = false;
    json::value outcome = parse_json(j.out);
    for (const auto& d : outcome.at("diagnostics").as_array())
        said = said ||
               (d.at("code").as_string() == "run_cancelled" &&
                d.at("message").as_string().subview().find("run timeout 0.5 s reached") != std::string::npos);
    BOOST_TEST(said, j.out);
    // SIGINT, by name.
    command_options o;
    o.poll = [&](pid_t pid) {
        if (processes_with(nonce).size() < 2) return false;
        ::kill(pid, SIGINT);
        return true;
    };
    auto i = agentctl({"--color", "never", "run", "--jobs", "2", wf}, o);
    BOOST_TEST(i.exit_code == 130, i.err);
    BOOST_TEST(i.err.find("the run was cancelled (SIGINT)") != std::string::npos, i.err);
}

BOOST_AUTO_TEST_CASE(retries_stderr_tails_and_limits_say_what_they_hide) {
    temp_dir dir;
    std::string actions =
        "    flaky: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"echo attempt >&2; exit 2\"]}\n"
        "    noisy: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"seq 1 12 >&2; exit 1\"]}\n"
        "    loud: {kind: builtin.shell.exec, command: /bin/sh, args: [-c, \"seq 1 100000\"], "
        "stdoutLimitBytes: 1024}\n";
    std::string tasks =
        "    - {id: flaky, uses: action:flaky, failure: continue, retry: {maxAttempts: 3, on: "
        "[exit_nonzero], "
        "backoffMs: 10}}\n"
        "    - {id: noisy, uses: action:noisy, failure: continue}\n"
        "    - {id: loud, uses: action:loud, failure: continue}\n";
    auto wf = dir.write("wf.yaml", workflow("sh", actions, tasks));
    auto r = agentctl({"--color", "never", "run", wf});
    BOOST_TEST(r.exit_code == 4, r.err);
    // Without -v: one line for every retry of the run.
    BOOST_TEST(r.err.find("↻ flaky attempt") == std::string::npos, r.err);
    BOOST_TEST(r.err.find("↻ 1 task was retried, 2 retries in all (-v shows each)\n") != std::string::npos,
               r.err);
    // With -v: each retry as it happens, and no summary of them.
    auto v = agentctl({"--color", "never", "-v", "run", wf});
    BOOST_TEST(v.exit_code == 4, v.err);
    BOOST_TEST(v.err.find("↻ flaky attempt 1 of 3 failed: exited with status 2; retrying in 10 ms") !=
                   std::string::npos,
               v.err);
    BOOST_TEST(v.err.find("↻ flaky attempt 2 of 3 failed") != std::string::npos, v.err);
    BOOST_TEST(v.err.find("↻ flaky attempt 3") == std::string::npos,
               v.err);  // the last one is the task's end
    BOOST_TEST(v.err.find("retries in all") == std::string::npos, v.err);
    BOOST_TEST(r.err.find("  | … 7 earlier stderr lines not shown (12 in all") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("  | 8\n  | 9\n  | 10\n  | 11\n  | 12\n") != std::string::npos, r.err);
    BOOST_TEST(
        r.err.find("raise the limit with stdoutLimitBytes on the task or its action") != std::string::npos,
        r.err);
    // jsonl: each failed attempt that is retried is an event of its own.
    auto l = agentctl({"--output", "jsonl", "run", wf});
    std::istringstream in(l.out);
    std::vector<std::uint64_t> failed_attempts;
    for (std::string line; std::getline(in, line);) {
        json::value v = parse_json(line);
        if (v.is_object() && v.as_object().contains("event") &&
            v.at("event").as_string() == "attemptFailed") {
            BOOST_TEST(v.at("taskId").as_string() == "flaky");
            BOOST_TEST(v.at("retryInMs").as_int64() == 10);
            BOOST_TEST(v.at("result").at("exitCode").as_int64() == 2);
            failed_attempts.push_back(static_cast<std::uint64_t>(v.at("attempt").as_int64()));
        }
    }
    BOOST_TEST((failed_attempts == std::vector<std::uint64_t>{1, 2}), l.out);
}

BOOST_AUTO_TEST_CASE(zero_tasks_from_a_misnamed_input_warns_even_when_quiet) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", gz_over_files_workflow());
    const std::string warned = "gz expanded to no task: its items are empty [empty_expansion]";
    auto r = agentctl({"--color", "never", "run", "-q", wf, "--input", "file=[\"a\"]"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("undeclared_input") != std::string::npos, r.err);
    BOOST_TEST(r.err.find(warned) != std::string::npos, r.err);
    // A forgotten --items: said in every output mode.
    for (const std::vector<std::string>& mode : {std::vector<std::string>{}, {"-q"}}) {
        auto args = mode;
        args.insert(args.end(), {"--color", "never", "run", wf});
        auto h = agentctl(args);
        BOOST_TEST(h.exit_code == 0, h.err);
        BOOST_TEST(h.err.find(warned) != std::string::npos, h.err);
    }
    for (const char* format : {"json", "jsonl"}) {
        auto j = agentctl({"--output", format, "run", wf});
        BOOST_TEST(j.exit_code == 0, j.err);
        std::string last = j.out.substr(j.out.rfind('\n', j.out.size() - 2) + 1);
        bool said = false;
        json::value envelope = parse_json(last);
        for (const auto& d : envelope.at("diagnostics").as_array())
            said = said || d.at("code").as_string() == "empty_expansion";
        BOOST_TEST(said, format << ": " << j.out);
    }
    // Named right: quiet is quiet.
    auto ok = agentctl({"--color", "never", "run", "-q", wf, "--input", "files=[\"a\"]"});
    BOOST_TEST(ok.exit_code == 0, ok.err);
    BOOST_TEST(ok.err.find("warning") == std::string::npos, ok.err);
}

// An items file fills a declared input: a name the workflow does not declare is a typo, exit 2
// before anything is read, run or recorded.
BOOST_AUTO_TEST_CASE(an_items_file_for_an_undeclared_input_is_refused) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml", gz_over_files_workflow());
    auto list = dir.write("list.txt", "a\nb\n");
    std::string db = dir.path() + "/j.db";
    for (const char* command : {"check", "plan", "run"}) {
        std::vector<std::string> args = {"--color", "never", command, wf, "--items", "file=" + list};
        if (std::string(command) == "run") args.insert(args.end(), {"--db", db});
        auto r = agentctl(args);
        BOOST_TEST(r.exit_code == 2, command << ": " << r.err);
        BOOST_TEST(r.err.find("error: --items file=" + list + ": the workflow declares no input `file`") !=
                       std::string::npos,
                   r.err);
        BOOST_TEST(r.err.find("did you mean `files`?") != std::string::npos, r.err);
    }
    BOOST_TEST(!fs::exists(db), "a run was recorded");
    auto j = agentctl({"--output", "json", "run", wf, "--items", "file=" + list, "--db", db});
    BOOST_TEST(j.exit_code == 2);
    BOOST_TEST(j.err.find("\"code\":\"undeclared_input\"") != std::string::npos, j.err);
    auto right = agentctl({"run", wf, "--items", "files=" + list, "--db", db});
    BOOST_TEST(right.exit_code == 0, right.err);
}

BOOST_AUTO_TEST_CASE(the_readme_batch_from_parallel_runs_as_written) {
    // The workflow and the command line of README.md's "From a command line to a workflow file"
    // (under "For GNU parallel users"), exactly.
    std::ifstream in(data_dir() + "/../../README.md");
    std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto section = readme.find("### From a command line to a workflow file");
    BOOST_REQUIRE(section != std::string::npos);
    auto begin = readme.find("```yaml\n# gzip.yaml\n", section);
    BOOST_REQUIRE(begin != std::string::npos);
    begin += 8;
    auto end = readme.find("```", begin);
    std::string yaml = readme.substr(begin, end - begin);
    std::string line = "agentctl run gzip.yaml -j 8 --items files=list.txt --workspace .";
    BOOST_REQUIRE_MESSAGE(readme.find(line, section) != std::string::npos,
                          "the README's command line changed");
    BOOST_REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/gzip") || std::filesystem::exists("/bin/gzip"),
                          "gzip is missing: this test needs it");

    temp_dir dir;
    dir.write("recipes/gzip.yaml", yaml);  // the workflow elsewhere: --workspace . is what matters
    std::string list;
    for (int i = 0; i < 12; ++i) list += "f" + std::to_string(i) + ".txt\n";
    for (int i = 0; i < 12; ++i) dir.write("data/f" + std::to_string(i) + ".txt", "hello\n");
    dir.write("data/list.txt", list);
    command_options o;
    o.cwd = dir.path() + "/data";
    auto r = agentctl({"run", dir.path() + "/recipes/gzip.yaml", "-j", "8", "--items", "files=list.txt",
                       "--workspace", "."},
                      o);
    BOOST_TEST(r.exit_code == 0, r.err);
    for (int i = 0; i < 12; ++i) {
        std::string base = dir.path() + "/data/f" + std::to_string(i) + ".txt";
        BOOST_TEST(std::filesystem::exists(base + ".gz"), base);
        BOOST_TEST(std::filesystem::exists(base), base);  // -k kept it
    }
}

BOOST_AUTO_TEST_SUITE_END()
