//! sdpa_fp8_ws.cu — SDPA forward (non-causal) for fp16 Q and FP8 E4M3 K/V on Hopper (sm_90a),
//! warp-specialized in the FlashAttention-3 manner.
//!
//! Same operation, ABI, entry name (`sdpa_fp8_fwd`) and launch-geometry globals as
//! sdpa_fp8.cu and sdpa_fp8_mma.cu (kernels/README.md).  A block is one producer warpgroup and
//! NUM_CONSUMERS consumer warpgroups of 64 query rows each:
//!
//!  * The producer's first thread copies each raw e4m3 K and V tile (TILE_N keys: TILE_N * 64
//!    contiguous bytes of a head) into a RAW_STAGES-deep ring with the bulk-copy engine
//!    (`cp.async.bulk`, Hopper's TMA in its one-dimensional form: no tensor map, so the fixed
//!    ABI suffices), completing on an mbarrier by byte count.  The producer's 128 threads then
//!    dequantize the tile (`cvt.rn.f16x2.e4m3x2`, exact) into a NUM_STAGES-deep ring of fp16
//!    tiles in the 128-byte swizzle that wgmma reads, zero the keys past S, and publish each
//!    slot on its FULL mbarrier; the consumers hand it back on its EMPTY mbarrier.
//!  * Each consumer warpgroup keeps its Q fragments in registers (loaded once) and runs
//!    S = Q·Kᵀ as `wgmma m64nTILE_Nk16` (K read by the tensor cores from the fp16 tile), the
//!    online softmax on the fp32 accumulators, and O += P·V as `wgmma m64n64k16` with P in
//!    registers (the accumulator layout of S is the A-fragment layout of P) and V read
//!    MN-major from its tile.  The next tile's S is issued before this tile's P·V, so its
//!    softmax runs while P·V is on the tensor cores (FlashAttention-3's intra-warpgroup
//!    overlap); P·V is waited for only before O is rescaled.
//!  * `setmaxnreg` gives the producer's registers to the consumers: the producer needs few,
//!    a consumer holds S (TILE_N/2 registers), P for two tiles, O and Q.
//!  * With KV_SPLIT=2 the two consumer warpgroups share 64 query rows and split the K/V tiles
//!    between them (split-KV inside the block), merging their softmax states through shared
//!    memory at the end: half the sequential steps per block, for grids that under-fill the GPU.
//!  * k_scale is folded into the softmax scale, v_scale into the final 1/l (both are per head);
//!    scores are kept in log2 units (exp2).
//!
//! Built for anything but sm_90a (the L4's sm_89, an A100's sm_80), this file is the
//! register-resident kernel (sdpa_fp8_mma.cu) in its `mma-wg-ring-gs` configuration: the
//! variant runs everywhere, and is this design where there is a Hopper.
//!
//! Needs softmax_scale > 0 and k_scale >= 0 (the row max is taken on unscaled scores).

#include <cuda_fp16.h>
#include <stdint.h>

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
// Consumer warpgroups (64 query rows each): the block's rows are 64 * NUM_CONSUMERS.
#ifndef NUM_CONSUMERS
#define NUM_CONSUMERS 2
#endif
// Keys per K/V tile: one S = Q·Kᵀ wgmma of m64 x TILE_N per k-block, one softmax step.
#ifndef TILE_N
#define TILE_N 128
#endif
// Depth of the fp16 K/V ring (the consumers' side).
#ifndef NUM_STAGES
#define NUM_STAGES 2
#endif
// Depth of the raw e4m3 ring the bulk copies land in (the producer's side).
#ifndef RAW_STAGES
#define RAW_STAGES 2
#endif
// Blocks per SM the registers are shared between (`__launch_bounds__`' second argument).
#ifndef CTAS_PER_SM
#define CTAS_PER_SM 1
#endif
// Registers per producer thread after `setmaxnreg.dec`; the consumers take the rest.
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif

// 1 (two consumers): the consumer warpgroups take turns issuing their MMAs (named barriers
// 2 and 3), so one's softmax runs while the other's MMAs hold the tensor cores (FlashAttention-3's
// ping-pong) instead of both competing for them at once.
#ifndef PINGPONG
#define PINGPONG 0
#endif

