// What a task's environment holds on the Slurm backend (docs/SLURM.md, section 3): the declared
// names that are set in agentctl's environment, plus Slurm's own variables, and nothing else.
#pragma once

#include <iostream>
#include <set>
#include <string>
#include <string_view>

namespace slurm_test {

/// What Slurm 22.05 added to a task's environment with `srun --export=NAMES` in every run
/// measured with the fixture. Which of its own variables Slurm sets is Slurm's business, not
/// agentctl's contract: one run of the README's test command on a fresh machine got one
/// fewer (which one was not recorded), so the tests allow Slurm's own variables by name
/// (slurm_own) and require only slurm_job_names; a run that differs from this list says how.
inline const std::set<std::string> slurm_names = {"SLURMD_NODENAME",
                                                  "SLURM_CLUSTER_NAME",
                                                  "SLURM_CONF",
                                                  "SLURM_CPUS_ON_NODE",
                                                  "SLURM_GTIDS",
                                                  "SLURM_JOBID",
                                                  "SLURM_JOB_CPUS_PER_NODE",
                                                  "SLURM_JOB_GID",
                                                  "SLURM_JOB_ID",
                                                  "SLURM_JOB_NAME",
                                                  "SLURM_JOB_NODELIST",
                                                  "SLURM_JOB_NUM_NODES",
                                                  "SLURM_JOB_PARTITION",
                                                  "SLURM_JOB_UID",
                                                  "SLURM_JOB_USER",
                                                  "SLURM_LAUNCH_NODE_IPADDR",
                                                  "SLURM_LOCALID",
                                                  "SLURM_NNODES",
                                                  "SLURM_NODEID",
                                                  "SLURM_NODELIST",
                                                  "SLURM_NPROCS",
                                                  "SLURM_NTASKS",
                                                  "SLURM_PRIO_PROCESS",
                                                  "SLURM_PROCID",
                                                  "SLURM_SRUN_COMM_HOST",
                                                  "SLURM_SRUN_COMM_PORT",
                                                  "SLURM_STEPID",
                                                  "SLURM_STEP_ID",
                                                  "SLURM_STEP_LAUNCHER_PORT",
                                                  "SLURM_STEP_NODELIST",
                                                  "SLURM_STEP_NUM_NODES",
                                                  "SLURM_STEP_NUM_TASKS",
                                                  "SLURM_STEP_TASKS_PER_NODE",
                                                  "SLURM_SUBMIT_DIR",
                                                  "SLURM_SUBMIT_HOST",
                                                  "SLURM_TASKS_PER_NODE",
                                                  "SLURM_TASK_PID",
                                                  "SLURM_TOPOLOGY_ADDR",
                                                  "SLURM_TOPOLOGY_ADDR_PATTERN",
                                                  "SLURM_UMASK",
                                                  "SLURM_WORKING_CLUSTER",
                                                  "TMPDIR"};

/// Slurm's own variables: srun and slurmstepd set `SLURM_*` and `SLURMD_*` names and TMPDIR.
/// agentctl gives srun no `SLURM_*` variable but SLURM_CONF, so any other one in a task is
/// Slurm's (the tests plant `SLURM_*` canaries in agentctl's environment to prove it).
inline bool slurm_own(std::string_view name) {
    return name.starts_with("SLURM_") || name.starts_with("SLURMD_") || name == "TMPDIR";
}

/// The variables that say which job and node a task runs as: every task gets them, and the
/// tests check their values.
inline const std::set<std::string> slurm_job_names = {"SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NAME",
                                                      "SLURM_JOB_PARTITION", "SLURMD_NODENAME"};

/// What is wrong with a task's environment `names` for the rule above: a declared (and set)
/// name missing, a name that is neither declared nor Slurm's own, one of agentctl's own
/// `canaries`, a job variable missing. Empty when it holds.
inline std::string environment_problems(const std::set<std::string>& names,
                                        const std::set<std::string>& declared,
                                        const std::set<std::string>& canaries) {
    std::string problems;
    auto say = [&](const std::string& what) { problems += (problems.empty() ? "" : "; ") + what; };
    for (const auto& d : declared)
        if (!names.count(d)) say("declared " + d + " is missing");
    for (const auto& n : names) {
        if (canaries.count(n))
            say(n + " is agentctl's own, not Slurm's");
        else if (!declared.count(n) && !slurm_own(n))
            say(n + " is neither declared nor Slurm's");
    }
    for (const auto& j : slurm_job_names)
        if (!names.count(j)) say("Slurm's " + j + " is missing");
    return problems;
}

/// How Slurm's part of `names` differs from slurm_names ("" when it does not): for the log.
inline std::string differences_from_the_usual(const std::set<std::string>& names,
                                              const std::set<std::string>& declared) {
    std::string out;
    for (const auto& s : slurm_names)
        if (!names.count(s)) out += " -" + s;
    for (const auto& n : names)
        if (!declared.count(n) && !slurm_names.count(n)) out += " +" + n;
    return out;
}

/// Says a difference from slurm_names on stderr, which meson keeps in testlog.txt for a
/// passing test too: the one run that got 41 names did not record which one was missing,
/// and a message at Boost's default log level would not have either.
inline void record_difference(const std::string& difference) {
    std::cerr << "Slurm's own variables differ from the usual set:" << difference << std::endl;
}

}  // namespace slurm_test
