//! sdpa_fp8_mma.cu — register-resident SDPA forward (non-causal) for fp16 Q and FP8 E4M3 K/V,
//! FlashAttention-2 style, on `mma.sync.aligned.m16n8k16` (fp16 in, fp32 accumulate).
//!
//! Same operation, ABI, entry name (`sdpa_fp8_fwd`) and launch-geometry globals as
//! sdpa_fp8.cu (see kernels/README.md), so the harness, the tune stage and the profile stage
//! treat it as one more kernel.  What differs is the design:
//!
//!  * Each warp owns WARP_M query rows: one m16 tile (16, the default) or two (32; each K and V
//!    fragment read with ldmatrix then feeds both tiles' MMAs, and the softmax runs 16-key steps
//!    so the 32 rows' S fit beside their 64-register O).  S = Q·Kᵀ stays in fp32 registers; the online softmax runs
//!    on those registers (row max across the 4 threads of a quad with __shfl_xor 1, 2); P is
//!    rounded to fp16 in registers and used directly as the A operand of P·V (the m16n8 C
//!    fragments of n-tiles 2k and 2k+1 are exactly the m16k16 A fragment of k-block k).  The row
//!    sums come from the tensor cores too (P·1, one extra MMA per 16 keys), so they sum exactly
//!    the fp16 P that P·V uses.
//!  * K/V tiles arrive as raw e4m3 bytes through a NUM_STAGES-deep ring of 16-byte cp.async
//!    copies.  Each thread converts the chunks its own cp.async wrote (so cp.async.wait_group
//!    suffices, no barrier) with `cvt.rn.f16x2.e4m3x2` (exact; sm_89+) into a double-buffered,
//!    XOR-swizzled fp16 tile, and the warps read their MMA fragments from it with `ldmatrix`
//!    (`.trans` for V); Q goes the same way (cp.async, swizzled fp16, ldmatrix).  Tile j+1 is
//!    converted right after a warp's compute of tile j, while the other warps still compute;
//!    the loads of tiles j+1 .. j+NUM_STAGES are in flight meanwhile (the ring slot of tile j is
//!    refilled right after the barrier that follows its conversion): one __syncthreads per tile.
//!    The Q fragments are re-read from shared memory per step (ldmatrix), which keeps 16
//!    registers free, or, with Q_IN_REGS = 1 (WARP_M 16), loaded into registers once: a fifth
//!    fewer ldmatrix bytes per step, 8.5 % faster on the long shape on an H100
//!    (benches/results/2026-11-23-sdpa-fp8-mma-h100.md).  DEQUANT_INT converts with integer bit
//!    operations instead of the cvt.  Data movement: sdpa_fp8_mma_tiles.cuh; PTX wrappers:
//!    sdpa_fp8_mma_ptx.cuh.
//!  * k_scale is folded into the softmax scale, v_scale into the final 1/l (both are per head,
//!    so this is exact); scores are kept in log2 units (exp2).
//!  * PV_FP8 = 1 (sm_89+, the L4 path): P·V on `mma.sync m16n8k32` e4m3 tensor cores instead.  P
//!    is computed as 2^8 · exp2(s - m) (the 2^8 folded into the exp2 argument) and converted to
//!    e4m3 in registers; V stays raw e4m3 bytes, transposed 4x4 bytes at a time (prmt) into a
//!    [d][key] shared tile whose key order matches the P fragment, so each B fragment is one
//!    64-bit load.  Each 32-key step's P·V starts from zero accumulators and is added to O in
//!    fp32 (two-level accumulation, fused with the alpha rescale).
//!  * USE_WGMMA = 1 (built for sm_90a, which `repro build` picks on an H100/H200): each warpgroup
//!    (4 warps, 64 query rows) runs S = Q·Kᵀ and O += P·V as `wgmma.mma_async` m64nNk16, with Q
//!    and P as the A operand in registers (the same fragment layout as mma.sync) and K and V read
//!    by the tensor cores straight from the fp16 tiles, whose XOR swizzle is Hopper's 128-byte
//!    swizzle: once per 64 rows instead of once per warp through ldmatrix.  The row sums are
//!    this thread's fp32 P, added across the quad at the end; P·V's wait is deferred to the next
//!    barrier, so it overlaps the conversion of the next tile.  On other targets the define
//!    changes nothing.  Helpers: sdpa_fp8_mma_wgmma.cuh.
//!  * KV_VIA_REGS = 1: K/V bytes go global -> registers (one tile ahead) -> fp16 tile, instead of
//!    through the cp.async ring in shared memory (two fewer shared-memory passes per tile).
//!  * KV_SPLIT = 2 or 4 splits every K/V tile between that many warp groups that each run their
//!    own online softmax over the same query rows; groups 1.. publish (m, l, O) through shared
//!    memory at the end and group 0 merges.  More warps per query tile: more latency hiding
//!    when the grid is small (2 is the fastest on an H100; 4 loses to the per-step costs).
//!  * KV_GROUP_SYNC = 1 (with KV_SPLIT > 1): each group loads and converts only its own keys of
//!    every tile and waits at a named barrier of its own warps, not the block's: the groups run
//!    out of step, so one group's softmax overlaps another's MMAs (2-5 % faster on an H100,
//!    benches/results/2026-11-24-sdpa-fp8-group-sync-h100.md).
//!
//! Needs sm_80 or newer (sm_80 has no e4m3 convert: it always takes the DEQUANT_INT path),
//! softmax_scale > 0 and k_scale >= 0 (the row maximum is taken on unscaled scores, as in
//! FlashAttention-2).

