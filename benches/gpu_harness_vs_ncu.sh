#!/bin/bash
# Check repro's timing harness against Nsight Compute, and its run-to-run spread.
#
# Run from a project root whose cubins are built (`repro stage build`, or nvcc into
# .repro/cubins/), on a machine with a GPU and ncu:
#     benches/gpu_harness_vs_ncu.sh [VARIANT ...]      (default: every variant)
# For each variant and two shapes of its workload (attention: mission, long; RMSNorm: mission,
# wide; seed 0) it prints the harness's p50 over three
# `repro exec` runs (the default isolated method), one run of the graph method, and ncu's
# median gpu__time_duration of 40 launches of the same kernel and inputs, with L2 warm
# (--cache-control none) and flushed (all). Clocks are left as they are
# (--clock-control none), as the harness leaves them. "diff" is isolated vs ncu warm.
# Writes benches/results/harness_vs_ncu.md; exits 1 when a row's diff is outside ±3% or its
# three isolated runs spread more than 2% (the targets), after writing the table.
set -euo pipefail
. "$(dirname "$0")/results_header.sh"
REPRO=${REPRO_BIN:-repro}
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  mapfile -t variants < <(python3 -c 'import yaml; print("\n".join(yaml.safe_load(open("pipeline.yaml"))["variants"]))')
fi
# The entry ncu times and the two shapes, by the variant's workload.
entry_of() { case "$1" in rms-*) echo rmsnorm_fwd ;; *) echo sdpa_fp8_fwd ;; esac; }
shapes_of() { case "$1" in rms-*) echo "mission wide" ;; *) echo "mission long" ;; esac; }
p50() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_us"])'; }
ncu_median() {
  ncu --clock-control none --cache-control "$1" --print-units base --metrics gpu__time_duration.sum \
      -k "regex:$2" --launch-skip 25 --launch-count 40 --csv \
      "$REPRO" exec "${@:3}" --warmup 20 --iters 5 --method graph --launches-per-sample 1 2>/dev/null \
    | grep '^"' | grep -v '"ID"' | awk -F'","' '{print $NF}' | tr -d '",' | sort -n \
    | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]/1000}'
}
out=benches/results/harness_vs_ncu.md
bad=0
{
  results_header "REPRO_BIN=repro benches/gpu_harness_vs_ncu.sh ${variants[*]}"
  echo "ncu: $(ncu --version | grep -i version). Seed 0; isolated = \`repro exec\` (warm-up 20, L2 warm), 3 runs; ncu = median \`gpu__time_duration\` of 40 launches, \`--clock-control none\`; diff = middle isolated run vs ncu warm."
  echo
  echo "| variant | shape | isolated p50, 3 runs (µs) | run spread | graph p50 | ncu warm | ncu flushed | diff |"
  echo "|---|---|---|---:|---:|---:|---:|---:|"
} > "$out.tmp"
for v in "${variants[@]}"; do
  for shape in $(shapes_of "$v"); do
    args=(--variant "$v" --shape "$shape" --seed 0)
    runs=$(for _ in 1 2 3; do "$REPRO" exec "${args[@]}" | p50; done | paste -sd/)
    graph=$("$REPRO" exec "${args[@]}" --method graph | p50)
    warm=$(ncu_median none "$(entry_of "$v")" "${args[@]}")
    cold=$(ncu_median all "$(entry_of "$v")" "${args[@]}")
    row=$(python3 - "$v" "$shape" "$runs" "$graph" "$warm" "$cold" <<'PY'
import sys
v, shape, runs, graph, warm, cold = sys.argv[1:]
r = sorted(float(x) for x in runs.split("/"))
spread = (r[-1] - r[0]) / r[1] * 100
diff = (r[1] - float(warm)) / float(warm) * 100
ok = abs(diff) <= 3 and spread <= 2
print(f"| {v} | {shape} | {runs.replace('/', ' / ')} | {spread:.1f}% | {graph} | {warm} | {cold} | {diff:+.1f}%{'' if ok else ' ❌'} |")
sys.exit(0 if ok else 3)
PY
) || bad=$((bad + 1))
    echo "$row" | tee -a "$out.tmp"
  done
done
mv "$out.tmp" "$out"
echo "wrote $out; rows outside the targets: $bad"
[ "$bad" -eq 0 ]
