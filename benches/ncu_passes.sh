#!/usr/bin/env bash
# What each group of the profile's metrics costs ncu (issue 41): replay passes per launch and
# the wall time of a `repro exec` profiling one target's 5 launches, per metric group, on one
# GPU.
#
#   bash benches/ncu_passes.sh REPRO_BINARY PROJECT OUT_DIR [VARIANT] [SHAPE]
#
# PROJECT: a checkout whose `repro stage build` has run (the variant's cubin in place).
# VARIANT/SHAPE: default ws-c1-x2 on mission. Each group is profiled alone with the time,
# plus ncu's own `profiler__replayer_*` counters, by
#   ncu --csv --page raw --metrics M --profile-from-start off --target-processes
#       application-only --clock-control base --cache-control all
#       REPRO exec --variant V --shape S --warmup 5 --profile-launches 5
# Writes OUT_DIR/<group>.csv (ncu's page), OUT_DIR/values.txt (each metric's median over
# the launches) and prints the table. Exits non-zero if any run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
repro=$(realpath "$1"); proj=$(realpath "$2"); out=$(realpath -m "$3")
variant=${4:-ws-c1-x2}; shape=${5:-mission}
mkdir -p "$out"
header=$(cd "$here/.." && results_header "bash benches/ncu_passes.sh REPRO_BINARY PROJECT OUT_DIR $variant $shape")
cd "$proj"
ncu=$(command -v ncu)
reasons="barrier branch_resolving dispatch_stall drain gmma imc_miss lg_throttle long_scoreboard math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait"
join() { local IFS=,; echo "$*"; }
stalls=$(join $(for r in $reasons; do echo "smsp__warp_issue_stalled_${r}_per_warp_active.pct"; done))
pcsamp=$(join $(for r in $reasons; do echo "smsp__pcsamp_warps_issue_stalled_${r}"; done))
time=gpu__time_duration.sum
tc=sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active
occ=sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
l2=lts__t_sector_hit_rate.pct
dram=gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed
sm=sm__throughput.avg.pct_of_peak_sustained_elapsed
sma=sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.avg.pct_of_peak_sustained_elapsed
bank=l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
replayer=profiler__replayer_bytes_mem_backed_up.sum,profiler__replayer_passes.sum
args=(exec --variant "$variant" --shape "$shape" --warmup 5 --profile-launches 5)
secs() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}'; }
rows=()
t0=$(date +%s%N); "$repro" "${args[@]}" > "$out/no-ncu.out" 2>&1
rows+=("| no ncu | — | $(secs "$t0") |")
profile() { # group metrics
  local t0; t0=$(date +%s%N)
  "$ncu" --csv --page raw --metrics "$2,$replayer" --log-file "$out/$1.csv" \
    --profile-from-start off --target-processes application-only \
    --clock-control base --cache-control all "$repro" "${args[@]}" > "$out/$1.out" 2>&1
  rows+=("| $1 | PASSES:$1 | $(secs "$t0") |")
}
profile time "$time"
profile "the profile's (all below)" "$time,$tc,$occ,$l2,$dram,$sm,$bank,$stalls"
profile "tensor pipe" "$time,$tc"
profile "occupancy, registers" "$time,$occ"
profile "L2 hit rate" "$time,$l2"
profile "DRAM throughput" "$time,$dram"
profile "SM throughput" "$time,$sm"
profile "SM cycles active, instructions" "$time,$sma"
profile "bank conflicts" "$time,$bank"
profile "stall reasons (counters)" "$time,$stalls"
profile "stall reasons (PC sampling)" "$time,$pcsamp"
profile "all but the stalls" "$time,$tc,$occ,$l2,$dram,$sm,$bank"
python3 - "$out" <<'PY' > "$out/values.txt"
import csv, glob, os, statistics, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    rows = list(csv.reader(l for l in open(f) if not l.startswith("==")))
    if len(rows) < 3:
        sys.exit(f"{f}: no launches")
    head, data = rows[0], rows[2:]
    out = []
    for i, name in enumerate(head):
        vals = []
        for r in data:
            try:
                vals.append(float(r[i].replace(",", "")))
            except (ValueError, IndexError):
                pass
        if "__" in name and vals:
            out.append(f"{name}={statistics.median(vals):.4g}")
    print(os.path.basename(f)[:-4], "|", len(data), "launches |", " ".join(out))
PY
echo "$header"
echo
echo "ncu replay passes per launch and the wall time of one \`repro exec\` profiling $variant on $shape (5 launches after 5 warm-up ones), each metric group alone with \`gpu__time_duration\`; one run each."
echo
echo "| metric group | passes per launch | wall (s) |"
echo "|---|---:|---:|"
for r in "${rows[@]}"; do
  g=$(echo "$r" | sed -n 's/.*PASSES:\([^|]*\) |.*/\1/p')
  if [ -n "$g" ]; then
    p=$(grep -F "$g |" "$out/values.txt" | grep -o 'profiler__replayer_passes=[0-9]*' | cut -d= -f2)
    r=${r/PASSES:$g/${p:-?}}
  fi
  echo "$r"
done
