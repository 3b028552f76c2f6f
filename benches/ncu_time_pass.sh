#!/usr/bin/env bash
# What the profile stage's kernel-time pass changes: for each profiled target of a run, the
# kernel time as the full profile measured it (`artifacts/ncu/<target>.full.csv`, or
# `<target>.csv` in runs from before the one-pass profile, when that was the full one;
# targets profiled in one pass only are left out) against the pass
# that times the same launches alone (`<target>.time.csv`, the figure summary.json and the
# report use), both the median of the target's launches (a baseline call's kernels apart).
#
#   bash benches/ncu_time_pass.sh [PROJECT]
#
# PROJECT: a project whose ncu-profile stage ran on a GPU (default: this checkout, whose
# committed artifacts came from one); it only reads the CSVs, so it runs anywhere. Prints the
# results file; exits non-zero when a target lacks either CSV or a kernel time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
proj=$(realpath "${1:-$here/..}")
header=$(cd "$proj" && results_header "bash benches/ncu_time_pass.sh${1:+ PROJECT}")
echo "$header"
echo
python3 - "$proj" <<'PY'
import csv, glob, json, os, re, statistics, sys
proj = sys.argv[1]
summary = json.load(open(f"{proj}/artifacts/ncu/summary.json"))
gpu = re.search(r"^\s*name: (.+)$", open(f"{proj}/artifacts/manifest.yaml").read(), re.M)
def times(path):
    lines = open(path).read().splitlines()
    # ncu's header row, after its own lines and a baseline script's
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), len(lines))
    rows = list(csv.reader(l for l in lines[start:] if not l.startswith("==")))
    if len(rows) < 3:
        sys.exit(f"{path}: no launches")
    head = rows[0]
    col, name = head.index("gpu__time_duration.sum"), head.index("Kernel Name")
    unit = rows[1][col]
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "msecond": 1e3}[unit]
    by_kernel = {}
    for r in rows[2:]:
        by_kernel.setdefault(r[name].split("(")[0][:60], []).append(float(r[col].replace(",", "")) * scale)
    return by_kernel
def cell(t):
    return f"{statistics.median(t):.2f} ({min(t):.2f}–{max(t):.2f}, n={len(t)})"
print("Kernel time, µs, of each profiled target"
      + (f" (measured on {gpu.group(1).strip().strip(chr(34))}, artifacts/manifest.yaml)" if gpu else "")
      + ": the median of its launches in the full profile (`<target>.full.csv`, or"
      " `<target>.csv` before the one-pass profile) and in the pass that times them alone"
      " (`<target>.time.csv`), min–max and count; the difference is the full profile's over"
      " the time pass's. Targets profiled once as another, or in one pass only, are left"
      " out.\n")
print("| target | kernel | full profile | time pass | difference |\n|---|---|---:|---:|---:|")
for t in summary["targets"]:
    if t["status"] != "ok" or (t.get("reason") or "").startswith("profiled once as"):
        continue
    if t.get("metric_set") == "one-pass":
        continue
    base = f"{proj}/artifacts/ncu/{t['target']}"
    full_csv = base + (".full.csv" if t.get("metric_set") == "full" else ".csv")
    full, alone = times(full_csv), times(base + ".time.csv")
    for kernel, ft in full.items():
        at = alone.get(kernel)
        if not at:
            sys.exit(f"{base}.time.csv: no launches of {kernel}")
        d = 100 * (statistics.median(ft) / statistics.median(at) - 1)
        print(f"| {t['target']} | `{kernel}` | {cell(ft)} | {cell(at)} | {d:+.1f}% |")
PY
