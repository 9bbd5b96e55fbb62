// builtin.read and builtin.write from the CLI: their results, the paths they may touch, their
// bounds and budget, approval, the --check/--diff preview, and a resume that keeps a write.
#include "command.hpp"
#include "json_output.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cli_test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// A workflow with builtin.read, builtin.write and builtin.assert actions, `policy` members
// after the workspace root and `tasks` as given.
std::string files_workflow(const std::string& policy, const std::string& tasks,
                           const std::string& extra = "") {
    return "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: files}\nspec:\n"
           "  policy: {workspaceRoot: ., " +
           policy + "}\n" + extra +
           "  actions:\n    read: {kind: builtin.read}\n    write: {kind: builtin.write}\n"
           "    check: {kind: builtin.assert}\n"
           "  tasks:\n" +
           tasks;
}

const json::value& task_of(const json::value& outcome, const std::string& id) {
    return outcome.at("data").at("tasks").at(id);
}

std::string code_of(const json::value& outcome, const std::string& id) {
    return std::string(task_of(outcome, id).at("error").at("code").as_string());
}

std::string message_of(const json::value& outcome, const std::string& id) {
    return std::string(task_of(outcome, id).at("error").at("message").as_string());
}

// Entries of `folder` whose name says they are a temporary file of a write.
int temporaries_in(const std::string& folder) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(folder))
        n += e.path().filename().string().find(".agentctl-") != std::string::npos;
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(files_cli)

BOOST_AUTO_TEST_CASE(write_then_read_gives_the_reference_shapes) {
    temp_dir dir;
    auto wf = dir.write("wf.yaml",
                        files_workflow("writableRoots: [out], approval: never",
                                       "    - {id: save, uses: action:write, with: {path: out/deep/a.txt, "
                                       "content: \"one\\ntwo\"}}\n"
                                       "    - {id: load, uses: action:read, needs: [save], with: {path: "
                                       "out/deep/a.txt}}\n"
                                       "    - {id: same, uses: action:check, needs: [load], with: {that: "
                                       "\"${{ tasks.load.output.status == 'unchanged' }}\"}}\n"));
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal"});
    BOOST_TEST(r.exit_code == 0, r.err << r.out);
    json::value v = parse_json(r.out);
    BOOST_TEST(json::serialize(task_of(v, "save").at("output")) ==
               R"({"status":"changed","changed":true,"before":null,"after":"one\ntwo","diff":null,)"
               R"("path":"out/deep/a.txt","predictability":"fully_predictable"})");
    BOOST_TEST(json::serialize(task_of(v, "load").at("output")) ==
               R"({"status":"unchanged","changed":false,"content":"one\ntwo"})");
    BOOST_TEST(!task_of(v, "save").as_object().contains("argv"), "a built-in action has no command line");
    BOOST_TEST(read_file(dir.path() + "/out/deep/a.txt") == "one\ntwo");
    BOOST_TEST(temporaries_in(dir.path() + "/out/deep") == 0);

    // The same content again: nothing to write, and the result says so.
    auto again = agentctl({"--output", "json", "run", wf, "--no-journal", "--diff"});
    BOOST_TEST(again.exit_code == 0, again.err);
    json::value a = parse_json(again.out);
    BOOST_TEST(json::serialize(task_of(a, "save").at("output")) ==
               R"({"status":"unchanged","changed":false,"before":"one\ntwo","after":"one\ntwo","diff":"",)"
               R"("path":"out/deep/a.txt","predictability":"fully_predictable"})");
}

