#!/usr/bin/env bash
# Runs, in one sitting, the peer comparison of the README's Performance section with the project's own
# baselines: one hyperfine group per workload, each including the C anchor (spawnbench), so
# every figure is read as a ratio against the anchor of its own group.
#
#   W1  N x /bin/true, J=64                     (throughput)
#   W2  N x 1 MiB on stdout, captured, J=64     (capture)
#   W3  N x `sleep 30`, all in flight, each killed by a 0.2 s timeout
#   plus single instrumented runs for the deadline -> reaped latency (W3 and burst kill).
#
# usage: bench/peers.sh [--quick] [--build DIR] [--runs R] [--out DIR]
#   --quick      smaller N and 3 runs per command (~3 min on a quiet box instead of ~8)
#   --build DIR  meson build directory holding bench/spawnbench and agentctl
#                (default: build); spawnbench is compiled with cc -O2 if it is not built there
#   --runs R     hyperfine runs per command (default 5, quick 3)
#   --out DIR    where the JSON lines go (default: bench/results)
#
# Output: DIR/peers-<UTC time>[-quick].jsonl, one JSON object per line: a "machine" record,
# one "hyperfine" record per command (median, mean, stddev, min, max, spread, ratio to the
# group's anchor) and one "instrumented" record per latency run. A table is printed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=$root/build
out=$here/results
quick=0
runs=
while (($#)); do
    case $1 in
        --quick) quick=1 ;;
        --build) build=$(cd "$2" && pwd); shift ;;
        --runs) runs=$2; shift ;;
        --out) out=$2; shift ;;
        -h | --help) sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "peers.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

if ((quick)); then
    mode=quick suffix=-quick w1_n=2000 w2_n=400 w3_n=500 group_cap=300
    runs=${runs:-3}
else
    mode=full suffix='' w1_n=10000 w2_n=2000 w3_n=1000 group_cap=900
    runs=${runs:-5}
fi
w3_j=1000
mib=1048576

# --- tools ---------------------------------------------------------------------------------
have() { command -v "$1" >/dev/null 2>&1; }
missing=()
for tool in hyperfine python3 xargs seq timeout parallel cc; do
    have "$tool" || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "peers.sh: missing: ${missing[*]} (Debian: apt-get install hyperfine parallel python3 findutils coreutils gcc)" >&2
fi
for tool in hyperfine python3; do
    have "$tool" || { echo "peers.sh: $tool is required" >&2; exit 1; }
done
python=$(command -v python3)

mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=$out/peers-$stamp$suffix.jsonl
work=$(mktemp -d "${TMPDIR:-/tmp}/agentctl-peers.XXXXXX")
trap 'rm -rf "$work"' EXIT
# timeout(1) passes the signal on to the whole group it started (hyperfine and the runner).
current=
stop() {
    if [[ -n $current ]]; then kill -TERM "$current" 2>/dev/null || true; fi
    exit 130
}
trap stop INT TERM

spawnbench=$build/bench/spawnbench
if [[ ! -x $spawnbench ]]; then
    have cc || { echo "peers.sh: no $spawnbench and no cc to build it" >&2; exit 1; }
    spawnbench=$work/spawnbench
    cc -O2 -o "$spawnbench" "$here/spawnbench.c"
    echo "peers.sh: $build/bench/spawnbench not built; compiled $here/spawnbench.c with cc -O2" >&2
fi
# Hyperfine takes command strings; the instrumented runs take argument arrays.
py=("$python" "$here/py_asyncio.py")
printf -v py_asyncio '%q %q' "${py[@]}"
printf -v spawnbench_q '%q' "$spawnbench"

# --- the agentctl hook ---------------------------------------------------------------------
# bench/run is the complete comparison (interleaved runs, targets, README); this script is
# the hyperfine-only variant.
# Writes a workflow that runs N tasks of one command through a foreach; $action_extra is
# appended to the action (e.g. a timeout).
# usage: write_workflow FILE N J COMMAND [ARG...]
write_workflow() {
    local file=$1 n=$2 j=$3 command=$4
    shift 4
    local args="" a
    for a in "$@"; do args+="${args:+, }\"$a\""; done
    {
        echo "apiVersion: agentctl.dev/v1"
        echo "kind: Workflow"
        echo "metadata: {name: bench}"
        echo "spec:"
        echo "  inputs:"
        echo "    items: [$(seq -s ', ' 1 "$n")]"
        echo "  policy:"
        # Quoted: `true` unquoted is a YAML boolean.
        echo "    processAllowlist: [\"$(basename "$command")\"]"
        echo "    approval: never"
        echo "  runtime:"
        echo "    maxConcurrency: $j"
        echo "  actions:"
        echo "    work:"
        echo "      kind: builtin.shell.exec"
        echo "      command: $command"
        echo "      args: [$args]"
        if [[ -n ${action_extra:-} ]]; then echo "      $action_extra"; fi
        echo "  tasks:"
        echo "    - id: work"
        echo "      uses: action:work"
        echo "      foreach: {items: \"\${{ inputs.items }}\", as: item, maxItems: $n}"
        echo "      failure: continue"
    } >"$file"
}

