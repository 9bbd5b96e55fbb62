// srun and the controller calls around it, as argument vectors.
#include "runner/slurm/command.hpp"

#include "runner/lines.hpp"

#include <algorithm>

namespace agentctl::slurm {

namespace {

bool has_control(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// A flag value: not empty, no control character (srun would carry a newline into its
// messages and logs; a NUL would end the argument).
std::string value_error(std::string_view what, std::string_view value) {
    if (value.empty()) return std::string(what) + " is empty";
    if (has_control(value)) return std::string(what) + " holds a control character";
    return {};
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               auto lower = [](char c) {
                   return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
               };
               return lower(x) == lower(y);
           });
}

template <typename T, typename Text>
std::vector<std::vector<std::string>> chunked(std::vector<std::string> prefix, std::string_view flag,
                                              const std::vector<T>& items, Text text,
                                              std::size_t max_arg_bytes) {
    std::vector<std::vector<std::string>> commands;
    std::string arg;
    auto flush = [&] {
        if (arg.empty()) return;
        auto cmd = prefix;
        cmd.push_back(std::string(flag) + arg);
        commands.push_back(std::move(cmd));
        arg.clear();
    };
    for (const auto& item : items) {
        std::string t = text(item);
        if (!arg.empty() && flag.size() + arg.size() + 1 + t.size() > max_arg_bytes) flush();
        if (!arg.empty()) arg += ',';
        arg += t;
    }
    flush();
    return commands;
}

// A command line refused: no argv, and why.
argv_result refused(std::string why) {
    return argv_result{{}, std::move(why)};
}

}  // namespace

std::string env_name_error(std::string_view name) {
    auto first_ok = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    auto rest_ok = [&](char c) { return first_ok(c) || (c >= '0' && c <= '9'); };
    if (name.empty() || !first_ok(name[0]) || !std::all_of(name.begin() + 1, name.end(), rest_ok))
        return "the environment name '" + std::string(name) + "' is not of the form [A-Za-z_][A-Za-z0-9_]*";
    for (std::string_view keyword : {"ALL", "NONE", "NIL"})
        if (iequals(name, keyword))
            return "the environment name " + std::string(name) +
                   " is a keyword of srun --export and cannot be passed";
    for (std::string_view prefix : {"SLURM_", "SRUN_"})
        if (name.substr(0, prefix.size()) == prefix)
            return "the environment name " + std::string(name) +
                   " would steer srun itself (srun reads SLURM_* and SRUN_* as options)";
    return {};
}

argv_result worker_step_argv(const worker_step_request& r) {
    if (auto e = value_error("the srun path", r.srun); !e.empty()) return refused(e);
    if (auto e = value_error("agentctl's path", r.agentctl); !e.empty()) return refused(e);
    if (r.srun.front() != '/' || r.agentctl.front() != '/')
        return refused("srun and agentctl must be absolute paths");
    if (auto e = value_error("the node", r.node); !e.empty()) return refused(e);
    if (auto e = value_error("the step name", r.name); !e.empty()) return refused(e);
    if (r.job_id == 0) return refused("no allocation to run the worker in");
    argv_result out;
    out.argv = {r.srun, "--jobid=" + std::to_string(r.job_id),
                // Shares the node's CPUs with the allocation's other steps instead of claiming them:
                // the tasks the worker starts are where they go.
                "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=" + r.node};
    if (r.cpus > 0) out.argv.push_back("--cpus-per-task=" + std::to_string(r.cpus));
    for (const char* fixed :
         {"--mem=0", "--unbuffered", "--mpi=none", "--kill-on-bad-exit=1", "--quiet", "--export=NONE"})
        out.argv.emplace_back(fixed);
    out.argv.push_back("--job-name=" + r.name);
    out.argv.insert(out.argv.end(), {"--", r.agentctl, "worker"});
    return out;
}

argv_result salloc_argv(const salloc_request& r) {
    if (auto e = value_error("the salloc path", r.salloc); !e.empty()) return refused(e);
    if (r.salloc.front() != '/') return refused("the salloc path is not absolute: " + r.salloc);
    if (auto e = value_error("the allocation's name", r.name); !e.empty()) return refused(e);
    if (r.nodes == 0) return refused("an allocation needs at least one node");
    argv_result out;
    // --no-kill: a node that fails takes its own worker with it, not the whole allocation
    // (Slurm's default), so the run goes on on the other nodes (docs/WORKER.md, "Failures").
    out.argv = {
        r.salloc,    "--no-shell",          "--quiet", "--nodes=" + std::to_string(r.nodes), "--exclusive",
        "--no-kill", "--job-name=" + r.name};
    for (auto [flag, value] : {std::pair<std::string_view, const std::string*>{"time", &r.time},
                               {"partition", &r.partition},
                               {"account", &r.account},
                               {"qos", &r.qos}}) {
        if (value->empty()) continue;
        if (has_control(*value)) return refused("--" + std::string(flag) + " holds a control character");
        out.argv.push_back("--" + std::string(flag) + "=" + *value);
    }
    return out;
}

