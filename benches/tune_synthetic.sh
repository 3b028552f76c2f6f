#!/usr/bin/env bash
# The autotuner's trials-to-target on the synthetic landscapes of tests/tune_search.rs
# against random sampling, and the budget-40 gap on the model of benches/tune/pipeline.yaml.
# The objectives are formulas, so these are deterministic counts, not timings: any machine,
# any load, debug or release gives the same table.
# Usage: benches/tune_synthetic.sh [--release]   (project root; needs cargo)
# Writes benches/results/tune_synthetic.md; exits non-zero if a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/results_header.sh
profile=()
[ "${1:-}" = --release ] && profile=(--release)
out=benches/results/tune_synthetic.md
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --locked "${profile[@]}" --test tune_search tune_synthetic -- --nocapture --test-threads 1 > "$log" 2>&1 \
  || { cat "$log"; exit 1; }
{
  results_header "benches/tune_synthetic.sh${1:+ $1} (cargo test --test tune_search tune_synthetic -- --nocapture --test-threads 1)"
  echo "Population 8, elite 3, seeds 0–9. \"Trials to target\" counts every trial, failed ones included, until one is within 2% of the landscape's optimum; a run that never gets there counts as budget + 1. Random sampling draws valid configurations without replacement (seeded)."
  echo
  # libtest prints "test NAME ... " before a test's own output: keep what follows it.
  python3 - "$log" <<'PY'
import sys
rows, header, gap = [], [], ""
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if "|" in line and line.rstrip().endswith("|"):
        cell = line[line.index("|"):]
        if cell.startswith("| landscape") or cell.startswith("|---"):
            if cell not in header:
                header.append(cell)
        elif cell not in rows:
            rows.append(cell)
    elif "kernel space (189), budget 40" in line:
        gap = line[line.index("kernel space"):]
print("\n".join(header + sorted(rows)))
print()
print(gap)
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
