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
# exhaustive.csv, topk.json, comparison.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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

"$repro" --quiet stage build > "$out/build.log" 2>&1

t0=$(date +%s.%N)
"$repro" tune > "$out/search.log" 2>&1 || echo "repro tune exited $?" >> "$out/search.log"
t1=$(date +%s.%N)
"$repro" tune --exhaustive > "$out/exhaustive.log" 2>&1 || echo "repro tune --exhaustive exited $?" >> "$out/exhaustive.log"
t2=$(date +%s.%N)
{
    echo "search wall s: $(awk "BEGIN{print $t1 - $t0}")"
    echo "exhaustive (configurations the search had not evaluated) wall s: $(awk "BEGIN{print $t2 - $t1}")"
} > "$out/wall.txt"
cp artifacts/tune/tune_log.csv artifacts/tune/topk.json "$out/"
cp artifacts/tune/exhaustive.csv artifacts/tune/comparison.json "$out/" 2>/dev/null || true
cat "$out/wall.txt"
cat "$out/comparison.json" 2>/dev/null || tail -n 20 "$out/exhaustive.log"
