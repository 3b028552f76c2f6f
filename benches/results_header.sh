#!/usr/bin/env bash
# Sourced by the bench scripts: `results_header "COMMAND"` prints the header every file under
# benches/results/ starts with (the command, the device, the date and the git commit), so a
# figure quoted in the docs can always be traced to what produced it.
#   REPRO_COMMIT  the commit to name instead of asking git: a copy of the tree sent to a GPU
#                 machine may carry no .git, or a stale one
mkdir -p "$(dirname "${BASH_SOURCE[0]}")/results"
results_device() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
      | awk -F', ' '{printf "%s%s (driver %s)", (NR > 1 ? "; " : ""), $1, $2}'
    echo ", $(nproc) CPU cores"
  else
    echo "no GPU; $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  fi
}
results_commit() {
  local c
  if [ -n "${REPRO_COMMIT:-}" ]; then
    echo "$REPRO_COMMIT"
  elif c=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
      c="$c (with uncommitted changes)"
    fi
    echo "$c"
  else
    echo "unknown (no .git here; set REPRO_COMMIT)"
  fi
}
# A copy of the folder TREE in /tmp/NAME.XXXXXX, made a git repository of one commit (as a
# clone is) unless it is one already; prints the copy's path.
tree_copy() { # tree_copy TREE NAME
  local work
  work=$(mktemp -d "/tmp/$2.XXXXXX")
  cp -a "$1/." "$work/"
  if [ ! -d "$work/.git" ] && command -v git >/dev/null; then
    (cd "$work" && git init -q && git add -A \
      && git -c user.name=bench -c user.email=bench@localhost commit -qm "$2")
  fi
  echo "$work"
}

results_header() {
  echo "- command: \`$1\`"
  echo "- device: $(results_device)"
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(results_commit)"
  echo
}
# For the scripts run as `bash benches/SCRIPT REPRO_BINARY PROJECT OUT_DIR`: sets `repro`,
# `proj` and `out` (created) to absolute paths and `header` to the results header naming the
# script, then enters PROJECT.
worker_bench_args() {
  repro=$(realpath "$1"); proj=$(realpath "$2"); out=$(realpath -m "$3")
  mkdir -p "$out"
  header=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." \
    && results_header "bash benches/$(basename "$0") REPRO_BINARY PROJECT OUT_DIR")
  cd "$proj"
}
# The GPU worker's request lines (`repro exec --worker`) for each target ("VARIANT WORKLOAD
# SHAPE"), REPEAT times in a row, numbered from 1: the check, 20 warm-up launches, then 5
# launches in ncu's profiler window, on seed 0 with a warm L2.
worker_requests() {
  local repeat=$1 id=0 target v w s k
  shift
  for target in "$@"; do
    read -r v w s <<< "$target"
    for ((k = 0; k < repeat; k++)); do
      id=$((id + 1))
      printf '{"id":%d,"run":{"target":{"variant":"%s"},"workload":"%s","shape":"%s","inputs":null,"precision":null,"seed":0,"warmup":20,"iters":100,"l2":"warm","method":"graph","timing":false,"profile":5}}\n' "$id" "$v" "$w" "$s"
    done
  done
}
