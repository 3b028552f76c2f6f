#!/usr/bin/env bash
# End to end on a GPU machine, in one call: the whole pipeline, a no-op rerun, a forced
# bench, the fault drill of docs/RELIABILITY.md, the GPU-gated tests, repro compare and the
# ncu check.
#
#   bash benches/gpu_e2e.sh REPRO_BINARY OUTDIR [TEST_BINARY...]
#   PHASES="fresh reruns drills tests" (the default) picks the parts, to split it over calls.
#
# Runs in the project root. Every step is a check with the exit status it must have (a
# pipeline run may end 1 only through a failed gate, never a failed stage; a drill's
# interrupted run must end 130 and leave the artifacts byte for byte; a broken variant must
# fail alone). Every step runs even after one fails; the script exits 1 if any failed.
# Writes OUTDIR/e2e.log (everything), OUTDIR/results.tgz (artifacts/, reports/, logs),
# OUTDIR/drill.tgz, and benches/results/e2e.md (each step: want, got, wall time, verdict;
# the fresh run's stage table) with the command, device, date and commit.
set -euo pipefail
REPRO=$(realpath "$1"); OUT=$2; shift 2
TESTS=("$@")
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
ROOT=$PWD
. "$ROOT/benches/results_header.sh"
HEADER=$(results_header "bash benches/gpu_e2e.sh REPRO_BINARY OUTDIR ${TESTS[*]##*/} (PHASES=${PHASES:-fresh reruns drills tests})")
LOG=$OUT/e2e.log
ROWS=$OUT/steps.md
: > "$ROWS"
exec > >(tee -a "$LOG") 2>&1
FAILURES=0

record() { # record NAME WANT GOT SECONDS [NOTE]: one row of the results table
  local verdict=pass
  [[ " $2 " == *" $3 "* ]] || { verdict=FAIL; FAILURES=$((FAILURES + 1)); }
  echo "== $1: rc=$3 (want ${2// / or }), $4 s: $verdict${5:+ — $5}"
  echo "| $1 | ${2// / or } | $3 | $4 | $verdict${5:+ — $5} |" >> "$ROWS"
}
step() { # step NAME "WANT..." CMD...: run, record rc against the wanted ones and wall time
  local name=$1 want=$2; shift 2
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  record "$name" "$want" "$rc" "$((SECONDS - t0))"
}
check() { # check NAME CMD...: a check that must exit 0
  step "$1" 0 "${@:2}"
}
all_up_to_date() { # every stage up to date (a failed gate is fine; a failed stage is not)
  local bad
  bad=$("$REPRO" status | grep -vE ' up-to-date( \(gate failed.*\))?$' || true)
  [ -z "$bad" ] || { echo "not up to date:"; echo "$bad"; return 1; }
}
pack() { tar czf "$OUT/results.tgz" -C "$ROOT" artifacts reports .repro/logs .repro/state 2>/dev/null || true; }
digest() { { find artifacts reports -type f 2>/dev/null || true; } | sort | xargs -r sha256sum | sha256sum | cut -c1-16; }
unchanged() { [ "$(digest)" = "$1" ]; }
# interrupted NAME SIGNAL AFTER CMD...: start CMD, send SIGNAL after AFTER s; want exit 130
# and the artifacts unchanged.
interrupted() {
  local name=$1 sig=$2 after=$3; shift 3
  local before rc=0 t0=$SECONDS
  before=$(digest)
  "$@" & local pid=$!
  sleep "$after"; kill "-$sig" "$pid" || true
  wait "$pid" || rc=$?
  local same=yes; unchanged "$before" || same=NO
  record "$name" 130 "$rc" "$((SECONDS - t0))" "artifacts unchanged: $same"
  [ "$same" = yes ] || { FAILURES=$((FAILURES + 1)); echo "| $name: artifacts changed | yes | NO | | FAIL |" >> "$ROWS"; }
}

echo "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)' || true

PHASES=${PHASES:-fresh reruns drills tests}
has() { [[ " $PHASES " == *" $1 "* ]]; }

if has fresh; then
# 1. The pipeline, from nothing, then again (nothing to do).
rm -rf .repro artifacts reports
step "run (fresh)" "0 1" bash -c 'set -o pipefail; "$0" run -q | tee "$1"' "$REPRO" "$OUT/fresh_run.txt"
check "every stage up to date after the fresh run" all_up_to_date
before=$(digest)
step "run (again: nothing to do)" "0 1" "$REPRO" run
check "the no-op rerun changed nothing" unchanged "$before"
pack
fi

if has reruns; then
step "stage bench --force" "0 1" "$REPRO" stage bench --force -q
"$REPRO" status

