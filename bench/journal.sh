#!/bin/sh
# The journal's numbers in docs/JOURNAL.md: every journal_bench configuration REPEAT times
# (default 5), medians and minimums side by side. Usage: bench/journal.sh [BUILD_DIR] [REPEAT]
set -eu
build=${1:-build}
repeat=${2:-5}
bench="$build/bench/journal_bench"
[ -x "$bench" ] || { echo "bench/journal.sh: build $bench first (meson compile -C $build journal_bench)" >&2; exit 2; }
run() {
    label=$1
    shift
    i=0
    while [ "$i" -lt "$repeat" ]; do
        printf '%s\t' "$label"
        "$bench" "$@"
        i=$((i + 1))
    done
}
{
    run "raw write(2) of 2000 x 1 MiB" raw
    run "W2 1 MiB: stream files" big
    run "W2 1 MiB: files, loop waits for each sync" big --serial
    run "W2 1 MiB: files, FULL" big --full
    run "raw write(2) + fdatasync" raw --full
    run "W2 1 MiB: blobs, 4 KiB pages" big --threshold 0
    run "W2 1 MiB: blobs, 64 KiB pages" big --threshold 0 --page-size 65536
    run "W2 1 MiB: blobs, 64 KiB pages, no checkpoint" big --threshold 0 --page-size 65536 --checkpoint 0
    run "W1 small rows" small
    run "W1 small rows, loop waits for each sync" small --serial
    run "W1 small rows, 8 finish per refill, waits" small --serial --burst 8
    run "W1 small rows, FULL" small --full
    run "W1 small rows, FULL, waits" small --full --serial
    run "1 KiB stdout per task" small -s 1024
    run "gc of W2 (files): incremental" big --gc incremental
    run "gc of W2 (blobs): incremental" big --threshold 0 --gc incremental
    run "gc of W2 (blobs): VACUUM" big --threshold 0 --gc vacuum
} | python3 -c '
import json, statistics, sys
rows = {}
for line in sys.stdin:
    label, doc = line.rstrip("\n").split("\t", 1)
    rows.setdefault(label, []).append(json.loads(doc))
keys = ["wall_s", "close_s", "writer_cpu_s", "run_cpu_s", "commits", "sync_p50_us", "mb_per_s", "max_rss_mib", "journal_mib", "gc_s"]
print("load average", open("/proc/loadavg").read().split()[0])
print("configuration".ljust(46), " ".join(k.rjust(12) for k in keys), "  (median / min of", len(next(iter(rows.values()))), "runs)")
for label, docs in rows.items():
    cells = []
    for k in keys:
        vals = [d[k] for d in docs if k in d]
        cells.append(("%g/%g" % (round(statistics.median(vals), 3), round(min(vals), 3)) if vals else "-").rjust(12))
    print(label.ljust(46), " ".join(cells))
'
