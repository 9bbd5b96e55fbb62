// agentctl: parse the command line, hand over to one command, return its exit code.
//
// Every command and option is in the two tables below: parsing, the per-command checks,
// `--help`, `help CMD` and the shell completion scripts all come from them. main() reads the
// global options; each command reads its own (parse_* beside its run_*, cmd_*.cpp).
#include "cli.hpp"

#include <agentctl/process_heap.hpp>
#include <boost/program_options.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace po = boost::program_options;
using namespace agentctl::cli;

namespace {

struct command_info {
    std::string_view name;
    std::string_view operands;  ///< shown after the name
    std::string_view summary;
    parse_fn parse = nullptr;  ///< nullptr: help and completion, which main() answers itself
    int (*run)(const command_line&, agentctl::watchdog*) = nullptr;
};

const std::vector<command_info>& commands() {
    static const std::vector<command_info> table = {
        {"check", "FILE", "validate a workflow strictly; no effects", parse_check, run_check},
        {"plan", "FILE", "print the compiled plan", parse_plan, run_plan},
        {"run", "FILE", "run the workflow", parse_run, run_run},
        {"resume", "RUN_ID|--last", "continue a run from its journal: reuse what succeeded, run the rest",
         parse_resume, run_resume},
        {"compensate", "RUN_ID",
         "undo the effects of a finished run with its tasks' compensate actions, as a linked run",
         parse_compensate, run_compensate},
        {"runs", "[list|show RUN_ID|show --last|gc]",
         "past runs in the journal: list them, show one, remove old ones", parse_runs, run_runs},
        {"doctor", "FILE", "check that every process action can run here; runs nothing", parse_doctor,
         run_doctor},
        {"parallel", "[OPTIONS] COMMAND [::: VALUES]",
         "run COMMAND for each value, as GNU parallel does, as a journaled run"},
        {"version", "", "print the version", parse_version, run_version},
        {"worker", "", "serve tasks of a driver on standard input and output (started by --backend slurm)"},
        {"help", "[COMMAND]", "print help, for one command with COMMAND"},
        {"completion", "bash|zsh", "print a shell completion script"},
    };
    return table;
}

struct option_info {
    std::string_view name;
    char short_name = 0;
    std::string_view value;  ///< the value's placeholder; empty for a switch
    std::string_view help;
    /// Commands that take it; empty: every command (a global option).
    std::vector<std::string_view> commands;
    bool repeatable = false;
};

const std::vector<option_info>& options() {
    static const std::vector<std::string_view> file_commands = {"check", "plan", "run", "doctor"};
    static const std::vector<option_info> table = {
        {"output", 0, "human|json|jsonl", "output format (default human)", {}},
        {"color", 0, "auto|always|never", "colour on a terminal (default auto)", {}},
        {"quiet", 'q', "", "print only failures and the result", {}},
        {"verbose", 'v', "", "print more detail", {}},
        {"help", 'h', "", "print help", {}},
        {"version", 0, "", "print the version", {}},
        {"input", 0, "KEY=VALUE", "set an input; VALUE is JSON if it parses, else a string", file_commands,
         true},
        {"inputs-file", 0, "FILE", "a JSON or YAML mapping of inputs (-: standard input)", file_commands},
        {"items", 0, "NAME=FILE", "set input NAME to FILE's lines, an array of strings (-: standard input)",
         file_commands, true},
        {"null", 0, "", "--items files are NUL-separated, not one item per line", file_commands},
        {"var", 0, "KEY=JSON", "set variable KEY of every task; JSON is required ('env=\"qa\"' for a string)",
         file_commands, true},
        {"vars-file", 0, "FILE", "a YAML or JSON mapping of variables for every task, below every --var",
         file_commands, true},
        {"jobs", 'j', "N", "tasks at once, 1..4096 (overrides runtime.maxConcurrency)", {"run", "resume"}},
        {"workspace",
         0,
         "DIR",
         "base folder for workspaceRoot (default: the workflow's folder; compensate: the source run's)",
         {"plan", "run", "doctor", "compensate"}},
        {"timeout-seconds", 0, "S", "cancel the whole run after S seconds", {"run"}},
        {"timeout", 0, "S", "every task's timeout in seconds, instead of the workflow's", {"plan", "run"}},
        {"retries",
         0,
         "N",
         "every task runs up to N times in all (retried on a failure or a timeout)",
         {"plan", "run"}},
        {"interactive", 0, "", "ask for approval on the terminal", {"run"}},
        {"keep-going", 0, "", "treat every task as failure: continue", {"run"}},
        {"check", 0, "", "preview: run no process, write no file (reads still run)", {"run"}},
        {"diff", 0, "", "show each builtin.write's diff in its result", {"run"}},
        {"show-output", 0, "", "print each finished task's stdout, whole, in order of completion", {"run"}},
        {"tag", 0, "", "with --show-output (implied): prefix each line with the task's item or id", {"run"}},
        {"backend",
         0,
         "local|slurm",
         "where process tasks run (default local; slurm: one srun job each)",
         {"run", "doctor"}},
        {"slurm-dispatch",
         0,
         "auto|worker|job",
         "with --backend slurm: a worker per node of the allocation, or a job per task (default auto: "
         "worker inside salloc/sbatch, job outside)",
         {"run", "doctor"}},
        {"slurm-partition",
         0,
         "P",
         "with --backend slurm: the partition (a,b: any of these)",
         {"run", "doctor"}},
        {"slurm-account", 0, "A", "with --backend slurm: the account to charge", {"run", "doctor"}},
        {"slurm-qos", 0, "Q", "with --backend slurm: the quality of service", {"run", "doctor"}},
        {"slurm-cpus-per-task", 0, "N", "with --backend slurm: CPUs of each job", {"run", "doctor"}},
        {"slurm-mem", 0, "MIB", "with --backend slurm: memory of each job, in MiB", {"run", "doctor"}},
        {"slurm-nodes",
         0,
         "N",
         "with --backend slurm outside an allocation: ask for N whole nodes (salloc), run the tasks on "
         "their workers, release them at the end",
         {"run", "doctor"}},
        {"slurm-time",
         0,
         "T",
         "with --slurm-nodes: the allocation's time limit (Slurm's --time)",
         {"run", "doctor"}},
        {"db",
         0,
         "PATH",
         "the journal database (default: journal.db in agentctl's state folder)",
         {"run", "resume", "runs", "compensate"}},
        {"no-journal", 0, "", "record nothing (results stay in memory; no resume)", {"run"}},
        {"last", 0, "", "the newest run of the journal, instead of RUN_ID", {"resume", "runs"}},
        {"retry-failed", 0, "", "run tasks that failed again", {"resume"}},
        {"rerun-uncertain", 0, "", "run tasks whose last attempt may have had its effect again", {"resume"}},
        {"dry-run", 0, "", "print what each task would do and why; run nothing", {"resume"}},
        {"limit", 0, "N", "runs list: at most N runs (default 50)", {"runs"}},
        {"task",
         0,
         "ID",
         "runs show: one task; compensate: that task (or its children) only",
         {"runs", "compensate"}},
        {"plan", 0, "", "compensate: print what would be undone; run nothing", {"compensate"}},
        {"failed", 0, "", "runs show: only the tasks that failed", {"runs"}},
        {"attempt", 0, "N", "runs show --task: its attempt N (an earlier one of a retried task)", {"runs"}},
        {"stdout", 0, "", "runs show --task: its raw captured stdout", {"runs"}},
        {"stderr", 0, "", "runs show --task: its raw captured stderr", {"runs"}},
        {"keep", 0, "N", "runs gc: keep the newest N runs, remove the others", {"runs"}},
    };
    return table;
}

bool applies(const option_info& o, std::string_view command) {
    return o.commands.empty() || std::find(o.commands.begin(), o.commands.end(), command) != o.commands.end();
}

std::string option_line(const option_info& o) {
    std::string left = o.short_name ? std::string("-") + o.short_name + ", --" : std::string("    --");
    left += o.name;
    if (!o.value.empty()) left += " " + std::string(o.value);
    if (left.size() < 30) left.resize(30, ' ');
    return "  " + left + " " + std::string(o.help) + (o.repeatable ? " (repeatable)" : "") + "\n";
}

std::string overview() {
    std::string text = "usage: agentctl [global options] COMMAND [options] [OPERANDS]\n\ncommands:\n";
    for (const auto& c : commands()) {
        std::string left = std::string(c.name) + (c.operands.empty() ? "" : " " + std::string(c.operands));
        if (left.size() < 20) left.resize(20, ' ');
        text += "  " + left + " " + std::string(c.summary) + "\n";
    }
    text += "\nglobal options:\n";
    for (const auto& o : options())
        if (o.commands.empty()) text += option_line(o);
    text +=
        "\n`agentctl help COMMAND` or `agentctl COMMAND --help` lists a command's options.\nSee "
        "agentctl(1).\n";
    return text;
}

std::string command_help(const command_info& c) {
    std::string text = "usage: agentctl " + std::string(c.name) + " [options]" +
                       (c.operands.empty() ? "" : " " + std::string(c.operands)) + "\n\n" +
                       std::string(c.summary) + "\n";
    std::string own, global;
    for (const auto& o : options()) {
        if (o.commands.empty())
            global += option_line(o);
        else if (applies(o, c.name))
            own += option_line(o);
    }
    if (!own.empty()) text += "\noptions:\n" + own;
    text += "\nglobal options:\n" + global;
    return text;
}

const command_info* find_command(std::string_view name) {
    for (const auto& c : commands())
        if (c.name == name) return &c;
    return nullptr;
}

// Completion: the commands; each command's options and their values (a placeholder `a|b|c`
// lists them; FILE, PATH and DIR are files; --task and --attempt the run's, from `runs show`;
// --limit and --keep a few counts; --env the variables set); files for FILE operands; run ids
// for `resume`, `compensate` and `runs show`, from `agentctl runs` (of the --db given on the
// line); a program for `parallel`'s command word.
std::string completion_script(std::string_view shell) {
    std::vector<std::pair<std::string, std::string>> all;  // every option form and its value
    for (const auto& o : options()) {
        all.emplace_back("--" + std::string(o.name), std::string(o.value));
        if (o.short_name) all.emplace_back(std::string("-") + o.short_name, std::string(o.value));
    }
    for (auto& w : parallel_option_words()) all.push_back(std::move(w));
    std::string valued = " ", files, value_cases;
    for (const auto& [name, value] : all) {
        if (value.empty() || valued.find(" " + name + " ") != std::string::npos) continue;
        valued += name + " ";
        if (value.find('|') != std::string::npos) {
            std::string words = value;
            std::replace(words.begin(), words.end(), '|', ' ');
            value_cases +=
                "    " + name + ") COMPREPLY=($(compgen -W \"" + words + "\" -- \"$cur\")); return ;;\n";
        } else if (value == "FILE" || value == "PATH" || value == "DIR" || value == "NAME=FILE") {
            files += (files.empty() ? "" : "|") + name;
        }
    }
    value_cases +=
        "    --halt|--halt-on-error) COMPREPLY=($(compgen -W \"now,fail=1 soon,fail=1 now,success=1 "
        "soon,success=1 now,done=1 never\" -- \"$cur\")); return ;;\n";
    value_cases += "    --header) COMPREPLY=(:); return ;;\n";
    value_cases += "    --env) COMPREPLY=($(compgen -e -- \"$cur\")); return ;;\n";
    value_cases += "    --limit) COMPREPLY=($(compgen -W \"10 50 100 1000\" -- \"$cur\")); return ;;\n";
    value_cases += "    --keep) COMPREPLY=($(compgen -W \"0 10 20 50 100\" -- \"$cur\")); return ;;\n";
    value_cases +=
        "    --task) case $command in runs|compensate) ;; *) return ;; esac; COMPREPLY=($(compgen -W "
        "\"$(_agentctl_tasks "
        "\"${COMP_WORDS[0]}\" "
        "\"$run\" \"$db\")\" -- \"$cur\")); return ;;\n";
    value_cases +=
        "    --attempt) COMPREPLY=($(compgen -W \"$(_agentctl_attempts \"${COMP_WORDS[0]}\" \"$run\" \"$db\" "
        "\"$task\")\" -- \"$cur\")); return ;;\n";
    value_cases += "    " + files + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
    std::string words_of_command, names;
    for (const auto& c : commands()) {
        names += (names.empty() ? "" : " ") + std::string(c.name);
        std::string opts;
        if (c.name == "parallel") {
            // Only its own options (cmd_parallel.cpp): it refuses the global ones it does not
            // list (--output, --quiet, --version).
            for (const auto& [name, value] : parallel_option_words())
                if (name.size() > 2) opts += " " + name;
        } else {
            for (const auto& o : options())
                if (applies(o, c.name)) opts += " --" + std::string(o.name);
        }
        words_of_command += "    " + std::string(c.name) + ") opts=\"" + opts.substr(1) + "\" ;;\n";
    }
    if (shell == "bash")
        return "# bash completion for agentctl: source it, or put it in /etc/bash_completion.d/agentctl\n"
               "# AGENTCTL RUN DB: the run ids of the journal DB (default: agentctl's), the task ids of\n"
               "# RUN (default: the newest run), the attempt numbers of TASK.\n"
               "_agentctl_run_ids() { \"$1\" runs --limit 100 ${2:+--db \"$2\"} 2>/dev/null | awk '/^run-/ { "
               "print $1 "
               "}'; }\n"
               "_agentctl_tasks() { \"$1\" runs show \"${2:---last}\" ${3:+--db \"$3\"} 2>/dev/null | awk "
               "'$1 == "
               "\"✓\" || $1 == \"✗\" || $1 == \"?\" { print $2 }' | sort -u; }\n"
               "_agentctl_attempts() { \"$1\" runs show \"${2:---last}\" --task \"$4\" ${3:+--db \"$3\"} "
               "2>/dev/null | "
               "awk '$1 == \"attempt\" && $2 ~ /^[0-9]+$/ { print $2 }'; }\n"
               "_agentctl() {\n"
               "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command= operands=0 "
               "opts= i w\n"
               "  local first= run= db= task=\n"
               "  # The command, the operands before the word completed (options' values skipped), the\n"
               "  # run they name (resume RUN, runs show RUN) and the --db and --task given.\n"
               "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
               "    w=${COMP_WORDS[i]}\n"
               "    case $w in\n"
               "      --db) db=${COMP_WORDS[i+1]} ;;\n"
               "      --task) task=${COMP_WORDS[i+1]} ;;\n"
               "    esac\n"
               "    case $w in\n"
               "      -*) [[ \"" +
               valued +
               "\" == *\" $w \"* ]] && ((i++)) ;;\n"
               "      *) if [ -z \"$command\" ]; then command=$w; continue; fi\n"
               "         ((operands++))\n"
               "         if [ -z \"$first\" ]; then first=$w; elif [ -z \"$run\" ]; then run=$w; fi ;;\n"
               "    esac\n"
               "  done\n"
               "  case $command in resume|compensate) run=$first ;; esac\n"
               "  case $prev in\n" +
               value_cases +
               "  esac\n"
               "  if [ -z \"$command\" ] && [[ $cur != -* ]]; then\n"
               "    COMPREPLY=($(compgen -W \"" +
               names +
               "\" -- \"$cur\")); return\n"
               "  fi\n"
               "  case $command in\n" +
               words_of_command +
               "    *) opts=\"--output --color --quiet --verbose --help --version\" ;;\n"
               "  esac\n"
               "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")); return; fi\n"
               "  case $command:$operands:$first in\n"
               "    help:0:*) COMPREPLY=($(compgen -W \"" +
               names +
               "\" -- \"$cur\")) ;;\n"
               "    completion:0:*) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")) ;;\n"
               "    runs:0:*) COMPREPLY=($(compgen -W \"list show gc\" -- \"$cur\")) ;;\n"
               "    parallel:0:*) COMPREPLY=($(compgen -c -- \"$cur\")) ;;\n"
               "    runs:1:show|resume:0:*|compensate:0:*) COMPREPLY=($(compgen -W \"$(_agentctl_run_ids "
               "\"${COMP_WORDS[0]}\" \"$db\")\" -- \"$cur\")) ;;\n"
               "    runs:*|resume:*|compensate:*|version:*|help:*|completion:*) COMPREPLY=() ;;\n"
               "    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
               "  esac\n"
               "}\n"
               "complete -F _agentctl agentctl\n";
    // zsh: the bash function through bashcompinit keeps one definition of the words.
    return "#compdef agentctl\n# zsh completion for agentctl: put it in a folder of $fpath as _agentctl\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           completion_script("bash").substr(completion_script("bash").find('\n') + 1);
}