#include <cuda_fp16.h>
#include <stdint.h>

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef TILE_M
#define TILE_M 64
#endif
#ifndef TILE_N
#define TILE_N 32
#endif
#ifndef KV_SPLIT
#define KV_SPLIT 1
#endif
#ifndef NUM_STAGES
#define NUM_STAGES 2
#endif
// Query rows per warp: 16 (one m16 tile) or 32 (two m16 tiles, each K/V fragment read from
// shared memory once and used for both).
#ifndef WARP_M
#define WARP_M 16
#endif
// 1: each warp keeps its Q fragments in registers (loaded once) instead of re-reading them
// from shared memory every softmax step.  WARP_M 16 only (32 rows of Q are 32 more registers).
#ifndef Q_IN_REGS
#define Q_IN_REGS 0
#endif
// Each warp owns WARP_M query rows of one KV_SPLIT group.
#ifndef NUM_WARPS
#define NUM_WARPS ((TILE_M / WARP_M) * KV_SPLIT)
#endif
// E4M3 -> fp16: 0 = cvt.rn.f16x2.e4m3x2 (exact, sm_89+, a conversion-pipe instruction);
// 1 = integer bit moves on the ALU pipe (prmt, shift, and/or), which give the value * 2^-8 (also
// exact: E4M3 subnormals become fp16 subnormals), the 2^8 folded into the scales.  Decodes the
// E4M3 NaN code (S.1111.111) as +-480 instead of NaN.
#ifndef DEQUANT_INT
#define DEQUANT_INT 0
#endif
// Per-thread register cap (__maxnreg__); 0 = no cap beyond __launch_bounds__(block threads).
#ifndef MAX_REGS
#define MAX_REGS 128
#endif

// 1: on sm_90a (Hopper with its arch-specific features: an H100/H200 built by `repro build`),
// S = Q·Kᵀ and O += P·V run as warpgroup MMAs (wgmma.mma_async m64nNk16): Q and P stay in
// registers as the A operand, and the tensor cores read K and V straight from the swizzled fp16
// tiles, once per 64 query rows instead of once per warp (ldmatrix).  Elsewhere (sm_89, sm_80, a
// plain sm_90 build) the same variant compiles to the mma.sync path below: the define only
// chooses, per architecture.  Needs WARP_M 16, HEAD_DIM 64, TILE_M 64 or 128, TILE_N 32 or 64.
#ifndef USE_WGMMA
#define USE_WGMMA 0
#endif

// 1: each thread loads its K/V chunks of tile j+1 from global memory straight into registers
// (ld.global.nc, 16 bytes each) while tile j is computed, and converts them from there: no
// shared-memory ring, so a tile crosses shared memory once (as fp16) instead of three times
// (cp.async write, raw read, fp16 write).  NUM_STAGES is then unused.
#ifndef KV_VIA_REGS
#define KV_VIA_REGS 0
#endif

// 1 (KV_SPLIT 2 or 4): each KV group loads and converts only its own TILE_N keys of every tile
// and waits at a barrier of its own warps (bar.sync 1 + group) instead of __syncthreads: the
// groups share no tile rows, so they drift apart and one group's softmax runs beside another's
// MMAs instead of in lockstep.  Shared memory and the per-thread work are unchanged.
#ifndef KV_GROUP_SYNC
#define KV_GROUP_SYNC 0
#endif

