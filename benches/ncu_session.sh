#!/usr/bin/env bash
# What an ncu process spends before its first profiled launch ends, and whether a second
# process can spend it while the first profiles (issue 41). A probe (CUDA C, built here with
# nvcc) prints the time of each phase: its start, CUDA's (a context), optionally one profiled
# launch of an empty kernel, then five profiled launches of a ~0.1 ms kernel; the profile
# stage's ncu flags (time alone).
#   1. One process, RUNS times (default 3): each phase, and the same with the empty launch
#      first.
#   2. Process A profiles 200 launches, then stays 1.5 s before it exits, in runs 3 and 4
#      after one launch outside its window; process B starts 0.8 s after A, with the empty
#      launch: when B's empty launch ends against A's last profiled launch, A's launch after
#      the window and A's exit, and A's kernel time with and without B beside it.
#
#   bash benches/ncu_session.sh OUT_DIR [RUNS]
#
# Writes OUT_DIR/ncu_session.md and prints it; exits non-zero if a build, a run or a CSV fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results_header.sh"
out=$(realpath -m "$1"); runs=${2:-3}
mkdir -p "$out/no-sections"
header=$(cd "$here/.." && results_header "bash benches/ncu_session.sh OUT_DIR $runs")
cat > "$out/probe.cu" <<'CU'
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
static double now() { timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
__global__ void spin(long long cycles, int* out) {
  long long s = clock64();
  while (clock64() - s < cycles) {}
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}
__global__ void empty() {}
#define OK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(e)); return 1; } } while (0)
// probe LAUNCHES EMPTY(0|1) STAY_MS CALL_AFTER(0|1): phase times on stderr as "phase seconds".
int main(int argc, char** argv) {
  int launches = atoi(argv[1]), with_empty = atoi(argv[2]), stay_ms = atoi(argv[3]);
  int call_after = atoi(argv[4]);
  fprintf(stderr, "main %.3f\n", now());
  OK(cudaFree(0));
  fprintf(stderr, "context %.3f\n", now());
  if (with_empty) {
    cudaProfilerStart(); empty<<<1, 1>>>(); OK(cudaDeviceSynchronize()); cudaProfilerStop();
    fprintf(stderr, "empty %.3f\n", now());
  }
  int* out; OK(cudaMalloc(&out, 4096 * 4));
  spin<<<132, 128>>>(200000, out); OK(cudaDeviceSynchronize());
  fprintf(stderr, "warm %.3f\n", now());
  cudaProfilerStart();
  for (int i = 0; i < launches; i++) spin<<<132, 128>>>(200000, out);
  OK(cudaDeviceSynchronize());
  cudaProfilerStop();
  fprintf(stderr, "launches %.3f\n", now());
  if (call_after) {
    spin<<<1, 1>>>(1000, out); OK(cudaDeviceSynchronize());
    fprintf(stderr, "after %.3f\n", now());
  }
  struct timespec stay = {stay_ms / 1000, (stay_ms % 1000) * 1000000L};
  nanosleep(&stay, nullptr);
  return 0;
}
CU
nvcc -O2 -o "$out/probe" "$out/probe.cu"
ncu_flags=(--csv --page raw --section-folder "$out/no-sections" --metrics gpu__time_duration.sum
           --profile-from-start off --target-processes application-only --clock-control base
           --cache-control all)
ts() { date +%s.%N; }
# probe NAME LAUNCHES EMPTY STAY_MS: one process under ncu; its phases to OUT/NAME.phases.
probe() {
  local name=$1; shift
  echo "spawn $(ts)" > "$out/$name.phases"
  ncu "${ncu_flags[@]}" --log-file "$out/$name.csv" "$out/probe" "$@" 2>> "$out/$name.phases" > /dev/null
  echo "exit $(ts)" >> "$out/$name.phases"
  grep -q '^"[0-9]' "$out/$name.csv" || { echo "$name: no profiled launch in its CSV" >&2; exit 1; }
}
for ((k = 1; k <= runs; k++)); do
  probe "plain-$k" 5 0 0 0
  probe "empty-$k" 5 1 0 0
done
for k in 1 2 3 4; do
  after=$(( k > 2 ))
  probe "A-alone-$k" 200 0 1500 $after
  ( sleep 0.8; probe "B-$k" 5 1 0 0 ) &
  probe "A-beside-$k" 200 0 1500 $after
  wait $! || { echo "B-$k failed" >&2; exit 1; }
done
{
  echo "$header"
  python3 - "$out" "$runs" <<'PY'
import csv, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def phases(name):
    return {k: float(v) for k, v in (l.split() for l in open(f"{out}/{name}.phases") if len(l.split()) == 2)}
def kernel_us(name):
    rows = list(csv.DictReader(l for l in open(f"{out}/{name}.csv") if l.startswith('"')))
    return [float(r["gpu__time_duration.sum"].replace(",", "")) / 1000 for r in rows[1:] if r["Kernel Name"].startswith("spin")]
def cell(xs):
    return f"{statistics.median(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
print(f"Part 1: one process under ncu (the stage's time-alone flags), s, median of {runs} runs (each run's in brackets). `start`: ncu's start to the probe's `main`; `CUDA`: a context (`cudaFree(0)`); `empty launch`: one profiled launch of an empty kernel; `5 launches`: a warm-up launch outside the window, then 5 profiled launches of a ~0.1 ms kernel; `exit`: to ncu's exit.")
print()
print("| phase | plain | with the empty launch first |")
print("|---|---:|---:|")
steps = [("start", "spawn", "main"), ("CUDA", "main", "context"), ("empty launch", "context", "empty"), ("5 launches", None, "launches"), ("exit", "launches", "exit"), ("whole process", "spawn", "exit")]
for label, a, b in steps:
    cols = []
    for kind in ("plain", "empty"):
        xs = []
        for k in range(1, runs + 1):
            p = phases(f"{kind}-{k}")
            start = a or ("empty" if "empty" in p else "context")
            if start in p and b in p:
                xs.append(p[b] - p[start])
        cols.append(cell(xs) if xs else "–")
    print(f"| {label} | {cols[0]} | {cols[1]} |")
print()
print("Part 2: A profiles 200 launches and exits 1.5 s after its last (in runs 3 and 4 after one launch outside its window); B starts 0.8 s after A and makes its empty profiled launch, then its 5 launches. s, relative to the end of A's last profiled launch:")
print()
print("| run | A's launch after its window | A exits | B's CUDA ready | B's empty launch ends | B's 5 launches end | A's kernel, µs, median (min–max): alone | beside B |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for k in (1, 2, 3, 4):
    a, b = phases(f"A-beside-{k}"), phases(f"B-{k}")
    t = a["launches"]
    after = f"{a['after'] - t:+.2f}" if "after" in a else "none"
    alone, beside = kernel_us(f"A-alone-{k}"), kernel_us(f"A-beside-{k}")
    rng = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f}, n={len(xs)})"
    print(f"| {k} | {after} | {a['exit'] - t:+.2f} | {b['context'] - t:+.2f} | {b['empty'] - t:+.2f} | {b['launches'] - t:+.2f} | {rng(alone)} | {rng(beside)} |")
PY
} > "$out/ncu_session.md"
cat "$out/ncu_session.md"
