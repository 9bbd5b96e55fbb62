#!/usr/bin/env python3
"""Regenerates the README's "## Performance" section from a bench/run results file.

usage: bench/report.py RESULTS.json [--readme README.md] [--print]

Copies the results file and its chart (RESULTS.png, drawn again with gnuplot when it is
missing) to docs/bench/results.json and docs/bench/performance.png, then replaces the
section from "## Performance" to the next "## " heading (or appends it). --print writes the
section to stdout instead and touches nothing. bench/run imports chart(), summary_text()
and update_readme() from here.
"""

import argparse
import json
import shutil
import subprocess
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATIO_GROUPS = ["W1", "W2", "W2-json", "W3"]
COLORS = {"anchor": 0x7F7F7F, "agentctl": 0xD62728, "engine": 0xFF9896}
PEER_COLORS = {"xargs": 0x1F77B4, "xargs-timeout": 0x1F77B4, "parallel": 0x2CA02C, "parallel-u": 0x98DF8A,
               "py_asyncio": 0x9467BD, "py_asyncio-pidfd": 0xC5B0D5, "spawnbench-dd": 0xC7C7C7}


def fmt_s(s):
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def rate(group, r):
    if group["unit_bytes"]:
        return f"{r['captured_mb_per_s']:.0f} MB/s"
    if group["n"] and group["id"] in RATIO_GROUPS:
        return f"{r['tasks_per_s']:.0f} tasks/s"
    return ""


def verdict(t):
    if t.get("informational"):
        return "no target"
    return {True: "pass", False: "**MISSED**", None: "not measured"}[t["pass"]]


def value_text(t):
    if t["value"] is None:
        return t.get("note", "not measured")
    # Ratios keep three decimals, so that 1.051 against a limit of 1.05 reads as missed.
    v = f"{t['value']:.3f}" if t["unit"].startswith("x") else f"{t['value']:.3g}"
    return f"{v} {t['unit']}"


def limit_text(t):
    if t["limit"] is None:
        return "–"
    return f"{t['op']} {t['limit']:g} {t['unit']}"


def chart(results, png, work=None):
    """Bars of each runner's throughput relative to the C limit of its group. Returns an
    error message, or None once the PNG is written."""
    rows, labels, x, top = [], [], 0, 1.0
    for gid in RATIO_GROUPS:
        g = next((g for g in results["groups"] if g["id"] == gid), None)
        if not g:
            continue
        runners = [r for r in g["runners"] if r.get("throughput_vs_anchor")]
        if not runners:
            continue
        first = x
        for r in runners:
            color = COLORS.get(r["kind"], PEER_COLORS.get(r["name"], 0x17BECF))
            name = r["name"].replace("_", "-")
            rows.append(f'{x} {r["throughput_vs_anchor"]} {color} "{name}"')
            top = max(top, r["throughput_vs_anchor"])
            x += 1
        labels.append((gid, (first + x - 1) / 2))
        x += 1
    if not rows:
        return "no group with ratios"
    work = Path(work or tempfile.mkdtemp())
    data = work / "chart.dat"
    data.write_text("\n".join(rows) + "\n")
    m = results["machine"]
    title = (f"agentctl vs the C limit and peers: throughput relative to the C loop of each group "
             f"(higher is better)\\n{results['date'][:10]}, {m['cpu']}, {m['cores']} vCPU, "
             f"median of {results['runs']} runs")
    script = [
        'set terminal pngcairo size 1200,560 font "sans,10"',
        f"set output '{png}'",
        f'set title "{title}"',
        'set ylabel "x C limit (anchor median / runner median)"',
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.8",
        f"set yrange [0:{top * 1.3:.2f}]",
        "set xrange [-1:%d]" % x,
        "set xtics rotate by -35 left nomirror font ',9'",
        "set grid ytics",
        "set key off",
        "set bmargin 6",
        "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#555555'",
    ]
    for gid, center in labels:
        script.append(f"set label '{gid}' at {center}, {top * 1.22:.2f} center font ',11'")
    script.append(f"plot '{data}' using 1:2:3:xtic(4) with boxes lc rgb variable, "
                  f"'' using 1:2:(sprintf('%.2f', $2)) with labels offset 0,0.7 font ',8'")
    r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", capture_output=True, text=True)
    if r.returncode != 0 or not Path(png).exists():
        return r.stderr.strip() or "gnuplot failed"
    return None


