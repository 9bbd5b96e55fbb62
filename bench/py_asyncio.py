#!/usr/bin/env python3
"""The Python asyncio peer: what a Python user would write to run N commands, J at a time.

usage: py_asyncio.py N J TIMEOUT PROGRAM [ARG...]

Each task is asyncio.create_subprocess_exec(env={}, stdout=PIPE, stderr=PIPE) under a
Semaphore(J); its output is collected with communicate(), bounded by TIMEOUT seconds from its
spawn (0: no timeout); on timeout the child is kill()ed and wait()ed. Deliberately untuned
(no start_new_session/killpg, no output cap), like the Python baseline of the README's Performance section.

Environment:
  PIDFD_WATCHER=1  use asyncio.PidfdChildWatcher instead of 3.11's default ThreadedChildWatcher
  ABS_DEADLINE=1   one common deadline for all tasks, start + TIMEOUT (burst kill)

Prints one JSON line on stdout with the same field names as spawnbench.
"""

import asyncio
import json
import math
import os
import resource
import sys
import time
import warnings


def percentiles(values):
    """Nearest-rank p50/p99/max in milliseconds, or None when nothing was killed."""
    if not values:
        return None
    v = sorted(values)

    def rank(p):
        return v[max(1, math.ceil(round(p * len(v), 9))) - 1]

    return {"count": len(v), "p50": round(rank(0.50), 3), "p99": round(rank(0.99), 3),
            "max": round(v[-1], 3)}


async def run_one(argv, sem, timeout, common_deadline, stats):
    async with sem:
        spawned = time.monotonic()
        deadline = common_deadline if common_deadline is not None else spawned + timeout
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, env={}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError:
            stats["spawn_errors"] += 1
            return
        try:
            if timeout > 0:
                out, err = await asyncio.wait_for(proc.communicate(),
                                                  max(0.0, deadline - time.monotonic()))
            else:
                out, err = await proc.communicate()
            stats["bytes_captured"] += len(out) + len(err)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            stats["killed"] += 1
            stats["latency_ms"].append((time.monotonic() - deadline) * 1000.0)
        code = proc.returncode
        if code == 0:
            stats["exit_zero"] += 1
        elif code > 0:
            stats["exit_nonzero"] += 1
        else:
            stats["signaled"] += 1


async def main_async(n, j, timeout, argv, stats):
    sem = asyncio.Semaphore(j)
    common_deadline = None
    if os.environ.get("ABS_DEADLINE") == "1":
        common_deadline = time.monotonic() + timeout
    await asyncio.gather(*(run_one(argv, sem, timeout, common_deadline, stats) for _ in range(n)))


def main():
    if len(sys.argv) < 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    n, j, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    argv = sys.argv[4:]
    if os.environ.get("ABS_DEADLINE") == "1" and timeout <= 0:
        print("py_asyncio.py: ABS_DEADLINE=1 needs a TIMEOUT", file=sys.stderr)
        return 2
    # 1,000 children in flight hold 3,000 pipe ends; the soft limit is often 1,024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    pidfd = os.environ.get("PIDFD_WATCHER") == "1"
    if pidfd:
        # Child watchers are deprecated from 3.12, where the pidfd watcher is the default.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(asyncio.PidfdChildWatcher())

    stats = {"exit_zero": 0, "exit_nonzero": 0, "signaled": 0, "killed": 0, "spawn_errors": 0,
             "bytes_captured": 0, "latency_ms": []}
    start = time.monotonic()
    asyncio.run(main_async(n, j, timeout, argv, stats))
    wall = time.monotonic() - start

    result = {"bench": "py_asyncio", "program": argv[0], "n": n, "j": j, "timeout_s": timeout,
              "absolute_deadline": os.environ.get("ABS_DEADLINE") == "1",
              "watcher": "pidfd" if pidfd else "threaded", "wall_s": round(wall, 6),
              "tasks_per_s": round(n / wall, 1), "bytes_captured": stats["bytes_captured"],
              "captured_mb_per_s": round(stats["bytes_captured"] / 1e6 / wall, 1)}
    for key in ("exit_zero", "exit_nonzero", "signaled", "killed", "spawn_errors"):
        result[key] = stats[key]
    result["latency_ms"] = percentiles(stats["latency_ms"])
    print(json.dumps(result, separators=(",", ":")))
    return 0 if stats["spawn_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
