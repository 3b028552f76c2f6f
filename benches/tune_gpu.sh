#!/usr/bin/env bash
# The real tune against --exhaustive on one GPU machine (run where there is no Rust: the
# repro binary is built elsewhere and copied in).
#
#   benches/tune_gpu.sh REPRO_BINARY KERNELS_DIR OUT_DIR [PIPELINE_YAML]
#
# Makes a project in $TUNE_PROJECT (default /tmp/repro-tune-project; KERNELS_DIR copied to
# kernels/, PIPELINE_YAML — default benches/tune/pipeline.yaml — as pipeline.yaml; an
# existing one keeps its .repro/, so a call cut short resumes from the tune memo on the next
# call to a still-warm machine), builds, runs `repro tune` (the search,
# timed), then `repro tune --exhaustive` (the rest of the space; the search's trials come
# from the memo, so every configuration is measured once and both sides compare the same
# measurements), sampling every GPU's utilization meanwhile. Leaves in OUT_DIR: gpus.csv,
# gpu_util.csv, search.log, exhaustive.log, wall.txt and the artifacts tune_log.csv,
# exhaustive.csv, topk.json, comparison.json; and benches/results/tune_vs_exhaustive.md (the
# comparison with a header naming the command, device, date and commit). Exit 1 when the
# build, the search or the sweep fails (each still runs and is reported).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
results=$here/results/tune_vs_exhaustive.md
header=$(cd "$here/.." && results_header "bash benches/tune_gpu.sh REPRO_BINARY kernels OUT_DIR ${4:-}")
repro=$(realpath "$1")
kernels=$(realpath "$2")
out=$(realpath -m "$3")
pipeline=$(realpath "${4:-$here/tune/pipeline.yaml}")
mkdir -p "$out"
proj=${TUNE_PROJECT:-/tmp/repro-tune-project}
mkdir -p "$proj"
rm -rf "$proj/kernels"
cp -r "$kernels" "$proj/kernels"
cp "$pipeline" "$proj/pipeline.yaml"
cd "$proj"

nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$out/gpus.csv"
nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader -lms 500 \
    > "$out/gpu_util.csv" &
smi=$!
trap 'kill $smi 2>/dev/null || true' EXIT

failures=0
"$repro" --quiet stage build > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log" >&2; failures=$((failures + 1)); }

t0=$(date +%s.%N)
search_rc=0
"$repro" tune > "$out/search.log" 2>&1 || search_rc=$?
t1=$(date +%s.%N)
sweep_rc=0
"$repro" tune --exhaustive > "$out/exhaustive.log" 2>&1 || sweep_rc=$?
t2=$(date +%s.%N)
[ "$search_rc" -eq 0 ] || { echo "repro tune exited $search_rc (see $out/search.log)" >&2; failures=$((failures + 1)); }
[ "$sweep_rc" -eq 0 ] || { echo "repro tune --exhaustive exited $sweep_rc (see $out/exhaustive.log)" >&2; failures=$((failures + 1)); }
{
    echo "search wall s: $(awk "BEGIN{print $t1 - $t0}")"
    echo "exhaustive (configurations the search had not evaluated) wall s: $(awk "BEGIN{print $t2 - $t1}")"
} > "$out/wall.txt"
cp artifacts/tune/tune_log.csv artifacts/tune/topk.json "$out/"
cp artifacts/tune/exhaustive.csv artifacts/tune/comparison.json "$out/" 2>/dev/null || true
cat "$out/wall.txt"
if [ -f "$out/comparison.json" ]; then
  {
    echo "$header"
    echo
    python3 - "$out/comparison.json" "$out/wall.txt" "$out/gpu_util.csv" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
wall = dict(l.rsplit(": ", 1) for l in open(sys.argv[2]).read().splitlines())
search_s = float(wall["search wall s"]); sweep_s = float(wall["exhaustive (configurations the search had not evaluated) wall s"])
cfg = lambda d: " ".join(f"{k}={v}" for k, v in sorted((d or {}).items()))
f = lambda x, n=2: "n/a" if x is None else f"{x:.{n}f}"
print(f"Space: {c['space']} configurations; budget {c['budget']}. Trials are timed on the pipeline's primary shape.")
print()
print("| | trials | wall | best p50 (µs) | best configuration |")
print("|---|---:|---:|---:|---|")
print(f"| `repro tune` | {c['search_trials']} | {search_s:.1f} s | {f(c['search_best_p50_us'])} | `{cfg(c['search_best_config'])}` |")
print(f"| `repro tune --exhaustive` | {c['exhaustive_trials']} | {search_s:.1f} s + {sweep_s:.1f} s | {f(c['exhaustive_best_p50_us'])} | `{cfg(c['exhaustive_best_config'])}` |")
print()
print(f"Gap (search best / exhaustive best − 1): {f(c['gap_pct'])}%; first search trial within 2% of the exhaustive best: {c['search_trials_to_within_2pct'] if c['search_trials_to_within_2pct'] is not None else 'never'}.")
busy = {}
for line in open(sys.argv[3]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 3 and parts[2].endswith("%"):
        busy.setdefault(parts[1], []).append(int(parts[2].rstrip(" %")) > 0)
if busy:
    print("GPU utilization above zero (nvidia-smi every 0.5 s): " + ", ".join(f"GPU {g} in {sum(v)} of {len(v)} samples" for g, v in sorted(busy.items())) + ".")
PY
  } > "$results.tmp" && mv "$results.tmp" "$results"
  cat "$results"
else
  echo "no comparison.json: see $out/exhaustive.log" >&2
  tail -n 20 "$out/exhaustive.log"
  failures=$((failures + 1))
fi
exit $(( failures > 0 ))