// 2 (two consumers, no ping-pong): split-KV inside the block.  Both consumer warpgroups take the
// same 64 query rows, each every other K/V tile, and merge their softmax states at the end, so
// a block walks its tiles in half the steps: for grids that leave SMs idle (mission's 128 blocks
// of 64 rows on 132 SMs), where one warpgroup's chain of tiles is the kernel's time.
#ifndef KV_SPLIT
#define KV_SPLIT 1
#endif

#if HEAD_DIM != 64
#error "sdpa_fp8_ws: HEAD_DIM must be 64 (one 128-byte swizzle atom per fp16 row)"
#endif
#if (NUM_CONSUMERS != 1) && (NUM_CONSUMERS != 2)
#error "sdpa_fp8_ws: NUM_CONSUMERS must be 1 or 2"
#endif
#if (TILE_N != 64) && (TILE_N != 128)
#error "sdpa_fp8_ws: TILE_N must be 64 or 128"
#endif
#if (NUM_STAGES < 2) || (NUM_STAGES > 4)
#error "sdpa_fp8_ws: NUM_STAGES must be 2, 3 or 4"
#endif
#if (RAW_STAGES < 1) || (RAW_STAGES > 4)
#error "sdpa_fp8_ws: RAW_STAGES must be 1 to 4"
#endif
#if (PINGPONG != 0) && ((PINGPONG != 1) || (NUM_CONSUMERS != 2))
#error "sdpa_fp8_ws: PINGPONG=1 needs NUM_CONSUMERS=2"
#endif
#if (KV_SPLIT != 1) && ((KV_SPLIT != 2) || (NUM_CONSUMERS != 2) || (PINGPONG != 0))
#error "sdpa_fp8_ws: KV_SPLIT=2 needs NUM_CONSUMERS=2 and PINGPONG=0"
#endif
// A warpgroup keeps its tile t until its next one, t + KV_SPLIT, is in the ring: with two slots
// and KV_SPLIT=2 that is t's own slot, and the block deadlocks.
#if KV_SPLIT == 2 && NUM_STAGES < 3
#error "sdpa_fp8_ws: KV_SPLIT=2 needs NUM_STAGES >= 3"
#endif
#if (CTAS_PER_SM != 1) && (CTAS_PER_SM != 2)
#error "sdpa_fp8_ws: CTAS_PER_SM must be 1 or 2"
#endif
#if (PRODUCER_REGS < 24) || (PRODUCER_REGS > 64) || (PRODUCER_REGS % 8 != 0)
#error "sdpa_fp8_ws: PRODUCER_REGS must be a multiple of 8 from 24 to 64"
#endif

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)

// ---- not sm_90a: the register-resident kernel with mma-wg-ring-gs's defines (the defines above
// are checked, then set aside) ---------------------------------------------------------------
#undef TILE_M
#undef TILE_N
#undef NUM_STAGES
#undef KV_SPLIT
#define TILE_M 64
#define TILE_N 32
#define KV_SPLIT 2
#define NUM_STAGES 2
#define KV_GROUP_SYNC 1
#include "sdpa_fp8_mma.cu"

#else

// The conversion of sdpa_fp8_mma_ptx.cuh: the exact cvt, no FP8 P·V.
#define MMA_DEQUANT_INT 0
#define PV_FP8 0

