#!/usr/bin/env bash
# One batch of GPU checks for kernels/sdpa_fp8.cu, meant for a single call on the GPU machine.
# Usage: kernels/tools/gpu_check.sh OUTDIR [all|shipped|space|sanitize|time]...
# Writes logs and JSON into OUTDIR (at most 8 files); prints short tables.  Every step has its
# own timeout, clipped to what is left of DEADLINE_S (default 570 s from the start, so the whole
# script fits in one 10-minute device call); a step that does not fit is reported SKIPPED and
# counts as a failure.  Exit status 0 only if every requested step passed.
#
# sanitize-rmsnorm: the same three tools over kernels/rmsnorm/rmsnorm.cu through `repro exec`
# (REPRO=the binary; writes benches/results/kernel_sanitize_rmsnorm.md).
# sanitize: memcheck, racecheck, synccheck over every shipped variant of both kernels: sdpa_fp8.cu's
# (incl. both warp-specialized ones, plus extra WS configs: NUM_STAGES=3, 2 producer warps,
# TILE_N=16, scalar P.V, no cp.async; D=64 and D=128), sdpa_fp8_mma.cu's (every mma-* variant
# of pipeline.yaml, wgmma ones included, built for this GPU's architecture) and sdpa_fp8_ws.cu's
# (every ws-* variant, plus the configs no variant ships: one raw stage, four fp16 stages, 64-key
# tiles, split-KV over a 3-deep ring), shapes S=1, 17, 32, 100, 300 (and D128 S=100).  A tool fails on a
# non-zero exit, on any racecheck hazard (error *or* warning) in its log, or when the checked
# program itself did not finish with ALL OK.
#
# Evidence for the docs: `shipped` writes benches/results/kernel_variants.md (the timing
# table), `sanitize` benches/results/kernel_sanitize.md (each tool's verdict and summary
# lines), `space` benches/results/kernel_space.md, each with the command, device, date and
# commit (REPRO_COMMIT names it when the tree has no .git).
set -euo pipefail
START_S=$SECONDS
DEADLINE_S=${DEADLINE_S:-570}
# step_timeout WANT: WANT clipped to the time left before the deadline (0 if < 20 s remain).
step_timeout() { local left=$(( DEADLINE_S - (SECONDS - START_S) )); if [ $left -lt 20 ]; then echo 0;
  elif [ $left -lt $1 ]; then echo $left; else echo $1; fi; }
OUTDIR=${1:?usage: gpu_check.sh OUTDIR [steps...]}
shift
STEPS=${*:-all}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. benches/results_header.sh
# evidence NAME STEP LOG [SECTION_PATTERN]: benches/results/NAME.md from LOG (the lines from
# SECTION_PATTERN on, or all), behind the header.
evidence() {
  { results_header "kernels/tools/gpu_check.sh OUTDIR $2"
    echo '```text'
    if [ -n "${4:-}" ]; then sed -n "/$4/,\$p" "$3"; else cat "$3"; fi
    echo '```'
  } > "benches/results/$1.md.tmp"
  mv "benches/results/$1.md.tmp" "benches/results/$1.md"
}
export PYTHONUNBUFFERED=1
export PATH=$PATH:/usr/local/cuda/bin
CV="python3 kernels/tools/check_variants.py --build-dir /tmp/kcheck"
want() { [[ " $STEPS " == *" $1 "* || ( " $STEPS " == *" all "* && $1 != sample ) ]]; }
rc=0

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nvcc --version | tail -2;
  python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'; } 2>&1 | tee "$OUTDIR/env.txt" \
  || { echo "the environment is incomplete (see above)"; rc=1; }

