//! sdpa_fp8_mma.cu — register-resident SDPA forward (non-causal) for fp16 Q and FP8 E4M3 K/V,
//! FlashAttention-2 style, on `mma.sync.aligned.m16n8k16` (fp16 in, fp32 accumulate).
//!
//! Same operation, ABI, entry name (`sdpa_fp8_fwd`) and launch-geometry globals as
//! sdpa_fp8.cu (see kernels/README.md), so the harness, the tune stage and the profile stage
//! treat it as one more kernel.  What differs is the design:
//!
//!  * Each warp owns 16 query rows.  Its Q fragments are loaded once, straight from global
//!    memory into registers; S = Q·Kᵀ stays in fp32 registers; the online softmax runs on those
//!    registers (row max / sum across the 4 threads of a quad with __shfl_xor 1, 2); P is
//!    rounded to fp16 in registers and used directly as the A operand of P·V (the m16n8 C
//!    fragments of n-tiles 2k and 2k+1 are exactly the m16k16 A fragment of k-block k).
//!    Nothing but the raw K/V bytes goes through shared memory.
//!  * K/V tiles arrive as raw e4m3 bytes through a NUM_STAGES-deep ring of 16-byte cp.async
//!    copies into an XOR-swizzled shared tile (conflict-free for the reads below); the load of
//!    tile j+NUM_STAGES-1 is in flight while tile j is computed; one __syncthreads per tile.
//!  * Dequantisation happens in registers, after a plain shared load: `cvt.rn.f16x2.e4m3x2`
//!    (exact; sm_89+), 4 bytes at a time.  No ldmatrix: 8-bit data cannot be transposed by it, and the layouts
//!    below make every thread's bytes contiguous instead:
//!      - the head dimension is permuted identically in Q and K (a dot product does not care),
//!        so the 16 K bytes a thread needs for one 8-key n-tile are one 16-byte shared load;
//!      - the output columns are permuted in V's B fragments (column d = (D/8)*n + t of the
//!        n-tile t), so the V bytes a thread needs for a k-block are (D/8)-byte runs of 4 rows,
//!        transposed in registers with `prmt`, and each thread ends up owning 2*(D/8)
//!        contiguous output columns of its two rows (two 16-byte stores per row for D = 64).
//!  * k_scale is folded into the softmax scale, v_scale into the final 1/l (both are per head,
//!    so this is exact); scores are kept in log2 units (exp2).
//!  * KV_SPLIT = 2 splits every K/V tile between two warp groups that each run their own online
//!    softmax over the same query rows; the groups merge (m, l, O) through shared memory at the
//!    end.  Twice the warps per query tile: more latency hiding when the grid is small.
//!
//! Requires sm_89 or newer (the e4m3 convert instruction).

#include <cuda_fp16.h>
#include <stdint.h>

// ----------------------------------------------------------------------------------------
// Compile-time configuration (every knob is a -D define with a safe default).
// ----------------------------------------------------------------------------------------
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef TILE_M
#define TILE_M 64
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef KV_SPLIT
#define KV_SPLIT 1
#endif
#ifndef NUM_STAGES
#define NUM_STAGES 2
#endif
// Each warp owns 16 query rows of one KV_SPLIT group.
#ifndef NUM_WARPS
#define NUM_WARPS ((TILE_M / 16) * KV_SPLIT)
#endif
// Per-thread register cap (__maxnreg__); 0 = no cap beyond __launch_bounds__(block threads).
#ifndef MAX_REGS
#define MAX_REGS 128
#endif