// P·V in FP8 (e4m3 P and V, m16n8k32, fp32 accumulate); needs sm_89+ and TILE_N >= 32 (one
// 32-key k-block per softmax step).  See kernels/README.md for the error model.
#ifndef PV_FP8
#define PV_FP8 0
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
#if (KV_SPLIT != 1) && (KV_SPLIT != 2) && (KV_SPLIT != 4)
#error "sdpa_fp8_mma: KV_SPLIT must be 1, 2 or 4"
#endif
#if (WARP_M != 16) && (WARP_M != 32)
#error "sdpa_fp8_mma: WARP_M must be 16 or 32"
#endif
#if WARP_M > TILE_M
#error "sdpa_fp8_mma: WARP_M must not exceed TILE_M"
#endif
#if (Q_IN_REGS != 0) && (Q_IN_REGS != 1)
#error "sdpa_fp8_mma: Q_IN_REGS must be 0 or 1"
#endif
#if (WARP_M == 32) && (HEAD_DIM != 64)
#error "sdpa_fp8_mma: WARP_M=32 needs HEAD_DIM=64 (O alone would take 128 registers at HEAD_DIM 128)"
#endif
#if Q_IN_REGS && (WARP_M != 16)
#error "sdpa_fp8_mma: Q_IN_REGS=1 needs WARP_M=16 (32 rows of Q fragments do not fit beside O in 128 registers)"
#endif
#if (TILE_M / WARP_M) * KV_SPLIT > 16
#error "sdpa_fp8_mma: more than 16 warps per block ((TILE_M / WARP_M) * KV_SPLIT): 128 registers each would exceed the SM's 64K registers"
#endif
#if (NUM_STAGES != 2) && (NUM_STAGES != 3) && (NUM_STAGES != 4)
#error "sdpa_fp8_mma: NUM_STAGES must be 2, 3 or 4"
#endif
#if NUM_WARPS != ((TILE_M / WARP_M) * KV_SPLIT)
#error "sdpa_fp8_mma: NUM_WARPS must equal (TILE_M / WARP_M) * KV_SPLIT (each warp owns WARP_M query rows of one KV group)"
#endif
#if (DEQUANT_INT != 0) && (DEQUANT_INT != 1)
#error "sdpa_fp8_mma: DEQUANT_INT must be 0 or 1"
#endif
#if (PV_FP8 != 0) && (PV_FP8 != 1)
#error "sdpa_fp8_mma: PV_FP8 must be 0 or 1"
#endif
#if (USE_WGMMA != 0) && (USE_WGMMA != 1)
#error "sdpa_fp8_mma: USE_WGMMA must be 0 or 1"
#endif
#if USE_WGMMA && ((WARP_M != 16) || (HEAD_DIM != 64) || (TILE_M % 64 != 0) || (TILE_N < 32) || (TILE_N > 64) || PV_FP8)
#error "sdpa_fp8_mma: USE_WGMMA=1 needs WARP_M=16, HEAD_DIM=64, TILE_M 64 or 128, TILE_N 32 or 64 and PV_FP8=0 (one warpgroup per 64 query rows)"
#endif
#if (KV_VIA_REGS != 0) && (KV_VIA_REGS != 1)
#error "sdpa_fp8_mma: KV_VIA_REGS must be 0 or 1"
#endif
#if KV_VIA_REGS && PV_FP8
#error "sdpa_fp8_mma: KV_VIA_REGS=1 is not implemented with PV_FP8=1 (its V transpose reads four rows per thread)"
#endif
#if (KV_GROUP_SYNC != 0) && (KV_GROUP_SYNC != 1)
#error "sdpa_fp8_mma: KV_GROUP_SYNC must be 0 or 1"
#endif
#if KV_GROUP_SYNC && ((KV_SPLIT == 1) || PV_FP8)
#error "sdpa_fp8_mma: KV_GROUP_SYNC=1 needs KV_SPLIT 2 or 4 and PV_FP8=0 (the V transpose groups span the whole tile)"
#endif
#if PV_FP8 && ((WARP_M != 16) || (KV_SPLIT > 2))
#error "sdpa_fp8_mma: PV_FP8=1 is implemented for WARP_M=16 and KV_SPLIT 1 or 2 only"
#endif
#if PV_FP8 && (TILE_N < 32)
#error "sdpa_fp8_mma: PV_FP8=1 needs TILE_N >= 32 (one 32-key k-block of m16n8k32 per softmax step)"
#endif
#if PV_FP8 && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 890)
#error "sdpa_fp8_mma: PV_FP8=1 needs sm_89 or newer (mma.sync m16n8k32 e4m3, cvt e4m3x2.f32)"
#endif
#if (MAX_REGS != 0) && ((MAX_REGS < 64) || (MAX_REGS > 255))
#error "sdpa_fp8_mma: MAX_REGS must be 0 (no cap) or between 64 and 255"
#endif

// ---- shared memory (bytes) ---------------------------------------------------------------
// KT = KV_SPLIT * TILE_N keys per tile.  Raw ring: NUM_STAGES x {K, V} e4m3 tiles (KT*D bytes
// each); fp16 tiles: 2 buffers x {K, V} (KT*D*2 bytes each); the fp16 Q tile (TILE_M*D*2).
// With KV_SPLIT > 1 the start of shared memory is reused at the end for the merge: per query
// row and group other than 0, D fp32 outputs plus m and l.  With PV_FP8 = 1 the V half of each fp16 buffer holds the
// transposed e4m3 V tile instead (D rows of VT_ROW <= 2*KT bytes: it fits; the formula is kept).
#if KV_VIA_REGS
#define MMA_SMEM_RAW 0
#else
#define MMA_SMEM_RAW (NUM_STAGES * 2 * KV_SPLIT * TILE_N * HEAD_DIM)
#endif
#define MMA_SMEM_F16 (2 * 2 * KV_SPLIT * TILE_N * HEAD_DIM * 2)
#define MMA_SMEM_Q (TILE_M * HEAD_DIM * 2)
#define MMA_SMEM_TILES (MMA_SMEM_RAW + MMA_SMEM_F16 + MMA_SMEM_Q)
#define MMA_SMEM_MERGE ((KV_SPLIT - 1) * TILE_M * (HEAD_DIM + 2) * 4)
#define MMA_SMEM_BYTES (MMA_SMEM_TILES > MMA_SMEM_MERGE ? MMA_SMEM_TILES : MMA_SMEM_MERGE)
#if (MMA_SMEM_BYTES > 101376)
#error "sdpa_fp8_mma: this config needs more than 101376 bytes (99 KiB) of shared memory (the sm_89 limit); reduce TILE_N, KV_SPLIT or NUM_STAGES"
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "sdpa_fp8_mma: needs sm_80 or newer (cp.async, ldmatrix, mma.sync m16n8k16)"
#endif
// The integer conversion: asked for, or the only one there is (cvt ... e4m3x2 needs sm_89).
#if DEQUANT_INT || (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 890))
#define MMA_DEQUANT_INT 1
#else
#define MMA_DEQUANT_INT 0
#endif
// The warpgroup path: asked for, and compiling for sm_90a.
#if USE_WGMMA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MMA_WGMMA 1
#else
#define MMA_WGMMA 0
#endif