if want shipped; then
  echo "=== shipped variants (+HEAD_DIM=128 twins, + timing candidates), full shapes, 3 seeds ==="
  t=$(step_timeout ${SHIPPED_TIMEOUT:-200})
  [ $t -eq 0 ] && { echo "shipped SKIPPED (deadline)"; rc=1; } || \
  timeout $t $CV --set shipped --d128 --time --time-shapes mission,long \
    --defines "TILE_M=64" --defines "TILE_M=64 USE_WARP_SPECIALIZATION=1" \
    --defines "TILE_M=64 USE_WARP_SPECIALIZATION=1 NUM_PRODUCER_WARPS=2" \
    --defines "USE_WARP_SPECIALIZATION=1 NUM_PRODUCER_WARPS=2 USE_CP_ASYNC=0" \
    --defines "TILE_M=32 TILE_N=64" --defines "TILE_M=32 TILE_N=64 USE_WARP_SPECIALIZATION=1" \
    --defines "TILE_M=32 TILE_N=64 USE_WARP_SPECIALIZATION=1 NUM_PRODUCER_WARPS=2" \
    --defines "TILE_M=16 TILE_N=64" --defines "TILE_M=16 TILE_N=64 USE_WARP_SPECIALIZATION=1" \
    --defines "TILE_M=16 TILE_N=32" --defines "TILE_M=16 TILE_N=32 USE_WARP_SPECIALIZATION=1" \
    --defines "TILE_M=64 TILE_N=64" --defines "TILE_M=32 NUM_STAGES=3 USE_WARP_SPECIALIZATION=1" \
    --defines "USE_CP_ASYNC=0" --defines "USE_WMMA_PV=0" --defines "USE_WARP_SPECIALIZATION=1 USE_CP_ASYNC=0" \
    --json "$OUTDIR/shipped.json" > "$OUTDIR/shipped.log" 2>&1 || rc=1
  if [ -f "$OUTDIR/shipped.log" ]; then evidence kernel_variants shipped "$OUTDIR/shipped.log" p50_us; fi
  { grep -v "^m\|^stage" "$OUTDIR/shipped.log" | head -5
    grep -E "^(stage|m[0-9])" "$OUTDIR/shipped.log" | grep -E "sm_|worst|FAIL" | head -80
    sed -n '/p50_us/,$p' "$OUTDIR/shipped.log" | head -80
    grep -A30 "^FAILURES" "$OUTDIR/shipped.log" | head -30; } || true
fi