#if (HEAD_DIM != 64) && (HEAD_DIM != 128)
#error "sdpa_fp8_mma: HEAD_DIM must be 64 or 128"
#endif
#if (TILE_M != 16) && (TILE_M != 32) && (TILE_M != 64) && (TILE_M != 128)
#error "sdpa_fp8_mma: TILE_M must be one of 16, 32, 64, 128 (16 query rows per warp)"
#endif
#if (TILE_N != 16) && (TILE_N != 32) && (TILE_N != 64) && (TILE_N != 128)
#error "sdpa_fp8_mma: TILE_N must be one of 16, 32, 64, 128"
#endif
#if (KV_SPLIT != 1) && (KV_SPLIT != 2)
#error "sdpa_fp8_mma: KV_SPLIT must be 1 or 2"
#endif
#if (NUM_STAGES != 2) && (NUM_STAGES != 3) && (NUM_STAGES != 4)
#error "sdpa_fp8_mma: NUM_STAGES must be 2, 3 or 4"
#endif
#if NUM_WARPS != ((TILE_M / 16) * KV_SPLIT)
#error "sdpa_fp8_mma: NUM_WARPS must equal (TILE_M / 16) * KV_SPLIT (each warp owns 16 query rows of one KV group)"
#endif
#if (MAX_REGS != 0) && ((MAX_REGS < 64) || (MAX_REGS > 255))
#error "sdpa_fp8_mma: MAX_REGS must be 0 (no cap) or between 64 and 255"
#endif

// ---- shared memory (bytes) ---------------------------------------------------------------
// Ring: NUM_STAGES x {K, V} raw e4m3 tiles of KV_SPLIT*TILE_N rows.  With KV_SPLIT = 2 the
// ring is reused at the end for the merge: per row of the split-off group, D fp32 partial
// outputs plus m and l.
#define MMA_SMEM_RING (NUM_STAGES * 2 * KV_SPLIT * TILE_N * HEAD_DIM)
#define MMA_SMEM_MERGE ((KV_SPLIT - 1) * TILE_M * (HEAD_DIM + 2) * 4)
#define MMA_SMEM_BYTES (MMA_SMEM_RING > MMA_SMEM_MERGE ? MMA_SMEM_RING : MMA_SMEM_MERGE)
#if (MMA_SMEM_BYTES > 101376)
#error "sdpa_fp8_mma: this config needs more than 101376 bytes (99 KiB) of shared memory (the sm_89 limit)"
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 890)
#error "sdpa_fp8_mma: needs sm_89 or newer (cvt.rn.f16x2.e4m3x2)"
#endif

