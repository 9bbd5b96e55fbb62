// The shell completion `agentctl completion bash` prints (and meson installs): commands, each
// command's options, option values, `runs` actions and run ids, driven through bash itself.
#include "command.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

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

// The bash completion script written to a temporary folder, and a state folder beside it.
struct bash_completion {
    temp_dir dir;
    std::string path;
    std::string state = dir.path() + "/state";
    const std::string a = agentctl_bin();
    bash_completion() {
        auto script = agentctl({"completion", "bash"});
        BOOST_TEST_REQUIRE(script.exit_code == 0);
        path = dir.write("agentctl.bash", script.out);
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(completion)

BOOST_FIXTURE_TEST_CASE(bash_completes_commands_options_values_and_run_ids, bash_completion) {
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

// Every command `agentctl --help` lists, and every option and option value each command's
// help lists, is offered: the lists come from the help text, so an option added to a table
// without its completion (or the other way round) fails here.
BOOST_FIXTURE_TEST_CASE(every_command_option_and_value_of_the_help_is_completed, bash_completion) {
    auto words_of = [](const std::string& text) {
        std::vector<std::string> words;
        std::istringstream in(text);
        for (std::string w; in >> w;) words.push_back(w);
        return words;
    };
    auto has = [&](const std::string& offered_words, const std::string& word) {
        auto all = words_of(offered_words);
        return std::find(all.begin(), all.end(), word) != all.end();
    };

    // The commands: the first word of each line under "commands:".
    auto overview = agentctl({"--help"});
    BOOST_TEST_REQUIRE(overview.exit_code == 0);
    std::vector<std::string> commands;
    {
        std::istringstream in(overview.out);
        std::string line;
        while (std::getline(in, line) && line != "commands:") {
        }
        while (std::getline(in, line) && !line.empty()) commands.push_back(words_of(line).at(0));
    }
    BOOST_TEST_REQUIRE(commands.size() >= 10u, overview.out);
    std::string every_command;
    for (const auto& c : commands) every_command += (every_command.empty() ? "" : " ") + c;
    BOOST_TEST(offered(path, {a, ""}, state) == every_command);

    std::size_t options_seen = 0;
    for (const auto& command : commands) {
        auto help = agentctl({"help", command});
        BOOST_TEST_REQUIRE(help.exit_code == 0, command << ": " << help.err);
        const std::string offered_options = offered(path, {a, command, "--"}, state);
        std::istringstream in(help.out);
        for (std::string line; std::getline(in, line);) {
            // An option line: "  -j, --jobs N    help" or "      --db PATH    help".
            auto words = words_of(line);
            if (line.rfind("  ", 0) != 0 || words.empty() || words[0][0] != '-') continue;
            std::vector<std::string> names;
            std::size_t w = 0;
            for (; w < words.size() && words[w][0] == '-'; ++w) {
                bool more = words[w].back() == ',';
                names.push_back(more ? words[w].substr(0, words[w].size() - 1) : words[w]);
                if (!more) {
                    ++w;
                    break;
                }
            }
            const std::string value = w < words.size() ? words[w] : "";
            for (const auto& name : names) {
                if (name.rfind("--", 0) != 0) continue;  // short forms are not offered
                ++options_seen;
                BOOST_TEST(has(offered_options, name), command << " " << name << " is not completed");
                // A value of a few words (human|json|jsonl) is completed with them.
                if (value.find('|') != std::string::npos) {
                    std::string expected = value;
                    std::replace(expected.begin(), expected.end(), '|', ' ');
                    BOOST_TEST(offered(path, {a, command, name, ""}, state) == expected,
                               command << " " << name);
                }
            }
        }
    }
    BOOST_TEST(options_seen > 100u);
    // parallel refuses the global options it does not list: none is offered.
    const std::string parallel_options = offered(path, {a, "parallel", "--"}, state);
    for (const char* refused : {"--output", "--quiet", "--version"})
        BOOST_TEST(!has(parallel_options, refused), refused);
    BOOST_TEST(offered(path, {a, "parallel", "--env", "PAT"}, state) == "PATH");
    BOOST_TEST(offered(path, {a, "parallel", "-j", "4", "bas"}, state).find("bash") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