// --output json must shape even the usage errors, so look for it before parsing.
output_format sniff_output(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        std::string_view value;
        if (a == "--output" && i + 1 < argc)
            value = argv[i + 1];
        else if (a.substr(0, 9) == "--output=")
            value = a.substr(9);
        if (value == "json") return output_format::json;
        if (value == "jsonl") return output_format::jsonl;
    }
    return output_format::human;
}

int print_text(const std::string& text) {
    standard_output().write(text);
    return status(agentctl::exit_status::success);
}

// Reads argv against the options table: the global options into `cl`, everything else into
// `a` for the command. A status when argv is refused.
std::optional<int> read_arguments(int argc, char** argv, command_line& cl, arguments& a) {
    po::options_description all;
    for (const auto& o : options()) {
        std::string spec(o.name);
        if (o.short_name) spec += std::string(",") + o.short_name;
        if (o.value.empty())
            all.add_options()(spec.c_str(), "");
        else if (o.repeatable)
            all.add_options()(spec.c_str(), po::value<std::vector<std::string>>()->composing());
        else
            all.add_options()(spec.c_str(), po::value<std::string>());
    }
    all.add_options()("args", po::value<std::vector<std::string>>());
    po::positional_options_description positional;
    positional.add("args", -1);

    // No guessing: `--job 4` is an unknown option, never `--jobs 4`.
    const int style = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).style(style).run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& e) {
        return usage_error(cl, e.what());
    }
    for (const auto& o : options()) {
        std::string name(o.name);
        if (!vm.count(name)) continue;
        auto& values = a.given[name];
        if (o.repeatable)
            values = vm[name].as<std::vector<std::string>>();
        else if (!o.value.empty())
            values.push_back(vm[name].as<std::string>());
    }
    if (vm.count("args")) a.operands = vm["args"].as<std::vector<std::string>>();

    std::string output = a.has("output") ? a.value("output") : "human";
    if (output == "human")
        cl.output = output_format::human;
    else if (output == "json")
        cl.output = output_format::json;
    else if (output == "jsonl")
        cl.output = output_format::jsonl;
    else
        return usage_error(cl, "--output must be human, json or jsonl, not \"" + output + "\"");
    std::string color = a.has("color") ? a.value("color") : "auto";
    if (color == "auto")
        cl.color = color_mode::automatic;
    else if (color == "always")
        cl.color = color_mode::always;
    else if (color == "never")
        cl.color = color_mode::never;
    else
        return usage_error(cl, "--color must be auto, always or never, not \"" + color + "\"");
    cl.quiet = a.has("quiet");
    cl.verbose = a.has("verbose");
    return std::nullopt;
}

}  // namespace