BOOST_AUTO_TEST_CASE(a_write_replaces_the_file_whole_and_keeps_its_mode) {
    temp_dir dir;
    fs::create_directories(dir.path() + "/out");
    auto target = dir.write("out/a.sh", "old\nlines\n");
    ::chmod(target.c_str(), 0750);
    auto wf =
        dir.write("wf.yaml", files_workflow("writableRoots: [out], approval: never",
                                            "    - {id: save, uses: action:write, with: {path: out/a.sh, "
                                            "content: \"new\"}}\n"));
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal", "--diff"});
    BOOST_TEST(r.exit_code == 0, r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(task_of(v, "save").at("output").at("before") == "old\nlines\n");
    BOOST_TEST(task_of(v, "save").at("output").at("diff") == "--- before\n+++ after\n-old\n-lines\n-\n+new");
    BOOST_TEST(read_file(target) == "new");
    struct stat st {};
    BOOST_REQUIRE(::stat(target.c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 07777) == 0750u);
}

BOOST_AUTO_TEST_CASE(paths_outside_their_roots_are_refused_and_nothing_is_written) {
    temp_dir dir;
    temp_dir outside;
    fs::create_directories(dir.path() + "/out");
    fs::create_symlink(outside.path(), dir.path() + "/out/away");
    fs::create_symlink(outside.path(), dir.path() + "/elsewhere");
    outside.write("secret.txt", "outside");
    struct row {
        std::string task;
        std::string code;
        std::string says;
    };
    const row rows[] = {
        {"{id: t, uses: action:write, with: {path: out/../x.txt, content: x}}", "path_not_allowed",
         "contains '..'"},
        {"{id: t, uses: action:write, with: {path: other/x.txt, content: x}}", "path_not_allowed",
         "not beneath a writable root (policy.writableRoots: out)"},
        {"{id: t, uses: action:write, with: {path: /tmp/x.txt, content: x}}", "path_not_allowed",
         "not beneath a writable root"},
        {"{id: t, uses: action:write, with: {path: out/away/x.txt, content: x}}", "path_not_allowed",
         "leads out of"},
        {"{id: t, uses: action:read, with: {path: elsewhere/secret.txt}}", "path_not_allowed",
         "leads out of"},
        {"{id: t, uses: action:read, with: {path: ../secret.txt}}", "path_not_allowed", "contains '..'"},
        {"{id: t, uses: action:read, with: {path: /etc/hostname}}", "path_not_allowed",
         "not beneath the workspace root"},
        {"{id: t, uses: action:read, with: {path: missing.txt}}", "file_error", "missing.txt does not exist"},
        {"{id: t, uses: action:read, with: {path: out}}", "file_error", "not a regular file"},
        {"{id: t, uses: action:write, with: {path: out/x.txt}}", "input_invalid",
         "builtin.write needs a string `content`, found none"},
        {"{id: t, uses: action:read, with: {path: 5}}", "input_invalid",
         "builtin.read needs a string `path`"},
    };
    for (const auto& c : rows) {
        auto wf = dir.write(
            "wf.yaml", files_workflow("writableRoots: [out], approval: never", "    - " + c.task + "\n"));
        auto r = agentctl({"--output", "json", "run", wf, "--no-journal"});
        BOOST_TEST(r.exit_code == 4, c.task << ": " << r.err);
        json::value v = parse_json(r.out);
        BOOST_TEST(code_of(v, "t") == c.code, c.task);
        BOOST_TEST(message_of(v, "t").find(c.says) != std::string::npos,
                   c.task << ": " << message_of(v, "t"));
    }
    BOOST_TEST(!fs::exists(outside.path() + "/x.txt"));
    BOOST_TEST(!fs::exists(dir.path() + "/x.txt"));
    BOOST_TEST(!fs::exists(dir.path() + "/other"));
    BOOST_TEST(read_file(outside.path() + "/secret.txt") == "outside");

    auto none = dir.write("wf.yaml",
                          files_workflow("approval: never",
                                         "    - {id: t, uses: action:write, with: {path: x, content: x}}\n"));
    auto r = agentctl({"--output", "json", "run", none, "--no-journal"});
    BOOST_TEST(message_of(parse_json(r.out), "t").find("policy.writableRoots is empty") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_absolute_writable_root_and_an_absolute_path_beneath_it) {
    temp_dir dir;
    temp_dir artifacts;
    auto wf = dir.write("wf.yaml",
                        files_workflow("writableRoots: [" + artifacts.path() + "], approval: never",
                                       "    - {id: t, uses: action:write, with: {path: " + artifacts.path() +
                                           "/r/report.txt, content: done}}\n"));
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal"});
    BOOST_TEST(r.exit_code == 0, r.err << r.out);
    BOOST_TEST(read_file(artifacts.path() + "/r/report.txt") == "done");
}

BOOST_AUTO_TEST_CASE(reads_are_bounded_and_text) {
    temp_dir dir;
    dir.write("big.txt", std::string(1024 * 1024 + 1, 'x'));
    dir.write("edge.txt", std::string(1024 * 1024, 'y'));
    dir.write("bin.dat", std::string("\xff\xfe", 2));
    auto wf =
        dir.write("wf.yaml", files_workflow("approval: never",
                                            "    - {id: big, uses: action:read, with: {path: big.txt}}\n"
                                            "    - {id: edge, uses: action:read, with: {path: edge.txt}}\n"
                                            "    - {id: bin, uses: action:read, with: {path: bin.dat}}\n"));
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal", "--keep-going"});
    BOOST_TEST(r.exit_code == 4, r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(code_of(v, "big") == "file_error");
    BOOST_TEST(message_of(v, "big").find("larger than 1048576 bytes") != std::string::npos,
               message_of(v, "big"));
    BOOST_TEST(task_of(v, "edge").at("state") == "succeeded");
    BOOST_TEST(task_of(v, "edge").at("output").at("content").as_string().size() == 1024u * 1024u);
    BOOST_TEST(code_of(v, "bin") == "file_error");
    BOOST_TEST(message_of(v, "bin").find("not UTF-8 text") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_artifact_bytes_stops_the_write_that_would_pass_it) {
    temp_dir dir;
    auto wf = dir.write(
        "wf.yaml",
        files_workflow("writableRoots: [out], approval: never",
                       "    - {id: a, uses: action:write, with: {path: out/a, content: \"12345\"}}\n"
                       "    - {id: b, uses: action:write, needs: [a], with: {path: out/b, content: "
                       "\"123456\"}}\n",
                       "  runtime: {budgets: {maxArtifactBytes: 10}}\n"));
    auto r = agentctl({"--output", "json", "run", wf, "--no-journal"});
    BOOST_TEST(r.exit_code == 4, r.err);
    json::value v = parse_json(r.out);
    BOOST_TEST(task_of(v, "a").at("state") == "succeeded");
    BOOST_TEST(code_of(v, "b") == "budget_exceeded");
    BOOST_TEST(
        message_of(v, "b") ==
        "budgets.maxArtifactBytes (10) cannot cover writing out/b (6 bytes; 5 left); nothing was written");
    BOOST_TEST(fs::exists(dir.path() + "/out/a"));
    BOOST_TEST(!fs::exists(dir.path() + "/out/b"));
}

BOOST_AUTO_TEST_CASE(a_write_needs_approval_under_mutations_and_a_preview_does_not) {
    temp_dir dir;
    std::string tasks =
        "    - {id: save, uses: action:write, with: {path: out/a.txt, content: hello}}\n"
        "    - {id: run, uses: action:touch, needs: [save]}\n"
        "    - {id: load, uses: action:read, needs: [run], with: {path: in.txt}}\n";
    std::string wf_text =
        files_workflow("writableRoots: [out], processAllowlist: [touch], approval: mutations", tasks);
    wf_text.replace(wf_text.find("  tasks:"), 0,
                    "    touch: {kind: builtin.shell.exec, command: touch, args: [ran]}\n");
    auto wf = dir.write("wf.yaml", wf_text);
    dir.write("in.txt", "input");

    auto refused = agentctl({"run", wf, "--no-journal"});
    BOOST_TEST(refused.exit_code == 3, refused.err);
    BOOST_TEST(refused.err.find("save") != std::string::npos, refused.err);
    BOOST_TEST(!fs::exists(dir.path() + "/out"));

    // The reference's check-diff: nothing is written or run, the write says what it would do.
    auto preview = agentctl({"--output", "json", "run", wf, "--check", "--diff", "--no-journal"});
    BOOST_TEST(preview.exit_code == 0, preview.err << preview.out);
    json::value v = parse_json(preview.out);
    BOOST_TEST(
        json::serialize(task_of(v, "save").at("output")) ==
        R"({"status":"changed","changed":true,"before":null,"after":"hello",)"
        R"("diff":"--- before\n+++ after\n-\n+hello","path":"out/a.txt","predictability":"fully_predictable"})");
    BOOST_TEST(json::serialize(task_of(v, "run").at("output")) ==
               R"({"status":"requires_execution","changed":false,"predictability":"requires_execution"})");
    BOOST_TEST(task_of(v, "load").at("output").at("content") == "input", "a preview still reads");
    BOOST_TEST(!fs::exists(dir.path() + "/out"), "the preview made the writable root");
    BOOST_TEST(!fs::exists(dir.path() + "/ran"), "the preview ran a process");
}

// The first segment stops at a read of a file that is not there yet; once it is, the
// resumed preview reaches the write, which still writes nothing.
BOOST_AUTO_TEST_CASE(a_preview_is_journaled_as_one_and_resumes_as_one) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    auto wf = dir.write("wf.yaml",
                        files_workflow("writableRoots: [out], approval: never",
                                       "    - {id: load, uses: action:read, with: {path: later.txt}}\n"
                                       "    - {id: save, uses: action:write, needs: [load], with: {path: "
                                       "out/a.txt, content: \"${{ tasks.load.output.content }}\"}}\n"));
    auto preview = agentctl({"--output", "json", "run", wf, "--check", "--db", db});
    BOOST_TEST(preview.exit_code == 4, preview.err);
    std::string id(parse_json(preview.out).at("data").at("runId").as_string());
    dir.write("later.txt", "now");
    auto resumed = agentctl({"--output", "json", "resume", id, "--db", db, "--retry-failed"});
    BOOST_TEST(resumed.exit_code == 0, resumed.err << resumed.out);
    json::value v = parse_json(resumed.out);
    BOOST_TEST(task_of(v, "save").at("output").at("after") == "now");
    BOOST_TEST(!fs::exists(dir.path() + "/out"), "a resumed preview wrote");
}

BOOST_AUTO_TEST_CASE(resume_keeps_a_write_that_succeeded) {
    temp_dir dir;
    std::string db = dir.path() + "/j.db";
    auto wf = dir.write("wf.yaml",
                        files_workflow("writableRoots: [out], approval: never",
                                       "    - {id: save, uses: action:write, with: {path: out/a.txt, "
                                       "content: written}}\n"
                                       "    - {id: gate, uses: action:check, needs: [save], with: {that: "
                                       "false, message: not yet}}\n"));
    auto first = agentctl({"--output", "json", "run", wf, "--db", db});
    BOOST_TEST(first.exit_code == 4, first.err);
    std::string id(parse_json(first.out).at("data").at("runId").as_string());
    BOOST_TEST(read_file(dir.path() + "/out/a.txt") == "written");
    // Had the write run again, it would put its content back.
    dir.write("out/a.txt", "changed since");
    auto resumed = agentctl({"--output", "json", "resume", id, "--db", db, "--retry-failed"});
    BOOST_TEST(resumed.exit_code == 4, resumed.err);
    json::value v = parse_json(resumed.out);
    BOOST_TEST(json::serialize(v.at("data").at("resume")) == R"({"reused":["save"],"executed":["gate"]})");
    BOOST_TEST(task_of(v, "save").at("output").at("after") == "written");
    BOOST_TEST(read_file(dir.path() + "/out/a.txt") == "changed since");
}

BOOST_AUTO_TEST_SUITE_END()