namespace ws_attn {

constexpr int D = HEAD_DIM;
constexpr int NC = NUM_CONSUMERS;
constexpr int NT = 128 * (NC + 1);  // block threads: the producer warpgroup first
constexpr int BN = TILE_N;
constexpr int KVS = KV_SPLIT;
constexpr int ROWS = 64 * NC / KVS;     // query rows per block
constexpr int TILE_READERS = NC / KVS;  // consumer warpgroups that read each tile
constexpr int NS = NUM_STAGES;
constexpr int NR = RAW_STAGES;
constexpr int H_ROW = 2 * D;          // bytes of an fp16 row: one 128-byte swizzle atom
constexpr int H_TILE = BN * H_ROW;    // one fp16 K (or V) tile
constexpr int H_STAGE = 2 * H_TILE;   // K then V
constexpr int RAW_TILE = BN * D;      // one raw e4m3 K (or V) tile
constexpr int RAW_STAGE = 2 * RAW_TILE;
constexpr int OFF_RAW = NS * H_STAGE;  // the fp16 ring starts at 0 (1024-byte aligned)
constexpr int OFF_BAR = OFF_RAW + NR * RAW_STAGE;
constexpr int KBD = D / 16;  // 16-wide k-blocks of Q·Kᵀ
constexpr int NTN = BN / 8;  // 8-key n-tiles of S
constexpr int KBN = BN / 16; // 16-key k-blocks of P·V
constexpr int NTD = D / 8;   // 8-column n-tiles of O
// KV_SPLIT=2: the second warpgroup's O, row maxima and row sums, one word per consumer thread
// and value (value-major, so a warp's 32 stores hit 32 banks), for the first to merge.
constexpr int MERGE_WORDS = 4 * NTD + 4;
constexpr int OFF_MERGE = OFF_BAR + 128;  // FULL[NS], EMPTY[NS], RAW[NR]: at most 12 mbarriers
constexpr int SMEM_BYTES = OFF_MERGE + (KVS == 2 ? MERGE_WORDS * 128 * 4 : 0);
constexpr int CHUNKS = BN * D / 16 / 128;  // 16-byte raw chunks per producer thread, per tile
constexpr float LOG2E = 1.4426950408889634f;

// Registers per thread: the block's share of the SM's 64 K, as compiled (`__launch_bounds__`)
// and as redistributed (`setmaxnreg`, multiples of 8): producer + consumers <= the share.
constexpr int REG_SHARE = 65536 / CTAS_PER_SM;
constexpr int CONSUMER_REGS_RAW = (REG_SHARE / 128 - PRODUCER_REGS) / NC;
constexpr int CONSUMER_REGS = (CONSUMER_REGS_RAW > 256 ? 256 : CONSUMER_REGS_RAW) / 8 * 8;
static_assert(CONSUMER_REGS >= 128, "the consumers need at least 128 registers");
static_assert(OFF_RAW % 1024 == 0 && H_TILE % 1024 == 0, "wgmma's 128B-swizzle tiles start on 1024-byte boundaries");
static_assert(2 * NS + NR <= 16, "the mbarrier region holds 16");
static_assert(SMEM_BYTES * CTAS_PER_SM <= 232448 - 1024 * (CTAS_PER_SM - 1), "shared memory per SM (227 KiB)");

#include "sdpa_fp8_mma_ptx.cuh"    // e4m3 conversion, exp2, pack_half2
#include "sdpa_fp8_mma_wgmma.cuh"  // wgmma.mma_async, its fences and the smem descriptor

// Byte offset of 16-byte chunk c of row r in an fp16 tile: the 128-byte swizzle sw128_desc
// describes (chunk index XOR row & 7, 128-byte rows, 1024-byte-aligned tiles).
__device__ __forceinline__ int sw128(int r, int c) { return r * H_ROW + ((c ^ (r & 7)) << 4); }

// ---- mbarriers: `bar` is a shared-window address.  Waiting on parity (k & 1) returns once
// the barrier's k-th phase has completed; a fresh barrier counts as having completed the phase
// before its first (parity 1), so the producer's first wait on an EMPTY slot passes. ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n\t.reg .pred p;\n"
        "WS_MBAR_WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
        "@!p bra WS_MBAR_WAIT;\n\t"
        "}\n" ::"r"(bar), "r"(parity)
        : "memory");
}
// Global -> shared bulk copy (the TMA unit; 16-byte multiples), completing `bytes` on `bar`.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
// The producer warpgroup alone (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

// Ping-pong turns: consumer `wg` waits for its turn (named barrier 2 + wg: its own 128 threads
// and the other's 128 arrivals) before it issues MMAs, and hands the turn over after.
__device__ __forceinline__ void turn_wait(int wg) {
#if PINGPONG
    if (wg == 0) asm volatile("bar.sync 2, 256;\n" ::: "memory");
    else asm volatile("bar.sync 3, 256;\n" ::: "memory");
#else
    (void)wg;
#endif
}
__device__ __forceinline__ void turn_pass(int wg) {
#if PINGPONG
    if (wg == 0) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
    else asm volatile("bar.arrive 2, 256;\n" ::: "memory");
#else
    (void)wg;
#endif
}

