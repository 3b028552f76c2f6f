#!/usr/bin/env bash
# Source changes to kernels/sdpa_fp8_ws.cu that no define expresses, timed beside the kernel as
# it is, for one call on a GPU machine with nvcc, ncu and CuPy (from the repo root):
#
#   bash kernels/tools/ws_source_variants.sh OUTDIR producer|exp2-poly
#
# Each build is a patched copy of the source (the file itself is never changed), compiled for
# sm_90a and timed by ncu (`gpu__time_duration`, 5 launches per shape: one per seed, warm L2,
# clocks as found) through tools/check_variants.py, which also checks its outputs.
#
#   producer   `ws-c1-x2` and `ws-c2-kv2` on mission and ragged, with the producer's work taken
#              away: `no-dequant` stores zeros instead of converting each raw tile (the bulk
#              copies, the waits and the stores stay); `no-convert` only waits for each tile's
#              bulk copy and publishes the slot. Their outputs are wrong, which is the point:
#              only their time is read. If the split (two consumer warpgroups) gained more than
#              the single consumer, the producer would set the split's pace.
#   exp2-poly  `ws-c1-x2` and `ws-c2-pp` on mission, long and ragged, with the exponentials of
#              every N-th 8-key group of a tile's scores (N = 8, 4, 2) computed by a degree-3
#              polynomial on the FMA pipe instead of MUFU's ex2 (FlashAttention-4's trick).
#              Their outputs must pass.
#
# Writes benches/results/ws_producer_share.md or ws_exp2_poly.md; exits non-zero on any
# failure (for `producer`, but the modified builds' expected wrong outputs).
set -euo pipefail
OUTDIR=$(realpath -m "${1:?usage: ws_source_variants.sh OUTDIR producer|exp2-poly}")
EXPERIMENT=${2:?usage: ws_source_variants.sh OUTDIR producer|exp2-poly}
mkdir -p "$OUTDIR"
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
source benches/results_header.sh
declare -A CONFIG=([ws-c1-x2]="NUM_CONSUMERS=1 CTAS_PER_SM=2 TILE_N=128 NUM_STAGES=2"
                   [ws-c2-kv2]="NUM_CONSUMERS=2 KV_SPLIT=2 TILE_N=128 NUM_STAGES=4 RAW_STAGES=4"
                   [ws-c2-pp]="NUM_CONSUMERS=2 TILE_N=128 NUM_STAGES=3 PINGPONG=1")
case $EXPERIMENT in
  producer)  BUILDS=(shipped no-dequant no-convert); VARIANTS=(ws-c1-x2 ws-c2-kv2); SHAPES=mission,ragged
             RESULT=ws_producer_share; WRONG_OK=1 ;;
  exp2-poly) BUILDS=(shipped poly-8 poly-4 poly-2); VARIANTS=(ws-c1-x2 ws-c2-pp); SHAPES=mission,long,ragged
             RESULT=ws_exp2_poly; WRONG_OK=0 ;;
  *) echo "unknown experiment: $EXPERIMENT (producer or exp2-poly)"; exit 2 ;;
esac

# The patched sources, each named after its build.
python3 - "$OUTDIR" "${BUILDS[@]}" <<'PY'
import re, sys
out, builds = sys.argv[1], sys.argv[2:]
src = open("kernels/sdpa_fp8_ws.cu").read()
def patched(text, old, new):
    assert text.count(old) == 1, old
    return text.replace(old, new)
POLY = '''// 2^x for x <= 0 on the FMA and integer pipes: n = round(x) (the 1.5*2^23 trick leaves it in
// t's low bits), 2^(x - n) by a degree-3 polynomial (relative error <= 1.02e-4), n added to the
// exponent; x clamped at -126, so -inf gives 2^-126, which P's fp16 rounds to 0.
__device__ __forceinline__ float poly_exp2(float x) {
    x = fmaxf(x, -126.f);
    const float t = x + 12582912.f;
    const float f = x - (t - 12582912.f);
    const float p = fmaf(fmaf(fmaf(0.055008747f, f, 0.24221076f), f, 0.6932829f), f, 1.f);
    return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

__device__ __forceinline__ void softmax_tile('''
EXPS = '''            const float p0 = fast_exp2(fmaf(x[0], c, mneg[0])), p1 = fast_exp2(fmaf(x[1], c, mneg[0]));
            const float p2 = fast_exp2(fmaf(x[2], c, mneg[1])), p3 = fast_exp2(fmaf(x[3], c, mneg[1]));'''