# 2. Fault drill, on the real project.
interrupted "drill: SIGINT during bench" INT 6 "$REPRO" stage bench --force -q
"$REPRO" status | sed -n '1,10p'
rm -rf .repro/cache/tune  # without its memo the tune really searches, so the kill lands mid-search
interrupted "drill: SIGTERM during tune" TERM 20 "$REPRO" stage evo-tune --force -q
echo "memo lines before the rerun (a header, then one per finished trial): $(cat .repro/cache/tune/*.jsonl 2>/dev/null | grep -c . || true)"
step "tune rerun after the kill (resumes from the memo)" "0 1" "$REPRO" stage evo-tune --force
"$REPRO" status
step "run (final: everything up to date again)" "0 1" "$REPRO" run -q
check "every stage up to date after the drills" all_up_to_date
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
py_check() { python3 -c "$1"; }
cp pipeline.yaml /tmp/drill-base.yaml
hidden=()  # make ncu really unavailable (this machine is disposable), then put it back
for f in $(command -v ncu || true) /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -e "$f" ] && mv "$f" "$f.off" && hidden+=("$f")
done
step "drill: ncu unavailable (profile skipped, not failed)" 0 "$REPRO" stage ncu-profile --force
for f in "${hidden[@]}"; do mv "$f.off" "$f"; done
check "drill: every ncu target skipped with a reason" py_check 'import json; s=json.load(open("artifacts/ncu/summary.json")); t=s["targets"]; print([(x["target"], x["status"], x.get("reason")) for x in t]); assert t and all(x["status"] == "skipped" and x.get("reason") for x in t)'
add_variant broken "" "broken-tile: {kernel: sdpa_fp8, defines: {TILE_M: 48}}"
step "drill: a variant that does not compile (build, bench)" 1 "$REPRO" stage build bench -q
check "drill: broken-tile recorded as compile_error, not built, the control still measured" py_check '
import json
b = json.load(open("artifacts/build/broken-tile.json")); print("build:", b["status"], (b.get("error") or "")[:200])
r = json.load(open("artifacts/bench/broken-tile.json")); print("bench:", r["status"], r.get("reason"))
c = json.load(open("artifacts/bench/stage2-baseline.json")); ok = [x for x in c["results"] if x["status"] == "ok"]
print("control:", c["status"], len(ok), "of", len(c["results"]), "records ok")
assert b["status"] == "compile_error" and r["status"] != "ok" and c["results"] and len(ok) == len(c["results"])'
add_variant faulty "fault: {source: tests/fixtures/cuda/fault.cu, entry: sdpa_fp8_fwd}" "faulty: {kernel: fault}"
step "drill: a variant that faults (build, bench)" 1 "$REPRO" stage build bench -q
check "drill: every faulty record failed, the control still measured" py_check '
import json
r = json.load(open("artifacts/bench/faulty.json")); print("faulty:", r["status"], [(x["shape"], x["status"], (x.get("error") or "")[:160]) for x in r["results"]][:2])
c = json.load(open("artifacts/bench/stage2-baseline.json")); ok = [x for x in c["results"] if x["status"] == "ok"]
print("control:", len(ok), "of", len(c["results"]), "records ok")
assert r["results"] and all(x["status"] == "failed" for x in r["results"]) and len(ok) == len(c["results"])'
cp /tmp/drill-base.yaml pipeline.yaml
step "drill: back to the shipped variants" 0 "$REPRO" stage build -q
before=$(digest)
printf 'version: 1\nstages:\n  build: {uses: build, needs: [nope}\n' > pipeline.yaml
step "drill: malformed pipeline.yaml" 2 "$REPRO" run
check "drill: artifacts unchanged by the malformed pipeline" unchanged "$before"
cd "$ROOT"
fi

if has tests; then
# 4. GPU-gated tests (binaries built on the dev machine; paths compiled in point at /work/main).
for t in "${TESTS[@]}"; do
  step "test $(basename "$t")" 0 env REPRO_GPU_TESTS=1 REPRO_BIN="$REPRO" REPRO_SOURCE_ROOT="$ROOT" "$t" --test-threads=1
done

# 5. repro compare on the shipped variants (the cubins in .repro/cubins), with an A/A check.
step "compare" 0 env REPRO_BIN="$REPRO" bash benches/compare_gpu.sh /tmp/compare
tar czf "$OUT/compare.tgz" -C /tmp compare 2>/dev/null || true

# 6. Named ncu metrics against ncu's details page for the same launches
#    (writes benches/results/ncu_check.md).
step "ncu check" 0 env REPRO="$REPRO" CLOCK_CONTROL=none bash benches/ncu_check.sh
cp .repro/ncu-check/comparison.md "$OUT/" 2>/dev/null || true
fi

pack
tar czf "$OUT/drill.tgz" -C /tmp/drill artifacts/build artifacts/bench 2>/dev/null || true
{
  echo "$HEADER"
  echo
  echo "| step | want exit | got | wall s | verdict |"
  echo "|---|---|---:|---:|---|"
  cat "$ROWS"
  if [ -s "$OUT/fresh_run.txt" ]; then
    echo
    echo "The fresh run's final table (\`repro run -q\`):"
    echo
    echo '```text'
    cat "$OUT/fresh_run.txt"
    echo '```'
  fi
} > "$ROOT/benches/results/e2e.md"
echo "== done: $FAILURES failed checks (benches/results/e2e.md)"
[ "$FAILURES" -eq 0 ]
