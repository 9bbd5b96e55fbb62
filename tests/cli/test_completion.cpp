// The shell completion `agentctl completion bash` prints (and meson installs): commands, each
// command's options, option values, `runs` actions and run ids, driven through bash itself.
#include "command.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>

using namespace cli_test;

namespace {

// What the completion offers for `words` (the last one being completed), in a bash that
// sourced the script; `state`: the journal's folder.
std::string offered(const std::string& script, const std::vector<std::string>& words,
                    const std::string& state) {
    std::string array;
    for (const auto& w : words) array += " '" + w + "'";
    std::string line = "source " + script + "; COMP_WORDS=(" + array +
                       "); COMP_CWORD=" + std::to_string(words.size() - 1) +
                       "; _agentctl; echo \"${COMPREPLY[*]}\"";
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state};
    auto r = run({"/bin/bash", "--norc", "-c", line}, o);
    BOOST_TEST(r.exit_code == 0, r.err);
    return r.out.empty() ? r.out : r.out.substr(0, r.out.size() - 1);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(completion)

BOOST_AUTO_TEST_CASE(bash_completes_commands_options_values_and_run_ids) {
    temp_dir dir;
    auto script = agentctl({"completion", "bash"});
    BOOST_TEST_REQUIRE(script.exit_code == 0);
    std::string path = dir.write("agentctl.bash", script.out);
    std::string state = dir.path() + "/state";
    const std::string a = agentctl_bin();
    BOOST_TEST(offered(path, {a, "pa"}, state) == "parallel");
    BOOST_TEST(offered(path, {a, "--output", "json", "ru"}, state) == "run runs");  // a value is no command
    BOOST_TEST(offered(path, {a, "--output", ""}, state) == "human json jsonl");
    BOOST_TEST(offered(path, {a, "run", "--backend", ""}, state) == "local slurm");
    BOOST_TEST(offered(path, {a, "run", "--slurm-dispatch", ""}, state) == "auto worker job");
    BOOST_TEST(offered(path, {a, "parallel", "--slurm-dispatch", ""}, state) == "auto worker job");
    BOOST_TEST(offered(path, {a, "run", "--keep-g"}, state) == "--keep-going");
    BOOST_TEST(offered(path, {a, "runs", ""}, state) == "list show gc");
    BOOST_TEST(offered(path, {a, "completion", ""}, state) == "bash zsh");
    BOOST_TEST(offered(path, {a, "parallel", "--resume-f"}, state) == "--resume-failed");
    BOOST_TEST(offered(path, {a, "parallel", "--halt", "soon,f"}, state) == "soon,fail=1");
    // Run ids, newest first, for resume and runs show (none before the first run).
    BOOST_TEST(offered(path, {a, "resume", ""}, state) == "");
    command_options o;
    o.env = {"AGENTCTL_STATE_DIR=" + state};
    o.cwd = dir.path();
    auto ran = agentctl({"parallel", "true", ":::", "x"}, o);
    BOOST_TEST_REQUIRE(ran.exit_code == 0, ran.err);
    auto ids = offered(path, {a, "resume", "run-"}, state);
    BOOST_TEST(ids.rfind("run-", 0) == 0u, ids);
    BOOST_TEST(ids.find(' ') == std::string::npos);  // one run
    BOOST_TEST(offered(path, {a, "runs", "show", ""}, state) == ids);
    BOOST_TEST(offered(path, {a, "compensate", ""}, state) == ids);
    BOOST_TEST(offered(path, {a, "runs", "show", ids, ""}, state) == "");
    // Options of runs and resume, and their values: a run's tasks and a task's attempts.
    BOOST_TEST(offered(path, {a, "runs", "show", ids, "--fa"}, state) == "--failed");
    BOOST_TEST(offered(path, {a, "resume", "--la"}, state) == "--last");
    BOOST_TEST(offered(path, {a, "runs", "show", ids, "--att"}, state) == "--attempt");
    std::string task = offered(path, {a, "runs", "show", ids, "--task", ""}, state);
    BOOST_TEST(task.rfind("job--0000-", 0) == 0u, task);
    BOOST_TEST(task.find(' ') == std::string::npos, task);  // one job: the foreach itself is no task
    BOOST_TEST(offered(path, {a, "runs", "show", "--last", "--task", "j"}, state) == task);
    BOOST_TEST(offered(path, {a, "runs", "show", ids, "--task", task, "--attempt", ""}, state) == "1");
    BOOST_TEST(offered(path, {a, "runs", "gc", "--keep", "2"}, state) == "20");
    BOOST_TEST(offered(path, {a, "runs", "--limit", "10"}, state) == "10 100 1000");
    // Another journal's runs with --db.
    std::string other = dir.path() + "/other.db";
    BOOST_TEST(offered(path, {a, "resume", "--db", other, ""}, state) == "");
    o.env = {"AGENTCTL_STATE_DIR=" + state};
    auto there = agentctl({"parallel", "--db", other, "true", ":::", "y"}, o);
    BOOST_TEST_REQUIRE(there.exit_code == 0, there.err);
    auto other_ids = offered(path, {a, "resume", "--db", other, ""}, state);
    BOOST_TEST(other_ids.rfind("run-", 0) == 0u, other_ids);
    BOOST_TEST(other_ids != ids);
    BOOST_TEST(offered(path, {a, "runs", "show", "--db", other, ""}, state) == other_ids);
}

BOOST_AUTO_TEST_SUITE_END()