namespace mma_attn {

constexpr int D = HEAD_DIM;
constexpr int NT = NUM_WARPS * 32;       // block threads
constexpr int ROW_WARPS = TILE_M / WARP_M;  // warps per KV group
constexpr int MT = WARP_M / 16;          // m16 tiles per warp
constexpr int KT = KV_SPLIT * TILE_N;    // keys per tile (both groups)
// A warp runs its online softmax over SUB_N keys at a time (a TILE_N tile in TILE_N/SUB_N steps):
// the S accumulators of WARP_M x SUB_N scores must fit beside O (WARP_M x D) in 128 registers,
// so SUB_N is 32 keys for WARP_M 16 and 16 for WARP_M 32 (32 spills 72-76 bytes under the
// 128-register cap), while a larger TILE_N still cuts the barriers and conversion rounds per key.
constexpr int SUB_MAX = WARP_M == 16 ? 32 : 16;
constexpr int SUB_N = TILE_N < SUB_MAX ? TILE_N : SUB_MAX;
constexpr int NTN = SUB_N / 8;           // 8-key n-tiles of S per softmax step
#if !PV_FP8
constexpr int KBN = SUB_N / 16;          // 16-key k-blocks of P.V per softmax step
#endif
constexpr int KBD = D / 16;              // 16-wide k-blocks of Q.K^T
constexpr int NTD = D / 8;               // 8-column n-tiles of O
constexpr int RAW_ROW_CHUNKS = D / 16;   // 16-byte chunks per raw e4m3 row
constexpr int RAW_TILE = KT * D;         // bytes of one raw K (or V) tile
constexpr int RAW_CHUNKS = RAW_TILE / 16;
#if !KV_VIA_REGS
constexpr int RAW_SLOT = 2 * RAW_TILE;  // one ring slot: K and V
#endif
constexpr int H_ROW = 2 * D;             // bytes of one fp16 row
constexpr int H_TILE = KT * H_ROW;       // bytes of one fp16 K (or V) tile
constexpr int H_BUF = 2 * H_TILE;
constexpr int OFF_H = MMA_SMEM_RAW;
constexpr int OFF_Q = OFF_H + MMA_SMEM_F16;
constexpr int Q_CHUNKS = TILE_M * D / 8;  // 16-byte chunks of the fp16 Q tile
constexpr int SMEM_BYTES = MMA_SMEM_BYTES;
constexpr float LOG2E = 1.4426950408889634f;

// PV_FP8: V transposed to [d][key] e4m3 bytes.  Within each 32-key block of a row, word
// w = 2t + h (t = 0..3, h = 0..1) holds keys 16h + {2t, 2t+1, 8+2t, 9+2t}, in this byte order:
// the keys thread t of a quad holds in S (C fragments of n-tiles 2h, 2h+1), which the A fragment
// of m16n8k32 takes as k = 16h + 4t .. 16h + 4t + 3.  So the B fragment (k = 4t.., 16+4t.. of
// column d) is words 2t, 2t+1: one 64-bit load.  Rows are padded to an odd multiple of 32 bytes
// (KT = 32 needs none): the 4 rows a half-warp reads then fall into distinct banks.
constexpr int VT_ROW = KT == 32 ? 32 : KT + 32;
#if PV_FP8
constexpr int V_GROUPS = KT * D / 64;  // 4 keys x 16 columns: one transpose unit (4 raw chunks)
constexpr int V_OWN = (V_GROUPS + NT - 1) / NT;  // transpose groups per thread
#endif

static_assert(!PV_FP8 || D * VT_ROW <= H_TILE, "the transposed V tile fits in the fp16 V tile's place");
static_assert(OFF_H % 128 == 0 && OFF_Q % 128 == 0 && H_TILE % 128 == 0, "fp16 tiles stay 128-byte aligned");
static_assert(KBD % 2 == 0 && NTD % 2 == 0, "ldmatrix.x4 covers two k-blocks / two n-tiles");

// Byte offset of 16-byte chunk c of row r in an fp16 tile: the low 3 bits of the chunk index
// are XORed with the row, so the 8 rows an ldmatrix phase reads (same logical chunk) and the
// chunks a quarter-warp stores after conversion fall into distinct banks.
__device__ __forceinline__ int hswz(int r, int c) { return r * H_ROW + ((c ^ (r & 7)) << 4); }

// The once-per-tile barrier: the whole block, or with KV_GROUP_SYNC only KV group `grp`'s warps
// (named barrier 1 + grp; 0 is __syncthreads'), which are the only ones that write or read its
// rows.  Barrier ids are immediates, so ptxas reserves KV_SPLIT + 1 barriers, not all 16.
template <int ID>
__device__ __forceinline__ void group_barrier() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(NT / KV_SPLIT) : "memory");
}
__device__ __forceinline__ void tile_barrier(int grp) {
#if KV_GROUP_SYNC
    if (grp == 0) group_barrier<1>();
    else if (KV_SPLIT == 2 || grp == 1) group_barrier<2>();
    else if (grp == 2) group_barrier<3>();
    else group_barrier<4>();
#else
    (void)grp;
    __syncthreads();
#endif
}

#include "sdpa_fp8_mma_ptx.cuh"  // cp.async, ldmatrix, mma.sync, e4m3 conversion, exp2
#if MMA_WGMMA
#include "sdpa_fp8_mma_wgmma.cuh"  // wgmma.mma_async, its fences and the smem descriptor
static_assert(OFF_H % 1024 == 0 && H_TILE % 1024 == 0, "wgmma's 128B-swizzle tiles start on 1024-byte boundaries");
#endif

// One x4 B fragment (n-tiles 2i and 2i+1) used by every m16 tile of the warp:
// acc[mt][2i] += a[mt]·(b0, b1), acc[mt][2i+1] += a[mt]·(b2, b3).
template <int N>
__device__ __forceinline__ void mma_pair_all_tiles(float (&acc)[MT][N][4], int i, const uint32_t (&a)[MT][4],
                                                   uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        mma16816(acc[mt][2 * i], a[mt], b0, b1);
        mma16816(acc[mt][2 * i + 1], a[mt], b2, b3);
    }
}

