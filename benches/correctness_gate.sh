#!/usr/bin/env bash
# The correctness gate on a GPU (docs/guide/correctness.md): with the default thresholds of
# pipeline.yaml every shipped variant passes every (shape, input recipe, seed), and every
# planted bug of tests/fixtures/cuda/planted.cu fails at least one. Writes OUT/gate.tsv
# (every measurement) and OUT/gate.log; exits non-zero when any assertion fails.
#
#   benches/correctness_gate.sh OUT                 # builds and runs the test with cargo
#   benches/correctness_gate.sh OUT TEST_BINARY     # a prebuilt tests/gpu_correctness_gate
#                                                   # binary (set REPRO_BIN to a repro binary)
set -euo pipefail
out=${1:?usage: benches/correctness_gate.sh OUT [TEST_BINARY]}
binary=${2:-}
mkdir -p "$out"
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
export REPRO_GPU_TESTS=1 REPRO_GATE_TABLE="$out/gate.tsv"
if [[ -z "$binary" ]]; then
    cargo test --release --locked --test gpu_correctness_gate -- --nocapture --test-threads 1 \
        2>&1 | tee "$out/gate.log"
else
    export REPRO_SOURCE_ROOT="${REPRO_SOURCE_ROOT:-$PWD}"
    "$binary" --nocapture --test-threads 1 2>&1 | tee "$out/gate.log"
fi
