#!/usr/bin/env bash
# The L2 hit rate the profile stage reports, against ncu's own (issue 41: a number must be
# what it claims). Five kernel targets in one GPU worker under ncu, as the stage runs them
# (`--profile-from-start off --clock-control none --cache-control none`, 20 warm-up
# launches, 5 profiled), collecting ncu's `lts__t_sector_hit_rate.pct`, `lts__t_sectors.sum`
# and the lookup counts `lts__t_sectors_lookup_{hit,miss}.sum`, then the lookup counts alone.
# Also checks that each architecture's ncu lists both counts (`--query-metrics --chip`).
#
#   bash benches/ncu_l2_hit_rate.sh REPRO_BINARY PROJECT OUT_DIR
#
# PROJECT: a checkout whose `repro stage build` has run. Writes OUT_DIR/l2_hit_rate.md,
# OUT_DIR/query_<chip>.txt and the CSVs; exits non-zero if any run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
worker_bench_args "$@"
for chip in gh100 ad104 ga100; do
  ncu --query-metrics --chip $chip | grep -E '^lts__t_sectors_lookup_(hit|miss) ' > "$out/query_$chip.txt"
  [ "$(wc -l < "$out/query_$chip.txt")" = 2 ] || { echo "$chip: ncu lists no L2 lookup counts" >&2; exit 1; }
done
targets=("mma-m64 sdpa_fp8 small" "ws-c1-x2 sdpa_fp8 mission" "ws-c1-x2 sdpa_fp8 ragged"
         "ws-c2-pp sdpa_fp8 long" "rms-warp-row rmsnorm mission")
requests=$(worker_requests 1 "${targets[@]}")
counts=lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum
for run in ncu counts; do
  metrics="$counts,profiler__replayer_passes"
  [ $run = ncu ] && metrics="lts__t_sector_hit_rate.pct,lts__t_sectors.sum,$metrics"
  printf '%s\n' "$requests" | ncu --csv --page raw --metrics "$metrics" --log-file "$out/$run.csv" \
    --profile-from-start off --target-processes application-only --clock-control none \
    --cache-control none "$repro" exec --worker > "$out/$run.out"
  answered=$(grep -c '"result"' "$out/$run.out" || true)
  [ "$answered" = "${#targets[@]}" ] || { echo "$run: $answered of ${#targets[@]} answered" >&2; exit 1; }
done
{
echo "$header"
echo
python3 - "$out" "${targets[@]}" <<'PY'
import csv, statistics, sys
out, targets = sys.argv[1], sys.argv[2:]
def launches(name):
    recs = list(csv.reader(l for l in open(f"{out}/{name}.csv") if l.startswith('"')))
    head, data = recs[0], recs[2:]
    if len(data) != 5 * len(targets):
        sys.exit(f"{name}: {len(data)} launches, expected {5 * len(targets)}")
    return lambda row, m: float(data[row][head.index(m)].replace(",", "")), data
ncu, n_rows = launches("ncu")
cnt, _ = launches("counts")
hit, miss = "lts__t_sectors_lookup_hit.sum", "lts__t_sectors_lookup_miss.sum"
print("L2 hit rate, %, of 5 profiled launches per target (median, min–max): ncu's "
      "`lts__t_sector_hit_rate.pct`; hits ÷ `lts__t_sectors.sum` of the same launches (what "
      "ncu's rate works out to); hits ÷ (hits + misses) of the lookup counts, in the same run, "
      "then in a run that collects the lookup counts alone (what the profile stage reports). "
      f"Replay passes per launch: {ncu(0, 'profiler__replayer_passes'):.0f} and "
      f"{cnt(0, 'profiler__replayer_passes'):.0f}. `ncu --query-metrics --chip` lists both "
      "counts on gh100, ad104 and ga100.")
print()
print("| target | ncu's rate | hits ÷ sectors | hits ÷ lookups | hits ÷ lookups, counts alone |")
print("|---|---:|---:|---:|---:|")
cell = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"
for i, t in enumerate(targets):
    v, _, s = t.split()
    rows = range(5 * i, 5 * i + 5)
    own = [ncu(r, "lts__t_sector_hit_rate.pct") for r in rows]
    per_sector = [100 * ncu(r, hit) / ncu(r, "lts__t_sectors.sum") for r in rows]
    same = [100 * ncu(r, hit) / (ncu(r, hit) + ncu(r, miss)) for r in rows]
    alone = [100 * cnt(r, hit) / (cnt(r, hit) + cnt(r, miss)) for r in rows]
    print(f"| {v} on {s} | {cell(own)} | {cell(per_sector)} | {cell(same)} | {cell(alone)} |")
PY
} > "$out/l2_hit_rate.md"
cat "$out/l2_hit_rate.md"
