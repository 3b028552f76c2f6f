#!/usr/bin/env bash
# What ncu's replay passes cost the profile stage (issue 41), and what collecting counters
# does to the kernel time it measures beside them. Eight kernel targets run in one GPU worker
# (`repro exec --worker`) under ncu, as the stage runs them (`--profile-from-start off`,
# `--clock-control none --cache-control none`, 20 warm-up launches, then 5 profiled ones per
# target), once per metric list: the time alone (the stage's time pass), the stage's one-pass
# list, that list plus one more group, all of them ("whole"), and the stage's full list (the
# groups and the time, without the one-pass fields, which the record takes from the one pass).
#
#   bash benches/ncu_replay_cost.sh REPRO_BINARY PROJECT OUT_DIR
#
# PROJECT: a checkout whose `repro stage build` has run. The lists are the Hopper ones
# (repro_ncu::metrics::{one_pass_list, full_list} on an H100/H200), plus ncu's own
# `profiler__replayer_passes`. Writes OUT_DIR/<list>.csv (ncu's page) and
# OUT_DIR/<list>.out (the worker's answers) and prints the result file. Exits non-zero if
# any run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
worker_bench_args "$@"
join() { local IFS=,; echo "$*"; }
time=gpu__time_duration.sum
one="$time,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active"
one+=",sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
one+=",sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
one+=",gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed"
sm=sm__throughput.avg.pct_of_peak_sustained_elapsed
l2=lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum
bank=l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
reasons="barrier branch_resolving dispatch_stall drain gmma imc_miss lg_throttle long_scoreboard math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait"
stalls=$(join $(for r in $reasons; do echo "smsp__warp_issue_stalled_${r}_per_warp_active.pct"; done))
passes=profiler__replayer_passes
targets=("ws-c1-x2 sdpa_fp8 mission" "stage2-baseline sdpa_fp8 mission" "mma-m64 sdpa_fp8 mission"
         "rms-warp-row rmsnorm mission" "rms-scalar rmsnorm mission" "ws-c1-x2 sdpa_fp8 small"
         "mma-m64 sdpa_fp8 small" "ws-c2-pp sdpa_fp8 long")
requests=$(worker_requests 1 "${targets[@]}")
rows=()
# run NAME METRICS: one worker under ncu with every target; its wall time into the table.
run() {
  local t0; t0=$(date +%s%N)
  printf '%s\n' "$requests" | ncu --csv --page raw --metrics "$2" --log-file "$out/$1.csv" \
    --profile-from-start off --target-processes application-only --clock-control none \
    --cache-control none "$repro" exec --worker > "$out/$1.out" 2> "$out/$1.err"
  local answered; answered=$(grep -c '"result"' "$out/$1.out" || true)
  [ "$answered" = "${#targets[@]}" ] || { echo "$1: $answered of ${#targets[@]} answered" >&2; exit 1; }
  rows+=("$1 $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')")
}
run time "$time,$passes"
run one-pass "$one,$passes"
run one-pass+bank "$one,$bank,$passes"
run one-pass+l2 "$one,$l2,$passes"
run one-pass+stalls "$one,$stalls,$passes"
run one-pass+sm "$one,$sm,$passes"
run whole "$one,$sm,$l2,$bank,$stalls,$passes"
run full "$time,$sm,$l2,$bank,$stalls,$passes"
run time-again "$time,$passes"
run one-pass-again "$one,$passes"
{
echo "$header"
echo
python3 - "$out" "${#targets[@]}" "${targets[@]}" -- "${rows[@]}" <<'PY'
import csv, statistics, sys
args = sys.argv[1:]
out, n = args[0], int(args[1])
targets = args[2:2 + n]
rows = [r.split() for r in args[3 + n:]]
def launches(name):
    recs = list(csv.reader(l for l in open(f"{out}/{name}.csv") if l.startswith('"')))
    head, data = recs[0], recs[2:]
    if len(data) != 5 * n:
        sys.exit(f"{name}: {len(data)} launches, expected {5 * n}")
    col = lambda m: [float(r[head.index(m)].replace(",", "")) for r in data]
    return col("gpu__time_duration.sum"), col("profiler__replayer_passes")
walls = {name: float(w) for name, w in rows}
base = (walls["time"] + walls["time-again"]) / 2
print(f"ncu on {n} kernel targets in one GPU worker, 5 profiled launches each after 20 warm-up ones "
      "(`--clock-control none --cache-control none`), once per metric list; one run of each list "
      "(the time alone and the one-pass list twice). Wall: the worker's whole run under ncu. "
      "\"Per launch over the time alone\": (wall − the mean wall of the two time-alone runs) ÷ "
      f"{5 * n} launches.")
print()
print("| metric list | replay passes per launch | wall (s) | per launch over the time alone (ms) |")
print("|---|---:|---:|---:|")
times = {}
for name, _ in rows:
    t, p = launches(name)
    times[name] = t
    print(f"| {name} | {statistics.median(p):.0f} | {walls[name]:.2f} | "
          f"{1000 * (walls[name] - base) / (5 * n):.0f} |")
print()
print("Kernel time (`gpu__time_duration`, median of the 5 launches, µs) by the list it was "
      "collected with, and how far the one-pass and full lists' times lie from the mean of the "
      "two time-alone runs:")
print()
print("| target | time alone | again | one pass | again | full | one pass vs alone | full vs alone |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for i, t in enumerate(targets):
    v, _, s = t.split()
    med = lambda name: statistics.median(times[name][5 * i:5 * i + 5]) / 1000
    alone = (med("time") + med("time-again")) / 2
    one = (med("one-pass") + med("one-pass-again")) / 2
    print(f"| {v} on {s} | {med('time'):.3f} | {med('time-again'):.3f} | {med('one-pass'):.3f} | "
          f"{med('one-pass-again'):.3f} | {med('full'):.3f} | {100 * (one / alone - 1):+.1f} % | "
          f"{100 * (med('full') / alone - 1):+.1f} % |")
PY
} > "$out/ncu_replay_cost.md"
cat "$out/ncu_replay_cost.md"
