#!/usr/bin/env bash
# What starting the profile stage's ncu processes ahead of their turn saves and costs
# (issue 41). Two parts:
#   1. Start-up under ncu: the CUDA driver's start (cuInit) and a context in a bare process,
#      and torch's import and CUDA start in the baseline script's way, plain and under ncu
#      (3 runs each): what a process pays before its first launch.
#   2. Whether such start-ups disturb the kernels measured meanwhile: eight kernel targets
#      (3 requests each, 5 profiled launches per request) in one GPU worker under ncu, with
#      the time-alone list and the one-pass list, each run alone, then beside a loop of
#      processes that start ncu, CUDA, a context and an empty profiler range (two at a time),
#      then alone and beside again.
#
#   bash benches/ncu_prestart.sh REPRO_BINARY PROJECT OUT_DIR
#
# PROJECT: a checkout whose `repro stage build` has run. Writes OUT_DIR/ncu_prestart.md and
# every run's CSV; exits non-zero if any run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
worker_bench_args "$@"
ncu_flags=(--csv --page raw --profile-from-start off --target-processes application-only
           --clock-control none --cache-control none)
time_list=gpu__time_duration.sum
one_list="$time_list,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active"
one_list+=",sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
one_list+=",gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"

cat > "$out/start.py" <<'PY'
# argv[1]: bare (cuInit, a context, one allocation) | torch (import torch, is_available) |
# pest (bare, an empty profiler range, then idle 0.2 s). Prints the phases' seconds.
import ctypes, sys, time
T = time.time
if sys.argv[1] == "torch":
    a = T(); import torch; b = T(); torch.cuda.is_available(); c = T()
    print(f"phases import={b - a:.3f} cuda={c - b:.3f}")
    sys.exit(0)
a = T(); cu = ctypes.CDLL("libcuda.so.1"); assert cu.cuInit(0) == 0; b = T()
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 20) == 0
c = T()
if sys.argv[1] == "pest":
    assert cu.cuProfilerStart() == 0 and cu.cuProfilerStop() == 0
    time.sleep(0.2)
print(f"phases cuInit={b - a:.3f} context={c - b:.3f}")
PY

# Part 1.
: > "$out/start.txt"
for what in bare torch; do
  for i in 1 2 3; do
    python3 "$out/start.py" $what | sed "s/^/$what plain /" >> "$out/start.txt"
    ncu "${ncu_flags[@]}" --metrics $time_list --log-file "$out/start_$what$i.csv" \
      python3 "$out/start.py" $what | grep '^phases' | sed "s/^/$what ncu /" >> "$out/start.txt"
  done
done
[ "$(grep -c phases "$out/start.txt")" = 12 ] || { echo "a start-up probe failed" >&2; cat "$out/start.txt" >&2; exit 1; }

# Part 2.
targets=("ws-c1-x2 sdpa_fp8 mission" "stage2-baseline sdpa_fp8 mission" "mma-m64 sdpa_fp8 mission"
         "rms-warp-row rmsnorm mission" "rms-scalar rmsnorm mission" "ws-c1-x2 sdpa_fp8 small"
         "mma-m64 sdpa_fp8 small" "ws-c2-pp sdpa_fp8 long")
