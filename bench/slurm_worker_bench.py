#!/usr/bin/env python3
"""The Slurm backend's allocation mode (docs/WORKER.md) against the local backend, in the same
allocation and the same sitting: N x /bin/true at --jobs 8 through
`agentctl run --backend slurm` (one `agentctl worker` step on the node, tasks sent over its
stdio) and through `agentctl run` (local), in interleaved rounds (the order alternating, one
warm-up round of each first). Target (issue 28): the worker's throughput at least 0.9x the
local backend's, i.e. at most ~1 ms added per task.

  AGENTCTL_SLURM_CPUS=8 tools/slurm-fixture run -- \\
      salloc --nodes=1 --exclusive --quiet -- python3 bench/slurm_worker_bench.py BUILD [RUNS] [N]

It must run inside the allocation (SLURM_JOB_ID set): that is where allocation mode applies.
With `--against OTHER_BUILD` after N, a third command, OTHER_BUILD's worker, joins the rounds (an
A/B of two builds in the same allocation and rounds), and each round's order is shuffled.

  AGENTCTL_SLURM_CPUS=8 tools/slurm-fixture run -- \\
      python3 bench/slurm_worker_bench.py BUILD --scale 10000,100000

runs each size once with `--slurm-nodes 1` from outside an allocation (agentctl asks for the
node itself), journaled, and reports agentctl's peak RSS (wait4's ru_maxrss) and the Slurm
client commands it started: every srun, squeue, scancel, scontrol, sinfo and salloc is run
through a logging shim put first on agentctl's PATH, so the count is exact (each command is
one or a few RPCs to the controller). Targets: the largest run's RSS within 32 MiB of the
smallest's, fewer than 50 calls.
"""

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, cwd):
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"slurm-worker-bench: {' '.join(argv)} failed with status {p.returncode}: "
                 f"{p.stderr.decode(errors='replace')[-500:]}")
    return wall


def workflow(work, n):
    items = ", ".join(str(i) for i in range(n))
    with open(os.path.join(work, "wf.yaml"), "w") as f:
        f.write(f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: worker-bench}}
spec:
  policy: {{processAllowlist: ["true"], approval: never}}
  actions:
    nothing: {{kind: builtin.shell.exec, command: /bin/true}}
  tasks:
    - {{id: t, uses: action:nothing, foreach: {{items: [{items}], maxItems: {max(n, 10000)}}}}}
""")


def scale(build, sizes):
    agentctl = os.path.join(build, "agentctl")
    work = tempfile.mkdtemp(prefix="agentctl-worker-scale.")
    shims = os.path.join(work, "shims")
    os.mkdir(shims)
    log = os.path.join(work, "calls.log")
    for tool in ["srun", "squeue", "scancel", "scontrol", "sinfo", "salloc"]:
        real = shutil.which(tool)
        if not real:
            sys.exit(f"slurm-worker-bench: {tool} not found")
        path = os.path.join(shims, tool)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho "{tool} $*" >> {log}\nexec {real} "$@"\n')
        os.chmod(path, 0o755)
    env = dict(os.environ, PATH=shims + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    env.pop("SLURM_JOB_ID", None)
    rss = {}
    for n in sizes:
        workflow(work, n)
        open(log, "w").close()
        argv = [agentctl, "run", "--quiet", "--backend", "slurm", "--slurm-nodes", "1", "--jobs", "8",
                "--db", os.path.join(work, f"journal-{n}.db"), "wf.yaml"]
        print(f"scale command: {' '.join(argv)}", flush=True)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        err = p.stderr.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"slurm-worker-bench: {n} tasks failed: {err[-500:]}")
        calls = [line.split()[0] for line in open(log) if line.strip()]
        by_tool = {t: calls.count(t) for t in sorted(set(calls))}
        rss[n] = usage.ru_maxrss / 1024
        print(f"scale {n}: {wall:.1f} s, peak RSS {rss[n]:.1f} MiB, Slurm calls {len(calls)} {by_tool}",
              flush=True)
    low, high = min(sizes), max(sizes)
    print(f"scale RSS growth {low} -> {high}: {rss[high] - rss[low]:.1f} MiB (target <= 32)")


def main():
    if len(sys.argv) > 3 and sys.argv[2] == "--scale":
        scale(os.path.abspath(sys.argv[1]), [int(x) for x in sys.argv[3].split(",")])
        return
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    other = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--against" else None
    if not os.environ.get("SLURM_JOB_ID"):
        sys.exit("slurm-worker-bench: not inside an allocation: run it under salloc (see the header)")
    work = tempfile.mkdtemp(prefix="agentctl-worker-bench.")
    workflow(work, n)
    agentctl = os.path.join(build, "agentctl")
    common = ["--no-journal", "--quiet", "--jobs", "8", "wf.yaml"]
    commands = {
        "local": [agentctl, "run"] + common,
        "worker": [agentctl, "run", "--backend", "slurm"] + common,
    }
    if other:
        commands["worker-against"] = [os.path.join(other, "agentctl"), "run", "--backend", "slurm"] + common
    for name, argv in commands.items():
        print(f"{name} command: {' '.join(argv)}")
        timed(argv, work)
    t = {name: [] for name in commands}
    for i in range(runs):
        order = list(commands.items())
        if other:
            random.shuffle(order)
        elif i % 2:
            order.reverse()
        for name, argv in order:
            wall = timed(argv, work)
            t[name].append(wall)
            print(f"round {i + 1} {name}: {wall:.3f} s", flush=True)
    local, worker = statistics.median(t["local"]), statistics.median(t["worker"])
    for name in commands:
        xs = sorted(t[name])
        med = statistics.median(xs)
        p10, p90 = xs[len(xs) // 10], xs[-1 - len(xs) // 10]
        print(f"{name}: median {med:.3f} s ({med / n * 1000:.2f} ms per task, {n / med:.0f} tasks/s); "
              f"p10-p90 {p10:.3f}-{p90:.3f}; runs " + " ".join(f"{x:.3f}" for x in xs))
    print(f"worker throughput / local throughput: {local / worker:.3f} (target >= 0.9); "
          f"added per task: {(worker - local) / n * 1000:.2f} ms")
    if other:
        against = statistics.median(t["worker-against"])
        print(f"worker-against ({other}) throughput / local throughput: {local / against:.3f}; "
              f"worker minus worker-against: {(worker - against) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
