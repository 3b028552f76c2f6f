//! sdpa_fp8_mma_tiles.cuh — the data movement of kernels/sdpa_fp8_mma.cu: cp.async of the raw
//! e4m3 K/V tiles (or, with KV_VIA_REGS, ld.global of each thread's chunks into registers) and
//! of the fp16 Q tile into shared memory, and the once-per-block conversion of a raw K/V tile
//! into the swizzled fp16 tile (with PV_FP8, V transposed to [d][key] e4m3 instead).  Included
//! by sdpa_fp8_mma.cu inside its namespace, after its layout constants; not a standalone header.

#if PV_FP8
// The 4 keys of V transpose group g (see VT_ROW): 32-key block kb, word w = 2t + h; its chunk
// column is cc (16 columns).  Groups run word-fastest, so a warp's stores cover whole rows.
struct VGroup {
    int kb, w, cc;
    __device__ __forceinline__ explicit VGroup(int g) : kb((g >> 3) % (KT / 32)), w(g & 7), cc((g >> 3) / (KT / 32)) {}
    __device__ __forceinline__ int key(int i) const {  // i = 0..3
        return 32 * kb + 16 * (w & 1) + 2 * (w >> 1) + (i & 1) + 8 * (i >> 1);
    }
};
#endif

// Thread t of the block owns raw chunks t, t + NT, ... of both the K and the V tile, in the
// copy and in the conversion, so it only ever converts bytes its own copy wrote.  With
// KV_GROUP_SYNC the same pattern runs within each KV group: the group's threads own exactly
// the chunks of its TILE_N rows, so no thread touches another group's rows.
constexpr int OWN_GROUPS = KV_GROUP_SYNC ? KV_SPLIT : 1;
constexpr int OWN_THREADS = NT / OWN_GROUPS;       // threads sharing one set of rows
constexpr int OWN_SPAN = RAW_CHUNKS / OWN_GROUPS;  // raw chunks of those rows
constexpr int OWN = (OWN_SPAN + OWN_THREADS - 1) / OWN_THREADS;
static_assert(NT % OWN_GROUPS == 0 && RAW_CHUNKS % OWN_GROUPS == 0, "groups own whole rows");

// Tile chunk index of this thread's i-th raw chunk, or -1 when it has no i-th chunk.
__device__ __forceinline__ int own_chunk(int tid, int i) {
    const int local = tid % OWN_THREADS + i * OWN_THREADS;
    return (OWN_SPAN % OWN_THREADS == 0 || local < OWN_SPAN) ? (tid / OWN_THREADS) * OWN_SPAN + local : -1;
}

// cp.async tile `tile` (rows past S zero-filled: V must hold no NaN bytes there, since
// P = 0 times NaN would poison O) into ring slot `slot` (shared-window address).
__device__ __forceinline__ void issue_tile(const uint8_t* __restrict__ Kbh, const uint8_t* __restrict__ Vbh, int tile,
                                           int S, uint32_t slot, int tid) {
#pragma unroll
    for (int i = 0; i < OWN; ++i) {
        const int c = own_chunk(tid, i);
        if (c >= 0) {
            const int key = tile * KT + c / RAW_ROW_CHUNKS;
            const bool valid = key < S;
            const size_t g = valid ? (static_cast<size_t>(key) * D + (c % RAW_ROW_CHUNKS) * 16) : 0;
            cp_async16_zfill(slot + c * 16, Kbh + g, valid);
#if !PV_FP8
            cp_async16_zfill(slot + RAW_TILE + c * 16, Vbh + g, valid);
#endif
        }
    }
#if PV_FP8
    // V by transpose groups: the thread that transposes a group copies its 4 chunks.
#pragma unroll
    for (int i = 0; i < V_OWN; ++i) {
        const int gi = tid + i * NT;
        if (V_GROUPS % NT == 0 || gi < V_GROUPS) {
            const VGroup grp(gi);
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int kr = grp.key(r);
                const int key = tile * KT + kr;
                const bool valid = key < S;
                const size_t g = valid ? (static_cast<size_t>(key) * D + grp.cc * 16) : 0;
                cp_async16_zfill(slot + RAW_TILE + (kr * RAW_ROW_CHUNKS + grp.cc) * 16, Vbh + g, valid);
            }
        }
    }
#endif
}

// cp.async the fp16 Q tile (rows past S zero-filled) into the swizzled tile at `qs`.
__device__ __forceinline__ void issue_q(const __half* __restrict__ Qbh, int q0, int S, uint32_t qs, int tid) {
#pragma unroll
    for (int i = 0; i < (Q_CHUNKS + NT - 1) / NT; ++i) {
        const int c = tid + i * NT;
        if (Q_CHUNKS % NT == 0 || c < Q_CHUNKS) {
            const int r = c / (D / 8);
            const bool valid = q0 + r < S;
            const __half* src = valid ? Qbh + static_cast<size_t>(q0 + r) * D + (c % (D / 8)) * 8 : Qbh;
            cp_async16_zfill(qs + hswz(r, c % (D / 8)), src, valid);
        }
    }
}