requests=$(worker_requests 3 "${targets[@]}")
pests() {
  while [ ! -e "$out/stop" ]; do
    ncu "${ncu_flags[@]}" --metrics "$one_list" --log-file /dev/null python3 "$out/start.py" pest \
      | grep '^phases' >> "$out/pests.txt" || { echo "a prestarting process failed" >&2; touch "$out/pest-failed"; }
  done
}
: > "$out/pests.txt"; rm -f "$out/pest-failed"
for list in time one; do
  metrics=$time_list; [ $list = one ] && metrics=$one_list
  for run in alone1 beside1 alone2 beside2; do
    rm -f "$out/stop"; pids=()
    case $run in beside*) pests & pids+=($!); pests & pids+=($!); sleep 2;; esac
    printf '%s\n' "$requests" | ncu "${ncu_flags[@]}" --metrics "$metrics" --log-file "$out/${list}_$run.csv" \
      "$repro" exec --worker > "$out/${list}_$run.out"
    touch "$out/stop"; [ ${#pids[@]} = 0 ] || wait "${pids[@]}"
    answered=$(grep -c '"result"' "$out/${list}_$run.out" || true)
    [ "$answered" = $((3 * ${#targets[@]})) ] || { echo "$list $run: $answered answered" >&2; exit 1; }
  done
done
[ ! -e "$out/pest-failed" ] || exit 1
{
echo "$header"
echo
python3 - "$out" "${targets[@]}" <<'PY'
import csv, re, statistics, sys
out, targets = sys.argv[1], sys.argv[2:]
rows = [l.split() for l in open(f"{out}/start.txt")]
def phases(what, how):
    got = {}
    for r in rows:
        if r[0] == what and r[1] == how:
            for k, v in (p.split("=") for p in r[3:]):
                got.setdefault(k, []).append(float(v))
    return got
print("Part 1: what a process pays before its first launch, s (median of 3 runs; each run's "
      "values in brackets). `bare`: cuInit, then a context and one allocation (ctypes); "
      "`torch`: `import torch`, then `torch.cuda.is_available()` (CUDA starts), the baseline "
      "script's start-up.")
print()
print("| process | phase | plain | under ncu |")
print("|---|---|---:|---:|")
for what in ("bare", "torch"):
    plain, under = phases(what, "plain"), phases(what, "ncu")
    for k in plain:
        cell = lambda v: f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})"
        print(f"| {what} | {k} | {cell(plain[k])} | {cell(under[k])} |")
print()
pests = sum(1 for _ in open(f"{out}/pests.txt"))
print(f"Part 2: kernel time (`gpu__time_duration`), µs: the median of each target's 15 profiled "
      f"launches (3 requests of 5), min–max in brackets, with each list run alone and beside "
      f"prestarting processes ({pests} of them over the `beside` runs of both lists, two at a time: "
      f"ncu, CUDA, a context, an empty profiler range, 0.2 s idle).")
print()
worst = 0.0
for lst in ("time", "one"):
    runs = ["alone1", "beside1", "alone2", "beside2"]
    t = {}
    for r in runs:
        recs = list(csv.reader(l for l in open(f"{out}/{lst}_{r}.csv") if l.startswith('"')))
        head, data = recs[0], recs[2:]
        if len(data) != 15 * len(targets):
            sys.exit(f"{lst} {r}: {len(data)} launches, expected {15 * len(targets)}")
        t[r] = [float(x[head.index("gpu__time_duration.sum")].replace(",", "")) / 1000 for x in data]
    name = {"time": "the time alone", "one": "the one-pass list"}[lst]
    print(f"{name}:")
    print()
    print("| target | " + " | ".join(runs) + " | beside vs alone |")
    print("|---|" + "---:|" * (len(runs) + 1))
    for i, tgt in enumerate(targets):
        v, _, s = tgt.split()
        med = {r: statistics.median(t[r][15 * i:15 * i + 15]) for r in runs}
        rng = {r: (min(t[r][15 * i:15 * i + 15]), max(t[r][15 * i:15 * i + 15])) for r in runs}
        alone = (med["alone1"] + med["alone2"]) / 2
        beside = (med["beside1"] + med["beside2"]) / 2
        d = 100 * (beside / alone - 1)
        worst = max(worst, abs(d))
        cells = " | ".join(f"{med[r]:.3f} ({rng[r][0]:.3f}–{rng[r][1]:.3f})" for r in runs)
        print(f"| {v} on {s} | {cells} | {d:+.1f} % |")
    print()
print(f"Largest difference of the mean median beside against alone: {worst:.1f} %.")
PY
} > "$out/ncu_prestart.md"
cat "$out/ncu_prestart.md"