# Prints agentctl's command line for workload W1, W2 or W3, or nothing while the CLI is not
# built (or does not accept the workflow yet).
agentctl_cmd() {
    local w=$1 bin=$build/agentctl wf=$work/${1,,}.yaml j=64
    [[ -x $bin ]] || return 0
    case $w in
        W1) write_workflow "$wf" "$w1_n" 64 /bin/true ;;
        W2) write_workflow "$wf" "$w2_n" 64 /usr/bin/head -c "$mib" /dev/zero ;;
        W3) j=$w3_j; action_extra="timeoutSeconds: 0.2" write_workflow "$wf" "$w3_n" "$j" /bin/sleep 30 ;;
        *) return 0 ;;
    esac
    # A CLI that is still a stub exits 0 for anything: insist on a real CheckResult.
    if ! "$bin" --output json check "$wf" 2>/dev/null | grep -q '"ok":true'; then
        echo "peers.sh: agentctl does not accept the $w workflow (yet); agentctl left out of $w" >&2
        return 0
    fi
    printf '%q run %q --jobs %d\n' "$bin" "$wf" "$j"
}

# --- running -------------------------------------------------------------------------------
# usage: group NAME N J UNIT_BYTES DESCRIPTION -- name1 cmd1 name2 cmd2 ...
# The first command is the anchor. UNIT_BYTES is the bytes each task captures (for MB/s).
group() {
    local name=$1 n=$2 j=$3 unit=$4 desc=$5
    shift 6
    local -a hf=(hyperfine --style basic -i --warmup 1 --runs "$runs" --export-json "$work/$name.json")
    while (($#)); do
        hf+=(-n "$1" "$2")
        shift 2
    done
    echo
    echo "=== $name: $desc"
    # In the background so that the INT/TERM trap can stop the group while we wait.
    timeout -k 10 "$group_cap" "${hf[@]}" &
    current=$!
    if ! wait "$current"; then
        current=
        echo "peers.sh: group $name failed or exceeded ${group_cap}s" >&2
        return 0
    fi
    current=
    "$python" - "$work/$name.json" "$results" "$stamp" "$quick" "$name" "$n" "$j" "$unit" "$desc" <<'EOF'
import json, sys
path, results, stamp, quick, group, n, j, unit, desc = sys.argv[1:]
n, j, unit = int(n), int(j), int(unit)
data = json.load(open(path))["results"]
anchor = data[0]["median"]
with open(results, "a") as f:
    for r in data:
        rec = {"record": "hyperfine", "run_id": stamp, "quick": quick == "1", "group": group,
               "workload": desc, "name": r["command"], "n": n, "j": j, "runs": len(r["times"]),
               "median_s": round(r["median"], 4), "mean_s": round(r["mean"], 4),
               "stddev_s": round(r["stddev"] or 0.0, 4), "min_s": round(r["min"], 4),
               "max_s": round(r["max"], 4),
               "spread_pct": round(100 * (r["max"] - r["min"]) / r["median"], 1),
               "ratio_vs_anchor": round(r["median"] / anchor, 3), "anchor": data[0]["command"],
               "tasks_per_s": round(n / r["median"], 1),
               "nonzero_exits": sum(1 for c in r.get("exit_codes", []) if c != 0),
               "times_s": [round(t, 4) for t in r["times"]]}
        if unit:
            rec["captured_mb_per_s"] = round(n * unit / 1e6 / r["median"], 1)
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
EOF
}

# usage: instrumented GROUP NAME COMMAND...   (the command prints one JSON line)
instrumented() {
    local group=$1 name=$2
    shift 2
    local line
    if ! line=$(timeout -k 10 120 "$@" 2>/dev/null | tail -n 1) || [[ -z $line ]]; then
        echo "peers.sh: instrumented run $group/$name failed" >&2
        return 0
    fi
    "$python" - "$results" "$stamp" "$quick" "$group" "$name" "$line" <<'EOF'
import json, sys
results, stamp, quick, group, name, line = sys.argv[1:]
rec = {"record": "instrumented", "run_id": stamp, "quick": quick == "1", "group": group,
       "name": name}
rec.update(json.loads(line))
with open(results, "a") as f:
    f.write(json.dumps(rec, separators=(",", ":")) + "\n")
EOF
}

"$python" - "$results" "$stamp" "$quick" "$runs" <<'EOF'
import json, os, platform, subprocess, sys
results, stamp, quick, runs = sys.argv[1:]
def first_line(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
rec = {"record": "machine", "run_id": stamp, "quick": quick == "1", "runs": int(runs),
       "nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
       "python": platform.python_version(), "hyperfine": first_line(["hyperfine", "--version"]),
       "parallel": first_line(["parallel", "--version"]), "xargs": first_line(["xargs", "--version"]),
       "loadavg": open("/proc/loadavg").read().split()[:3]}
with open(results, "w") as f:
    f.write(json.dumps(rec, separators=(",", ":")) + "\n")
EOF

echo "peers.sh: $mode run, $runs runs per command, results in $results"

args=(spawnbench "$spawnbench_q -n $w1_n -j 64 -- /bin/true")
cmd=$(agentctl_cmd W1)
if [[ -n $cmd ]]; then args+=(agentctl "$cmd"); fi
have xargs && args+=(xargs "seq $w1_n | xargs -P 64 -I{} /bin/true")
have parallel && args+=(parallel "seq $w1_n | parallel -j 64 -N0 /bin/true")
args+=(py_asyncio "$py_asyncio $w1_n 64 0 /bin/true")
group W1 "$w1_n" 64 0 "$w1_n x /bin/true, J=64" -- "${args[@]}"

args=(spawnbench "$spawnbench_q -n $w2_n -j 64 -- /usr/bin/head -c $mib /dev/zero")
cmd=$(agentctl_cmd W2)
if [[ -n $cmd ]]; then args+=(agentctl "$cmd"); fi
args+=(spawnbench-pipe1m "$spawnbench_q -n $w2_n -j 64 -p $mib -- /usr/bin/head -c $mib /dev/zero")
args+=(py_asyncio "$py_asyncio $w2_n 64 0 /usr/bin/head -c $mib /dev/zero")
have parallel && args+=(parallel "seq $w2_n | parallel -j 64 -N0 head -c $mib /dev/zero")
group W2 "$w2_n" 64 "$mib" "$w2_n x 1 MiB stdout captured, J=64" -- "${args[@]}"

args=(spawnbench "$spawnbench_q -n $w3_n -j $w3_j -t 0.2 -- /bin/sleep 30")
cmd=$(agentctl_cmd W3)
if [[ -n $cmd ]]; then args+=(agentctl "$cmd"); fi
have xargs && args+=(xargs-timeout "seq $w3_n | xargs -P $w3_j -I{} timeout 0.2 sleep 30")
args+=(py_asyncio "$py_asyncio $w3_n $w3_j 0.2 /bin/sleep 30")
args+=(py_asyncio-pidfd "PIDFD_WATCHER=1 $py_asyncio $w3_n $w3_j 0.2 /bin/sleep 30")
group W3 "$w3_n" "$w3_j" 0 "$w3_n x sleep 30 killed by a 0.2 s timeout, J=$w3_j" -- "${args[@]}"

echo
echo "=== instrumented: deadline -> reaped latency (one run each)"
instrumented W3 spawnbench "$spawnbench" -n "$w3_n" -j "$w3_j" -t 0.2 -- /bin/sleep 30
instrumented W3 spawnbench-unbatched "$spawnbench" -n "$w3_n" -j "$w3_j" -b 0 -t 0.2 -- /bin/sleep 30
instrumented W3 py_asyncio "${py[@]}" "$w3_n" "$w3_j" 0.2 /bin/sleep 30
instrumented W3 py_asyncio-pidfd env PIDFD_WATCHER=1 "${py[@]}" "$w3_n" "$w3_j" 0.2 /bin/sleep 30
# The common deadline leaves time to start every child first, so all are alive when it fires.
instrumented W3-burst spawnbench "$spawnbench" -n "$w3_n" -j "$w3_j" -A -t 2.0 -- /bin/sleep 30
instrumented W3-burst py_asyncio-pidfd env ABS_DEADLINE=1 PIDFD_WATCHER=1 "${py[@]}" "$w3_n" "$w3_j" 2.0 /bin/sleep 30

echo
"$python" - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-9s %-20s %9s %19s %7s %10s %9s" % ("group", "runner", "median s", "min-max s", "x C", "tasks/s", "MB/s"))
for r in rows:
    if r["record"] != "hyperfine":
        continue
    mb = "%.0f" % r["captured_mb_per_s"] if "captured_mb_per_s" in r else "-"
    print("%-9s %-20s %9.3f %9.3f-%-9.3f %6.2fx %10.0f %9s" % (r["group"], r["name"], r["median_s"],
          r["min_s"], r["max_s"], r["ratio_vs_anchor"], r["tasks_per_s"], mb))
print()
print("%-9s %-22s %8s %9s %9s %9s" % ("group", "runner", "killed", "p50 ms", "p99 ms", "max ms"))
for r in rows:
    if r["record"] != "instrumented" or not r.get("latency_ms"):
        continue
    l = r["latency_ms"]
    print("%-9s %-22s %8d %9.1f %9.1f %9.1f" % (r["group"], r["name"], r["killed"], l["p50"], l["p99"], l["max"]))
print()
print("results:", sys.argv[1])
EOF
