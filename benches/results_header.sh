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
results_header() {
  echo "- command: \`$1\`"
  echo "- device: $(results_device)"
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(results_commit)"
  echo
}
