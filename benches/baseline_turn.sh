#!/usr/bin/env bash
# How long the baseline script's turn in the profile stage lasts once its gate opens (issue
# 41): the shipped script's profiling mode under ncu (`--metrics gpu__time_duration.sum`, the
# stage's time pass), with the calls the shipped pipeline's profile stage lists (torch-sdpa-best
# and torch-sdpa-default on mission, long, ragged and small, torch-rmsnorm on mission; 5 of
# each in a row), `REPRO_PROFILE_GATE` opened GATE_S seconds (default 8, past torch's import)
# after the process starts. The scripts of PROJECT against those in BEFORE_DIR (an earlier
# `kernels/baselines`, e.g. from `git archive REV kernels/baselines`), RUNS times each
# (default 3), alternating.
#
#   bash benches/baseline_turn.sh REPRO_BINARY PROJECT OUT_DIR BEFORE_DIR [RUNS]
#
# PROJECT: a checkout with its committed `artifacts/bench/baselines` (the chosen backend).
# Prints the result file; exits non-zero if a run fails or lacks a call's 5 profiled launches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
before=$(realpath "$4")
worker_bench_args "$@"
runs=${5:-3}
gate_s=${GATE_S:-8}
header=$(results_header "GATE_S=$gate_s bash benches/baseline_turn.sh REPRO_BINARY PROJECT OUT_DIR BEFORE_DIR $runs")
export REPRO_BIN=$repro
calls=() ranges=()
for b in torch-sdpa-best torch-sdpa-default; do
  for s in mission long ragged small; do
    ranges+=(--nvtx-include "repro-profile.$b.$s/")
    for _ in 1 2 3 4 5; do calls+=(--profile "$b" "$s" "repro-profile.$b.$s"); done
  done
done
ranges+=(--nvtx-include repro-profile.torch-rmsnorm.mission/)
for _ in 1 2 3 4 5; do calls+=(--profile torch-rmsnorm mission repro-profile.torch-rmsnorm.mission); done
# turn NAME DIR K: one process; the ms from its gate opening to its end into OUT/NAME.ms.
turn() {
  local gate="$out/gate-$1-$3" t0 rc=0
  rm -f "$gate" "$gate.honoured"
  t0=$(date +%s%N)
  (sleep "$gate_s"; touch "$gate") &
  REPRO_PROFILE_GATE=$gate ncu --csv --page raw --metrics gpu__time_duration.sum --nvtx "${ranges[@]}" \
    --target-processes application-only --clock-control none --cache-control none \
    python3 "$2/torch_baselines.py" --warmup 5 "${calls[@]}" > "$out/$1-$3.csv" 2> "$out/$1-$3.err" || rc=$?
  local end; end=$(date +%s%N); wait
  [ "$rc" = 0 ] || { echo "$1 run $3: exit $rc" >&2; tail -5 "$out/$1-$3.err" >&2; exit 1; }
  [ -f "$gate.honoured" ] || { echo "$1 run $3: the script did not wait at its gate" >&2; exit 1; }
  echo $(( (end - t0) / 1000000 - gate_s * 1000 )) >> "$out/$1.ms"
}
rm -f "$out"/*.ms
for ((k = 1; k <= runs; k++)); do
  turn before "$before" "$k"
  turn after "$proj/kernels/baselines" "$k"
done
{
echo "$header"
echo
python3 - "$out" "$runs" "$gate_s" <<'PY'
import csv, statistics, sys
out, runs, gate_s = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def kernel_times(name, k):
    recs = list(csv.reader(l for l in open(f"{out}/{name}-{k}.csv") if l.startswith('"')))
    head, data = recs[0], recs[2:]
    col = head.index("gpu__time_duration.sum")
    nvtx = next(i for i, h in enumerate(head) if "Push/Pop_Range" in h)
    by = {}
    for r in data:
        call = r[nvtx].split(":")[1]
        by.setdefault(call, []).append(float(r[col].replace(",", "")) / 1000)
    for call, t in by.items():
        if len(t) % 5:
            sys.exit(f"{name} run {k}: {call} has {len(t)} kernels, not a multiple of 5 calls")
    return by
ms = {n: [int(x) for x in open(f"{out}/{n}.ms")] for n in ("before", "after")}
print(f"The baseline script's profiling mode under `ncu --metrics gpu__time_duration.sum` with the "
      f"shipped pipeline's calls (5 of each), its gate opened {gate_s} s after it started; ms from "
      f"the gate opening to its end, median (min–max) of {runs} runs, alternating. `before`: the "
      "scripts given as BEFORE_DIR; `after`: this tree's.")
print()
print("| script | after the gate, ms |")
print("|---|---:|")
for name in ("before", "after"):
    v = ms[name]
    print(f"| {name} | {statistics.median(v):.0f} ({min(v)}–{max(v)}) |")
print()
print("Each profiled call's kernel time (µs, median of its kernels in run 1), the two ways:")
print()
print("| call | before | after |")
print("|---|---:|---:|")
b, a = kernel_times("before", 1), kernel_times("after", 1)
for call in b:
    print(f"| {call} | {statistics.median(b[call]):.2f} | {statistics.median(a.get(call, [float('nan')])):.2f} |")
PY
} > "$out/baseline_turn.md"
cat "$out/baseline_turn.md"