struct Barriers {
    uint32_t base;
    __device__ __forceinline__ uint32_t full(int s) const { return base + 8 * s; }
    __device__ __forceinline__ uint32_t empty(int s) const { return base + 8 * (NS + s); }
    __device__ __forceinline__ uint32_t raw(int r) const { return base + 8 * (2 * NS + r); }
};

// ---- the producer warpgroup ----------------------------------------------------------------
// Thread 0 starts the bulk copies of tile t's K and V rows (only the rows before S) into raw
// slot t % NR.
__device__ __forceinline__ void issue_raw(const uint8_t* Kbh, const uint8_t* Vbh, int t, int S, uint32_t smem_s,
                                          const Barriers& bars) {
    const int keys = min(BN, S - t * BN);
    const uint32_t bytes = static_cast<uint32_t>(keys * D);
    const uint32_t bar = bars.raw(t % NR);
    const uint32_t dst = smem_s + OFF_RAW + (t % NR) * RAW_STAGE;
    const size_t src = static_cast<size_t>(t) * BN * D;
    mbar_expect_tx(bar, 2 * bytes);
    bulk_copy(dst, Kbh + src, bytes, bar);
    bulk_copy(dst + RAW_TILE, Vbh + src, bytes, bar);
}

// This thread's 16-byte raw chunks of one tile (K or V) -> fp16, swizzled; keys at or past
// `valid` become zeros (their raw bytes are stale: a NaN code times P = 0 would still be NaN).
__device__ __forceinline__ void convert_tile(const unsigned char* raw, unsigned char* htile, int p, int valid) {
#pragma unroll
    for (int m = 0; m < CHUNKS; ++m) {
        const int i = p + 128 * m;  // chunk i: key i / 4, dims 16 (i % 4) .. + 15
        const int key = i >> 2;
        uint4 x = *reinterpret_cast<const uint4*>(raw + 16 * i);
        if (key >= valid) x = make_uint4(0, 0, 0, 0);
        uint4 a, b;
        e4m3x4_to_half2x2(x.x, a.x, a.y);
        e4m3x4_to_half2x2(x.y, a.z, a.w);
        e4m3x4_to_half2x2(x.z, b.x, b.y);
        e4m3x4_to_half2x2(x.w, b.z, b.w);
        *reinterpret_cast<uint4*>(htile + sw128(key, 2 * (i & 3))) = a;
        *reinterpret_cast<uint4*>(htile + sw128(key, 2 * (i & 3) + 1)) = b;
    }
}

__device__ __forceinline__ void produce(const uint8_t* Kbh, const uint8_t* Vbh, int S, int ntiles, uint32_t smem_s,
                                        unsigned char* smem, const Barriers& bars, int p) {
    if (p == 0)
        for (int t = 0; t < NR && t < ntiles; ++t) issue_raw(Kbh, Vbh, t, S, smem_s, bars);
#pragma unroll 1
    for (int t = 0; t < ntiles; ++t) {
        const int r = t % NR, s = t % NS;
        mbar_wait(bars.raw(r), (t / NR) & 1);
        mbar_wait(bars.empty(s), ((t / NS) & 1) ^ 1);
        const unsigned char* raw = smem + OFF_RAW + r * RAW_STAGE;
        unsigned char* h = smem + s * H_STAGE;
        const int valid = S - t * BN;
        convert_tile(raw, h, p, valid);
        convert_tile(raw + RAW_TILE, h + H_TILE, p, valid);
        fence_proxy_async_shared();  // the tensor cores read the tile through the async proxy
        mbar_arrive(bars.full(s));
        if (t + NR < ntiles) {
            producer_sync();  // every producer thread is done reading raw slot r
            if (p == 0) issue_raw(Kbh, Vbh, t + NR, S, smem_s, bars);
        }
    }
}

// ---- a consumer warpgroup ----------------------------------------------------------------
// The online softmax of one tile's scores: the row max (this thread's rows gid and gid + 8,
// quad-reduced), the rescale factor of the rows' earlier sums, and P = exp2(s·c − m) as fp16
// A fragments (pa[kb]: keys 16 kb .. 16 kb + 15) with this thread's fp32 partial row sums.
struct Softmax {
    float m[2];      // running max, log2 units
    float alpha[2];  // exp2(old m - new m)
    float sum[2];    // this tile's sum of this thread's P
};

