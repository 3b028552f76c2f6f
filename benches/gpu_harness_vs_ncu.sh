#!/bin/bash
# Check repro's timing harness against Nsight Compute, and its run-to-run spread.
#
# Run from a project root whose cubins are built (`repro stage build`, or nvcc into
# .repro/cubins/), on a machine with a GPU and ncu:
#     benches/gpu_harness_vs_ncu.sh [VARIANT ...]      (default: every variant)
# For each variant and shape (mission, long; seed 0) it prints the harness's p50 over three
# `repro exec` runs (the default isolated method), one run of the graph method, and ncu's
# median gpu__time_duration of 40 launches of the same kernel and inputs, with L2 warm
# (--cache-control none) and flushed (all). Clocks are left as they are
# (--clock-control none), as the harness leaves them. "diff" is isolated vs ncu warm.
set -euo pipefail
REPRO=${REPRO_BIN:-repro}
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  mapfile -t variants < <(ls .repro/cubins/*.cubin | xargs -n1 basename | sed 's/\.cubin$//' | grep -v '^reference$' | grep -v '^tune-top')
fi
p50() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_us"])'; }
ncu_median() {
  ncu --clock-control none --cache-control "$1" --print-units base --metrics gpu__time_duration.sum \
      -k regex:sdpa_fp8_fwd --launch-skip 25 --launch-count 40 --csv \
      "$REPRO" exec "${@:2}" --warmup 20 --iters 5 --method graph --launches-per-sample 1 2>/dev/null \
    | grep '^"' | grep -v '"ID"' | awk -F'","' '{print $NF}' | tr -d '",' | sort -n \
    | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]/1000}'
}
printf '%-20s %-8s %-26s %10s %10s %10s %8s\n' variant shape "isolated p50 x3 (us)" "graph p50" "ncu warm" "ncu cold" "diff"
for v in "${variants[@]}"; do
  for shape in mission long; do
    args=(--variant "$v" --shape "$shape" --seed 0)
    runs=$(for _ in 1 2 3; do "$REPRO" exec "${args[@]}" | p50; done | paste -sd/)
    graph=$("$REPRO" exec "${args[@]}" --method graph | p50)
    warm=$(ncu_median none "${args[@]}")
    cold=$(ncu_median all "${args[@]}")
    median=$(echo "$runs" | tr / '\n' | sort -n | sed -n 2p)
    diff=$(python3 -c "print(f'{($median - $warm) / $warm * 100:+.1f}%')")
    printf '%-20s %-8s %-26s %10s %10s %10s %8s\n' "$v" "$shape" "$runs" "$graph" "$warm" "$cold" "$diff"
  done
done
