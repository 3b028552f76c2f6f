#!/usr/bin/env bash
# End to end on a GPU machine, in one call: the whole pipeline, a no-op rerun, a forced
# bench, the fault drill of docs/RELIABILITY.md, the GPU-gated tests, repro compare and the
# ncu check.
#
#   bash benches/gpu_e2e.sh REPRO_BINARY OUTDIR [TEST_BINARY...]
#   PHASES="fresh reruns drills tests" (the default) picks the parts, to split it over calls.
#
# Runs in the project root. Writes OUTDIR/e2e.log (everything), OUTDIR/results.tgz
# (artifacts/, reports/, logs, drill outputs). Each step prints `== step: rc=N, T s`.
set -u
REPRO=$(realpath "$1"); OUT=$2; shift 2
TESTS=("$@")
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
ROOT=$PWD
LOG=$OUT/e2e.log
exec > >(tee -a "$LOG") 2>&1

step() { # step NAME CMD...: run, print rc and wall time
  local name=$1; shift
  local t0=$SECONDS
  "$@"; local rc=$?
  echo "== $name: rc=$rc, $((SECONDS - t0)) s"
  return 0
}
pack() { tar czf "$OUT/results.tgz" -C "$ROOT" artifacts reports .repro/logs .repro/state 2>/dev/null; }
digest() { find artifacts reports -type f 2>/dev/null | sort | xargs sha256sum 2>/dev/null | sha256sum | cut -c1-16; }

echo "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'

PHASES=${PHASES:-fresh reruns drills tests}
has() { [[ " $PHASES " == *" $1 "* ]]; }

if has fresh; then
# 1. The pipeline, from nothing, then again (nothing to do).
rm -rf .repro artifacts reports
step "run (fresh)" "$REPRO" run -q
step "run (again)" "$REPRO" run
pack
fi

if has reruns; then
step "stage bench --force" "$REPRO" stage bench --force -q
"$REPRO" status

# 2. Fault drill, on the real project.
before=$(digest)
"$REPRO" stage bench --force -q & pid=$!
sleep 6; kill -INT $pid; wait $pid; echo "== drill kill-during-bench: rc=$? (want 130); artifacts unchanged: $([ "$(digest)" = "$before" ] && echo yes || echo NO)"
"$REPRO" status | sed -n '1,10p'
rm -rf .repro/cache/tune  # without its memo the tune really searches, so the kill lands mid-search
"$REPRO" stage evo-tune --force -q & pid=$!
sleep 20; kill -TERM $pid; wait $pid; echo "== drill kill-during-tune: rc=$? (want 130); artifacts unchanged: $([ "$(digest)" = "$before" ] && echo yes || echo NO)"
echo "memo lines before the rerun (a header, then one per finished trial): $(cat .repro/cache/tune/*.jsonl 2>/dev/null | grep -c .)"
step "tune rerun after kill (resumes from the memo)" "$REPRO" stage evo-tune --force
grep -c . artifacts/tune/tune_log.csv
"$REPRO" status
step "run (final: everything up to date again)" "$REPRO" run -q
"$REPRO" status
pack
fi

if has drills; then
# 3. Fault drill on a scratch copy: broken variant, faulting variant, no ncu, bad yaml.
rm -rf /tmp/drill && cp -r "$ROOT" /tmp/drill && cd /tmp/drill
add_variant() { # add_variant NAME KERNEL_LINE VARIANT_LINE: a copy of the root pipeline with one more variant
  python3 - "$@" <<'PY'
import sys
name, kernel, variant = sys.argv[1:4]
s = open("/tmp/drill-base.yaml").read()
if kernel:
    s = s.replace("kernels:\n", "kernels:\n  " + kernel + "\n", 1)
s = s.replace("variants:\n", "variants:\n  " + variant + "\n", 1)
open("pipeline.yaml", "w").write(s)
PY
}
cp pipeline.yaml /tmp/drill-base.yaml
hidden=()  # make ncu really unavailable (this machine is disposable), then put it back
for f in $(command -v ncu) /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -e "$f" ] && mv "$f" "$f.off" && hidden+=("$f")
done
step "drill: ncu unavailable" "$REPRO" stage ncu-profile --force
for f in "${hidden[@]}"; do mv "$f.off" "$f"; done
python3 -c 'import json; s=json.load(open("artifacts/ncu/summary.json")); print([(t["target"], t["status"], t.get("reason")) for t in s["targets"]])'
"$REPRO" status | grep -A2 ncu-profile
add_variant broken "" "broken-tile: {kernel: sdpa_fp8, defines: {TILE_M: 48}}"
step "drill: a variant that does not compile (build, bench)" "$REPRO" stage build bench -q
python3 -c 'import json; r=json.load(open("artifacts/build/broken-tile.json")); print("broken-tile build:", r["status"], (r.get("error") or "")[:200])'
python3 -c 'import json; r=json.load(open("artifacts/bench/broken-tile.json")); print("broken-tile bench:", r["status"], r.get("reason"))'
python3 -c 'import json; r=json.load(open("artifacts/bench/stage2-baseline.json")); print("control still measured:", r["status"], len(r["results"]), "records")'
ls .repro/cubins/
add_variant faulty "fault: {source: tests/fixtures/cuda/fault.cu, entry: sdpa_fp8_fwd}" "faulty: {kernel: fault}"
step "drill: a variant that faults (build, bench)" "$REPRO" stage build bench -q
python3 -c 'import json; r=json.load(open("artifacts/bench/faulty.json")); print("faulty:", r["status"], [(x["shape"], x["status"], (x.get("error") or "")[:160]) for x in r["results"]][:2])'
python3 -c 'import json; r=json.load(open("artifacts/bench/stage2-baseline.json")); print("control still measured:", r["status"], len(r["results"]), "records")'
cp /tmp/drill-base.yaml pipeline.yaml
step "drill: back to the shipped variants" "$REPRO" stage build -q
before=$(digest)
printf 'version: 1\nstages:\n  build: {uses: build, needs: [nope}\n' > pipeline.yaml
step "drill: malformed pipeline.yaml" "$REPRO" run
echo "artifacts unchanged: $([ "$(digest)" = "$before" ] && echo yes || echo NO)"
cd "$ROOT"
fi

if has tests; then
# 4. GPU-gated tests (binaries built on the dev machine; paths compiled in point at /work/main).
for t in "${TESTS[@]}"; do
  step "test $(basename "$t")" env REPRO_GPU_TESTS=1 REPRO_BIN="$REPRO" REPRO_SOURCE_ROOT="$ROOT" "$t" --test-threads=1
done

# 5. repro compare on the shipped variants (the cubins in .repro/cubins), with an A/A check.
step "compare" env REPRO_BIN="$REPRO" bash benches/compare_gpu.sh /tmp/compare
tar czf "$OUT/compare.tgz" -C /tmp compare 2>/dev/null

# 6. Named ncu metrics against ncu's details page for the same launches.
step "ncu check" env REPRO="$REPRO" CLOCK_CONTROL=none bash benches/ncu_check.sh
cp .repro/ncu-check/comparison.md "$OUT/" 2>/dev/null
fi

pack
tar czf "$OUT/drill.tgz" -C /tmp/drill artifacts/build artifacts/bench 2>/dev/null
echo "== done"
