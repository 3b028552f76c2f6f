#!/usr/bin/env bash
# Kernel times by Nsight Compute of kernels/sdpa_fp8_ws.cu configurations beside the shipped
# mma-wg-ring-gs and PyTorch's cuDNN SDPA (fp16 Q, K, V) on the mission and long shapes, for one
# call on a GPU machine with nvcc, ncu, CuPy and PyTorch.
#
#   bash kernels/tools/ws_ncu_times.sh OUTDIR      (from the repo root)
#
# Each kernel is timed by `gpu__time_duration` over 5 launches per shape (fresh inputs per seed,
# warm L2: --cache-control none; clocks as found: --clock-control none); the table gives the
# median.  Writes benches/results/ws_kernel_times.md; exits non-zero on any failure.
set -euo pipefail
OUTDIR=$(realpath -m "${1:?usage: ws_ncu_times.sh OUTDIR}")
mkdir -p "$OUTDIR"
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
source benches/results_header.sh
NCU="ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none --csv"
CV="python3 kernels/tools/check_variants.py --set none --no-reference-check"
CONFIGS=("NUM_CONSUMERS=1 CTAS_PER_SM=2 TILE_N=128 NUM_STAGES=2"
         "NUM_CONSUMERS=1 CTAS_PER_SM=2 TILE_N=64 NUM_STAGES=3"
         "NUM_CONSUMERS=2 TILE_N=128 NUM_STAGES=3 PINGPONG=1"
         "NUM_CONSUMERS=2 TILE_N=128 NUM_STAGES=3"
         "NUM_CONSUMERS=1 TILE_N=128 NUM_STAGES=2")
MMA="TILE_M=64 TILE_N=32 KV_SPLIT=2 NUM_STAGES=2 USE_WGMMA=1 KV_GROUP_SYNC=1"
ARGS=(); for c in "${CONFIGS[@]}"; do ARGS+=(--defines "$c"); done
# Correctness first (every config, quick shapes, 3 seeds): a wrong kernel is not timed.
$CV --kernel ws --build-dir /tmp/ws-times "${ARGS[@]}" --shapes quick --seeds 0 1 2 > "$OUTDIR/check.log" 2>&1
cat > "$OUTDIR/cudnn.py" <<'PY'
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
B, H, S, D = map(int, sys.argv[1:5])
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(5):
        F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
declare -A SHAPE=([mission]="2 8 512 64" [long]="1 8 2048 64")
for sh in mission long; do
  $NCU -k regex:sdpa_fp8_fwd $CV --kernel ws --build-dir /tmp/ws-times "${ARGS[@]}" --no-compile \
    --shapes $sh --seeds 0 1 2 3 4 > "$OUTDIR/ws_$sh.csv" 2>&1
  $NCU -k regex:sdpa_fp8_fwd $CV --kernel mma --build-dir /tmp/ws-times-mma --defines "$MMA" \
    --shapes $sh --seeds 0 1 2 3 4 > "$OUTDIR/mma_$sh.csv" 2>&1
  # shellcheck disable=SC2086  # the shape is four words
  $NCU -k regex:sdpa python3 "$OUTDIR/cudnn.py" ${SHAPE[$sh]} > "$OUTDIR/cudnn_$sh.csv" 2>&1
done
{
  results_header "bash kernels/tools/ws_ncu_times.sh OUTDIR"
  echo
  python3 - "$OUTDIR" "$MMA" "${CONFIGS[@]}" <<'PY'
import csv, io, statistics, sys
out, mma, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
def times(path):
    text = open(path).read()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    t = [float(r["Metric Value"].replace(",", "")) / 1000 for r in rows if r["Metric Name"] == "gpu__time_duration.sum"]
    assert rows and rows[0]["Metric Unit"] == "ns", path
    return [statistics.median(t[i:i + 5]) for i in range(0, len(t), 5)]
res = {sh: (times(f"{out}/ws_{sh}.csv"), times(f"{out}/mma_{sh}.csv")[0], times(f"{out}/cudnn_{sh}.csv")[0])
       for sh in ("mission", "long")}
for sh, (ws, _, _) in res.items():
    assert len(ws) == len(configs), (sh, len(ws))
print("ncu `gpu__time_duration`, median of 5 launches, µs; cuDNN ÷ kernel in brackets (higher is better).\n")
print("| kernel | mission | long |\n|---|---:|---:|")
def cell(sh, t):
    return f"{t:.2f} ({res[sh][2] / t:.2f}×)"
for i, c in enumerate(configs):
    print(f"| `sdpa_fp8_ws.cu` {c} | {cell('mission', res['mission'][0][i])} | {cell('long', res['long'][0][i])} |")
print(f"| `sdpa_fp8_mma.cu` {mma} (mma-wg-ring-gs) | {cell('mission', res['mission'][1])} | {cell('long', res['long'][1])} |")
print(f"| cuDNN SDPA (PyTorch, fp16 Q, K, V) | {res['mission'][2]:.2f} | {res['long'][2]:.2f} |")
PY
} > benches/results/ws_kernel_times.md
cat benches/results/ws_kernel_times.md
