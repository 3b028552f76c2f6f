#!/bin/bash
# `repro compare` on a GPU: the shipped variants against each other, and one against itself.
#
# Run from a project root whose cubins are built (`repro stage build`), on a machine with a
# GPU:
#     benches/compare_gpu.sh [OUT_DIR]     (REPRO_BIN=path/to/repro, default `repro`)
# For the mission shape it runs, each with 1000 interleaved pairs:
#   stage5-ws-p1 vs stage2-baseline, stage5-ws-p2 vs stage5-ws-p1, stage5-ws-p1 vs itself
#   (an A/A check: the interval must contain 1 or the ratio be within 1%), and
#   tune-top1 vs stage5-ws-p1 when .repro/cubins/tune-top1.cubin exists;
# prints each comparison's figures and sentence, writes each as JSON to OUT_DIR (default a
# temporary folder), and fails when a comparison fails, a kernel is incorrect, or the A/A
# check does not hold.
set -euo pipefail
REPRO=${REPRO_BIN:-repro}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), $("$REPRO" --version), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
cat > "$out/show.py" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
print(f"  {c['device']} (GPU {c['device_index']}), {c['ratio']['pairs']} pairs, L2 {c['l2']}")
for s in (c["a"], c["b"]):
    print(f"  {s['name']}: p50 {s['p50_us']:.3f} us, min {s['min_us']:.3f}, p90 {s['p90_us']:.3f}, correct {s['correct']}")
print(f"  {c['sentence']}")
if len(sys.argv) > 2:  # the A/A check
    r = c["ratio"]
    ok = r["ci95_low"] <= 1.0 <= r["ci95_high"] or abs(r["ratio"] - 1.0) < 0.01
    print(f"A/A: ratio {r['ratio']:.4f}, 95% CI {r['ci95_low']:.4f}-{r['ci95_high']:.4f}: {'ok' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)
PY
compare() {
  local name=$1
  shift
  echo "\$ repro compare $* --shape mission --json > $out/$name.json"
  "$REPRO" compare "$@" --shape mission --json > "$out/$name.json"
  python3 "$out/show.py" "$out/$name.json"
}
compare ws-p1_vs_baseline stage5-ws-p1 stage2-baseline
compare ws-p2_vs_ws-p1 stage5-ws-p2 stage5-ws-p1
compare ws-p1_vs_itself stage5-ws-p1 stage5-ws-p1
if [ -f .repro/cubins/tune-top1.cubin ]; then
  compare top1_vs_ws-p1 .repro/cubins/tune-top1.cubin stage5-ws-p1
fi
python3 "$out/show.py" "$out/ws-p1_vs_itself.json" aa
echo "JSON: $out"
