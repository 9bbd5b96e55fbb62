// What several commands read alike from the command line: the workflow FILE and its inputs,
// the backend and its Slurm options, --jobs, the journal's --db. Each is read once, here.
#include "cli.hpp"

#include <agentctl/plan.hpp>

namespace agentctl::cli {

std::string arguments::value(std::string_view option) const {
    auto it = given.find(option);
    return it == given.end() || it->second.empty() ? std::string() : it->second.back();
}

std::vector<std::string> arguments::values(std::string_view option) const {
    auto it = given.find(option);
    return it == given.end() ? std::vector<std::string>() : it->second;
}

std::optional<int> parse_workflow_file(command_line& cl, const arguments& a) {
    if (a.operands.size() != 1) return usage_error(cl, cl.command + " needs exactly one workflow FILE");
    cl.file = a.operands[0];
    cl.inputs = a.values("input");
    cl.vars = a.values("var");
    cl.vars_files = a.values("vars-file");
    if (a.has("inputs-file")) cl.inputs_file = a.value("inputs-file");
    int from_stdin = cl.inputs_file == "-";
    for (const auto& spec : a.values("items")) {
        auto eq = spec.find('=');
        if (eq == 0 || eq == std::string::npos || eq + 1 == spec.size())
            return usage_error(cl, "--items needs NAME=FILE, not \"" + spec + "\"");
        cl.items.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
        from_stdin += cl.items.back().file == "-";
    }
    if (from_stdin > 1)
        return usage_error(cl, "only one of --items and --inputs-file can read standard input (-)");
    cl.null_separated = a.has("null");
    if (cl.null_separated && cl.items.empty())
        return usage_error(cl, "--null applies to --items files; none given");
    if (a.has("workspace")) cl.workspace = a.value("workspace");
    return std::nullopt;
}

std::optional<int> parse_backend(command_line& cl, const arguments& a) {
    if (a.has("backend")) {
        auto b = backend_from_string(a.value("backend"));
        if (!b)
            return usage_error(cl, "--backend must be local or slurm, not \"" + a.value("backend") + "\"");
        cl.backend = *b;
    }
    for (const char* name :
         {"dispatch", "partition", "account", "qos", "cpus-per-task", "mem", "nodes", "time"}) {
        std::string flag = std::string("slurm-") + name;
        if (!a.has(flag)) continue;
        if (cl.backend != backend_kind::slurm) return usage_error(cl, "--" + flag + " needs --backend slurm");
        std::string why = set_slurm_option(cl.slurm, name, a.value(flag));
        if (!why.empty()) return usage_error(cl, why);
    }
    if (std::string why = slurm_options_error(cl.slurm); !why.empty()) return usage_error(cl, why);
    return std::nullopt;
}

std::optional<int> parse_jobs(command_line& cl, const arguments& a) {
    if (!a.has("jobs")) return std::nullopt;
    const std::string text = a.value("jobs");
    cl.jobs = number_of<int>(text);
    if (!cl.jobs && !number_of<double>(text))
        return usage_error(cl, "--jobs " + text + ": not a number (tasks at once, 1 to 4096)");
    if (!cl.jobs || *cl.jobs < 1 || *cl.jobs > limits::max_concurrency)
        return usage_error(cl, "--jobs must be a whole number between 1 and 4096");
    return std::nullopt;
}

std::optional<int> parse_task_limits(command_line& cl, const arguments& a) {
    if (a.has("timeout")) {
        cl.task_timeout_seconds = number_of<double>(a.value("timeout"));
        if (!cl.task_timeout_seconds || !(*cl.task_timeout_seconds >= 0.001) ||
            *cl.task_timeout_seconds > limits::max_timeout_ms / 1000)
            return usage_error(cl, "--timeout " + a.value("timeout") +
                                       ": every task's timeout is a number of seconds from 0.001 to 86400");
    }
    if (a.has("retries")) {
        cl.task_attempts = number_of<int>(a.value("retries"));
        if (!cl.task_attempts || *cl.task_attempts < 1 || *cl.task_attempts > limits::max_retry_attempts)
            return usage_error(cl, "--retries " + a.value("retries") + ": the attempts in all, 1 to 20");
    }
    return std::nullopt;
}

std::optional<int> parse_journal_db(command_line& cl, const arguments& a) {
    if (a.has("db")) cl.db = a.value("db");
    cl.no_journal = a.has("no-journal");
    if (cl.db && cl.no_journal) return usage_error(cl, "--db and --no-journal exclude each other");
    if (cl.db && cl.db->empty()) return usage_error(cl, "--db needs a path");
    return std::nullopt;
}

}  // namespace agentctl::cli