if want sanitize; then
  CS=compute-sanitizer
  # racecheck options this compute-sanitizer knows (probed, so an older one still runs):
  # print every hazard and the analysis, and report warnings, not only errors.
  RC_OPTS=""
  CSHELP=$($CS --help 2>&1 || true)
  if grep -q -- "--racecheck-report" <<<"$CSHELP"; then RC_OPTS="$RC_OPTS --racecheck-report all"; fi
  if grep -q -- "--racecheck-detect-level" <<<"$CSHELP"; then RC_OPTS="$RC_OPTS --racecheck-detect-level warn"; fi
  echo "compute-sanitizer: $($CS --version 2>&1 | tail -1); racecheck options:$RC_OPTS" | tee "$OUTDIR/sanitize_summary.txt"
  # sanitize_one TOOL FAMILY ARGS...: one compute-sanitizer pass of check_variants.py; its verdict.
  sanitize_one() {
    local tool=$1 family=$2; shift 2
    local log="$OUTDIR/sanitize_${tool}_${family}.log" extra="" t r=0 bad=""
    [ $tool = racecheck ] && extra="$RC_OPTS"
    t=$(step_timeout ${SAN_TIMEOUT:-150})
    if [ $t -eq 0 ]; then echo "$tool $family SKIPPED (deadline)" | tee -a "$OUTDIR/sanitize_summary.txt"; rc=1; return; fi
    timeout $t $CS --tool $tool $extra --error-exitcode 9 $CV "$@" --shapes sanitize --seeds 0 --no-reference-check \
      > "$log" 2>&1 || r=$?
    [ $r -ne 0 ] && bad="$bad exit=$r"
    grep -q "^ALL OK" "$log" || bad="$bad no-ALL-OK"
    grep -qE "ERROR SUMMARY: [1-9]" "$log" && bad="$bad errors"
    grep -qiE "RACECHECK SUMMARY: [1-9]|hazard detected|Race reported" "$log" && bad="$bad hazards"
    if [ -n "$bad" ]; then verdict="$tool $family FAIL:$bad"; rc=1; else verdict="$tool $family clean (exit 0, no errors, no hazards, ALL OK)"; fi
    echo "$verdict" | tee -a "$OUTDIR/sanitize_summary.txt"
    { grep -E "^(stage|m[0-9]|mma|  )|checked" "$log" | grep -E "sm_|checked" | head -40
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|ALL OK|FAIL" "$log" | sort | uniq -c | sort -rn | head -12; } \
      | tee -a "$OUTDIR/sanitize_summary.txt" || true
  }
  for tool in memcheck racecheck synccheck; do
    echo "=== compute-sanitizer --tool $tool: sdpa_fp8.cu (shipped incl. stage5-ws-p1/p2 + 6 odd configs, D=64 and D=128 twins), then sdpa_fp8_mma.cu (every shipped mma-* variant), then sdpa_fp8_ws.cu (every shipped ws-* variant + 4 odd configs); S=1, 17, 32, 100, 300 (D128 S=100) ===" \
      | tee -a "$OUTDIR/sanitize_summary.txt"
    sanitize_one $tool sdpa_fp8 --set shipped --d128 \
      --defines "USE_WARP_SPECIALIZATION=1 USE_CP_ASYNC=0 NUM_STAGES=3" \
      --defines "USE_WARP_SPECIALIZATION=1 NUM_STAGES=3 NUM_PRODUCER_WARPS=2" \
      --defines "TILE_M=16 TILE_N=16 NUM_WARPS=8 USE_WARP_SPECIALIZATION=1 NUM_PRODUCER_WARPS=2" \
      --defines "TILE_N=64 USE_WARP_SPECIALIZATION=1 USE_WMMA_PV=0" \
      --defines "TILE_M=64 NUM_WARPS=2 USE_WARP_SPECIALIZATION=1 USE_CP_ASYNC=0 NUM_PRODUCER_WARPS=2" \
      --defines "TILE_M=128 NUM_WARPS=8 USE_WMMA_PV=0 NUM_STAGES=3"
    sanitize_one $tool mma --kernel mma --set shipped
    sanitize_one $tool ws --kernel ws --set shipped --defines "NUM_CONSUMERS=2 RAW_STAGES=1" \
      --defines "NUM_CONSUMERS=1 NUM_STAGES=4 TILE_N=64" --defines "NUM_CONSUMERS=2 TILE_N=64 PINGPONG=1 NUM_STAGES=3" \
      --defines "NUM_CONSUMERS=2 KV_SPLIT=2 TILE_N=64 NUM_STAGES=3 RAW_STAGES=1"
  done
  if [ -f "$OUTDIR/sanitize_summary.txt" ]; then evidence kernel_sanitize sanitize "$OUTDIR/sanitize_summary.txt"; fi
fi

if want sanitize-rmsnorm; then
  # kernels/rmsnorm/rmsnorm.cu under memcheck, racecheck and synccheck: every shipped rms-*
  # variant and two configurations no variant ships, through `repro exec --no-timing` on every
  # shape of the rmsnorm workload (its tails: odd hidden sizes take the scalar path, partial
  # row blocks), seed 0. Needs REPRO (the binary) and a build in this tree (`repro stage build`).
  CS=compute-sanitizer
  REPRO_BIN=$(realpath "${REPRO:?set REPRO to the repro binary}")
  summary="$OUTDIR/sanitize_rmsnorm.txt"
  echo "compute-sanitizer: $($CS --version 2>&1 | tail -1)" | tee "$summary"
  shapes=$(python3 -c 'import yaml,sys; print(" ".join(yaml.safe_load(open("pipeline.yaml"))["workloads"]["rmsnorm"]["shapes"]))')
  mkdir -p /tmp/rmscheck
  extra_cfgs=("THREADS_PER_ROW=64 ROWS_PER_BLOCK=2 VEC=4 CACHED_VECS=0" "THREADS_PER_ROW=32 ROWS_PER_BLOCK=8 VEC=2 CACHED_VECS=16")
  for i in "${!extra_cfgs[@]}"; do
    d=""; for kv in ${extra_cfgs[$i]}; do d="$d -D$kv"; done
    # shellcheck disable=SC2086
    nvcc -cubin -O3 -arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d . | sed 's/^/sm_/')" $d \
      -o "/tmp/rmscheck/extra$i.cubin" kernels/rmsnorm/rmsnorm.cu || rc=1
  done
  for tool in memcheck racecheck synccheck; do
    runs=0; bad=0; t_start=$SECONDS
    for shape in $shapes; do
      targets=()
      for v in $(grep -oE '^  rms-[a-z0-9-]+' pipeline.yaml); do targets+=("--variant $v"); done
      for i in "${!extra_cfgs[@]}"; do
        defs=""; for kv in ${extra_cfgs[$i]}; do defs="$defs --define $kv"; done
        targets+=("--cubin /tmp/rmscheck/extra$i.cubin --entry rmsnorm_fwd --workload rmsnorm$defs")
      done
      for target in "${targets[@]}"; do
        t=$(step_timeout 60)
        [ "$t" -eq 0 ] && { echo "$tool SKIPPED (deadline)" | tee -a "$summary"; rc=1; break 3; }
        log="/tmp/rmscheck/$tool.log"
        r=0
        # shellcheck disable=SC2086
        timeout "$t" $CS --tool $tool --error-exitcode 9 "$REPRO_BIN" exec $target --shape "$shape" --seed 0 --no-timing > "$log" 2>&1 || r=$?
        runs=$((runs + 1))
        if [ $r -ne 0 ] || grep -qE "ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|hazard detected" "$log" \
           || ! grep -q '"correctness_pass": *true' "$log"; then
          bad=$((bad + 1)); echo "$tool FAIL: $target --shape $shape (exit $r)" | tee -a "$summary"; tail -5 "$log" >> "$summary"
        fi
      done
    done
    if [ $bad -eq 0 ]; then echo "$tool rmsnorm clean: $runs runs (3 shipped variants + 2 extra configs x shapes: $shapes), exit 0, no errors, no hazards, every check passed, $((SECONDS - t_start)) s" | tee -a "$summary"
    else rc=1; echo "$tool rmsnorm: $bad of $runs runs failed" | tee -a "$summary"; fi
  done
  evidence kernel_sanitize_rmsnorm sanitize-rmsnorm "$summary"
