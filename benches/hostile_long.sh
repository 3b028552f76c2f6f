#!/usr/bin/env bash
# A longer run of the hostile suite than CI gives it: fuzz each parser (pipeline loader, ncu
# CSV, ptxas report) for SECONDS seconds (default 120), then SIGKILL `repro` at random moments
# of KILLS runs (default 20). Exits non-zero if any of it fails; the log (command, inputs per
# parser, seeds, duration, date, machine) goes to benches/results/hostile_long_<date>.log.
# Usage: benches/hostile_long.sh [SECONDS] [KILLS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
secs=${1:-120}
kills=${2:-20}
mkdir -p benches/results
log=benches/results/hostile_long_$(date -u +%Y-%m-%d).log
cargo test --locked --no-run --test integration >/dev/null 2>&1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(uname -sm), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), debug build"
  echo "rustc: $(rustc --version)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo
  echo "\$ REPRO_FUZZ_CASES=1000000000 REPRO_FUZZ_SECONDS=$secs cargo test --locked --test integration fuzz:: -- --nocapture --test-threads 1"
  start=$(date +%s)
  REPRO_FUZZ_CASES=1000000000 REPRO_FUZZ_SECONDS=$secs \
    cargo test --locked --test integration fuzz:: -- --nocapture --test-threads 1 2>&1 |
    grep -E '^(test |fuzz |HANG)|panicked|smallest|test result' | sed 's/^test .* \.\.\. fuzz/fuzz/'
  echo "wall: $(( $(date +%s) - start )) s"
  echo
  echo "\$ REPRO_KILL_ITERATIONS=$kills cargo test --locked --test integration kill_random:: -- --nocapture"
  start=$(date +%s)
  REPRO_KILL_ITERATIONS=$kills cargo test --locked --test integration kill_random:: -- --nocapture 2>&1 |
    grep -E '^(REPRO_KILL|test )|panicked|test result'
  echo "wall: $(( $(date +%s) - start )) s"
} | tee "$log"
