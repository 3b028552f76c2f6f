#!/bin/sh
# Compile time of each shipped variant with the exact nvcc command the build stage runs
# (`nvcc -cubin -O3 -arch=ARCH -Xptxas -v -D...`), one nvcc at a time, for sm_89 and sm_90.
# Usage: benches/build_compile_times.sh [RUNS]   (run from the project root; needs nvcc, hyperfine)
set -eu
runs=${1:-3}
out=$(mktemp -d)
for arch in sm_89 sm_90; do
  hyperfine --runs "$runs" --warmup 1 --style basic --export-markdown "$out/$arch.md" \
    -n "stage2-baseline $arch" "nvcc -cubin -O3 -arch=$arch -Xptxas -v -DUSE_CP_ASYNC=1 -DUSE_WARP_SPECIALIZATION=0 -DUSE_WMMA_PV=1 -o $out/a.cubin kernels/sdpa_fp8.cu" \
    -n "stage5-ws-p1 $arch" "nvcc -cubin -O3 -arch=$arch -Xptxas -v -DNUM_PRODUCER_WARPS=1 -DUSE_CP_ASYNC=1 -DUSE_WARP_SPECIALIZATION=1 -DUSE_WMMA_PV=1 -o $out/b.cubin kernels/sdpa_fp8.cu" \
    -n "stage5-ws-p2 $arch" "nvcc -cubin -O3 -arch=$arch -Xptxas -v -DNUM_PRODUCER_WARPS=2 -DUSE_CP_ASYNC=1 -DUSE_WARP_SPECIALIZATION=1 -DUSE_WMMA_PV=1 -o $out/c.cubin kernels/sdpa_fp8.cu" \
    -n "reference $arch" "nvcc -cubin -O3 -arch=$arch -Xptxas -v -o $out/r.cubin kernels/reference.cu"
  cat "$out/$arch.md"
done
rm -rf "$out"