namespace mma_attn {

constexpr int D = HEAD_DIM;
constexpr int NT = NUM_WARPS * 32;       // block threads
constexpr int ROW_WARPS = TILE_M / 16;   // warps per KV group
constexpr int KT = KV_SPLIT * TILE_N;    // keys per ring slot
constexpr int NTN = TILE_N / 8;          // 8-key n-tiles of S per warp and tile
constexpr int KBN = TILE_N / 16;         // 16-key k-blocks of P.V
constexpr int NTD = D / 8;               // 8-column n-tiles of O
constexpr int QW = D / 8;                // 32-bit Q words per thread and row (D/4 halves)
constexpr int ROW_CHUNKS = D / 16;       // 16-byte chunks per K/V row
constexpr int TILE_BYTES = KT * D;       // one raw K (or V) tile in the ring
constexpr int TILE_CHUNKS = TILE_BYTES / 16;
constexpr int SLOT_BYTES = 2 * TILE_BYTES;
constexpr int SMEM_BYTES = MMA_SMEM_BYTES;
constexpr float LOG2E = 1.4426950408889634f;

static_assert(TILE_CHUNKS % NT == 0 || NT % TILE_CHUNKS == 0, "ring copy distribution");
static_assert(TILE_BYTES % 128 == 0, "ring tiles are whole 128-byte lines");

// Swizzled byte offset of 16-byte chunk c of row r in a raw tile.  A 128-byte line holds
// 128/D rows; its 8 chunks are XOR-permuted by line so that (a) the 16-byte K reads of a
// quarter-warp (rows 8n+{0,1}, all chunks) and (b) the V reads of a half- or quarter-warp
// (rows 2t+e, t = 0..3, same chunk columns) hit distinct banks.
__device__ __forceinline__ int swz(int r, int c) {
    const int lin = r * ROW_CHUNKS + c;
    const int line = lin >> 3;
    const int x = (D == 64) ? ((line & 3) << 1) : (line & 7);
    return (line << 7) + (((lin & 7) ^ x) << 4);
}

__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;  // 0 source bytes: the 16 destination bytes become zero
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two e4m3 bytes (low 16 bits / high 16 bits of w) -> two half2 words (exact).
__device__ __forceinline__ void e4m3x4_to_half2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
    asm("{\n\t.reg .b16 l, h;\n\t"
        "mov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;\n\t"
        "}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}

// 2^x on the SFU (ex2.approx.ftz: relative error ~2^-22; 2^-inf = +0).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// c += a * b, m16n8k16, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// cp.async one ring slot: the raw K and V rows [k0, k0 + KT) (rows past S are zero-filled, so
// V has no NaN bytes there: P = 0 times a NaN would poison O).
__device__ __forceinline__ void issue_tile(const uint8_t* __restrict__ Kbh, const uint8_t* __restrict__ Vbh, int k0,
                                           int S, uint32_t slot, int tid) {
#pragma unroll
    for (int i = 0; i < (TILE_CHUNKS + NT - 1) / NT; ++i) {
        const int c = tid + i * NT;
        if (TILE_CHUNKS % NT == 0 || c < TILE_CHUNKS) {
            const int r = c / ROW_CHUNKS;
            const int cc = c % ROW_CHUNKS;
            const bool valid = k0 + r < S;
            const size_t g = valid ? (static_cast<size_t>(k0 + r) * D + cc * 16) : 0;
            const uint32_t off = static_cast<uint32_t>(swz(r, cc));
            cp_async16_zfill(slot + off, Kbh + g, valid);
            cp_async16_zfill(slot + TILE_BYTES + off, Vbh + g, valid);
        }
    }
}

}  // namespace mma_attn

// ---------------------------------------------------------------------------------------
// Launch geometry, exported for the harness (cuModuleGetGlobal); see kernels/README.md.
// ---------------------------------------------------------------------------------------
extern "C" __device__ const int repro_block_threads = mma_attn::NT;
extern "C" __device__ const int repro_rows_per_block = TILE_M;
extern "C" __device__ const int repro_dynamic_smem_bytes = mma_attn::SMEM_BYTES;
extern "C" __device__ const int repro_head_dim = HEAD_DIM;

#if MAX_REGS > 0
#define MMA_BOUNDS __maxnreg__(MAX_REGS)
#else
#define MMA_BOUNDS __launch_bounds__(mma_attn::NT)
#endif

extern "C" __global__ void MMA_BOUNDS
    sdpa_fp8_fwd(const __half* __restrict__ Q,       // [B,H,S,D] fp16
                 const uint8_t* __restrict__ K,      // [B,H,S,D] e4m3 bytes
                 const uint8_t* __restrict__ V,      // [B,H,S,D] e4m3 bytes
                 const float* __restrict__ k_scale,  // [B*H]
                 const float* __restrict__ v_scale,  // [B*H]
                 __half* __restrict__ O,             // [B,H,S,D] fp16
                 int B, int H, int S, float softmax_scale) {
    using namespace mma_attn;
    extern __shared__ __align__(128) unsigned char smem[];

    const int tid = threadIdx.x;
    const int q0 = blockIdx.x * TILE_M;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    if (q0 >= S || h >= H || b >= B) return;  // whole block: uniform, before any barrier
    const int bh = b * H + h;
    const size_t base = static_cast<size_t>(bh) * static_cast<size_t>(S) * D;
    const uint8_t* Kbh = K + base;
    const uint8_t* Vbh = V + base;
    const int ntiles = (S + KT - 1) / KT;
    const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

    // ---- prologue: tiles 0 .. NUM_STAGES-2 in flight, one commit group each ----
#pragma unroll
    for (int st = 0; st < NUM_STAGES - 1; ++st) {
        if (st < ntiles) issue_tile(Kbh, Vbh, st * KT, S, ring + st * SLOT_BYTES, tid);
        cp_async_commit();
    }

    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int gid = lane >> 2;  // row within the 8-row half of the m16 tile; key / column group
    const int t4 = lane & 3;    // thread in quad
    const int grp = warp / ROW_WARPS;              // KV_SPLIT group
    const int r0 = (warp % ROW_WARPS) * 16 + gid;  // this thread's rows: r0 and r0 + 8

    // ---- Q fragments, straight from global memory (rows past S read as zero) ----
    // Head-dim permutation (shared with K): the A fragment of k-block kb holds, for thread t,
    // d = (D/4)*t + 4*kb + {0,1} (regs 0, 1) and + {2,3} (regs 2, 3).  So thread t needs the
    // contiguous halves [(D/4)*t, (D/4)*t + D/4) of its two rows: word w covers d pair 2w.
    uint32_t qf[2][QW];
    {
        const __half* Qbh = Q + base;
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = q0 + r0 + hr * 8;
#pragma unroll
            for (int v = 0; v < QW / 4; ++v) {
                uint4 x = make_uint4(0u, 0u, 0u, 0u);
                if (row < S)
                    x = __ldg(reinterpret_cast<const uint4*>(Qbh + static_cast<size_t>(row) * D + (D / 4) * t4) + v);
                qf[hr][4 * v + 0] = x.x;
                qf[hr][4 * v + 1] = x.y;
                qf[hr][4 * v + 2] = x.z;
                qf[hr][4 * v + 3] = x.w;
            }
        }
    }