// The fp16 tiles hold the E4M3 value / DQ_SCALE, so scores and O are multiplied by it.
constexpr float DQ_SCALE = MMA_DEQUANT_INT ? 256.f : 1.f;
// Added to every exp2 argument, so P = 2^P_EXP2_OFFSET · exp2(s - m): PV_FP8 stores P in e4m3
// as P * 256 (see kernels/README.md, "FP8 P·V").  A power of two: it costs nothing (folded into
// the FFMA that forms the argument), changes no rounding (e4m3 keeps the same relative
// precision in every normal binade), and cancels exactly in O / l, since l sums the same
// e4m3 P through the tensor cores.  256 rather than 448: the largest P (1, at the row max)
// becomes 256 <= 448, so nothing saturates, and the normal range reaches down to
// P = 2^-6 / 256 = 2^-14 (subnormals to 2^-17; smaller P flush to 0).
constexpr float P_EXP2_OFFSET = PV_FP8 ? 8.f : 0.f;

#include "sdpa_fp8_mma_tiles.cuh"  // issue_tile, issue_q, convert_tile

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
    extern __shared__ __align__(1024) unsigned char smem[];

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
    // The per-head scales are read first: their global-load latency then hides under the
    // prologue's copies instead of stalling the first softmax step (k_scale, read after the Q
    // barrier) and the epilogue (v_scale, read after the merge, right before the stores).
    const float c = fmaxf(k_scale[bh] * (softmax_scale * LOG2E * DQ_SCALE), 1e-30f);
    const float vsc = v_scale[bh] * (PV_FP8 ? 1.f : DQ_SCALE);  // PV_FP8: V never leaves e4m3
    const uint32_t smem_s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

#if KV_VIA_REGS
    // Convert tile t (this thread's chunks, in registers) into fp16 buffer t % 2, then start the
    // loads of tile t + 1 into the same registers.  The wait covers Q's copy (the only group).
    RawChunks raw;
    auto convert = [&](int t) {
        cp_async_wait<0>();
        convert_chunks(raw, smem + OFF_H + (t & 1) * H_BUF, tid);
#if MMA_WGMMA
        fence_proxy_async_shared();  // wgmma reads the tile through the async proxy
#endif
        if (t + 1 < ntiles) load_chunks(Kbh, Vbh, t + 1, S, tid, raw);
    };

    // ---- prologue: Q in flight (cp.async) and tile 0 into registers; tile 0 is converted below,
    // and the first loop barrier publishes Q and tile 0 ----
    issue_q(Q + base, q0, S, smem_s + OFF_Q, tid);
    cp_async_commit();
    load_chunks(Kbh, Vbh, 0, S, tid, raw);
#else
    // Convert tile t into fp16 buffer t % 2.  Its raw bytes are this thread's own cp.async copies,
    // landed once all but the newest NUM_STAGES-1 commit groups are complete (tiles 0..NS-1 in
    // the prologue, then one refill group per loop iteration, so this is tile t's group).
    auto convert = [&](int t) {
        cp_async_wait<NUM_STAGES - 1>();
        convert_tile(smem + (t % NUM_STAGES) * RAW_SLOT, smem + OFF_H + (t & 1) * H_BUF, tid);
#if MMA_WGMMA
        fence_proxy_async_shared();  // wgmma reads the tile through the async proxy
#endif
    };

    // ---- prologue: Q and tiles 0 .. NUM_STAGES-1 in flight, one commit group per tile (Q in
    // tile 0's); tile 0 is converted below, and the first loop barrier publishes Q and tile 0 ----
    issue_q(Q + base, q0, S, smem_s + OFF_Q, tid);
#pragma unroll
    for (int st = 0; st < NUM_STAGES; ++st) {
        if (st < ntiles) issue_tile(Kbh, Vbh, st, S, smem_s + st * RAW_SLOT, tid);
        cp_async_commit();
    }
#endif

    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int gid = lane >> 2;  // row within the 8-row half of an m16 tile
    const int t4 = lane & 3;    // thread in quad
    const int grp = warp / ROW_WARPS;                  // KV_SPLIT group
    const int r0 = (warp % ROW_WARPS) * WARP_M + gid;  // this thread's rows: r0 + 16 mt + 8 hr

    convert(0);

    // Per-lane ldmatrix offsets inside an fp16 tile.  The 8 rows an ldmatrix phase reads start
    // at a multiple of 8, so the swizzle term is the lane's (row & 7 = lane & 7), and moving to
    // the next k-block pair (K) or n-tile pair (V) flips one bit of the chunk index: an XOR.
    //  K (B of Q.K^T, x4 = k-blocks 2kk, 2kk+1 of one 8-key n-tile): row lane&7, chunk 4kk + lane/8.
    //  V (B of P.V, x4.trans = n-tiles 2nn, 2nn+1 of one 16-key k-block): row (lane&7) + 8*((lane/8)&1),
    //  chunk 2nn + lane/16.
    //  Q (A of Q.K^T, x4 = one 16-wide k-block kb of one m16 tile): as V, chunk 2kb + lane/16;
    //  m16 tile mt of the warp is 16 rows further (a multiple of 8 rows: same swizzle term).
    const uint32_t koff = static_cast<uint32_t>(hswz(lane & 7, lane >> 3));  // XOR kk << 6
