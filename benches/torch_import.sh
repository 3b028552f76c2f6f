#!/usr/bin/env bash
# What `import torch` costs a baseline process with and without Python's bytecode caches
# (issue 41): the baseline script imports torch in every process that runs it (the
# baselines stage, and each pass of the profile stage), and its import is on the profile
# stage's path when it outlasts the kernel targets' pass. `PYTHONPYCACHEPREFIX` points each
# way at its own scratch folder, so the site-packages on this machine are neither read nor
# changed: "compiled each time" is a folder never written (`-B`), "cached" one written by a
# first import not counted. RUNS (default 5) imports of each way, alternating.
#
#   bash benches/torch_import.sh OUT_DIR [RUNS]
#
# Also counts how many of torch's modules have bytecode in their own `__pycache__` here
# (what a plain import would read). Prints the result file; exits non-zero if an import fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
out=$(realpath -m "$1"); runs=${2:-5}
mkdir -p "$out"
never="$out/never-written"; cached="$out/cached"
rm -rf "$never" "$cached"; mkdir -p "$never" "$cached"
import='import time; t = time.time(); import numpy, torch, torch.nn.functional; print(round(1000 * (time.time() - t)))'
PYTHONPYCACHEPREFIX="$cached" python3 -c "$import" > /dev/null
rm -f "$out"/*.ms
for ((k = 1; k <= runs; k++)); do
  PYTHONPYCACHEPREFIX="$never" python3 -B -c "$import" >> "$out/compiled.ms"
  PYTHONPYCACHEPREFIX="$cached" python3 -c "$import" >> "$out/cached.ms"
done
[ -z "$(find "$never" -name '*.pyc' -print -quit)" ] || { echo "bytecode was written to $never" >&2; exit 1; }
{
results_header "bash benches/torch_import.sh OUT_DIR $runs"
python3 - "$out" "$runs" <<'PY'
import os, statistics, sys, sysconfig
out, runs = sys.argv[1], int(sys.argv[2])
ms = {n: [int(x) for x in open(f"{out}/{n}.ms")] for n in ("compiled", "cached")}
import importlib.util, importlib.machinery
spec = importlib.util.find_spec("torch")
root = os.path.dirname(spec.origin)
sources = cached_here = 0
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".py"):
            sources += 1
            if os.path.exists(importlib.util.cache_from_source(os.path.join(d, f))):
                cached_here += 1
print(f"`import numpy, torch, torch.nn.functional` in a fresh `python3`, {runs} runs of each way, "
      "alternating; ms: median (min–max).")
print()
print("| bytecode | import, ms |")
print("|---|---:|")
for name, label in (("compiled", "none: every module compiled from its source (`-B`, an empty cache folder)"),
                    ("cached", "cached by an earlier import (a cache folder written once)")):
    v = ms[name]
    print(f"| {label} | {statistics.median(v):.0f} ({min(v)}–{max(v)}) |")
print()
print(f"Caching saves {statistics.median(ms['compiled']) - statistics.median(ms['cached']):.0f} ms of each import. "
      f"On this machine {cached_here} of torch's {sources} modules have bytecode in their own `__pycache__` "
      f"({root}).")
PY
} > "$out/torch_import.md"
cat "$out/torch_import.md"
