#!/usr/bin/env python3
"""The Slurm backend against its own cluster: N x /bin/true through
`agentctl run --backend slurm --jobs 8` against `seq N | xargs -P 8 -I{} srun /bin/true` in the
same fixture, in interleaved rounds (the order alternating, one warm-up round first).
Target: agentctl's median wall time at most 1.1x the loop's. Also agentctl's own CPU time
per attempt: user + system time of the agentctl process alone (read from /proc/PID/stat
once it has exited and before it is reaped, so srun and squeue are not counted), / N.

  AGENTCTL_SLURM_CPUS=8 tools/slurm-fixture run -- python3 bench/slurm_bench.py BUILD [RUNS] [N]

The fixture's node gets 8 CPUs so that 8 jobs fit at once (docs/SLURM.md, section 8).
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, cwd):
    """Wall seconds, and the process's own user+system seconds (not its children's)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Wait for the exit without reaping: the zombie's /proc/PID/stat holds its final times.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - t0
    with open(f"/proc/{p.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
    err = p.stderr.read().decode(errors="replace")
    status = p.wait()
    if status != 0:
        sys.exit(f"slurm-bench: {argv[0]} failed with status {status}: {err[-500:]}")
    return wall, own


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    if not os.environ.get("SLURM_CONF"):
        sys.exit("slurm-bench: SLURM_CONF is not set: run this under tools/slurm-fixture (see the header)")
    srun = shutil.which("srun")
    if not srun:
        sys.exit("slurm-bench: srun is not in the PATH")
    work = tempfile.mkdtemp(prefix="agentctl-slurm-bench.")
    try:
        items = ", ".join(str(i) for i in range(n))
        with open(os.path.join(work, "wf.yaml"), "w") as f:
            f.write(f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: slurm-bench}}
spec:
  policy: {{processAllowlist: ["true"], approval: never}}
  actions:
    nothing: {{kind: builtin.shell.exec, command: /bin/true}}
  tasks:
    - {{id: t, uses: action:nothing, foreach: {{items: [{items}]}}}}
""")
        agentctl = [os.path.join(build, "agentctl"), "run", "--quiet", "--backend", "slurm", "--jobs", "8",
                    "wf.yaml"]
        loop = ["sh", "-c", f"seq {n} | xargs -P 8 -I{{}} {srun} /bin/true"]
        print("agentctl command: " + " ".join(agentctl))
        print("loop command: " + loop[2])
        timed(agentctl, work)
        timed(loop, work)
        t = {"agentctl": [], "loop": []}
        cpu = []
        for i in range(runs):
            order = [("agentctl", agentctl), ("loop", loop)]
            if i % 2:
                order.reverse()
            for name, argv in order:
                wall, own = timed(argv, work)
                t[name].append(wall)
                if name == "agentctl":
                    cpu.append(own)
                print(f"round {i + 1} {name}: {wall:.3f} s" + (f", own CPU {own:.2f} s" if name == "agentctl" else ""),
                      flush=True)
        a, lo = statistics.median(t["agentctl"]), statistics.median(t["loop"])
        for name, label in (("agentctl", "agentctl"), ("loop", "srun-loop")):
            xs = sorted(t[name])
            print(f"{label}: runs " + " ".join(f"{x:.3f}" for x in xs) +
                  f" s; Range (min … max):   {xs[0]:.3f} s …  {xs[-1]:.3f} s")
        per_attempt = statistics.median(cpu) / n * 1000
        print(f"agentctl own CPU per attempt: {per_attempt:.2f} ms (median of {runs} runs: "
              f"{statistics.median(cpu):.2f} s for {n} attempts)")
        print(f"agentctl {a:.2f} s ± {max(t['agentctl']) - min(t['agentctl']):.2f}, loop {lo:.2f} s ± "
              f"{max(t['loop']) - min(t['loop']):.2f}: ratio {a / lo:.3f} (medians of {runs} interleaved runs, "
              f"± is the spread; target <= 1.1)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
