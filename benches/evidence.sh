#!/usr/bin/env bash
# Every evidence script the docs cite, on one GPU machine, in the project root:
#
#   REPRO=path/to/repro [TEST_BINS="gpu-… gpu_timing-… …"] [REPRO_COMMIT=sha] \
#     bash benches/evidence.sh OUTDIR [STEP...]
#
# TEST_BINS: the GPU-gated test binaries (cargo test --release --no-run --test gpu --test
# gpu_timing --test gpu_results --test gpu_compare --test gpu_mma_kernel --test integration),
# run by the e2e step with REPRO_GPU_TESTS=1.
# Steps (default: all, in this order; rough wall time on one H100 with the shipped variants):
#   e2e       benches/gpu_e2e.sh: pipeline from nothing, reruns, fault drills, GPU tests, repro compare,
#             ncu check                       → results/e2e.md, results/ncu_check.md   (more
#             than 10 min on an H100 with the nine shipped variants of 2026-11-24, past one
#             10-minute device call: split it with gpu_e2e.sh's PHASES)
#   harness   benches/gpu_harness_vs_ncu.sh  → results/harness_vs_ncu.md (~20 s per variant;
#             needs the cubins of a build: run after e2e or `repro stage build`)
#   compile   benches/build_compile_times.sh 5 → results/compile_times.md (~1.5 min)
#   sanitize  kernels/tools/gpu_check.sh sanitize → results/kernel_sanitize.md (≤ 7.5 min)
#   kernels   kernels/tools/gpu_check.sh shipped  → results/kernel_variants.md (≤ 3.5 min)
#   constraints  kernels/tools/check_variants.py --verify-constraints --compile-only (nvcc -E
#             over each kernel's define space against its Python mirror; no GPU needed)
#                                            → results/kernel_constraints.md (~1–3 min),
#                                              kernel_constraints_mma.md (~11 min on 2 cores)
#   resources kernels/tools/check_variants.py --compile-only over the shipped variants of
#             both kernels and their HEAD_DIM=128 twins for sm_80, sm_89, sm_90 (and sm_90a
#             for the mma family; ptxas -v; no
#             GPU needed)        → results/kernel_resources.md, kernel_resources_mma.md (~30 s)
#   tune      benches/tune_gpu.sh (search, then --exhaustive) → results/tune_vs_exhaustive.md
#             (~1 min search + 2.5–5 min sweep)
# All of them take more than one 10-minute device call: pick steps per call, e.g.
# `e2e harness compile`, then `sanitize kernels`, then `tune`.
#
# Each step runs even after one fails; exit 1 if any failed. Results land in
# benches/results/ (commit them); OUTDIR gets two files: evidence.tgz (benches/results/ and
# every step's logs and outputs, incl. e2e/results.tgz with the fresh run's artifacts) and
# evidence.log (each step's verdict and wall time). Then regenerate the docs' tables from them:
# `repro docs`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:?usage: benches/evidence.sh OUTDIR [STEP...]}"); shift
STEPS=${*:-e2e harness compile constraints resources sanitize kernels tune}
# The repro binary: only the steps that run it need it.
repro() { realpath "${REPRO:?set REPRO to the repro binary}"; }
read -r -a TEST_BINS <<< "${TEST_BINS:-}"
WORK=$(mktemp -d)
mkdir -p "$OUT" benches/results
export PATH=$PATH:/usr/local/cuda/bin
LOG=$OUT/evidence.log
failures=0

run_step() { # run_step NAME CMD...: run, log its verdict and wall time
  local name=$1 t0=$SECONDS rc=0; shift
  echo "=== $name: $*" | tee -a "$LOG"
  "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  tail -n 40 "$WORK/$name.log"
  local verdict=ok
  [ "$rc" -eq 0 ] || { verdict="FAILED (exit $rc; see $name.log)"; failures=$((failures + 1)); }
  echo "=== $name: $verdict in $((SECONDS - t0)) s" | tee -a "$LOG"
}

. benches/results_header.sh
# check_variants NAME ARGS...: kernels/tools/check_variants.py ARGS → benches/results/NAME.md
# (the last 40 lines of its output behind the header); its exit status.
check_variants() {
  local name=$1 log=$WORK/$1.out rc=0; shift
  python3 kernels/tools/check_variants.py "$@" > "$log" 2>&1 || rc=$?
  { results_header "python3 kernels/tools/check_variants.py $*"
    echo "nvcc: $(nvcc --version | grep -m1 release)"; echo
    echo '```text'; tail -n 40 "$log"; echo '```'
    [ "$rc" -eq 0 ] || echo "exit status $rc"
  } > "benches/results/$name.md.tmp"
  mv "benches/results/$name.md.tmp" "benches/results/$name.md"
  cat "$log"
  return "$rc"
}
# The constraint mirror against nvcc -E, over the whole space.
constraints() {
  local rc=0
  check_variants kernel_constraints --verify-constraints --compile-only || rc=1
  check_variants kernel_constraints_mma --kernel mma --verify-constraints --compile-only --set none --jobs 4 || rc=1
  return $rc
}
# ptxas -v of the shipped variants of both kernels (and their D=128 twins) on three
# architectures.
resources() {
  local rc=0
  check_variants kernel_resources --compile-only --arch sm_80 sm_89 sm_90 --set shipped --d128 || rc=1
  check_variants kernel_resources_mma --kernel mma --compile-only --arch sm_80 sm_89 sm_90 sm_90a --set shipped --d128 || rc=1
  return "$rc"
}

for step in $STEPS; do
  case $step in
    e2e) run_step e2e bash benches/gpu_e2e.sh "$(repro)" "$WORK/e2e" "${TEST_BINS[@]}" ;;
    harness) run_step harness env REPRO_BIN="$(repro)" bash benches/gpu_harness_vs_ncu.sh ;;
    compile) run_step compile bash benches/build_compile_times.sh 5 ;;
    sanitize) run_step sanitize env DEADLINE_S=${SANITIZE_DEADLINE_S:-450} bash kernels/tools/gpu_check.sh "$WORK/sanitize" sanitize ;;
    kernels) run_step kernels env DEADLINE_S=${KERNELS_DEADLINE_S:-210} bash kernels/tools/gpu_check.sh "$WORK/kernels" shipped ;;
    constraints) run_step constraints constraints ;;
    resources) run_step resources resources ;;
    tune) run_step tune bash benches/tune_gpu.sh "$(repro)" kernels "$WORK/tune" ;;
    *) echo "unknown step $step (e2e harness compile constraints resources sanitize kernels tune)" >&2; exit 2 ;;
  esac
done

cp "$LOG" "$WORK/"
tar czf "$OUT/evidence.tgz" benches/results -C "$WORK" .
echo "evidence: $failures failed steps; results in benches/results/ and $OUT/evidence.tgz" | tee -a "$LOG"
[ "$failures" -eq 0 ]