    const float c = k_scale[bh] * softmax_scale * LOG2E;  // raw score -> log2 units
    float m_run[2] = {-INFINITY, -INFINITY};              // running max, log2 units
    float l_run[2] = {0.f, 0.f};                          // this thread's partial row sums
    float o[NTD][4];
#pragma unroll
    for (int n = 0; n < NTD; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    for (int j = 0; j < ntiles; ++j) {
        cp_async_wait<NUM_STAGES - 2>();  // this thread's copies of tile j have landed
        __syncthreads();  // everyone's copies of tile j visible; everyone done with tile j-1's slot
        {
            const int jn = j + NUM_STAGES - 1;  // refill the slot tile j-1 used
            if (jn < ntiles) issue_tile(Kbh, Vbh, jn * KT, S, ring + (jn % NUM_STAGES) * SLOT_BYTES, tid);
            cp_async_commit();
        }
        const int k0 = j * KT + grp * TILE_N;  // first key of this group's half of the slot
        if (k0 >= S) continue;                 // warp-uniform: nothing valid for this group
        const unsigned char* Ks = smem + (j % NUM_STAGES) * SLOT_BYTES;
        const unsigned char* Vs = Ks + TILE_BYTES;
        const int kr0 = grp * TILE_N;  // this group's first row in the slot

        // ---- S = Q K^T: n-tile n holds keys k0 + 8n + {0..7}; thread (gid, t) reads K row
        // 8n + gid, bytes [(D/4)*t, (D/4)*t + D/4): word kb -> the B fragment of k-block kb.
        float s[NTN][4];
#pragma unroll
        for (int n = 0; n < NTN; ++n) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
            const int kr = kr0 + 8 * n + gid;
#pragma unroll
            for (int v = 0; v < D / 64; ++v) {
                const uint4 raw = *reinterpret_cast<const uint4*>(Ks + swz(kr, (D / 64) * t4 + v));
                const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int kb = 4 * v + q;
                    uint32_t b0, b1;
                    e4m3x4_to_half2x2(w[q], b0, b1);
                    mma16816(s[n], qf[0][2 * kb], qf[1][2 * kb], qf[0][2 * kb + 1], qf[1][2 * kb + 1], b0, b1);
                }
            }
        }