// Raw chunk c (16 e4m3 bytes) -> its two fp16 chunks in the swizzled tile at `htile`.
__device__ __forceinline__ void store_fp16_chunk(uint4 x, unsigned char* htile, int c) {
    const int r = c / RAW_ROW_CHUNKS;
    const int hc = 2 * (c % RAW_ROW_CHUNKS);  // first of the two fp16 chunks
    uint4 a, b;
    e4m3x4_to_half2x2(x.x, a.x, a.y);
    e4m3x4_to_half2x2(x.y, a.z, a.w);
    e4m3x4_to_half2x2(x.z, b.x, b.y);
    e4m3x4_to_half2x2(x.w, b.z, b.w);
    *reinterpret_cast<uint4*>(htile + hswz(r, hc)) = a;
    *reinterpret_cast<uint4*>(htile + hswz(r, hc + 1)) = b;
}

#if KV_VIA_REGS
// This thread's chunks of one tile, K and V, held in registers between load and conversion.
struct RawChunks {
    uint4 k[OWN], v[OWN];
};

// ld.global.nc of this thread's chunks of tile `tile` (rows past S become zero, as with cp.async).
__device__ __forceinline__ void load_chunks(const uint8_t* __restrict__ Kbh, const uint8_t* __restrict__ Vbh, int tile,
                                            int S, int tid, RawChunks& raw) {
#pragma unroll
    for (int i = 0; i < OWN; ++i) {
        const int c = own_chunk(tid, i);
        raw.k[i] = raw.v[i] = make_uint4(0, 0, 0, 0);
        const int key = tile * KT + c / RAW_ROW_CHUNKS;
        if (c >= 0 && key < S) {
            const size_t g = static_cast<size_t>(key) * D + (c % RAW_ROW_CHUNKS) * 16;
            raw.k[i] = __ldg(reinterpret_cast<const uint4*>(Kbh + g));
            raw.v[i] = __ldg(reinterpret_cast<const uint4*>(Vbh + g));
        }
    }
}

// This thread's chunks, from registers -> fp16 (swizzled) in buffer `hbuf`.
__device__ __forceinline__ void convert_chunks(const RawChunks& raw, unsigned char* hbuf, int tid) {
#pragma unroll
    for (int i = 0; i < OWN; ++i) {
        const int c = own_chunk(tid, i);
        if (c >= 0) {
            store_fp16_chunk(raw.k[i], hbuf, c);
            store_fp16_chunk(raw.v[i], hbuf + H_TILE, c);
        }
    }
}
#endif

// This thread's raw chunks of ring slot `raw` -> fp16 (swizzled) in buffer `hbuf`.
__device__ __forceinline__ void convert_tile(const unsigned char* raw, unsigned char* hbuf, int tid) {
#pragma unroll
    for (int i = 0; i < OWN; ++i) {
        const int c = own_chunk(tid, i);
        if (c >= 0) {
#pragma unroll
            for (int m = 0; m < (PV_FP8 ? 1 : 2); ++m)  // K, V (V stays e4m3 with PV_FP8)
                store_fp16_chunk(*reinterpret_cast<const uint4*>(raw + m * RAW_TILE + c * 16), hbuf + m * H_TILE, c);
        }
    }
#if PV_FP8
    // This thread's V groups: 4 raw 16-byte rows (keys) -> 16 words of 4 keys each, one per
    // column, by a 4x4 byte transpose per 32-bit word (prmt), into the [d][key] tile.
    unsigned char* vt = hbuf + H_TILE;
#pragma unroll
    for (int i = 0; i < V_OWN; ++i) {
        const int gi = tid + i * NT;
        if (V_GROUPS % NT == 0 || gi < V_GROUPS) {
            const VGroup grp(gi);
            uint4 x[4];
#pragma unroll
            for (int r = 0; r < 4; ++r)
                x[r] = *reinterpret_cast<const uint4*>(raw + RAW_TILE + (grp.key(r) * RAW_ROW_CHUNKS + grp.cc) * 16);
            unsigned char* col = vt + grp.cc * 16 * VT_ROW + 32 * grp.kb + 4 * grp.w;
#pragma unroll
            for (int q = 0; q < 4; ++q) {  // word q of each row: columns 4q .. 4q+3 of the chunk
                const uint32_t a = (&x[0].x)[q], b = (&x[1].x)[q], c = (&x[2].x)[q], d = (&x[3].x)[q];
                const uint32_t ab01 = __byte_perm(a, b, 0x5140), cd01 = __byte_perm(c, d, 0x5140);
                const uint32_t ab23 = __byte_perm(a, b, 0x7362), cd23 = __byte_perm(c, d, 0x7362);
                *reinterpret_cast<uint32_t*>(col + (4 * q + 0) * VT_ROW) = __byte_perm(ab01, cd01, 0x5410);
                *reinterpret_cast<uint32_t*>(col + (4 * q + 1) * VT_ROW) = __byte_perm(ab01, cd01, 0x7632);
                *reinterpret_cast<uint32_t*>(col + (4 * q + 2) * VT_ROW) = __byte_perm(ab23, cd23, 0x5410);
                *reinterpret_cast<uint32_t*>(col + (4 * q + 3) * VT_ROW) = __byte_perm(ab23, cd23, 0x7632);
            }
        }
    }
#endif
}
