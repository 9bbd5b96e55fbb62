#!/usr/bin/env python3
"""bench/order_effect.py: does a W3 run's time depend on the run before it?

usage: bench/order_effect.py BUILD_DIR SEQUENCE ROUNDS

SEQUENCE names runners in the order each round runs them, comma-separated, from
  C  the C loop (spawnbench)          A  agentctl run (journal on)
  E  the executor (exec_bench)        G  exec_bench -g (process groups only)
  P  bench/py_asyncio.py, pidfd watcher
  S  sleep 3 (an idle predecessor)    T  sleep 0.1
all with W3's arguments (1 000 x sleep 30, all in flight, 0.2 s timeout). Every run goes
through bench/run's own run_once (a new session, /usr/bin/time, a fresh state folder, the
orphan sweep), after a warm-up round; each time is filed under "X after Y", Y being the run
before it (the last of the previous round for the first). docs/DESIGN.md, "bench/run's order
of runners", has what it found.
"""
import importlib.machinery
import importlib.util
import pathlib
import shutil
import statistics
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def load_bench_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(HERE / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    build, sequence, rounds = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2].split(","), int(sys.argv[3])
    br = load_bench_run()
    work = pathlib.Path(tempfile.mkdtemp(prefix="agentctl-order."))
    br.become_subreaper()
    br.fresh_state(work)
    env = br.runner_env(work)
    workflow = br.foreach_workflow(work / "w3.yaml", 1000, "/bin/sleep", ["30"],
                                   action_fields=["timeoutSeconds: 0.2"], task_fields=["failure: continue"])
    w3 = ["-n", "1000", "-j", "1000", "-t", "0.2", "--", "/bin/sleep", "30"]
    runners = {
        "C": [str(build / "bench" / "spawnbench"), *w3],
        "A": [str(build / "agentctl"), "--output", "json", "run", workflow, "--jobs", "1000"],
        "E": [str(build / "bench" / "exec_bench"), *w3],
        "G": [str(build / "bench" / "exec_bench"), "-g", *w3],
        "P": [sys.executable, str(HERE / "py_asyncio.py"), "1000", "1000", "0.2", "/bin/sleep", "30"],
        "S": ["/bin/sleep", "3"],
        "T": ["/bin/sleep", "0.1"],
    }
    unknown = [name for name in sequence if name not in runners]
    if unknown:
        sys.exit(f"unknown runners: {', '.join(unknown)}")
    times = {}
    try:
        measure(br, env, work, runners, sequence, rounds, times)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for key, values in sorted(times.items()):
        print(f"{key:<10} median {statistics.median(values):.3f} s  min {min(values):.3f}  "
              f"max {max(values):.3f}  n {len(values)}")


def measure(br, env, work, runners, sequence, rounds, times):
    for rnd in range(rounds + 1):
        previous = sequence[-1]
        for name in sequence:
            extra = {"PIDFD_WATCHER": "1"} if name == "P" else None
            o = br.run_once(env, runners[name], 120, stdout_path=work / "out", extra_env=extra)
            if rnd:
                times.setdefault(f"{name} after {previous}", []).append(o["wall_s"])
            previous = name


if __name__ == "__main__":
    main()
