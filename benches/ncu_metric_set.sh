#!/usr/bin/env bash
# Why the profile stage's ncu kernel time reads above the harness for short kernels: ncu's
# gpu__time_duration of one variant on one shape, alone and together with the profile's
# other metrics, each with the profile stage's launch window (skip 6, count 5) and the
# harness check's (skip 25, count 40). Run in a project whose cubins are built, on a GPU
# machine with ncu:
#     REPRO_BIN=path/to/repro bash benches/ncu_metric_set.sh [VARIANT:ENTRY ...]
# (default: ws-c1-x2:sdpa_fp8_fwd rms-warp-row:rmsnorm_fwd, shape mission, seed 0).
# Writes benches/results/ncu_metric_set.md; exits non-zero if any ncu call fails.
set -euo pipefail
. "$(dirname "$0")/results_header.sh"
REPRO=$(realpath "${REPRO_BIN:?set REPRO_BIN to the repro binary}")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ws-c1-x2:sdpa_fp8_fwd rms-warp-row:rmsnorm_fwd)
# The profile's metrics (crates/ncu/src/metrics.rs, as the sm_90 profile requests them).
PROFILE_METRICS="gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct,smsp__warp_issue_stalled_drain_per_warp_active.pct,smsp__warp_issue_stalled_gmma_per_warp_active.pct,smsp__warp_issue_stalled_imc_miss_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_misc_per_warp_active.pct,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_selected_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct,smsp__warp_issue_stalled_tex_throttle_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct"
med() { # med METRICS SKIP COUNT ENTRY ARGS...: median, range and count of gpu__time_duration (µs)
  local metrics=$1 skip=$2 count=$3 entry=$4; shift 4
  ncu --clock-control none --cache-control none --print-units base --metrics "$metrics" -k "regex:$entry" \
      --launch-skip "$skip" --launch-count "$count" --csv --page raw "$REPRO" exec "$@" --warmup 20 --iters 5 \
      --method graph --launches-per-sample 1 2>/dev/null | python3 -c '
import csv, statistics, sys
rows = [r for r in csv.reader(sys.stdin) if r]
k = next(j for j, r in enumerate(rows) if r[0] == "ID")
i = rows[k].index("gpu__time_duration.sum")
def num(x):
    try: return float(x.replace(",", "")) / 1000
    except ValueError: return None
v = sorted(x for x in (num(r[i]) for r in rows[k + 1:] if len(r) > i) if x is not None)
if not v: sys.exit("no launch was profiled")
print(f"{statistics.median(v):.3f} | {v[0]:.3f}–{v[-1]:.3f} | {len(v)}")'
}
out=benches/results/ncu_metric_set.md
{
  results_header "REPRO_BIN=repro bash benches/ncu_metric_set.sh ${targets[*]}"
  echo "ncu \`gpu__time_duration\` of \`repro exec --variant V --shape mission --seed 0 --warmup 20 --iters 5 --method graph --launches-per-sample 1\` (\`--clock-control none --cache-control none\`), measured alone and with the profile's other metrics."
  echo
  echo "| variant | metrics | launch window | median (µs) | range (µs) | launches |"
  echo "|---|---|---|---:|---:|---:|"
  for t in "${targets[@]}"; do
    v=${t%%:*}; e=${t#*:}
    for cfg in "gpu__time_duration.sum 6 5" "gpu__time_duration.sum 25 40" "$PROFILE_METRICS 6 5" "$PROFILE_METRICS 25 40"; do
      read -r m s c <<< "$cfg"
      label=$([ "$m" = gpu__time_duration.sum ] && echo "time alone" || echo "the profile's")
      echo "| $v | $label | skip $s, count $c | $(med "$m" "$s" "$c" "$e" --variant "$v" --shape mission --seed 0) |"
    done
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