# What the profiles above mean, for the shortfalls we understand.
WHY = {
    "W2-executor": "The executor's runs spread widely on this shared machine; compare its "
                   "rate over several runs before reading much into one.",
}


def section(results, chart_rel="docs/bench/performance.png", results_rel="docs/bench/results.json"):
    """The README section, Markdown."""
    m = results["machine"]
    loads = results["load"]
    start = next((x for x in loads if x["when"] == "measuring"), loads[0] if loads else None)
    end = next((x for x in loads if x["when"] == "end"), None)
    load_text = ""
    if start and end:
        load_text = (f" Load average (1 min) {start['loadavg'][0]:.2f} when the measurements started and "
                     f"{end['loadavg'][0]:.2f} at the end: the machine is shared, so read ratios, not "
                     "absolute times.")
    # Sittings before 2026-12-07 rotated one list: each runner had the same predecessor in every
    # round (docs/DESIGN.md, "bench/run's order of runners").
    order_text = (f", in an order shuffled every round (`--order-seed {results['order_seed']}`)"
                  if "order_seed" in results else ", the order rotated by one each round")
    out = ["## Performance", ""]
    out.append(
        f"Measured {results['date'][:10]} with `bench/run` ({results['mode']} run) on {m['cpu']}, "
        f"{m['cores']} vCPUs, {m['ram_gib']} GiB RAM, {m['distro']}, kernel {m['kernel']}; "
        f"{m['gcc']}, Boost {m['boost']}, {m['python']}, {m['parallel']}, {m['xargs']}. "
        f"agentctl {results['agentctl'].get('commit')} built with "
        f"`{results['agentctl'].get('build')}`.{load_text}")
    out.append("")
    out.append(
        f"Each command ran {results['runs']} times after {results['warmup']} warm-up round(s), the runners "
        f"of a group taking turns so that drift hits them alike{order_text}. Figures are medians; spread is "
        "(max − min) / median. The C limit is `bench/spawnbench` (posix_spawn, two pipes, a pidfd and "
        "epoll in one loop: the fastest an engine-like runner goes here); \"× C\" is its median over the "
        f"runner's, in the same group, so higher is better (the targets use it); \"× C, round by round\" "
        "is the median of the same ratio taken in each round (the C loop's run and the runner's of one "
        "round), with its range: drift that moves both alike cancels there. "
        f"All data: [`{results_rel}`]({results_rel}).")
    out.append("")
    rows = [r for g in results["groups"] for r in g.get("runners", []) if "spread_pct" in r]
    wide = [r for r in rows if r["spread_pct"] > 20]
    if wide:
        out.append(
            f"**{len(wide)} of the {len(rows)} rows below spread more than 20 %**: the machine was "
            "not quiet enough for those figures to be relied on alone; read them with their spread, "
            "and rerun `bench/run` on a quieter machine before quoting one.")
        out.append("")
    out.append(f"![Throughput relative to the C limit]({chart_rel})")
    out.append("")
    out.append("### Targets")
    out.append("")
    out.append("| Target | Measured | Limit | Result |")
    out.append("|---|---|---|---|")
    for t in results["targets"]:
        out.append(f"| {t['description']} | {value_text(t)} | {limit_text(t)} | {verdict(t)} |")
    out.append("")
    out.append("### Workloads")
    out.append("")
    out.append("| Workload | Runner | Median | Spread | Rate | × C | × C, round by round |")
    out.append("|---|---|---|---|---|---|---|")
    for g in results["groups"]:
        for r in g["runners"]:
            if not r.get("runs"):
                why = "failed" if r["failures"] else "not run"
                out.append(f"| {g['id']} | {r['label']} | {why} | | | | |")
                continue
            ratio = f"{r['throughput_vs_anchor']:.2f}" if "throughput_vs_anchor" in r and \
                g["id"] in RATIO_GROUPS else ""
            paired = paired_ratio(g, r) if g["id"] in RATIO_GROUPS else None
            paired = f"{paired['median']:.2f} ({paired['min']:.2f}-{paired['max']:.2f})" \
                if paired and r["name"] != g.get("anchor") else ""
            label = r["label"] + (f" ({r['runs']} run{'s' if r['runs'] > 1 else ''})"
                                  if r["runs"] < results["runs"] else "")
            out.append(f"| {g['id']}: {g['title']} | {label} | {fmt_s(r['median_s'])} | "
                       f"{r['spread_pct']:.0f} % | {rate(g, r)} | {ratio} | {paired} |")
    out.append("")
    notes = []
    w2j = next((g for g in results["groups"] if g["id"] == "W2-json"), None)
    if w2j and w2j.get("json_bytes_per_task"):
        notes.append(
            f"W2 with `--output json`: the document carries each task's stdout once, as base64 "
            f"(`stdoutBase64`: a stream with NUL bytes is binary, docs/CLI.md), {w2j['json_bytes_per_task'] / 1e6:.1f} MB per 1 MiB task "
            f"({w2j['json_bytes_at_w2_n'] / 1e9:.0f} GB for W2's {results['sizes']['w2']} tasks), so it is "
            f"measured at {w2j['n']} tasks beside `-q` (human output, which prints a summary line).")
    for lat in results["latency"]:
        notes.append(f"W3 deadline → reaped, {lat['label']}: p50 {lat['p50_ms']['median']:.1f} ms, p99 "
                     f"{lat['p99_ms']['median']:.1f} ms (median of {lat['runs']} runs; worst {lat['max_ms']:.1f} ms; "
                     f"{lat['source']}).")
    mem = results.get("memory")
    if mem and mem.get("kib_per_task") is not None:
        eb = mem.get("exec_bench") or {}
        notes.append(
            f"Memory: with {mem['in_flight']} × `sleep 10` in flight, agentctl grew by "
            f"{mem['kib_per_task']:.1f} KiB of RSS and {mem['fds_per_task']:.2f} file descriptors per task "
            f"(VmRSS {mem['vm_rss_first_kib']} → {mem['vm_rss_all_kib']} KiB, fds {mem['fds_first']} → "
            f"{mem['fds_all']}, peak VmHWM {mem['vm_hwm_kib']} KiB)"
            + (f"; the executor alone (exec_bench -m): {eb['kib_per_task']:.1f} KiB per task" if eb.get("kib_per_task") is not None else "")
            + ".")
    plan = next((g for g in results["groups"] if g["id"] == "plan"), None)
    if plan and plan.get("stages"):
        notes.append(f"Plan stages (bench/plan_bench, library only): `{plan['stages'][-1]}`.")
    c = results.get("containers")
    if c:
        notes.append(
            f"Containers (`bench/container-bench.sh` under `tools/container-fixture`): {c['n']} × `/bin/true` "
            f"in a container at `--jobs {c['jobs']}` through agentctl took {c['agentctl_median_s']:.2f} s "
            f"(spread {c['agentctl_spread_s']:.2f} s), the same `podman run` flags from `xargs -P {c['jobs']}` "
            f"{c['podman_loop_median_s']:.2f} s (spread {c['podman_loop_spread_s']:.2f} s); medians of "
            f"{c['runs']} interleaved runs: {c['ratio']:.3f}×.")
    sl = results.get("slurm")
    if sl:
        cpu = sl.get("agentctl_cpu_ms_per_attempt")
        notes.append(
            f"Slurm backend (`bench/slurm_bench.py` under `tools/slurm-fixture`, 8 CPUs): {sl['n']} × `/bin/true` "
            f"at `--jobs {sl['jobs']}` through `agentctl run --backend slurm` took {sl['agentctl_median_s']:.2f} s "
            f"(spread {sl['agentctl_spread_s']:.2f} s), `xargs -P {sl['jobs']} srun /bin/true` "
            f"{sl['srun_loop_median_s']:.2f} s (spread {sl['srun_loop_spread_s']:.2f} s); medians of {sl['runs']} "
            f"interleaved runs: {sl['ratio']:.3f}×"
            + (f"; agentctl's own CPU {cpu:.2f} ms per attempt" if cpu is not None else "") + ".")
    for s in results["skipped"]:
        notes.append(f"Skipped {s['what']}: {s['reason']}.")
    for n in results["notes"]:
        notes.append(n[0].upper() + n[1:] + ".")
    out += [f"- {n}" for n in notes]
    out.append("")
    missed = [t for t in results["targets"] if t["pass"] is False or t.get("informational")]
    if missed:
        out.append("### Where agentctl falls short")
        out.append("")
        for t in missed:
            prof = next((p for p in results["profiles"] if t.get("profile") and
                         p["group"] == t["profile"]["group"] and p["runner"] == t["profile"]["runner"]), None)
            line = f"- **{t['description']}**: {value_text(t)}"
            line += f" (target {limit_text(t)})." if t["limit"] is not None else "."
            if prof and prof["top"]:
                tops = "; ".join(f"{p['pct']:.1f} % `{p['symbol']}` ({p['dso']})" for p in prof["top"][:6])
                line += (f" Profile (`{prof['tool']}`; agentctl's own process took {prof['agentctl_share_pct']:.0f} % "
                         f"of the {prof['samples']} samples, the rest is its children): {tops}.")
            elif t.get("subject") == "executor" or t.get("profile") is None:
                line += " (No profile: see the executor's own numbers above.)"
            if t.get("id") in WHY:
                line += " " + WHY[t["id"]]
            out.append(line)
        out.append("")
    out.append("Reproduce with `bench/run` (full run, builds a release build in `build-bench/`, writes "
               "`bench/results/<UTC time>.json` and a chart, and regenerates this section) or "
               "`bench/run --quick` for a smoke run; `bench/report.py RESULTS.json` rebuilds this section "
               "from a results file. Earlier sittings, each with its machine and data: "
               "[`docs/bench/HISTORY.md`](docs/bench/HISTORY.md).")
    out.append("")
    return "\n".join(out)


