#!/usr/bin/env bash
# How much of kernels/sdpa_fp8_ws.cu's time is its producer's work, for one call on a GPU
# machine with nvcc, ncu and CuPy (from the repo root):
#
#   bash kernels/tools/ws_producer_share.sh OUTDIR
#
# ncu kernel times (`gpu__time_duration`, 5 launches: one per seed, warm L2, clocks as found)
# of `ws-c1-x2` and `ws-c2-kv2` on mission and ragged, each built three ways:
#   shipped     the source as it is;
#   no-dequant  the producer stores zeros instead of converting each raw tile (the bulk copies,
#               the waits and the shared-memory stores stay);
#   no-convert  the producer only waits for each tile's bulk copy and publishes the slot.
# The two modified builds compute wrong outputs, which is the point: only their time is read.
# If taking the producer's work away speeds the split (two consumer warpgroups) up more than
# the single consumer, the producer sets the split's pace. Writes
# benches/results/ws_producer_share.md; exits non-zero on any failure but the modified builds'
# expected wrong outputs.
set -euo pipefail
OUTDIR=$(realpath -m "${1:?usage: ws_producer_share.sh OUTDIR}")
mkdir -p "$OUTDIR"
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
source benches/results_header.sh
declare -A CONFIG=([ws-c1-x2]="NUM_CONSUMERS=1 CTAS_PER_SM=2 TILE_N=128 NUM_STAGES=2"
                   [ws-c2-kv2]="NUM_CONSUMERS=2 KV_SPLIT=2 TILE_N=128 NUM_STAGES=4 RAW_STAGES=4")
BUILDS=(shipped no-dequant no-convert)
VARIANTS=(ws-c1-x2 ws-c2-kv2)

# The modified sources, next to the kernel's headers.
python3 - "$OUTDIR" <<'PY'
import sys
out = sys.argv[1]
src = open("kernels/sdpa_fp8_ws.cu").read()
def patched(old, new):
    assert src.count(old) == 1, old
    return src.replace(old, new)
open(f"{out}/shipped.cu", "w").write(src)
open(f"{out}/no-dequant.cu", "w").write(patched(
    "uint4 x = *reinterpret_cast<const uint4*>(raw + 16 * i);",
    "uint4 x = make_uint4(0u, 0u, 0u, 0u);"))
open(f"{out}/no-convert.cu", "w").write(patched(
    "        convert_tile(raw, h, p, valid);\n        convert_tile(raw + RAW_TILE, h + H_TILE, p, valid);\n",
    "        (void)raw; (void)h; (void)valid;\n"))
PY
for b in "${BUILDS[@]}"; do
  for v in "${VARIANTS[@]}"; do
    defines=(); for d in ${CONFIG[$v]}; do defines+=("-D$d"); done
    nvcc -cubin -O3 -arch=sm_90a -I kernels "${defines[@]}" -o "$OUTDIR/$v.$b.cubin" "$OUTDIR/$b.cu"
  done
done

NCU=(ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none --csv -k regex:sdpa_fp8_fwd)
for b in "${BUILDS[@]}"; do
  for v in "${VARIANTS[@]}"; do
    rc=0
    "${NCU[@]}" python3 kernels/tools/check_variants.py --kernel ws --set none --no-reference-check \
      --cubin "$OUTDIR/$v.$b.cubin" --shapes mission,ragged --seeds 0 1 2 3 4 > "$OUTDIR/$v.$b.csv" 2>&1 || rc=$?
    # check_variants exits 1 on wrong outputs: expected of the modified builds, a failure of the shipped one
    if [ $rc -ne 0 ] && { [ $b = shipped ] || [ $rc -ne 1 ]; }; then
      echo "$v ($b): exit $rc"; tail -20 "$OUTDIR/$v.$b.csv"; exit 1
    fi
  done
done

{
  results_header "bash kernels/tools/ws_producer_share.sh OUTDIR"
  echo
  python3 - "$OUTDIR" "${VARIANTS[@]}" <<'PY'
import csv, io, statistics, sys
out, variants = sys.argv[1], sys.argv[2:]
builds = ["shipped", "no-dequant", "no-convert"]
def times(path):
    text = open(path).read()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    assert rows and rows[0]["Metric Unit"] == "ns", path
    t = [float(r["Metric Value"].replace(",", "")) / 1000 for r in rows if r["Metric Name"] == "gpu__time_duration.sum"]
    assert len(t) == 10, (path, len(t))  # 5 seeds on mission, then 5 on ragged
    return {"mission": t[:5], "ragged": t[5:]}
res = {(v, b): times(f"{out}/{v}.{b}.csv") for v in variants for b in builds}
print("ncu `gpu__time_duration`, µs: the median of 5 launches (one per seed), min–max in brackets. "
      "`no-dequant` and `no-convert` compute wrong outputs; only their time is read.\n")
print("| variant | shape | shipped | no-dequant | no-convert |\n|---|---|---:|---:|---:|")
for v in variants:
    for sh in ("mission", "ragged"):
        cells = [f"{statistics.median(res[(v, b)][sh]):.2f} ({min(res[(v, b)][sh]):.2f}–{max(res[(v, b)][sh]):.2f})"
                 for b in builds]
        print(f"| `{v}` | {sh} | " + " | ".join(cells) + " |")
PY
} > benches/results/ws_producer_share.md
cat benches/results/ws_producer_share.md