std::vector<std::string> scontrol_show_job_detail(std::string_view scontrol, std::uint64_t job_id) {
    return {std::string(scontrol), "show", "job", "-d", "-o", std::to_string(job_id)};
}

std::optional<std::uint64_t> time_limit_minutes(std::optional<std::uint64_t> timeout_ms,
                                                std::uint64_t grace_ms) {
    if (!timeout_ms) return std::nullopt;
    constexpr std::uint64_t max_minutes = 2147483647;
    constexpr std::uint64_t minute = 60000;
    // Saturating: a timeout this large is unlimited in practice.
    std::uint64_t total = *timeout_ms > UINT64_MAX - grace_ms ? UINT64_MAX : *timeout_ms + grace_ms;
    std::uint64_t minutes = total / minute + (total % minute != 0 ? 1 : 0) + 1;
    return std::min(minutes, max_minutes);
}

argv_result srun_argv(const srun_request& r) {
    if (auto e = value_error("the srun path", r.srun); !e.empty()) return refused(e);
    if (r.srun.front() != '/') return refused("the srun path is not absolute: " + r.srun);
    if (auto e = value_error("the executable", r.executable); !e.empty()) return refused(e);
    if (r.executable.front() != '/')
        return refused("the executable is not an absolute path: " + r.executable);
    if (auto e = value_error("the working directory", r.cwd); !e.empty()) return refused(e);
    if (r.cwd.front() != '/') return refused("the working directory is not absolute: " + r.cwd);
    for (const auto& a : r.args)
        if (a.find('\0') != std::string::npos) return refused("an argument holds a NUL byte");

    std::string error;
    auto name = job_name(r.run_id, r.owner, r.task_id, r.attempt, error);
    if (!name) return refused(error);

    std::string exports;
    for (const auto& n : r.env_names) {
        if (auto e = env_name_error(n); !e.empty()) return refused(e);
        if (!exports.empty()) exports += ',';
        exports += n;
    }

    const resource_options& res = r.resources;
    for (auto [what, value] : {std::pair<const char*, const std::string*>{"the partition", &res.partition},
                               {"the account", &res.account},
                               {"the QoS", &res.qos}})
        if (!value->empty() && has_control(*value))
            return refused(std::string(what) + " holds a control character");
    if (res.cpus_per_task && *res.cpus_per_task == 0) return refused("--cpus-per-task must be at least 1");
    if (res.mem_mib && *res.mem_mib == 0) return refused("--mem must be at least 1 MiB");

    argv_result out;
    out.argv = {
        r.srun,
        // Informational lines ("job N queued and waiting for resources") would land in the
        // task's stderr; errors still appear.
        "--quiet",
        "--ntasks=1",
        "--nodes=1",
        "--job-name=" + *name,
    };
    // stdin reads end-of-file at once; without it srun forwards its own (to the one task).
    if (!r.forward_stdin) out.argv.push_back("--input=none");
    // Partial lines reach us when written, as from a local process.
    out.argv.push_back("--unbuffered");
    // One task needs no MPI wiring, whatever the cluster's MpiDefault.
    out.argv.push_back("--mpi=none");
    out.argv.push_back("--chdir=" + r.cwd);
    out.argv.push_back("--export=" + (exports.empty() ? std::string("NONE") : exports));
    if (auto minutes = time_limit_minutes(r.timeout_ms, r.kill_grace_ms))
        out.argv.push_back("--time=" + std::to_string(*minutes));
    if (!res.partition.empty()) out.argv.push_back("--partition=" + res.partition);
    if (!res.account.empty()) out.argv.push_back("--account=" + res.account);
    if (!res.qos.empty()) out.argv.push_back("--qos=" + res.qos);
    if (res.cpus_per_task) out.argv.push_back("--cpus-per-task=" + std::to_string(*res.cpus_per_task));
    if (res.mem_mib) out.argv.push_back("--mem=" + std::to_string(*res.mem_mib) + "M");
    // srun stops reading options at the executable anyway; `--` says so explicitly.
    out.argv.push_back("--");
    out.argv.push_back(r.executable);
    out.argv.insert(out.argv.end(), r.args.begin(), r.args.end());
    return out;
}

