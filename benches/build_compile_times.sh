#!/usr/bin/env bash
# Compile time of each variant with the exact nvcc command the build stage ran (the argv in
# artifacts/build/<variant>.json, with -arch and -o replaced), one nvcc at a time, for sm_89
# and sm_90, plus the reference kernel. Median of RUNS runs after one warm-up.
# Usage: benches/build_compile_times.sh [RUNS]   (project root; needs nvcc on PATH, python3)
# Writes benches/results/compile_times.md. Exit 1 if any compile fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/results_header.sh
runs=${1:-5}
command -v nvcc >/dev/null || { echo "nvcc not found on PATH" >&2; exit 1; }
ls artifacts/build/*.json >/dev/null 2>&1 || { echo "no artifacts/build/*.json: run the build stage first" >&2; exit 1; }
out=benches/results/compile_times.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  results_header "benches/build_compile_times.sh $runs"
  echo "nvcc: $(nvcc --version | grep -m1 release). Wall time of one nvcc (one at a time), median of $runs runs after 1 warm-up."
  echo
  python3 - "$runs" "$tmp" <<'PY'
import glob, json, statistics, subprocess, sys, time
runs, tmp = int(sys.argv[1]), sys.argv[2]
jobs = []
for path in sorted(glob.glob("artifacts/build/*.json")):
    rec = json.load(open(path))
    argv = [a for a in rec["command"]]
    argv[0] = "nvcc"
    jobs.append((rec["variant"], argv))
jobs.append(("reference", ["nvcc", "-cubin", "-O3", "-arch=sm_90", "-Xptxas", "-v", "-o", "x", "kernels/reference.cu"]))
print("| variant | sm_89 median [s] | sm_89 min–max | sm_90 median [s] | sm_90 min–max |")
print("|---|---:|---:|---:|---:|")
failed = 0
for name, argv in jobs:
    cells = []
    for arch in ("sm_89", "sm_90"):
        cmd = [("-arch=" + arch if a.startswith("-arch=") else a) for a in argv]
        i = cmd.index("-o")
        cmd[i + 1] = f"{tmp}/{name}-{arch}.cubin"
        times = []
        for k in range(runs + 1):
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            if r.returncode != 0:
                print(f"{name} {arch}: nvcc failed:\n{r.stderr}", file=sys.stderr)
                failed += 1
                break
            if k:
                times.append(dt)
        if times:
            cells += [f"{statistics.median(times):.3f}", f"{min(times):.3f}–{max(times):.3f}"]
        else:
            cells += ["FAILED", ""]
    print(f"| {name} | " + " | ".join(cells) + " |")
sys.exit(1 if failed else 0)
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
