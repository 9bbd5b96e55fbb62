#!/bin/sh
# A run timeout with many tasks not started (docs/CRASH_SAFETY.md, "Stopping a run with many
# tasks not started"): for each N, `agentctl run` of a foreach over N items (`--items`, one a
# line) whose tasks sleep, 4 at a time, with `--timeout-seconds T`. Prints agentctl's peak
# RSS (/usr/bin/time), how long after the deadline it exited, and what the journal holds.
#
# The deadline is read from the tasks themselves: each running one writes the time it gets
# SIGTERM (the cancellation's first signal, sent as the deadline strikes), and the earliest of
# them is taken for the deadline, which it follows by a few ms at most. Not a unit test (the
# test asserts the mechanism: tests/cli/test_journal_cli.cpp).
#
# Usage: bench/run-timeout.sh [BUILD_DIR] [T] [N ...]   (defaults: build, 3, 100000 300000 1000000)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../build"}
seconds=${2:-3}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
[ $# -gt 0 ] || set -- 100000 300000 1000000

cli="$build/agentctl"
[ -x "$cli" ] || { echo "run-timeout: $cli not found; build first (ninja -C $build agentctl)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "run-timeout: /usr/bin/time is needed (apt-get install time)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# Each task: a shell that appends the time it gets SIGTERM to KILLED, its one argument.
cat > "$tmp/wf.yaml" <<'WORKFLOW'
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: run-timeout}
spec:
  inputs: {items: []}
  policy: {processAllowlist: [sh], approval: never}
  runtime: {killGraceSeconds: 1}  # SIGTERM first: the tasks see the deadline
  actions:
    nap:
      kind: builtin.shell.exec
      command: /bin/sh
      args: [-c, 'trap "date +%s%3N >> $0; exit 0" TERM; sleep 60 & wait', KILLED]
  tasks:
    - id: nap
      uses: action:nap
      foreach: {items: "${{ inputs.items }}", maxItems: 1000000}
WORKFLOW
sed -i "s|KILLED|$tmp/killed|" "$tmp/wf.yaml"

echo "$("$cli" version | head -1); T = ${seconds} s; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%10s %12s %18s %12s %15s\n' tasks "peak RSS" "exit - deadline" "result rows" "unstarted rows"
for n in "$@"; do
    seq 0 $((n - 1)) > "$tmp/items"
    rm -f "$tmp"/j.db* "$tmp/killed"
    status=0
    /usr/bin/time -f %M -o "$tmp/time" "$cli" run "$tmp/wf.yaml" --items "items=$tmp/items" \
        --jobs 4 --timeout-seconds "$seconds" --db "$tmp/j.db" > /dev/null 2> "$tmp/err" || status=$?
    ended=$(date +%s%3N)
    if [ "$status" -ne 130 ] || [ ! -s "$tmp/killed" ]; then
        echo "run-timeout: N=$n: exit $status (130 expected), or no task was running at the deadline:" >&2
        tail -5 "$tmp/err" >&2
        exit 1
    fi
    deadline=$(sort -n "$tmp/killed" | head -1)
    kib=$(tail -1 "$tmp/time")
    python3 - "$tmp/j.db" "$n" "$kib" "$((ended - deadline))" <<'PY'
import sqlite3, sys
db, n, kib, late = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c = sqlite3.connect(db)
rows = c.execute("SELECT count(*) FROM results").fetchone()[0]
try:
    ranges = c.execute("SELECT count(*) FROM unstarted").fetchone()[0]
except sqlite3.OperationalError:  # a journal before schema 4
    ranges = "-"
print(f"{n:>10} {kib / 1024:>8.0f} MiB {late / 1000:>16.2f} s {rows:>12} {ranges:>15}")
PY
done
