#!/usr/bin/env bash
# What an ncu process costs before it profiles anything (issue 41), and what the profile
# stage's `--section-folder` (an empty folder: the stage names its metrics and uses no
# section) saves of it. One GPU worker (`repro exec --worker`) answers one request (mma-m64
# on small: its check, 20 warm-up launches, 5 launches in the profiler window) under ncu with
# the time alone, as the stage's time pass runs it, RUNS times (default 5) with ncu's stock
# sections and as many with the empty folder, alternating; and as many times without ncu.
#
#   bash benches/ncu_startup.sh REPRO_BINARY PROJECT OUT_DIR [RUNS]
#
# PROJECT: a checkout whose `repro stage build` has run. Prints the result file; exits
# non-zero if a run fails, a CSV lacks the 5 launches, or the two ways' CSVs differ in their
# columns.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
worker_bench_args "$@"
runs=${4:-5}
requests=$(worker_requests 1 "mma-m64 sdpa_fp8 small")
empty="$out/no-sections"
rm -rf "$empty" && mkdir -p "$empty"
flags=(--csv --page raw --metrics gpu__time_duration.sum --profile-from-start off
       --target-processes application-only --clock-control none --cache-control none)
# one NAME K [ncu flags...]: the worker's whole run, its wall time in ms to OUT/NAME.ms.
one() {
  local name=$1 k=$2 t0; shift 2
  t0=$(date +%s%N)
  if [ "$name" = no-ncu ]; then
    printf '%s\n' "$requests" | "$repro" exec --worker > "$out/$name-$k.out"
  else
    printf '%s\n' "$requests" | ncu "${flags[@]}" "$@" --log-file "$out/$name-$k.csv" \
      "$repro" exec --worker > "$out/$name-$k.out"
    [ "$(grep -c '^"[0-9]' "$out/$name-$k.csv")" = 5 ] \
      || { echo "$name run $k: not 5 profiled launches" >&2; exit 1; }
  fi
  grep -q '"result"' "$out/$name-$k.out" || { echo "$name run $k: no answer" >&2; exit 1; }
  echo $(( ($(date +%s%N) - t0) / 1000000 )) >> "$out/$name.ms"
}
rm -f "$out"/*.ms
for ((k = 1; k <= runs; k++)); do
  one stock "$k"
  one no-sections "$k" --section-folder "$empty"
  one no-ncu "$k"
done
columns() { grep -m1 '^"ID"' "$1"; }
for ((k = 1; k <= runs; k++)); do
  [ "$(columns "$out/stock-$k.csv")" = "$(columns "$out/no-sections-$k.csv")" ] \
    || { echo "run $k: the CSVs' columns differ" >&2; exit 1; }
done
{
echo "$header"
echo
python3 - "$out" "$runs" <<'PY'
import statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
ms = {n: [int(x) for x in open(f"{out}/{n}.ms")] for n in ("stock", "no-sections", "no-ncu")}
print(f"One GPU worker answering one request (mma-m64 on small: the check, 20 warm-up launches, "
      f"5 profiled launches) under `ncu --metrics gpu__time_duration.sum --profile-from-start off "
      f"--clock-control none --cache-control none`, {runs} runs of each way, alternating; wall "
      "time of the whole process, ms: median (min–max). The two ncu ways' CSVs have the same "
      "columns and 5 launches each.")
print()
print("| ncu | wall, ms | over no ncu, ms |")
print("|---|---:|---:|")
base = statistics.median(ms["no-ncu"])
for name, label in (("stock", "its stock sections (ncu's default)"),
                    ("no-sections", "`--section-folder` an empty folder (the stage)"),
                    ("no-ncu", "none: the worker alone")):
    v = ms[name]
    print(f"| {label} | {statistics.median(v):.0f} ({min(v)}–{max(v)}) | "
          f"{statistics.median(v) - base:.0f} |")
print()
print(f"The empty folder saves {statistics.median(ms['stock']) - statistics.median(ms['no-sections']):.0f} ms "
      "of each ncu process (median against median).")
PY
} > "$out/ncu_startup.md"
cat "$out/ncu_startup.md"
