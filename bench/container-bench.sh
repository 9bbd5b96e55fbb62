#!/bin/sh
# Container mode against its own engine: 50 trivial container tasks at --jobs 4 through
# agentctl, against the same 50 `podman run` invocations (the same flags, plus --rm) from a
# shell loop with `xargs -P 4`, side by side in interleaved rounds. Target: agentctl's median
# wall time at most 1.05x the loop's.
#
#   tools/container-fixture run --probe BUILD/tests/support/probe -- bench/container-bench.sh BUILD [RUNS]
#
# The fixture provides the image ($AGENTCTL_TEST_IMAGE) and Podman's configuration.
set -eu

build=$(cd "${1:-build}" && pwd)
runs=${2:-5}
image=${AGENTCTL_TEST_IMAGE:?run this under tools/container-fixture (see the header)}

work=$(mktemp -d /tmp/agentctl-container-bench.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

items=$(seq -s, 1 50)
cat > "$work/wf.yaml" <<EOF
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: container-bench}
spec:
  policy: {processAllowlist: ["true"], approval: never}
  actions:
    nothing:
      kind: builtin.shell.exec
      command: /bin/true
      isolation: container
      container: {image: "$image", runtime: podman}
  tasks:
    - {id: t, uses: action:nothing, foreach: {items: [$items]}}
EOF

# What agentctl passes (docs/DESIGN.md, "Containers"), one invocation per item.
cat > "$work/loop.sh" <<EOF
seq 50 | xargs -P 4 -I{} podman run --rm --pull=never --network=none --read-only \\
  --read-only-tmpfs=false --ipc=none --user=65532:65532 --cap-drop=ALL \\
  --security-opt=no-new-privileges --memory=268435456b --memory-swap=268435456b --cpus=1.000 \\
  --pids-limit=64 --tmpfs=/tmp:rw,noexec,nosuid,nodev,size=16777216 --tmpfs=/dev/mqueue:ro \\
  '--mount=type=bind,"source=$work",target=/workspace,readonly' --workdir=/workspace \\
  --log-driver=none --name=agentctl-bench-\$\$-{} --label=agentctl.bench=1 --entrypoint=/bin/true \\
  "$image"
EOF

# Interleaved rounds (the order alternating), so that the machine's drift hits both alike;
# one warm-up round first. Medians, with the spread (max - min).
times="$work/times"
: > "$times"
now() { date +%s%N; }
round() {  # round NAME COMMAND...
  name=$1; shift
  t0=$(now); "$@" >/dev/null 2>&1 || { echo "container-bench: $name failed" >&2; exit 1; }
  t1=$(now)
  echo "$name $((t1 - t0))" >> "$times"
}
run_agentctl() { "$build/agentctl" run --jobs 4 --quiet "$work/wf.yaml"; }
run_loop() { sh "$work/loop.sh"; }
run_agentctl >/dev/null 2>&1; run_loop >/dev/null 2>&1
i=0
while [ $i -lt "$runs" ]; do
  if [ $((i % 2)) -eq 0 ]; then round agentctl run_agentctl; round loop run_loop
  else round loop run_loop; round agentctl run_agentctl; fi
  i=$((i + 1))
done

python3 - "$times" "$runs" <<'EOF2'
import statistics, sys
t = {"agentctl": [], "loop": []}
for line in open(sys.argv[1]):
    name, secs = line.split()
    t[name].append(int(secs) / 1e9)
a, l = statistics.median(t["agentctl"]), statistics.median(t["loop"])
for name, label in (("agentctl", "agentctl"), ("loop", "podman-loop")):
    xs = sorted(t[name])
    print(f"{label}: runs " + " ".join(f"{x:.3f}" for x in xs) + f" s; Range (min … max):   {xs[0]:.3f} s …  {xs[-1]:.3f} s")
print(f"agentctl {a:.2f} s ± {max(t['agentctl']) - min(t['agentctl']):.2f}, loop {l:.2f} s ± "
      f"{max(t['loop']) - min(t['loop']):.2f}: ratio {a / l:.3f} (medians of {sys.argv[2]} interleaved runs, "
      f"± is the spread; target <= 1.05)")
EOF2
