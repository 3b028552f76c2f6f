#!/usr/bin/env bash
# How long a Python process that has run PyTorch's SDPA on the GPU takes to end after its last
# call: under `ncu --profile-from-start off` (as the profile stage runs the baseline script)
# and without it. What the baseline script's `os._exit` at its end spares the stages that
# wait for it (kernels/baselines/torch_baselines.py).
#
#   bash benches/torch_teardown.sh OUT_DIR
#
# Each run: 20 warm-up calls, 5 calls in a profiler window, print the time, return from the
# script as a script normally ends; the wall clock is read again once the process has ended.
# Three runs under ncu, three without. Writes OUT_DIR/torch_teardown.md; exits non-zero if a
# run fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
out=$(realpath -m "$1"); mkdir -p "$out"
script=$(mktemp /tmp/torch-teardown.XXXXXX.py)
cat > "$script" <<'PY'
import time
import torch
import torch.nn.functional as F
q = torch.randn(2, 8, 512, 64, device="cuda", dtype=torch.float16)
for i in range(25):
    if i == 20:
        torch.cuda.cudart().cudaProfilerStart()
    F.scaled_dot_product_attention(q, q, q)
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(f"last call ended at {time.time():.6f}", flush=True)
PY
rows=()
run() { # LABEL COMMAND...
  local label=$1; shift
  local log; log=$(mktemp)
  "$@" python3 "$script" > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
  local ended; ended=$(date +%s.%N)
  local last; last=$(sed -n 's/^last call ended at //p' "$log")
  [ -n "$last" ] || { cat "$log" >&2; exit 1; }
  rows+=("| $label | $(python3 -c "print(f'{$ended - $last:.2f}')") |")
}
ncu_cmd=(ncu --metrics gpu__time_duration.sum --profile-from-start off --csv --page raw --log-file /dev/null)
for i in 1 2 3; do run "under ncu, run $i" "${ncu_cmd[@]}"; done
for i in 1 2 3; do run "alone, run $i" env; done
{
  results_header "bash benches/torch_teardown.sh OUT_DIR"
  echo "Seconds from the script's last SDPA call to the end of its process (torch $(python3 -c 'import torch; print(torch.__version__)')):"
  echo
  echo "| run | s |"
  echo "|---|---:|"
  printf '%s\n' "${rows[@]}"
} > "$out/torch_teardown.md"
rm -f "$script"
cat "$out/torch_teardown.md"