        // ---- scores to log2 units, then mask keys past S (only the last tile has any) ----
#pragma unroll
        for (int n = 0; n < NTN; ++n) {
            s[n][0] *= c;
            s[n][1] *= c;
            s[n][2] *= c;
            s[n][3] *= c;
        }
        if (k0 + TILE_N > S) {
#pragma unroll
            for (int n = 0; n < NTN; ++n) {
                const int key = k0 + 8 * n + 2 * t4;
                if (key >= S) s[n][0] = s[n][2] = -INFINITY;
                if (key + 1 >= S) s[n][1] = s[n][3] = -INFINITY;
            }
        }

        // ---- online softmax (rows r0: elements 0, 1; r0 + 8: elements 2, 3) ----
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < NTN; ++n) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
            const float m_new = fmaxf(m_run[hr], mx[hr]);  // finite: key k0 is valid
            alpha[hr] = fast_exp2(m_run[hr] - m_new);     // 0 on the first tile
            m_run[hr] = m_new;
            l_run[hr] *= alpha[hr];
        }
#pragma unroll
        for (int n = 0; n < NTD; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }

        // ---- P (fp16, in registers) and O += P V, one 16-key k-block at a time ----
#pragma unroll
        for (int kb = 0; kb < KBN; ++kb) {
            uint32_t pa[4];
            {
                float p[2][4];
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int n = 2 * kb + hh;
                    p[hh][0] = fast_exp2(s[n][0] - m_run[0]);
                    p[hh][1] = fast_exp2(s[n][1] - m_run[0]);
                    p[hh][2] = fast_exp2(s[n][2] - m_run[1]);
                    p[hh][3] = fast_exp2(s[n][3] - m_run[1]);
                    l_run[0] += p[hh][0] + p[hh][1];
                    l_run[1] += p[hh][2] + p[hh][3];
                }
                pa[0] = pack_half2(p[0][0], p[0][1]);  // row r0,     keys 16kb + 2t + {0,1}
                pa[1] = pack_half2(p[0][2], p[0][3]);  // row r0 + 8, keys 16kb + 2t + {0,1}
                pa[2] = pack_half2(p[1][0], p[1][1]);  // row r0,     keys 16kb + 8 + 2t + {0,1}
                pa[3] = pack_half2(p[1][2], p[1][3]);  // row r0 + 8, keys 16kb + 8 + 2t + {0,1}
            }
            // V B fragments: keys 16kb + 2t + {0, 1, 8, 9}; output column permutation: n-tile
            // n, fragment column g  <->  d = (D/8)*g + n, so thread gid reads D/8 contiguous
            // bytes [(D/8)*gid, (D/8)*gid + D/8) of each of its 4 key rows.
            const int vr = kr0 + 16 * kb + 2 * t4;
            uint32_t va[4][D / 32];  // [key row 0, 1, 8, 9][word]
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = vr + (e & 1) + 8 * (e >> 1);
                if (D == 64) {
                    const uint2 x = *reinterpret_cast<const uint2*>(Vs + swz(r, gid >> 1) + 8 * (gid & 1));
                    va[e][0] = x.x;
                    va[e][1] = x.y;
                } else {
                    const uint4 x = *reinterpret_cast<const uint4*>(Vs + swz(r, gid));
                    va[e][0] = x.x;
                    va[e][1] = x.y;
                    va[e][D / 32 - 2] = x.z;
                    va[e][D / 32 - 1] = x.w;
                }
            }