#if WARP_M == 32
    //  K for WARP_M 32 (x4 = one k-block kb of the n-tile pair 2np, 2np+1): row (lane&7) +
    //  8*(lane/16), chunk 2kb + (lane/8)&1.
    const uint32_t koff2 = static_cast<uint32_t>(hswz((lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1));  // XOR kb << 5
#endif
    const uint32_t voff = static_cast<uint32_t>(H_TILE + hswz((lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4));  // XOR nn << 5
    const uint32_t qaddr = smem_s + OFF_Q + (warp % ROW_WARPS) * WARP_M * H_ROW +
                           static_cast<uint32_t>(hswz((lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4));  // XOR kb << 5

#if MMA_WGMMA
    if (smem_s & 1023) __trap();  // the swizzle pattern is taken from absolute address bits
#endif
#if Q_IN_REGS || MMA_WGMMA || KV_GROUP_SYNC
    // Every thread's Q copies landed with tile 0's group (convert(0) waited for it); this barrier
    // publishes the other threads' copies (the loop's barriers span one KV group with KV_GROUP_SYNC).
    __syncthreads();
#endif
#if Q_IN_REGS || MMA_WGMMA
    // Q fragments loaded once (MT = 1 here).
    uint32_t qf[KBD][4];
#pragma unroll
    for (int kb = 0; kb < KBD; ++kb) ldmatrix_x4(qaddr ^ (kb << 5), qf[kb][0], qf[kb][1], qf[kb][2], qf[kb][3]);
#endif

    // Raw score -> log2 units: c (read at the start).  Clamped away from 0 so a masked score
    // (-inf) never meets 0 * inf.
    float m_run[MT][2];     // running max, log2 units: row r0 + 16 mt + 8 hr
    float l_acc[MT][4];     // row sums: [mt][0] row r0 + 16 mt, [mt][2] row r0 + 16 mt + 8
    float o[MT][NTD][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        m_run[mt][0] = m_run[mt][1] = -INFINITY;
        l_acc[mt][0] = l_acc[mt][1] = l_acc[mt][2] = l_acc[mt][3] = 0.f;
#pragma unroll
        for (int n = 0; n < NTD; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    }

    for (int j = 0; j < ntiles; ++j) {
#if MMA_WGMMA
        wgmma_wait_all();  // this warpgroup's P.V of tile j-1 has read its V tile
        wgmma_fence_operand(o[0]);
#endif
        tile_barrier(grp);  // fp16 tile j complete; every warp is done with tile j-1's buffer
#if !KV_VIA_REGS
        // Tile j's ring slot was converted before the barrier: refill it with tile j + NUM_STAGES.
        if (j + NUM_STAGES < ntiles)
            issue_tile(Kbh, Vbh, j + NUM_STAGES, S, smem_s + (j % NUM_STAGES) * RAW_SLOT, tid);
        cp_async_commit();
#endif
#pragma unroll 1
        for (int sub = 0; sub < TILE_N / SUB_N; ++sub) {
            // first key of this softmax step (this group's part of the tile, SUB_N keys)
            const int k0 = j * KT + grp * TILE_N + sub * SUB_N;
            if (k0 >= S) break;  // warp-uniform: no valid key left in this group's part
            const uint32_t hb = smem_s + OFF_H + (j & 1) * H_BUF + (grp * TILE_N + sub * SUB_N) * H_ROW;

            // ---- S = Q K^T: each K fragment is loaded once and used for all MT m16 tiles.  Q
            // fragments come from registers (Q_IN_REGS) or are re-read from shared memory per
            // k-block pair, so only 8 registers of them per m16 tile are live at a time ----
            float s[MT][NTN][4];
#if MMA_WGMMA
            // The warpgroup's m64 x SUB_N x 16 per k-block: K is read from the tile by the tensor
            // cores (+32 bytes per k-block inside its 128-byte rows).
            wgmma_fence();
#pragma unroll
            for (int kb = 0; kb < KBD; ++kb) wgmma_rs<0>(s[0], qf[kb], sw128_desc(hb + kb * 32), kb);
            wgmma_commit();
            wgmma_wait_all();
            wgmma_fence_operand(s[0]);
#else
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < NTN; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KBD / 2; ++kk) {
#if Q_IN_REGS
                const uint32_t(&qa)[4] = qf[2 * kk];
                const uint32_t(&qb)[4] = qf[2 * kk + 1];
#pragma unroll
                for (int n = 0; n < NTN; ++n) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4(hb + (koff ^ (kk << 6)) + n * 8 * H_ROW, b0, b1, b2, b3);
                    mma16816(s[0][n], qa, b0, b1);
                    mma16816(s[0][n], qb, b2, b3);
                }
#elif WARP_M == 32
                // One k-block at a time (8 registers of Q fragments live, not 16): each x4 of K
                // holds k-block kb of the n-tile pair (2np, 2np+1).
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int kb = 2 * kk + h;
                    uint32_t qa[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
                        ldmatrix_x4((qaddr + mt * 16 * H_ROW) ^ (kb << 5), qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3]);
#pragma unroll
                    for (int np = 0; np < NTN / 2; ++np) {
                        uint32_t b0, b1, b2, b3;
                        ldmatrix_x4(hb + (koff2 ^ (kb << 5)) + np * 16 * H_ROW, b0, b1, b2, b3);
                        mma_pair_all_tiles(s, np, qa, b0, b1, b2, b3);
                    }
                }
#else
                uint32_t qa[MT][4], qb[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const uint32_t qm = qaddr + mt * 16 * H_ROW;
                    ldmatrix_x4(qm ^ ((2 * kk) << 5), qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3]);
                    ldmatrix_x4(qm ^ ((2 * kk + 1) << 5), qb[mt][0], qb[mt][1], qb[mt][2], qb[mt][3]);
                }
#pragma unroll
                for (int n = 0; n < NTN; ++n) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4(hb + (koff ^ (kk << 6)) + n * 8 * H_ROW, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma16816(s[mt][n], qa[mt], b0, b1);
                        mma16816(s[mt][n], qb[mt], b2, b3);
                    }
                }
#endif
            }
#endif  // MMA_WGMMA

            // ---- mask keys past S (only the last tile can have any) ----
            if (k0 + SUB_N > S) {
#pragma unroll
                for (int n = 0; n < NTN; ++n) {
                    const int key = k0 + 8 * n + 2 * t4;
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        if (key >= S) s[mt][n][0] = s[mt][n][2] = -INFINITY;
                        if (key + 1 >= S) s[mt][n][1] = s[mt][n][3] = -INFINITY;
                    }
                }
            }

            // ---- online softmax (per m16 tile: row +0: elements 0, 1; row +8: elements 2, 3) ----
            float alpha[MT][2], mneg[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int n = 0; n < NTN; ++n) {
                    mx[0] = fmaxf(mx[0], fmaxf(s[mt][n][0], s[mt][n][1]));
                    mx[1] = fmaxf(mx[1], fmaxf(s[mt][n][2], s[mt][n][3]));
                }
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
                    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
                    const float m_new = fmaxf(m_run[mt][hr], mx[hr] * c);  // finite: key k0 is valid
                    alpha[mt][hr] = fast_exp2(m_run[mt][hr] - m_new);     // 0 on the first tile
                    m_run[mt][hr] = m_new;
                    mneg[mt][hr] = P_EXP2_OFFSET - m_new;
                }
            }
