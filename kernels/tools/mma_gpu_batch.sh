#!/usr/bin/env bash
# One GPU call's worth of checks for the register-resident family (kernels/sdpa_fp8_mma.cu).
#
#   bash kernels/tools/mma_gpu_batch.sh OUTDIR REPRO_BINARY [steps...]     (from the repo root)
#   steps: check sanitize sass ncu bench (default: all five)
#
#   check     check_variants.py --kernel mma: the shipped mma variants and candidates, every
#             shape of the tool (S = 1, 17, 32, 100, 300, 1000, mission, long; D = 128 shapes for
#             HEAD_DIM=128 candidates), 3 seeds,
#             against float64; CuPy timings (warm L2, back-to-back launches) on mission + long
#   sanitize  compute-sanitizer memcheck and racecheck over the shipped mma variants and fifteen odd
#             configs (KV_SPLIT 2 and 4 with sub-steps, TILE_N 16, NUM_STAGES 3/4, DEQUANT_INT,
#             WARP_M 32, Q_IN_REGS, USE_WGMMA, KV_VIA_REGS, KV_GROUP_SYNC), S = 1, 17,
#             32, 100, 300
#   sass      cuobjdump -sass of the default config, with an instruction histogram
#   ncu       Nsight Compute (speed of light, warp states, pipes, memory workload incl. shared-memory
#             wavefronts and bank conflicts) of each define-set in NCU_DEFINES (separated by ';') on
#             the long shape (`--set none`: only that kernel launches, so `-c 1` profiles it)
#   bench     the pipeline's own harness: `repro stage --with-deps bench` in a scratch copy whose
#             pipeline.yaml adds the candidate variants named below (CANDIDATES) and keeps only the
#             build, baselines and bench stages (torch baselines included); prints p50 and the
#             speedup against torch-sdpa-best per variant and shape; fails if a stage fails
#
# Writes at most 8 files into OUTDIR.  Every step has a timeout clipped to DEADLINE_S (default
# 560 s from the start).  Exit status 0 only if every requested step passed.
set -uo pipefail
START_S=$SECONDS
DEADLINE_S=${DEADLINE_S:-560}
step_timeout() { local left=$(( DEADLINE_S - (SECONDS - START_S) )); if [ $left -lt 20 ]; then echo 0;
  elif [ $left -lt $1 ]; then echo $left; else echo $1; fi; }
OUTDIR=$(realpath -m "${1:?usage: mma_gpu_batch.sh OUTDIR REPRO_BINARY [steps...]}")
REPRO=$(realpath -m "${2:?usage: mma_gpu_batch.sh OUTDIR REPRO_BINARY [steps...]}")
shift 2
STEPS=${*:-check sanitize sass ncu bench}
want() { [[ " $STEPS " == *" $1 "* ]]; }
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
ROOT=$PWD
CV="python3 kernels/tools/check_variants.py --kernel mma --build-dir /tmp/mma-check"
# Candidates beside the shipped mma variants, as "variant-name:defines" (defaults: TILE_M=64
# TILE_N=32 KV_SPLIT=1 NUM_STAGES=2 DEQUANT_INT=0 WARP_M=16 Q_IN_REGS=0).  check times them all;
# bench adds each to the scratch pipeline.yaml under its name.  Override with MMA_CANDIDATES
# (the same form, entries separated by ';').
CANDIDATES=("mma-w32-m64-kv2:TILE_M=64 TILE_N=32 KV_SPLIT=2 WARP_M=32"
            "mma-w32-m64-kv4:TILE_M=64 TILE_N=16 KV_SPLIT=4 WARP_M=32"
            "mma-w32-m128-kv2:TILE_M=128 TILE_N=32 KV_SPLIT=2 WARP_M=32"
            "mma-w32-m32-kv4:TILE_M=32 TILE_N=16 KV_SPLIT=4 WARP_M=32"
            "mma-w32-m128-kv2-n16:TILE_M=128 TILE_N=16 KV_SPLIT=2 WARP_M=32"
            "mma-m64-kv4:TILE_M=64 TILE_N=16 KV_SPLIT=4"
            "mma-m32-kv4:TILE_M=32 TILE_N=16 KV_SPLIT=4"
            "mma-m64-kv2-qr:TILE_M=64 TILE_N=32 KV_SPLIT=2 Q_IN_REGS=1")
