#!/usr/bin/env python3
"""A command's own CPU time, its children's apart, and each of its threads' (one JSON line).

usage: bench/own_cpu.py COMMAND [ARGS...]

`time` adds the children a process reaped to its own, and in W1 those are 10 000 /bin/true:
agentctl's part is lost in them. This waits for the command with waitid(WNOWAIT), so that its
/proc/PID/stat is still there, and reads utime+stime (the process, all its threads) apart from
cutime+cstime (what it reaped). Threads are sampled from /proc/PID/task every 20 ms: a thread's
figure is its last sample, so it may miss its last 20 ms. Resolution: clock ticks (10 ms).
Used for the per-thread figures of docs/DESIGN.md, "Where a task's time goes".
"""

import json
import os
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def stat_times(path):
    text = open(path).read()
    fields = text[text.rfind(")") + 2:].split()
    # Fields 14-17 of proc(5): utime stime cutime cstime; fields[0] is field 3.
    return [int(v) for v in fields[11:15]]


def main():
    start = time.monotonic()
    child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    threads, done = {}, threading.Event()

    def sample():
        while not done.is_set():
            try:
                for tid in os.listdir(f"/proc/{child.pid}/task"):
                    try:
                        utime, stime, _, _ = stat_times(f"/proc/{child.pid}/task/{tid}/stat")
                        threads[int(tid)] = (utime, stime)
                    except OSError:
                        pass
            except OSError:
                pass
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - start
    utime, stime, cutime, cstime = stat_times(f"/proc/{child.pid}/stat")
    done.set()
    sampler.join()
    status = child.wait()
    print(json.dumps({
        "wall": round(wall, 3), "rc": status, "own_user": utime / TICK, "own_sys": stime / TICK,
        "own": (utime + stime) / TICK, "children": (cutime + cstime) / TICK,
        # [user, system] of each thread, by thread id: the first is the main thread.
        "threads": [[u / TICK, s / TICK] for _, (u, s) in sorted(threads.items()) if u + s > 0],
    }))


if __name__ == "__main__":
    main()