#if PV_FP8
            // ---- P = 2^8 exp2(s - m) -> e4m3 in registers: the A fragment of one m16n8k32
            // (a[2h + hr]: row r0 + 8hr, keys of n-tiles 2h, 2h+1, the order VT_ROW describes);
            // then per n-tile of O: this step's P V from zero accumulators, added to O * alpha in
            // fp32 (two-level accumulation: the tensor core's own sum spans 32 products).
            // WARP_M = 16 here (MT = 1) ----
            {
                uint32_t pa[4];
#pragma unroll
                for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        const float(&x)[4] = s[0][2 * hh];
                        const float(&y)[4] = s[0][2 * hh + 1];
                        pa[2 * hh + hr] = pack_e4m3x4(fast_exp2(fmaf(x[2 * hr], c, mneg[0][hr])),
                                                      fast_exp2(fmaf(x[2 * hr + 1], c, mneg[0][hr])),
                                                      fast_exp2(fmaf(y[2 * hr], c, mneg[0][hr])),
                                                      fast_exp2(fmaf(y[2 * hr + 1], c, mneg[0][hr])));
                    }
                constexpr uint32_t ONES8 = 0x38383838u;  // four e4m3 1.0: P.1 gives the row sums
                float t[4];
                mma16832_e4m3(t, pa, ONES8, ONES8);
                l_acc[0][0] = fmaf(l_acc[0][0], alpha[0][0], t[0]);
                l_acc[0][2] = fmaf(l_acc[0][2], alpha[0][1], t[2]);
                const unsigned char* vt = smem + OFF_H + (j & 1) * H_BUF + H_TILE + grp * TILE_N + sub * SUB_N +
                                          gid * VT_ROW + 8 * t4;
#pragma unroll
                for (int n = 0; n < NTD; ++n) {
                    const uint2 bv = *reinterpret_cast<const uint2*>(vt + n * 8 * VT_ROW);
                    mma16832_e4m3(t, pa, bv.x, bv.y);
                    o[0][n][0] = fmaf(o[0][n][0], alpha[0][0], t[0]);
                    o[0][n][1] = fmaf(o[0][n][1], alpha[0][0], t[1]);
                    o[0][n][2] = fmaf(o[0][n][2], alpha[0][1], t[2]);
                    o[0][n][3] = fmaf(o[0][n][3], alpha[0][1], t[3]);
                }
            }
#else
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                l_acc[mt][0] *= alpha[mt][0];  // (elements 1 and 3 are copies of 0 and 2, never read)
                l_acc[mt][2] *= alpha[mt][1];
#pragma unroll
                for (int n = 0; n < NTD; ++n) {
                    o[mt][n][0] *= alpha[mt][0];
                    o[mt][n][1] *= alpha[mt][0];
                    o[mt][n][2] *= alpha[mt][1];
                    o[mt][n][3] *= alpha[mt][1];
                }
            }

#if MMA_WGMMA
            // ---- P (fp16, in registers) is the A operand of the warpgroup's m64 x 64 x 16 per
            // 16-key k-block; V is read by the tensor cores as an MN-major (transposed) B, 16 keys
            // = two 8-row groups per k-block.  l gets this thread's fp32 P (its quad's partial
            // sums are added after the loop).  P.V is waited for at the next barrier: pa must not be
            // overwritten before that (in mma-wg-kv2's SASS nothing writes them; check again when
            // the register count nears 128, see kernels/README.md) ----
            {
                uint32_t pa[KBN][4];
#pragma unroll
                for (int kb = 0; kb < KBN; ++kb)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) {
                        const float(&x)[4] = s[0][2 * kb + hh];
                        const float p0 = fast_exp2(fmaf(x[0], c, mneg[0][0])), p1 = fast_exp2(fmaf(x[1], c, mneg[0][0]));
                        const float p2 = fast_exp2(fmaf(x[2], c, mneg[0][1])), p3 = fast_exp2(fmaf(x[3], c, mneg[0][1]));
                        l_acc[0][0] += p0 + p1;
                        l_acc[0][2] += p2 + p3;
                        pa[kb][2 * hh] = pack_half2(p0, p1);
                        pa[kb][2 * hh + 1] = pack_half2(p2, p3);
                    }
                wgmma_fence();