if [ -n "${MMA_CANDIDATES:-}" ]; then IFS=';' read -r -a CANDIDATES <<< "$MMA_CANDIDATES"; fi
# Define-sets for the check step only (correctness and CuPy timing), e.g. configs past
# pipeline.yaml's ptxas gate, which bench would reject: MMA_CHECK_ONLY="DEFINES;DEFINES".
CHECK_ONLY=()
if [ -n "${MMA_CHECK_ONLY:-}" ]; then IFS=';' read -r -a CHECK_ONLY <<< "$MMA_CHECK_ONLY"; fi
rc=0

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nvcc --version | tail -2;
  python3 -c 'import cupy, torch; print("cupy", cupy.__version__, "torch", torch.__version__)'; } 2>&1 | tee "$OUTDIR/env.txt"

if want check; then
  echo "=== check: correctness (all shapes, 3 seeds) + CuPy timing ==="
  defs=(); for d in "${CANDIDATES[@]}"; do defs+=(--defines "${d#*:}"); done
  for d in "${CHECK_ONLY[@]}"; do defs+=(--defines "$d"); done
  t=$(step_timeout 200)
  if [ "$t" -eq 0 ]; then echo "check SKIPPED (deadline)"; rc=1; else
    timeout "$t" $CV --set shipped "${defs[@]}" --time --json "$OUTDIR/check.json" > "$OUTDIR/check.log" 2>&1 || rc=1
    grep -E "worst|FAIL|sm_90 " "$OUTDIR/check.log" | head -60
    sed -n '/p50_us/,$p' "$OUTDIR/check.log" | head -60
  fi
fi

if want sanitize; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer --tool $tool ==="
    t=$(step_timeout 120)
    if [ "$t" -eq 0 ]; then echo "$tool SKIPPED (deadline)"; rc=1; continue; fi
    extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
    timeout "$t" compute-sanitizer --tool $tool $extra --error-exitcode 9 \
      $CV --set shipped --defines "TILE_M=16 TILE_N=16 KV_SPLIT=2 NUM_STAGES=4" \
      --defines "TILE_M=128 TILE_N=64 NUM_STAGES=3 DEQUANT_INT=1" --defines "TILE_M=16 TILE_N=64 KV_SPLIT=2" \
      --defines "TILE_M=64 TILE_N=32 KV_SPLIT=2 WARP_M=32" --defines "TILE_M=64 TILE_N=16 KV_SPLIT=4 WARP_M=32" \
      --defines "TILE_M=32 TILE_N=16 KV_SPLIT=4 WARP_M=32 NUM_STAGES=3 DEQUANT_INT=1" \
      --defines "TILE_M=64 TILE_N=16 KV_SPLIT=4" --defines "TILE_M=64 TILE_N=32 KV_SPLIT=2 Q_IN_REGS=1" \
      --defines "TILE_M=64 TILE_N=32 KV_SPLIT=2 USE_WGMMA=1 KV_VIA_REGS=1" --defines "TILE_M=64 TILE_N=32 USE_WGMMA=1" \
      --defines "TILE_M=128 TILE_N=64 KV_SPLIT=2 USE_WGMMA=1 KV_VIA_REGS=1" \
      --defines "TILE_M=16 TILE_N=16 KV_SPLIT=2 KV_VIA_REGS=1" \
      --defines "TILE_M=64 TILE_N=32 KV_SPLIT=2 USE_WGMMA=1 KV_VIA_REGS=1 KV_GROUP_SYNC=1" \
      --defines "TILE_M=16 TILE_N=32 KV_SPLIT=2 NUM_STAGES=3 KV_GROUP_SYNC=1" \
      --defines "TILE_M=128 TILE_N=16 KV_SPLIT=2 KV_VIA_REGS=1 KV_GROUP_SYNC=1" \
      --shapes sanitize --seeds 0 --no-reference-check > "$OUTDIR/sanitize_$tool.log" 2>&1
    r=$?; bad=""
    [ $r -ne 0 ] && bad="$bad exit=$r"
    grep -q "^ALL OK" "$OUTDIR/sanitize_$tool.log" || bad="$bad no-ALL-OK"
    grep -qE "ERROR SUMMARY: [1-9]" "$OUTDIR/sanitize_$tool.log" && bad="$bad errors"
    grep -qiE "RACECHECK SUMMARY: [1-9]|hazard detected|Race reported" "$OUTDIR/sanitize_$tool.log" && bad="$bad hazards"
    if [ -n "$bad" ]; then echo "$tool FAIL:$bad"; rc=1; else echo "$tool clean"; fi
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUTDIR/sanitize_$tool.log" | sort | uniq -c | head -4
  done
fi