std::vector<std::string> client_environment(const environment_lookup& host_env,
                                            const std::vector<std::string>& action_env) {
    std::vector<std::string> env;
    if (host_env)
        if (auto conf = host_env("SLURM_CONF")) env.push_back("SLURM_CONF=" + *conf);
    env.insert(env.end(), action_env.begin(), action_env.end());
    return env;
}

std::vector<std::vector<std::string>> squeue_by_names(std::string_view squeue,
                                                      const std::vector<std::string>& names,
                                                      std::size_t max_arg_bytes) {
    return chunked(
        {std::string(squeue), "--noheader", "--states=all", "--format=" + std::string(squeue_format)},
        "--name=", names, [](const std::string& n) { return n; }, max_arg_bytes);
}

std::vector<std::vector<std::string>> squeue_by_ids(std::string_view squeue,
                                                    const std::vector<std::uint64_t>& ids,
                                                    std::size_t max_arg_bytes) {
    return chunked(
        {std::string(squeue), "--noheader", "--states=all", "--format=" + std::string(squeue_format)},
        "--jobs=", ids, [](std::uint64_t id) { return std::to_string(id); }, max_arg_bytes);
}

std::vector<std::string> squeue_mine(std::string_view squeue) {
    return {std::string(squeue), "--noheader", "--me", "--format=" + std::string(squeue_format)};
}

std::vector<std::string> scancel_signal(std::string_view scancel, std::uint64_t job_id,
                                        std::string_view signal) {
    return {std::string(scancel), "--signal=" + std::string(signal), std::to_string(job_id)};
}

std::vector<std::string> scancel_kill_step(std::string_view scancel, std::uint64_t job_id) {
    return {std::string(scancel), "--signal=KILL", std::to_string(job_id) + ".0"};
}

std::vector<std::string> scancel_jobs(std::string_view scancel, const std::vector<std::uint64_t>& ids) {
    std::vector<std::string> argv = {std::string(scancel)};
    for (auto id : ids) argv.push_back(std::to_string(id));
    return argv;
}

std::vector<std::string> scancel_by_name(std::string_view scancel, std::string_view name) {
    return {std::string(scancel), "--name=" + std::string(name)};
}

std::vector<std::string> scontrol_show_job(std::string_view scontrol, std::uint64_t job_id) {
    return {std::string(scontrol), "show", "job", "-o", std::to_string(job_id)};
}

std::vector<std::string> scontrol_ping(std::string_view scontrol) {
    return {std::string(scontrol), "ping"};
}

bool ping_says_up(std::string_view output) {
    // "Slurmctld(primary) at vm is UP"; with a backup controller, one line each.
    return output.find(" is UP") != std::string_view::npos;
}

std::vector<std::string> sinfo_partition(std::string_view sinfo, std::string_view partition) {
    return {std::string(sinfo), "--noheader", "--partition=" + std::string(partition), "--format=%P|%a"};
}

std::vector<std::string> sinfo_partitions(std::string_view sinfo) {
    return {std::string(sinfo), "--noheader", "--format=%P|%a"};
}

std::optional<std::string> default_partition(std::string_view output) {
    while (!output.empty()) {
        std::string_view line = next_line(output);
        auto bar = line.find('|');
        if (bar == std::string_view::npos || bar < 2) continue;  // a name, then '*'
        if (line[bar - 1] == '*') return std::string(line.substr(0, bar - 1));
    }
    return std::nullopt;
}

std::vector<std::string> split_partitions(std::string_view partition) {
    std::vector<std::string> out;
    while (!partition.empty()) {
        auto comma = partition.find(',');
        std::string_view one = partition.substr(0, comma);
        if (!one.empty()) out.emplace_back(one);
        if (comma == std::string_view::npos) break;
        partition.remove_prefix(comma + 1);
    }
    return out;
}

partition_status parse_partition(std::string_view output, std::string_view partition) {
    partition_status st;
    while (!output.empty()) {
        std::string_view line = next_line(output);
        auto bar = line.find('|');
        if (bar == std::string_view::npos) continue;
        std::string_view name = line.substr(0, bar);
        bool is_default = !name.empty() && name.back() == '*';
        if (is_default) name.remove_suffix(1);
        if (name != partition) continue;
        st.found = true;
        st.up = line.substr(bar + 1) == "up";
        st.is_default = is_default;
    }
    return st;
}

}  // namespace agentctl::slurm