__device__ __forceinline__ void softmax_tile(float (&s)[NTN][4], float c, int key0, int S, int t4, Softmax& sm,
                                             uint32_t (&pa)[KBN][4]) {
    if (key0 + BN > S) {  // only the last tile has keys past S
#pragma unroll
        for (int n = 0; n < NTN; ++n) {
            const int key = key0 + 8 * n + 2 * t4;
            if (key >= S) s[n][0] = s[n][2] = -INFINITY;
            if (key + 1 >= S) s[n][1] = s[n][3] = -INFINITY;
        }
    }
    float mneg[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NTN; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(sm.m[hr], mx * c);  // finite: the tile's first key is valid
        sm.alpha[hr] = fast_exp2(sm.m[hr] - m_new);   // 0 on the first tile
        sm.m[hr] = m_new;
        mneg[hr] = -m_new;
        sm.sum[hr] = 0.f;
    }
#pragma unroll
    for (int kb = 0; kb < KBN; ++kb)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float(&x)[4] = s[2 * kb + hh];
            const float p0 = fast_exp2(fmaf(x[0], c, mneg[0])), p1 = fast_exp2(fmaf(x[1], c, mneg[0]));
            const float p2 = fast_exp2(fmaf(x[2], c, mneg[1])), p3 = fast_exp2(fmaf(x[3], c, mneg[1]));
            sm.sum[0] += p0 + p1;
            sm.sum[1] += p2 + p3;
            pa[kb][2 * hh] = pack_half2(p0, p1);
            pa[kb][2 * hh + 1] = pack_half2(p2, p3);
        }
}

// KV_SPLIT=2: the second warpgroup (part 1) stores its state (O, its row maxima, its partial row
// sums) at `mine` (this thread's word of each value) and returns false; the first waits for it
// (named barrier 4) and takes it into its own, rescaled to the larger maximum, as the online
// softmax would have.  Part 1 has no tiles when the sequence is one tile: its maxima are -inf,
// its sums and O zero, and exp2(-inf) = 0 drops them.
__device__ __forceinline__ bool merge_parts(float* mine, int part, const float (&m)[2], float (&l)[2],
                                            float (&o)[NTD][4]) {
    auto word = [&](int k) -> float& { return mine[128 * k]; };
    if (part == 1) {
#pragma unroll
        for (int nd = 0; nd < NTD; ++nd)
#pragma unroll
            for (int e = 0; e < 4; ++e) word(4 * nd + e) = o[nd][e];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            word(4 * NTD + hr) = m[hr];
            word(4 * NTD + 2 + hr) = l[hr];
        }
        asm volatile("bar.arrive 4, 256;\n" ::: "memory");
        return false;
    }
    asm volatile("bar.sync 4, 256;\n" ::: "memory");
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const float m1 = word(4 * NTD + hr);
        const float mx = fmaxf(m[hr], m1);  // finite: part 0 has the first tile
        const float a0 = fast_exp2(m[hr] - mx), a1 = fast_exp2(m1 - mx);
        l[hr] = fmaf(l[hr], a0, word(4 * NTD + 2 + hr) * a1);
#pragma unroll
        for (int nd = 0; nd < NTD; ++nd) {
            o[nd][2 * hr] = fmaf(o[nd][2 * hr], a0, word(4 * nd + 2 * hr) * a1);
            o[nd][2 * hr + 1] = fmaf(o[nd][2 * hr + 1], a0, word(4 * nd + 2 * hr + 1) * a1);
        }
    }
    return true;
}

}  // namespace ws_attn

// ---------------------------------------------------------------------------------------
// Launch geometry, exported for the harness (cuModuleGetGlobal); see kernels/README.md.
// ---------------------------------------------------------------------------------------
extern "C" __device__ const int repro_block_threads = ws_attn::NT;
extern "C" __device__ const int repro_rows_per_block = ws_attn::ROWS;
extern "C" __device__ const int repro_dynamic_smem_bytes = ws_attn::SMEM_BYTES;
extern "C" __device__ const int repro_head_dim = HEAD_DIM;

