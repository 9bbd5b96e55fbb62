// What Slurm 22.05 adds to a task's environment with `srun --export=NAMES` (docs/SLURM.md,
// section 3): the whole environment of a task is these plus the declared names.
#pragma once

#include <set>
#include <string>

namespace slurm_test {

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

}  // namespace slurm_test