def poly(every):
    text = patched(src, "__device__ __forceinline__ void softmax_tile(", POLY)
    return patched(text, EXPS, f'''            const bool poly = (2 * kb + hh) % {every} == 0;
            auto ex = [poly](float v) {{ return poly ? poly_exp2(v) : fast_exp2(v); }};
            const float p0 = ex(fmaf(x[0], c, mneg[0])), p1 = ex(fmaf(x[1], c, mneg[0]));
            const float p2 = ex(fmaf(x[2], c, mneg[1])), p3 = ex(fmaf(x[3], c, mneg[1]));''')
for b in builds:
    if b == "shipped":
        text = src
    elif b == "no-dequant":
        text = patched(src, "uint4 x = *reinterpret_cast<const uint4*>(raw + 16 * i);", "uint4 x = make_uint4(0u, 0u, 0u, 0u);")
    elif b == "no-convert":
        text = patched(src, "        convert_tile(raw, h, p, valid);\n        convert_tile(raw + RAW_TILE, h + H_TILE, p, valid);\n",
                       "        (void)raw; (void)h; (void)valid;\n")
    else:
        text = poly(int(re.fullmatch(r"poly-(\d)", b).group(1)))
    open(f"{out}/{b}.cu", "w").write(text)
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
      --cubin "$OUTDIR/$v.$b.cubin" --shapes "$SHAPES" --seeds 0 1 2 3 4 > "$OUTDIR/$v.$b.csv" 2>&1 || rc=$?
    # check_variants exits 1 on wrong outputs: expected only of the producer experiment's modified builds
    if [ $rc -ne 0 ] && { [ $WRONG_OK = 0 ] || [ $b = shipped ] || [ $rc -ne 1 ]; }; then
      echo "$v ($b): exit $rc"; tail -20 "$OUTDIR/$v.$b.csv"; exit 1
    fi
  done
done

{
  results_header "bash kernels/tools/ws_source_variants.sh OUTDIR $EXPERIMENT"
  echo
  python3 - "$OUTDIR" "$SHAPES" "$WRONG_OK" "${VARIANTS[@]}" -- "${BUILDS[@]}" <<'PY'
import csv, io, statistics, sys
out, shapes, wrong_ok = sys.argv[1], sys.argv[2].split(","), sys.argv[3] == "1"
sep = sys.argv.index("--")
variants, builds = sys.argv[4:sep], sys.argv[sep + 1:]
def times(path):
    text = open(path).read()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    assert rows and rows[0]["Metric Unit"] == "ns", path
    t = [float(r["Metric Value"].replace(",", "")) / 1000 for r in rows if r["Metric Name"] == "gpu__time_duration.sum"]
    assert len(t) == 5 * len(shapes), (path, len(t))  # 5 seeds per shape, shape by shape
    return {sh: t[5 * i:5 * i + 5] for i, sh in enumerate(shapes)}
res = {(v, b): times(f"{out}/{v}.{b}.csv") for v in variants for b in builds}
print("ncu `gpu__time_duration`, µs: the median of 5 launches (one per seed), min–max in brackets."
      + (" The builds other than `shipped` compute wrong outputs; only their time is read." if wrong_ok
         else " Every build's outputs passed tools/check_variants.py's checks.") + "\n")
print("| variant | shape | " + " | ".join(builds) + " |\n|---|---|" + "---:|" * len(builds))
for v in variants:
    for sh in shapes:
        cells = [f"{statistics.median(res[(v, b)][sh]):.2f} ({min(res[(v, b)][sh]):.2f}–{max(res[(v, b)][sh]):.2f})"
                 for b in builds]
        print(f"| `{v}` | {sh} | " + " | ".join(cells) + " |")
PY
} > "benches/results/$RESULT.md"
cat "benches/results/$RESULT.md"