def paired_ratio(group, runner):
    """The runner's throughput over the anchor's taken round by round (the anchor's run and the
    runner's of one round: drift that moves both alike cancels, which the ratio of medians does
    not), as median, range and count; None without two such rounds. Rounds come from each
    time's `rounds` entry; a results file from before that field counts only where both ran
    every round without a failure (then the k-th times are the same round's)."""
    anchor = next((r for r in group["runners"] if r["name"] == group.get("anchor")), None)
    if not anchor:
        return None
    def by_round(r):
        times = r.get("times_s") or []
        if "rounds" in r:
            return dict(zip(r["rounds"], times))
        return None if r.get("failures") else dict(enumerate(times))
    a, b = by_round(anchor), by_round(runner)
    if a is None or b is None or ("rounds" not in runner and len(a) != len(b)):
        return None
    pairs = [a[k] / b[k] for k in sorted(b) if k in a]
    if len(pairs) < 2:
        return None
    return {"median": round(statistics.median(pairs), 3), "min": round(min(pairs), 3),
            "max": round(max(pairs), 3), "rounds": len(pairs)}


def summary_text(results):
    """A plain-text table for the terminal."""
    lines = ["", f"{'group':<9} {'runner':<20} {'median':>9} {'spread':>7} {'x C':>6}  rate"]
    for g in results["groups"]:
        for r in g["runners"]:
            if not r.get("runs"):
                lines.append(f"{g['id']:<9} {r['name']:<20} {'FAILED' if r['failures'] else '-':>9}")
                continue
            ratio = f"{r['throughput_vs_anchor']:.2f}" if "throughput_vs_anchor" in r else ""
            lines.append(f"{g['id']:<9} {r['name']:<20} {r['median_s']:9.3f} {r['spread_pct']:6.0f}% "
                         f"{ratio:>6}  {rate(g, r)}")
    lines.append("")
    for t in results["targets"]:
        lines.append(f"{verdict(t).strip('*'):<12} {t['id']:<22} {value_text(t)}  ({limit_text(t)})")
    return "\n".join(lines)


def update_readme(results_path, png, root=ROOT, readme=None):
    results = json.loads(Path(results_path).read_text())
    docs = Path(root) / "docs" / "bench"
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results_path, docs / "results.json")
    shutil.copyfile(png, docs / "performance.png")
    readme = Path(readme or Path(root) / "README.md")
    text = readme.read_text()
    new = section(results)
    start = text.find("\n## Performance\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + new
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start + 1] + new + (text[end + 1:] if end >= 0 else "")
    readme.write_text(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--readme", default=str(ROOT / "README.md"))
    p.add_argument("--print", action="store_true", help="print the section; change nothing")
    args = p.parse_args()
    results = json.loads(Path(args.results).read_text())
    if args.print:
        sys.stdout.write(section(results))
        return 0
    png = Path(args.results).with_suffix(".png")
    if not png.exists():
        err = chart(results, png)
        if err:
            print(f"bench/report.py: chart: {err} (gnuplot: apt-get install gnuplot-nox)", file=sys.stderr)
            return 1
    update_readme(args.results, png, ROOT, args.readme)
    print(f"bench/report.py: {args.readme} updated from {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