#pragma unroll
            for (int wd = 0; wd < D / 32; ++wd) {
                // bytes: (row 0, row 1) and (row 8, row 9) interleaved per column
                uint32_t lo01, hi01, lo89, hi89;
                uint32_t f01[4], f89[4];
                lo01 = prmt(va[0][wd], va[1][wd], 0x5140u);
                hi01 = prmt(va[0][wd], va[1][wd], 0x7362u);
                lo89 = prmt(va[2][wd], va[3][wd], 0x5140u);
                hi89 = prmt(va[2][wd], va[3][wd], 0x7362u);
                e4m3x4_to_half2x2(lo01, f01[0], f01[1]);
                e4m3x4_to_half2x2(hi01, f01[2], f01[3]);
                e4m3x4_to_half2x2(lo89, f89[0], f89[1]);
                e4m3x4_to_half2x2(hi89, f89[2], f89[3]);
#pragma unroll
                for (int q = 0; q < 4; ++q) mma16816(o[4 * wd + q], pa[0], pa[1], pa[2], pa[3], f01[q], f89[q]);
            }
        }
    }

    // ---- finish the row sums across the quad ----
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 1);
        l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 2);
    }

#if KV_SPLIT == 2
    // ---- merge the two KV groups: group 1 publishes (m, l, O), group 0 combines ----
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the ring; it becomes the merge buffer
    float* mrg = reinterpret_cast<float*>(smem);  // [TILE_M][D + 2]: O (permuted columns), m, l
    constexpr int LDM = D + 2;
    if (grp == 1) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            float* row = mrg + (r0 + 8 * hr) * LDM;
#pragma unroll
            for (int n = 0; n < NTD; ++n) {
                row[2 * t4 * NTD + n] = o[n][2 * hr];
                row[(2 * t4 + 1) * NTD + n] = o[n][2 * hr + 1];
            }
            if (t4 == 0) {
                row[D] = m_run[hr];
                row[D + 1] = l_run[hr];
            }
        }
    }
    __syncthreads();
    if (grp == 1) return;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const float* row = mrg + (r0 + 8 * hr) * LDM;
        const float m1 = row[D];
        const float m = fmaxf(m_run[hr], m1);  // finite: group 0 always saw key 0
        const float a0 = fast_exp2(m_run[hr] - m);
        const float a1 = fast_exp2(m1 - m);  // 0 when group 1 saw no key (m1 = -inf)
        l_run[hr] = l_run[hr] * a0 + row[D + 1] * a1;
#pragma unroll
        for (int n = 0; n < NTD; ++n) {
            o[n][2 * hr] = o[n][2 * hr] * a0 + row[2 * t4 * NTD + n] * a1;
            o[n][2 * hr + 1] = o[n][2 * hr + 1] * a0 + row[(2 * t4 + 1) * NTD + n] * a1;
        }
    }
#endif

    // ---- epilogue: O * v_scale / l -> fp16.  Thread t owns columns [2*(D/8)*t, +2*(D/8)) of
    // rows r0 and r0 + 8: o[n][0] is column 2*(D/8)*t + n, o[n][1] column (2t+1)*(D/8) + n.
    const float vsc = v_scale[bh];
    __half* Obh = O + base;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const int row = q0 + r0 + 8 * hr;
        if (row >= S) continue;
        const float f = vsc / l_run[hr];
        uint32_t w[NTD];
#pragma unroll
        for (int n = 0; n < NTD / 2; ++n) {
            w[n] = pack_half2(o[2 * n][2 * hr] * f, o[2 * n + 1][2 * hr] * f);
            w[NTD / 2 + n] = pack_half2(o[2 * n][2 * hr + 1] * f, o[2 * n + 1][2 * hr + 1] * f);
        }
        uint4* dst = reinterpret_cast<uint4*>(Obh + static_cast<size_t>(row) * D + 2 * NTD * t4);
#pragma unroll
        for (int v = 0; v < NTD / 4; ++v) dst[v] = make_uint4(w[4 * v], w[4 * v + 1], w[4 * v + 2], w[4 * v + 3]);
    }
}