namespace agentctl::cli {

int usage_error(const command_line& cl, const std::string& message) {
    std::string hint =
        cl.command.empty() || !find_command(cl.command) ? "agentctl --help" : "agentctl help " + cl.command;
    return print_failure(cl, message + " (see `" + hint + "`)", agentctl::exit_status::usage);
}

}  // namespace agentctl::cli

int main(int argc, char** argv) {
    // A reader that goes away is an EPIPE to handle (a run then ends as cancelled), never a
    // signal that kills agentctl and leaves its tasks running. Children get default
    // dispositions back when they are spawned.
    ::signal(SIGPIPE, SIG_IGN);
    // Captures on the heap (docs/CAPTURE.md, "Fresh memory").
    agentctl::prepare_process_heap();
    // GNU parallel's own grammar: everything after the word is its (cmd_parallel.cpp).
    if (argc >= 2 && std::string_view(argv[1]) == "parallel")
        return run_parallel({argv + 2, argv + argc}, {argv, argv + argc});
    // Frames, not a command line for people: no global option applies (cmd_worker.cpp).
    if (argc >= 2 && std::string_view(argv[1]) == "worker") return run_worker({argv + 2, argv + argc});
    command_line cl;
    cl.output = sniff_output(argc, argv);
    cl.argv.assign(argv, argv + argc);
    arguments a;
    if (auto refused = read_arguments(argc, argv, cl, a)) return *refused;

    if (a.has("version") && a.operands.empty()) return run_version(cl, nullptr);
    if (a.operands.empty()) {
        if (a.has("help")) return print_text(overview());
        return usage_error(cl, "no command given");
    }
    cl.command = a.operands[0];
    a.operands.erase(a.operands.begin());
    const command_info* command = find_command(cl.command);
    if (!command) return usage_error(cl, "unknown command \"" + cl.command + "\"");
    if (a.has("help")) return print_text(command_help(*command));
    // A workflow read and compiled once: its memory on huge pages; not a run's, whose many
    // small live blocks would make whole 2 MiB pages resident (docs/CAPTURE.md, "Huge pages").
    if (cl.command == "check" || cl.command == "plan") agentctl::reserve_huge_page_heap();

    // An option given to a command that does not take it is refused, not ignored.
    for (const auto& o : options()) {
        if (!a.has(o.name) || applies(o, cl.command)) continue;
        std::string takers;
        for (std::size_t i = 0; i < o.commands.size(); ++i)
            takers += (i == 0                       ? ""
                       : i + 1 == o.commands.size() ? " and "
                                                    : ", ") +
                      std::string(o.commands[i]);
        return usage_error(cl, "--" + std::string(o.name) + " applies to " + takers + " only");
    }

    if (cl.command == "help") {
        if (a.operands.empty()) return print_text(overview());
        const command_info* about = find_command(a.operands[0]);
        if (a.operands.size() != 1 || !about) return usage_error(cl, "help takes one command name");
        if (about->name == "parallel") return print_text(parallel_help());
        return print_text(command_help(*about));
    }
    if (cl.command == "completion") {
        if (a.operands.size() != 1 || (a.operands[0] != "bash" && a.operands[0] != "zsh"))
            return usage_error(cl, "completion needs bash or zsh");
        return print_text(completion_script(a.operands[0]));
    }
    if (cl.command == "parallel")
        return usage_error(cl, "give agentctl parallel's options after the word parallel");
    if (cl.command == "worker") return usage_error(cl, "agentctl worker takes no options");
    if (auto refused = command->parse(cl, a)) return *refused;
    std::optional<agentctl::watchdog> watch;
    if (cl.wants_watchdog()) watch = start_watchdog(cl);
    return command->run(cl, watch ? &*watch : nullptr);
}