#pragma unroll
                for (int kb = 0; kb < KBN; ++kb) wgmma_rs<1>(o[0], pa[kb], sw128_desc(hb + H_TILE + kb * 16 * H_ROW), 1);
                wgmma_commit();  // waited for before the next barrier: it overlaps the conversion
            }
#else
            // ---- P (fp16, in registers); O += P V and l += P 1, one 16-key k-block at a time;
            // each V fragment is loaded once and used for all MT m16 tiles ----
            constexpr uint32_t ONES = 0x3c003c00u;  // half2(1, 1): P.1 gives the row sums
#pragma unroll
            for (int kb = 0; kb < KBN; ++kb) {
                uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) {
                        const float(&x)[4] = s[mt][2 * kb + hh];
                        pa[mt][2 * hh] = pack_half2(fast_exp2(fmaf(x[0], c, mneg[mt][0])),
                                                    fast_exp2(fmaf(x[1], c, mneg[mt][0])));
                        pa[mt][2 * hh + 1] = pack_half2(fast_exp2(fmaf(x[2], c, mneg[mt][1])),
                                                        fast_exp2(fmaf(x[3], c, mneg[mt][1])));
                    }
                    mma16816(l_acc[mt], pa[mt], ONES, ONES);
                }
#pragma unroll
                for (int nn = 0; nn < NTD / 2; ++nn) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4_trans(hb + (voff ^ (nn << 5)) + kb * 16 * H_ROW, b0, b1, b2, b3);
                    mma_pair_all_tiles(o, nn, pa, b0, b1, b2, b3);
                }
            }
#endif  // MMA_WGMMA
#endif  // PV_FP8
        }
        if (j + 1 < ntiles) convert(j + 1);  // while the other warps may still compute tile j
    }

#if MMA_WGMMA
    wgmma_wait_all();  // the last P.V
    wgmma_fence_operand(o[0]);
    // ---- each thread summed its own columns of P: add the quad's four partial row sums ----
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        l_acc[0][2 * hr] += __shfl_xor_sync(0xffffffffu, l_acc[0][2 * hr], 1);
        l_acc[0][2 * hr] += __shfl_xor_sync(0xffffffffu, l_acc[0][2 * hr], 2);
    }
#endif

#if KV_SPLIT > 1
    // ---- merge the KV groups: groups 1 .. KV_SPLIT-1 publish (m, l, O), group 0 combines ----
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the tiles; shared memory becomes the merge buffer
    float* mrg = reinterpret_cast<float*>(smem);  // [KV_SPLIT - 1][TILE_M][D + 2]: O, m, l
    constexpr int LDM = D + 2;
    if (grp > 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                float* row = mrg + ((grp - 1) * TILE_M + r0 + 16 * mt + 8 * hr) * LDM;
#pragma unroll
                for (int n = 0; n < NTD; ++n) {
                    row[8 * n + 2 * t4] = o[mt][n][2 * hr];
                    row[8 * n + 2 * t4 + 1] = o[mt][n][2 * hr + 1];
                }
                if (t4 == 0) {
                    row[D] = m_run[mt][hr];
                    row[D + 1] = l_acc[mt][2 * hr];
                }
            }
    }
    __syncthreads();
    if (grp > 0) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int r = r0 + 16 * mt + 8 * hr;
            float m = m_run[mt][hr];  // finite: group 0 always saw key 0
#pragma unroll
            for (int g = 1; g < KV_SPLIT; ++g) m = fmaxf(m, mrg[((g - 1) * TILE_M + r) * LDM + D]);
            const float a0 = fast_exp2(m_run[mt][hr] - m);
            l_acc[mt][2 * hr] *= a0;
#pragma unroll
            for (int n = 0; n < NTD; ++n) {
                o[mt][n][2 * hr] *= a0;
                o[mt][n][2 * hr + 1] *= a0;
            }
#pragma unroll
            for (int g = 1; g < KV_SPLIT; ++g) {
                const float* row = mrg + ((g - 1) * TILE_M + r) * LDM;
                const float a = fast_exp2(row[D] - m);  // 0 when group g saw no key (m_g = -inf)
                l_acc[mt][2 * hr] = fmaf(row[D + 1], a, l_acc[mt][2 * hr]);
#pragma unroll
                for (int n = 0; n < NTD; ++n) {
                    o[mt][n][2 * hr] = fmaf(row[8 * n + 2 * t4], a, o[mt][n][2 * hr]);
                    o[mt][n][2 * hr + 1] = fmaf(row[8 * n + 2 * t4 + 1], a, o[mt][n][2 * hr + 1]);
                }
            }
        }
#endif

    // ---- epilogue: O * v_scale / l -> fp16; thread t holds columns 8n + 2t + {0,1} ----
    // (vsc = v_scale * DQ_SCALE, read at the start)
    __half* Obh = O + base;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = q0 + r0 + 16 * mt + 8 * hr;
            if (row >= S) continue;
            const float f = vsc / l_acc[mt][2 * hr];
            uint32_t* dst = reinterpret_cast<uint32_t*>(Obh + static_cast<size_t>(row) * D) + t4;
#pragma unroll
            for (int n = 0; n < NTD; ++n) dst[4 * n] = pack_half2(o[mt][n][2 * hr] * f, o[mt][n][2 * hr + 1] * f);
        }
}
