#!/usr/bin/env bash
# End-to-end check of the profile stage on a GPU machine: the named metrics in
# artifacts/ncu/summary.json (read from `ncu --page raw`) against what `ncu --page details`
# shows for the same launch of the same target (Duration, Registers Per Thread, Achieved
# Occupancy, DRAM Throughput).
#
# Run in the project root after the build (and tune, for `topk`) stages have run:
#   REPRO=./target/release/repro bash benches/ncu_check.sh
# Environment (defaults match the profile stage's defaults; keep them equal to its options):
#   REPRO=repro  PIPELINE=pipeline.yaml  STAGE=ncu-profile  SHAPE=<workload.primary>  WARMUP=5  ITERS=1
#   LAUNCH_SKIP=$WARMUP  CLOCK_CONTROL=base  NCU=<found like the stage finds it>
#   CHECK_DIR=.repro/ncu-check (details exports and the comparison table land here)
# Exit status: 0 when the profile stage succeeded and every compared field agrees within
# tolerance, 1 otherwise. Writes benches/results/ncu_check.md (the comparison, with a header
# naming the command, device, date and commit).
set -euo pipefail
. "$(dirname "$0")/results_header.sh"

REPRO=${REPRO:-repro}
PIPELINE=${PIPELINE:-pipeline.yaml}
STAGE=${STAGE:-ncu-profile}
WARMUP=${WARMUP:-5}
ITERS=${ITERS:-1}
LAUNCH_SKIP=${LAUNCH_SKIP:-$WARMUP}
CLOCK_CONTROL=${CLOCK_CONTROL:-base}
CHECK_DIR=${CHECK_DIR:-.repro/ncu-check}
if [ -z "${NCU:-}" ]; then
  NCU=$(command -v ncu || true)
  for c in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    [ -z "$NCU" ] && [ -x "$c" ] && NCU=$c
  done
fi
[ -n "$NCU" ] || { echo "ncu not found: set NCU=/path/to/ncu" >&2; exit 1; }
if [ -z "${SHAPE:-}" ]; then
  SHAPE=$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['workload']['primary'])" "$PIPELINE")
fi
mkdir -p "$CHECK_DIR"

echo "== profile stage ($("$NCU" --version | grep Version))"
stage_rc=0
"$REPRO" -f "$PIPELINE" stage "$STAGE" --force || stage_rc=$?
[ "$stage_rc" -eq 0 ] || echo "(profile stage exit $stage_rc: comparing what it wrote; the check fails)"

# target, variant, kernel of every profiled target
python3 - <<'PY' > "$CHECK_DIR/targets.tsv"
import json
for t in json.load(open("artifacts/ncu/summary.json"))["targets"]:
    if t["status"] == "ok":
        print(t["target"], t["variant"], t["kernel"], sep="\t")
PY

while IFS=$'\t' read -r target variant kernel; do
  if [[ $variant == tune-top* ]]; then
    prog=(--cubin ".repro/cubins/$variant.cubin" --entry "$kernel")
  else
    prog=(--variant "$variant")
  fi
  echo "== details page for $target"
  "$NCU" --csv --page details -k "regex:^${kernel}\$" --launch-skip "$LAUNCH_SKIP" --launch-count 1 \
    --clock-control "$CLOCK_CONTROL" "$REPRO" -f "$PIPELINE" exec "${prog[@]}" --shape "$SHAPE" \
    --seed 0 --warmup "$WARMUP" --iters "$ITERS" > "$CHECK_DIR/$target.details.csv"
  "$REPRO" ncu parse "$CHECK_DIR/$target.details.csv" --json > "$CHECK_DIR/$target.details.json"
done < "$CHECK_DIR/targets.tsv"

compare_rc=0
python3 - "$CHECK_DIR" <<'PY' > "$CHECK_DIR/comparison.md" || compare_rc=$?
import json, sys
check_dir = sys.argv[1]
summary = json.load(open("artifacts/ncu/summary.json"))
# field: (details-page name, tolerance, kind) -- two separate ncu runs, so times differ a little
fields = {
    "kernel_time_us": ("Duration", 0.10, "rel"),
    "registers_per_thread": ("Registers Per Thread", 0.0, "abs"),
    "achieved_occupancy_pct": ("Achieved Occupancy", 5.0, "abs"),
    "dram_bw_pct_peak": ("DRAM Throughput", 5.0, "abs"),
}
print(f"ncu: {summary['ncu_version']}, clock control: {summary['clock_control']}\n")
print("| target | field | summary.json (raw page) | details page | agree |")
print("| --- | --- | ---: | ---: | :---: |")
bad = 0
for t in summary["targets"]:
    if t["status"] != "ok":
        print(f"| {t['target']} | {t['status']} | {t.get('reason','')!s:.60} | | |")
        continue
    d = json.load(open(f"{check_dir}/{t['target']}.details.json"))["targets"][0]
    for field, (label, tol, kind) in fields.items():
        a, b = t[field], d[field]
        if a is None or b is None:
            ok = False
        elif kind == "rel":
            ok = abs(a - b) <= tol * max(abs(b), 1e-9)
        else:
            ok = abs(a - b) <= tol
        bad += not ok
        print(f"| {t['target']} | {field} ({label}) | {a} | {b} | {'✅' if ok else '❌'} |")
sys.exit(1 if bad else 0)
PY
{
  results_header "REPRO=repro CLOCK_CONTROL=$CLOCK_CONTROL bash benches/ncu_check.sh"
  cat "$CHECK_DIR/comparison.md"
} > benches/results/ncu_check.md.tmp
mv benches/results/ncu_check.md.tmp benches/results/ncu_check.md
cat benches/results/ncu_check.md
[ "$stage_rc" -eq 0 ] && [ "$compare_rc" -eq 0 ]