fi

if want space || want sample; then
  if want space; then SET="--set space ${SPACE_EXTRA:-}"; else SET="--set sample --sample ${SAMPLE:-120}"; fi
  echo "=== accepted tune space ($SET, distinct kernels), quick shapes, seed 0 ==="
  t=$(step_timeout ${SPACE_TIMEOUT:-240})
  [ $t -eq 0 ] && { echo "space SKIPPED (deadline)"; rc=1; } || \
  timeout $t $CV $SET --shapes quick --seeds 0 --no-reference-check --json "$OUTDIR/space.json" \
    > "$OUTDIR/space.log" 2>&1 || rc=1
  if [ -f "$OUTDIR/space.log" ]; then
    { grep -E "^compiled|^checked|ALL OK" "$OUTDIR/space.log"; grep -A40 "^FAILURES" "$OUTDIR/space.log" | head -40; } \
      > "$OUTDIR/space_summary.txt" || true
    cat "$OUTDIR/space_summary.txt"
    if want space; then evidence kernel_space space "$OUTDIR/space_summary.txt"; fi
  fi
fi

if want torch; then
  echo "=== torch fp16 SDPA on the mission shape (context only) ==="
  { timeout 60 python3 - 2>&1 | tail -3; } <<'EOF' || rc=1
import torch, torch.nn.functional as F
q, k, v = (torch.randn(2, 8, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
for _ in range(20): F.scaled_dot_product_attention(q, k, v)
ts = []
for _ in range(100):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(10): F.scaled_dot_product_attention(q, k, v)
    b.record(); b.synchronize(); ts.append(a.elapsed_time(b) * 100.0)
ts.sort(); print(f"torch SDPA fp16 mission p50 {ts[50]:.2f} us (same timing method)")
EOF
fi
echo "gpu_check: $(( SECONDS - START_S )) s, exit $rc"
exit $rc