if want sass; then
  echo "=== SASS of the default config (sm_90) ==="
  nvcc -cubin -O3 -arch=sm_90 -o /tmp/mma-default.cubin kernels/sdpa_fp8_mma.cu &&
  cuobjdump -sass /tmp/mma-default.cubin > /tmp/mma.sass &&
  { echo "# instruction histogram (whole kernel)";
    grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[A-Z][A-Z0-9_.]*' /tmp/mma.sass | awk '{print $2}' | sort | uniq -c | sort -rn;
    echo; cat /tmp/mma.sass; } > "$OUTDIR/sass.txt" || rc=1
  head -25 "$OUTDIR/sass.txt"
fi

if want ncu; then
  IFS=';' read -r -a ncu_sets <<< "${NCU_DEFINES:-TILE_N=64}"
  : > "$OUTDIR/ncu.txt"
  for nd in "${ncu_sets[@]}"; do
    echo "=== ncu: $nd, long shape, one launch ===" | tee -a "$OUTDIR/ncu.txt"
    t=$(step_timeout 90)
    if [ "$t" -eq 0 ]; then echo "ncu SKIPPED (deadline)"; rc=1; continue; fi
    timeout "$t" ncu --clock-control none -k sdpa_fp8_fwd -c 1 --section SpeedOfLight --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_op_ldsm.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg,'regex:^sm__inst_executed_pipe_[a-z0-9_]*\.avg\.pct_of_peak_sustained_active$','regex:^smsp__average_warps_issue_stalled_[a-z_]*_per_issue_active\.ratio$' \
      $CV --set none --defines "$nd" --shapes long --seeds 0 --no-reference-check >> "$OUTDIR/ncu.txt" 2>&1 || rc=1
  done
  grep -E "^=== ncu|Duration|Throughput|Pipe|Issue|Eligible|Achieved Occupancy|Theoretical Occupancy|Registers|wavefronts|bank_conflicts|ldsm|hmma|cycles_elapsed|Shared|pipe_|stalled" "$OUTDIR/ncu.txt" | head -150
fi

if want bench; then
  echo "=== repro bench in a scratch copy (pipeline harness, isolated launches) ==="
  t=$(step_timeout 300)
  if [ "$t" -eq 0 ]; then echo "bench SKIPPED (deadline)"; rc=1; else
    SCR=/tmp/mma-bench; rm -rf "$SCR"; mkdir -p "$SCR"
    tar cf - --exclude=./.git --exclude=./target --exclude=./.repro --exclude=./artifacts --exclude=./reports . | tar xf - -C "$SCR"
    CAND_LINES=$(printf '%s\n' "${CANDIDATES[@]}") python3 - "$SCR/pipeline.yaml" <<'EOF'
import os, sys, yaml
p = sys.argv[1]
d = yaml.safe_load(open(p))
extra = {}
for line in os.environ["CAND_LINES"].splitlines():
    if ":" in line:
        name, defs = line.strip().split(":", 1)
        extra[name] = {k: int(v) for k, v in (t.split("=") for t in defs.split())}
for n, defs in extra.items():
    d["variants"].setdefault(n, {"kernel": "sdpa_fp8_mma", "defines": defs})
d["stages"] = {k: v for k, v in d["stages"].items() if k in ("build", "baselines", "bench")}
yaml.safe_dump(d, open(p, "w"), sort_keys=False)
EOF
    ( cd "$SCR" && export REPRO_BIN="$REPRO" PATH="$(dirname "$REPRO"):$PATH" &&
      timeout "$t" "$REPRO" stage --with-deps bench -q ) > "$OUTDIR/bench.log" 2>&1 || rc=1
    tail -30 "$OUTDIR/bench.log"
    python3 - "$SCR/artifacts/bench" <<'EOF' | tee -a "$OUTDIR/bench.log"
import glob, json, os, statistics, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    d = json.load(open(f))
    for r in d.get("results", []):
        if r.get("status") == "ok" and r.get("p50_us") is not None:  # timed runs only
            rows.setdefault((d["name"], r["shape"]), []).append(r)
print(f"{'variant':22s} {'shape':8s} {'p50_us(med)':>11s} {'vs_best':>8s} {'max_abs':>9s}")
for (n, s), rs in sorted(rows.items()):
    p50 = statistics.median(r["p50_us"] for r in rs)
    sp = [r.get("speedup_vs_torch-sdpa-best") for r in rs if r.get("speedup_vs_torch-sdpa-best")]
    err = max(r.get("max_abs_err", 0) for r in rs)
    print(f"{n:22s} {s:8s} {p50:11.2f} {statistics.median(sp) if sp else float('nan'):8.2f} {err:9.2e}")
EOF
    tar czf "$OUTDIR/bench.tgz" -C "$SCR" artifacts .repro/logs 2>/dev/null
  fi
fi
echo "mma_gpu_batch: $(( SECONDS - START_S )) s, exit $rc"
exit $rc
