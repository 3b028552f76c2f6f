// RMSNorm over fp16 rows: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * weight[c],
// fp16 in and out, fp32 arithmetic. The second workload of repro (docs/guide/workloads.md);
// its declaration (arguments, launch geometry, reference, gates) is the `rmsnorm` workload of
// the project's pipeline.yaml.
//
// ABI:
//   extern "C" __global__ void rmsnorm_fwd(const __half* x,       // [rows, hidden]
//                                          const __half* weight,  // [hidden]
//                                          __half* y,             // [rows, hidden]
//                                          int rows, int hidden, float eps);
//   grid  (ceil(rows / ROWS_PER_BLOCK)), block (THREADS_PER_ROW * ROWS_PER_BLOCK), no dynamic
//   shared memory.
//
// Compile-time toggles (the tune space is the `evo-tune-rmsnorm` stage of pipeline.yaml):
//   THREADS_PER_ROW  threads that share one row: a power of two, 32..1024. 32 is the
//                    warp-per-row path: the row's sum is a warp shuffle, with no shared
//                    memory and no barrier.
//   ROWS_PER_BLOCK   rows per block (THREADS_PER_ROW * ROWS_PER_BLOCK <= 1024).
//   VEC              halves per load and store: 1, 2, 4 or 8 (8 = 16-byte accesses). Rows
//                    whose length is not a multiple of VEC take the scalar path.
//   CACHED_VECS      vectors per thread kept in registers between the sum and the scaling
//                    pass (0: read x twice; the rest of a longer row is read twice too).

#include <cuda_fp16.h>

#ifndef THREADS_PER_ROW
#define THREADS_PER_ROW 128
#endif
#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 1
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef CACHED_VECS
#define CACHED_VECS 2
#endif

#if THREADS_PER_ROW < 32 || THREADS_PER_ROW > 1024 || (THREADS_PER_ROW & (THREADS_PER_ROW - 1)) != 0
#error "rmsnorm: THREADS_PER_ROW must be a power of two from 32 to 1024"
#endif
#if ROWS_PER_BLOCK < 1 || THREADS_PER_ROW * ROWS_PER_BLOCK > 1024
#error "rmsnorm: ROWS_PER_BLOCK must be at least 1, with THREADS_PER_ROW * ROWS_PER_BLOCK <= 1024"
#endif
#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "rmsnorm: VEC must be 1, 2, 4 or 8"
#endif
#if CACHED_VECS < 0 || CACHED_VECS > 16
#error "rmsnorm: CACHED_VECS must be from 0 to 16"
#endif

constexpr int kBlockThreads = THREADS_PER_ROW * ROWS_PER_BLOCK;
constexpr int kWarpsPerRow = THREADS_PER_ROW / 32;
constexpr int kCacheSlots = CACHED_VECS > 0 ? CACHED_VECS : 1;

// VEC halves loaded or stored as one access.
struct alignas(2 * VEC) Halves {
    __half h[VEC];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

// The sum of `v` over the THREADS_PER_ROW threads of this thread's row. Every thread of the
// block must call it (it may hold a barrier).
__device__ __forceinline__ float row_sum(float v, int row_in_block, int lane_in_row) {
    v = warp_sum(v);
#if THREADS_PER_ROW > 32
    __shared__ float partial[ROWS_PER_BLOCK][kWarpsPerRow];
    if (lane_in_row % 32 == 0) {
        partial[row_in_block][lane_in_row / 32] = v;
    }
    __syncthreads();
    v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarpsPerRow; ++w) {
        v += partial[row_in_block][w];
    }
#endif
    return v;
}

// At least one block per SM: ptxas may then give a thread up to 65536 / kBlockThreads
// registers (without the 1, it capped a 1024-thread block at 32 on sm_90a, and spilled).
extern "C" __global__ void __launch_bounds__(kBlockThreads, 1)
rmsnorm_fwd(const __half* __restrict__ x, const __half* __restrict__ weight,
            __half* __restrict__ y, int rows, int hidden, float eps) {
    const int lane_in_row = threadIdx.x % THREADS_PER_ROW;
    const int row_in_block = threadIdx.x / THREADS_PER_ROW;
    const int row = blockIdx.x * ROWS_PER_BLOCK + row_in_block;
    // Threads past the last row still take part in the row sum's barrier.
    const bool active = row < rows;
    const __half* xr = x + static_cast<size_t>(active ? row : 0) * hidden;
    __half* yr = y + static_cast<size_t>(active ? row : 0) * hidden;
    // Row starts stay VEC-aligned when the length is a multiple of VEC (buffers come from
    // cudaMalloc, 256-byte aligned).
    const bool vectorized = hidden % VEC == 0;
    const int vecs = vectorized ? hidden / VEC : 0;
    const Halves* xv = reinterpret_cast<const Halves*>(xr);

    float cache[kCacheSlots][VEC];
    float sum = 0.0f;
    if (active && vectorized) {
#pragma unroll
        for (int k = 0; k < CACHED_VECS; ++k) {
            const int v = lane_in_row + k * THREADS_PER_ROW;
            if (v < vecs) {
                const Halves h = xv[v];
#pragma unroll
                for (int j = 0; j < VEC; ++j) {
                    cache[k][j] = __half2float(h.h[j]);
                    sum += cache[k][j] * cache[k][j];
                }
            }
        }
        for (int v = lane_in_row + CACHED_VECS * THREADS_PER_ROW; v < vecs; v += THREADS_PER_ROW) {
            const Halves h = xv[v];
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                const float f = __half2float(h.h[j]);
                sum += f * f;
            }
        }
    } else if (active) {
        for (int i = lane_in_row; i < hidden; i += THREADS_PER_ROW) {
            const float f = __half2float(xr[i]);
            sum += f * f;
        }
    }
    sum = row_sum(sum, row_in_block, lane_in_row);
    if (!active) {
        return;
    }
    const float inv_rms = rsqrtf(sum / static_cast<float>(hidden) + eps);

    if (vectorized) {
        const Halves* wv = reinterpret_cast<const Halves*>(weight);
        Halves* yv = reinterpret_cast<Halves*>(yr);
#pragma unroll
        for (int k = 0; k < CACHED_VECS; ++k) {
            const int v = lane_in_row + k * THREADS_PER_ROW;
            if (v < vecs) {
                const Halves w = wv[v];
                Halves out;
#pragma unroll
                for (int j = 0; j < VEC; ++j) {
                    out.h[j] = __float2half(cache[k][j] * inv_rms * __half2float(w.h[j]));
                }
                yv[v] = out;
            }
        }
        for (int v = lane_in_row + CACHED_VECS * THREADS_PER_ROW; v < vecs; v += THREADS_PER_ROW) {
            const Halves h = xv[v];
            const Halves w = wv[v];
            Halves out;
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                out.h[j] = __float2half(__half2float(h.h[j]) * inv_rms * __half2float(w.h[j]));
            }
            yv[v] = out;
        }
    } else {
        for (int i = lane_in_row; i < hidden; i += THREADS_PER_ROW) {
            yr[i] = __float2half(__half2float(xr[i]) * inv_rms * __half2float(weight[i]));
        }
    }
}
