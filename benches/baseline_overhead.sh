#!/usr/bin/env bash
# Why the PyTorch baselines' harness time exceeds their kernel time: for the mission and long
# shapes and each native SDPA backend, benches/baseline_overhead.py gives the isolated harness
# time (with and without the `sdpa_kernel` context manager in the timed call), a CUDA-graph
# replay per call, and the kernels one call launches (PyTorch's profiler: how many, their summed
# duration, first start to last end); Nsight Compute then gives each kernel's
# gpu__time_duration (median of 20 launches, --cache-control none --clock-control none).
# On a GPU machine with python3 + torch and ncu:
#     bash benches/baseline_overhead.sh OUTDIR
# Writes benches/results/baseline_overhead.md (and OUTDIR/baseline_overhead.jsonl,
# OUTDIR/ncu_*.csv). Exits non-zero if any step fails.
set -euo pipefail
OUT=${1:?usage: baseline_overhead.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
. benches/results_header.sh
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
python3 benches/baseline_overhead.py > "$OUT/baseline_overhead.jsonl"
# ncu over 30 bare calls of each (shape, backend) that ran: every kernel of launches 11..30.
while read -r shape backend; do
  ncu --clock-control none --cache-control none --print-units base --metrics gpu__time_duration.sum \
      --launch-skip 10 --launch-count 20 --csv \
      python3 benches/baseline_overhead.py --ncu-target "$shape" "$backend" 2>/dev/null \
    | grep '^"' > "$OUT/ncu_${shape}_${backend}.csv"
done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "error" not in r: print(r["shape"], r["backend"])' "$OUT/baseline_overhead.jsonl")
out=benches/results/baseline_overhead.md
python3 - "$OUT" > "$out.tmp" <<'PY'
import csv, json, os, statistics, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "baseline_overhead.jsonl"))]
print("| shape | backend | isolated, call in `sdpa_kernel` (µs) | isolated, bare call | graph replay, per call | kernels per call | kernel time sum (profiler) | first start to last end | ncu gpu__time_duration, per call | isolated − ncu |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
notes = []
for r in rows:
    if "error" in r:
        notes.append(f"- {r['shape']} / {r['backend']}: not run here ({r['error']})")
        continue
    path = os.path.join(out, f"ncu_{r['shape']}_{r['backend']}.csv")
    per_kernel = {}
    with open(path) as f:
        for rec in csv.DictReader(f):
            if rec.get("Metric Name") == "gpu__time_duration.sum":
                per_kernel.setdefault(rec["Kernel Name"][:60], []).append(float(rec["Metric Value"].replace(",", "")) / 1000)
    # 20 launches are 20 / k calls of k kernels each: a kernel seen n times runs n·k/20 times a call.
    # ncu profiles kernels only: a call's memsets (the profiler lists them) are not among the 20.
    k = sum(1 for n in r['kernel_names'] if not n.startswith('Memset'))
    ncu_call = sum(statistics.median(v) * len(v) * k / 20 for v in per_kernel.values())
    print(f"| {r['shape']} | {r['backend']} | {r['isolated_p50_us']:.2f} | {r['bare_p50_us']:.2f} | {r['graph_p50_us']:.2f} "
          f"| {r['kernels_per_call']} | {r['kernel_sum_us']:.2f} | {r['kernel_span_us']:.2f} | {ncu_call:.2f} "
          f"| {r['isolated_p50_us'] - ncu_call:+.2f} |")
    notes.append(f"- {r['shape']} / {r['backend']}: kernels {', '.join('`' + n + '`' for n in r['kernel_names'])}; "
                 f"samples retaken because the host was late: {r['isolated_host_late_retakes']} (in `sdpa_kernel`), "
                 f"{r['bare_host_late_retakes']} (bare); timer overhead subtracted {r['timer_overhead_us']} µs; "
                 f"ncu kernels seen in 20 launches: {', '.join(f'{k} ×{len(v)}' for k, v in per_kernel.items())}")
print()
print("\n".join(notes))
PY
{ results_header "bash benches/baseline_overhead.sh OUTDIR"; cat "$out.tmp"; } > "$out"
rm "$out.tmp"
cat "$out"