extern "C" __global__ void __launch_bounds__(ws_attn::NT, CTAS_PER_SM)
    sdpa_fp8_fwd(const __half* __restrict__ Q,       // [B,H,S,D] fp16
                 const uint8_t* __restrict__ K,      // [B,H,S,D] e4m3 bytes
                 const uint8_t* __restrict__ V,      // [B,H,S,D] e4m3 bytes
                 const float* __restrict__ k_scale,  // [B*H]
                 const float* __restrict__ v_scale,  // [B*H]
                 __half* __restrict__ O,             // [B,H,S,D] fp16
                 int B, int H, int S, float softmax_scale) {
    using namespace ws_attn;
    extern __shared__ __align__(1024) unsigned char smem[];

    const int tid = threadIdx.x;
    const int q0 = blockIdx.x * ROWS;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    if (q0 >= S || h >= H || b >= B) return;  // whole block: uniform, before any barrier
    const int bh = b * H + h;
    const size_t base = static_cast<size_t>(bh) * static_cast<size_t>(S) * D;
    const int ntiles = (S + BN - 1) / BN;
    const uint32_t smem_s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    if (smem_s & 1023) __trap();  // the swizzle pattern is taken from absolute address bits
    const Barriers bars{smem_s + OFF_BAR};

    if (tid == 0) {
        for (int s = 0; s < NS; ++s) {
            mbar_init(bars.full(s), 128);       // every producer thread, after its conversion
            mbar_init(bars.empty(s), 128 * TILE_READERS);  // every thread that read the tile, after its P·V
        }
        for (int r = 0; r < NR; ++r) mbar_init(bars.raw(r), 1);  // thread 0's expect_tx + the bytes
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (tid < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        produce(K + base, V + base, S, ntiles, smem_s, smem, bars, tid);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));

    const int ct = tid - 128;
    const int wg = ct >> 7;      // consumer warpgroup
    const int part = wg % KVS;   // its share of the tiles: part, part + KVS, ...
    const int lane = tid & 31;
    const int gid = lane >> 2;  // row within the 8-row half of the warp's m16 tile
    const int t4 = lane & 3;    // thread in quad
    const int row0 = q0 + 64 * (wg / KVS) + 16 * ((ct >> 5) & 3) + gid;  // this thread's rows: row0, row0 + 8
    const int ntiles_mine = ntiles > part ? (ntiles - part + KVS - 1) / KVS : 0;
    auto tile = [&](int j) { return part + KVS * j; };  // the warpgroup's j-th tile

    // Q's A fragments (k-block kb: element e is row row0 + 8 (e & 1), columns 16 kb + 8 (e >> 1)
    // + 2 t4, +1), loaded once from global memory; rows past S are zeros.
    uint32_t qf[KBD][4];
    const __half* Qbh = Q + base;
#pragma unroll
    for (int kb = 0; kb < KBD; ++kb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = row0 + 8 * (e & 1);
            const int col = 16 * kb + 8 * (e >> 1) + 2 * t4;
            qf[kb][e] = r < S ? __ldg(reinterpret_cast<const unsigned int*>(Qbh + static_cast<size_t>(r) * D + col)) : 0u;
        }

    // Raw score -> log2 units.  Clamped away from 0 so a masked score (-inf) never meets 0 * inf.
    const float c = fmaxf(k_scale[bh] * (softmax_scale * LOG2E), 1e-30f);
    const float vsc = v_scale[bh];  // read now: at the epilogue its latency would be the kernel's tail
    float o[NTD][4];
#pragma unroll
    for (int n = 0; n < NTD; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    Softmax sm{{-INFINITY, -INFINITY}, {0.f, 0.f}, {0.f, 0.f}};
    float l[2] = {0.f, 0.f};  // this thread's partial row sums (its columns of P)
    float s[NTN][4];
    uint32_t pa[KBN][4];

    // S of tile t: Q (registers) times K (fp16 slot t % NS, +32 bytes per k-block in its rows).
    auto issue_qk = [&](int t) {
        const uint32_t hk = smem_s + (t % NS) * H_STAGE;
#pragma unroll
        for (int kb = 0; kb < KBD; ++kb) wgmma_rs<0>(s, qf[kb], sw128_desc(hk + kb * 32), kb);
        wgmma_commit();
    };
    // O += P·V of tile t: V is MN-major, 16 keys (two 8-row groups) per k-block.
    auto issue_pv = [&](int t) {
        const uint32_t hv = smem_s + (t % NS) * H_STAGE + H_TILE;
#pragma unroll
        for (int kb = 0; kb < KBN; ++kb) wgmma_rs<1>(o, pa[kb], sw128_desc(hv + kb * 16 * H_ROW), 1);
        wgmma_commit();
    };
    // Every register a wgmma reads or writes is pinned here, before the fence that orders the
    // warpgroup's register writes before the MMAs (else the compiler may sink the rescale or
    // the copy of P past it, and ptxas serializes the MMAs).
    auto fence_operands = [&]() {
        wgmma_fence_operand(s);
        wgmma_fence_operand(o);
        wgmma_fence_operand(pa);
    };

    // Ping-pong: each consumer issues MMAs at ntiles + 1 points (S of tile 0, then S(t+1) with
    // P·V(t), then the last P·V); consumer 0 goes first, and consumer 1 passes no turn after its
    // last point, so every barrier's arrivals match its waits.  (Without KV_SPLIT every
    // warpgroup has every tile; with it, the second has none when the sequence is one tile.)
    if (wg == 1) turn_pass(1);
    if (ntiles_mine > 0) {
        mbar_wait(bars.full(tile(0) % NS), (tile(0) / NS) & 1);
        fence_operands();
        wgmma_fence();
        turn_wait(wg);
        issue_qk(tile(0));
        turn_pass(wg);
        wgmma_wait_all();
        wgmma_fence_operand(s);
        softmax_tile(s, c, tile(0) * BN, S, t4, sm, pa);
        l[0] = sm.sum[0];
        l[1] = sm.sum[1];

        // Tile t's P·V runs beside the next tile's softmax: S(next) is issued first, waited for
        // alone (wait_group 1), and P·V(t) only before O is rescaled with the next maximum.
#pragma unroll 1
        for (int j = 0; j + 1 < ntiles_mine; ++j) {
            const int t = tile(j), next = tile(j + 1);
            mbar_wait(bars.full(next % NS), (next / NS) & 1);
            fence_operands();
            wgmma_fence();
            turn_wait(wg);
            issue_qk(next);
            issue_pv(t);
            turn_pass(wg);
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            wgmma_fence_operand(s);
            uint32_t pn[KBN][4];
            softmax_tile(s, c, next * BN, S, t4, sm, pn);
            wgmma_wait_all();
            wgmma_fence_operand(o);
            wgmma_fence_operand(pa);          // P of tile t stayed untouched until its P·V finished
            mbar_arrive(bars.empty(t % NS));  // K and V of tile t are no longer read
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                l[hr] = fmaf(l[hr], sm.alpha[hr], sm.sum[hr]);
#pragma unroll
                for (int nd = 0; nd < NTD; ++nd) {
                    o[nd][2 * hr] *= sm.alpha[hr];
                    o[nd][2 * hr + 1] *= sm.alpha[hr];
                }
            }
#pragma unroll
            for (int kb = 0; kb < KBN; ++kb)
#pragma unroll
                for (int e = 0; e < 4; ++e) pa[kb][e] = pn[kb][e];
        }
        fence_operands();
        wgmma_fence();
        turn_wait(wg);
        issue_pv(tile(ntiles_mine - 1));
        if (wg == 0) turn_pass(0);
        wgmma_wait_all();
        wgmma_fence_operand(o);
    }
#if KV_SPLIT == 2
    if (!merge_parts(reinterpret_cast<float*>(smem + OFF_MERGE) + (ct & 127), part, sm.m, l, o)) return;
#endif

    // ---- epilogue: the quad's partial row sums, then O * v_scale / l -> fp16 ----
    __half* Obh = O + base;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
        l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
        const int row = row0 + 8 * hr;
        if (row >= S) continue;
        const float f = __fdividef(vsc, l[hr]);  // l >= 1: the row's maximum contributes exp2(0)
        uint32_t* dst = reinterpret_cast<uint32_t*>(Obh + static_cast<size_t>(row) * D) + t4;
#pragma unroll
        for (int nd = 0; nd < NTD; ++nd) dst[4 * nd] = pack_half2(o[nd][2 * hr] * f, o[nd][2 * hr + 1] * f);
    }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL
