// agentctl: parse the command line, hand over to one command, return its exit code.
#include "cli.hpp"

#include <boost/program_options.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>

namespace po = boost::program_options;
using namespace agentctl::cli;

namespace {

constexpr const char* usage_text =
    "usage: agentctl [global options] COMMAND [options] [FILE]\n"
    "\n"
    "commands:\n"
    "  check FILE      validate a workflow strictly; no effects\n"
    "  plan FILE       print the compiled plan\n"
    "  run FILE        run the workflow\n"
    "  doctor FILE     check that every process action can run here; runs nothing\n"
    "  version         print the version\n"
    "\n"
    "global options:\n"
    "  --output human|json|jsonl   output format (default human)\n"
    "  --color auto|always|never   colour on a terminal (default auto)\n"
    "  -q, --quiet                 print only failures and the result\n"
    "  -v, --verbose               print more detail\n"
    "\n"
    "inputs (check, plan, run, doctor):\n"
    "  --input KEY=VALUE           set an input; VALUE is JSON if it parses, else a string\n"
    "  --inputs-file FILE          a JSON or YAML mapping of inputs\n"
    "\n"
    "run options:\n"
    "  -j, --jobs N                tasks at once, 1..4096 (overrides runtime.maxConcurrency)\n"
    "  --workspace DIR             base folder for workspaceRoot (default: the workflow's folder)\n"
    "  --timeout-seconds S         cancel the whole run after S seconds\n"
    "  --interactive               ask for approval on the terminal\n"
    "  --keep-going                treat every task as failure: continue\n"
    "\n"
    "backend options (run, doctor):\n"
    "  --backend local|slurm       where process tasks run (default local; slurm: one srun job each)\n"
    "  --slurm-partition P         with --backend slurm: the partition (a,b: any of these)\n"
    "  --slurm-account A           the account to charge\n"
    "  --slurm-qos Q               the quality of service\n"
    "  --slurm-cpus-per-task N     CPUs of each job\n"
    "  --slurm-mem MIB             memory of each job, in MiB\n"
    "\n"
    "See agentctl(1).\n";

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

int usage_error(const command_line& cl, const std::string& message) {
    return print_failure(cl, message + " (see `agentctl --help`)", agentctl::exit_status::usage);
}

}  // namespace

int main(int argc, char** argv) {
    // A reader that goes away is an EPIPE to handle (a run then ends as cancelled), never a
    // signal that kills agentctl and leaves its tasks running. Children get default
    // dispositions back when they are spawned.
    ::signal(SIGPIPE, SIG_IGN);
    command_line cl;
    cl.output = sniff_output(argc, argv);

    std::string output = "human", color = "auto";
    po::options_description global("global");
    global.add_options()("help,h", "")("output", po::value(&output))("color", po::value(&color))(
        "quiet,q", po::bool_switch(&cl.quiet))("verbose,v", po::bool_switch(&cl.verbose));
    po::options_description inputs("inputs");
    inputs.add_options()("input", po::value(&cl.inputs)->composing())("inputs-file",
                                                                      po::value<std::string>());
    po::options_description run("run");
    run.add_options()("jobs,j", po::value<int>())("workspace", po::value<std::string>())(
        "timeout-seconds", po::value<double>())("interactive", po::bool_switch(&cl.interactive))(
        "keep-going", po::bool_switch(&cl.keep_going));
    po::options_description backend("backend");
    backend.add_options()("backend", po::value<std::string>())("slurm-partition", po::value<std::string>())(
        "slurm-account", po::value<std::string>())("slurm-qos", po::value<std::string>())(
        "slurm-cpus-per-task", po::value<std::string>())("slurm-mem", po::value<std::string>());
    po::options_description hidden("hidden");
    hidden.add_options()("args", po::value<std::vector<std::string>>());
    po::options_description all;
    all.add(global).add(inputs).add(run).add(backend).add(hidden);
    po::positional_options_description positional;
    positional.add("args", -1);

    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        return usage_error(cl, e.what());
    }

    if (output == "human")
        cl.output = output_format::human;
    else if (output == "json")
        cl.output = output_format::json;
    else if (output == "jsonl")
        cl.output = output_format::jsonl;
    else
        return usage_error(cl, "--output must be human, json or jsonl, not \"" + output + "\"");
    if (color == "auto")
        cl.color = color_mode::automatic;
    else if (color == "always")
        cl.color = color_mode::always;
    else if (color == "never")
        cl.color = color_mode::never;
    else
        return usage_error(cl, "--color must be auto, always or never, not \"" + color + "\"");

    if (vm.count("help")) {
        std::fputs(usage_text, stdout);
        return status(agentctl::exit_status::success);
    }
    std::vector<std::string> args;
    if (vm.count("args")) args = vm["args"].as<std::vector<std::string>>();
    if (args.empty()) return usage_error(cl, "no command given");
    cl.command = args[0];

    static const std::set<std::string> file_commands = {"check", "plan", "run", "doctor"};
    if (cl.command == "version") {
        if (args.size() > 1) return usage_error(cl, "version takes no arguments");
    } else if (file_commands.count(cl.command)) {
        if (args.size() != 2) return usage_error(cl, cl.command + " needs exactly one workflow FILE");
        cl.file = args[1];
    } else {
        return usage_error(cl, "unknown command \"" + cl.command + "\"");
    }

    if (vm.count("inputs-file")) cl.inputs_file = vm["inputs-file"].as<std::string>();
    if (vm.count("workspace")) cl.workspace = vm["workspace"].as<std::string>();
    if (vm.count("jobs")) cl.jobs = vm["jobs"].as<int>();
    if (vm.count("timeout-seconds")) cl.timeout_seconds = vm["timeout-seconds"].as<double>();

    // Options that belong to one command are refused elsewhere rather than ignored.
    bool is_run = cl.command == "run";
    for (const char* name : {"jobs", "timeout-seconds"})
        if (vm.count(name) && !is_run)
            return usage_error(cl, std::string("--") + name + " applies to run only");
    if ((cl.interactive || cl.keep_going) && !is_run)
        return usage_error(cl, "--interactive and --keep-going apply to run only");
    if (vm.count("workspace") && !(is_run || cl.command == "doctor"))
        return usage_error(cl, "--workspace applies to run and doctor only");
    static const char* const slurm_flags[] = {"partition", "account", "qos", "cpus-per-task", "mem"};
    bool any_slurm_flag = false;
    for (const char* name : slurm_flags) any_slurm_flag |= vm.count(std::string("slurm-") + name) > 0;
    if ((vm.count("backend") || any_slurm_flag) && !(is_run || cl.command == "doctor"))
        return usage_error(cl, "--backend and --slurm-* apply to run and doctor only");
    if (vm.count("backend")) {
        auto b = agentctl::backend_from_string(vm["backend"].as<std::string>());
        if (!b)
            return usage_error(
                cl, "--backend must be local or slurm, not \"" + vm["backend"].as<std::string>() + "\"");
        cl.backend = *b;
    }
    if (any_slurm_flag && cl.backend != agentctl::backend_kind::slurm)
        return usage_error(cl, "--slurm-* options need --backend slurm");
    for (const char* name : slurm_flags) {
        std::string flag = std::string("slurm-") + name;
        if (!vm.count(flag)) continue;
        std::string why = agentctl::set_slurm_option(cl.slurm, name, vm[flag].as<std::string>());
        if (!why.empty()) return usage_error(cl, why);
    }
    if (cl.command == "version" && (vm.count("input") || vm.count("inputs-file")))
        return usage_error(cl, "version takes no inputs");
    if (cl.jobs && (*cl.jobs < 1 || *cl.jobs > agentctl::limits::max_concurrency))
        return usage_error(cl, "--jobs must be between 1 and 4096");
    if (cl.timeout_seconds && !(*cl.timeout_seconds > 0 && *cl.timeout_seconds <= 86400 * 365))
        return usage_error(cl, "--timeout-seconds must be a number of seconds greater than 0");

    if (cl.command == "check") return run_check(cl);
    if (cl.command == "plan") return run_plan(cl);
    if (cl.command == "version") return run_version(cl);
    if (cl.command == "run") return run_run(cl);
    if (cl.command == "doctor") return run_doctor(cl);
    return print_failure(cl, "the " + cl.command + " command is not available yet",
                         agentctl::exit_status::usage);
}
