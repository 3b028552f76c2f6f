//! sdpa_fp8_mma_wgmma.cuh — the Hopper (sm_90a) warpgroup MMA wrappers of kernels/sdpa_fp8_mma.cu
//! (USE_WGMMA = 1) and kernels/sdpa_fp8_ws.cu: `wgmma.mma_async` with the A operand (Q or P, fp16) in registers and the B
//! operand (K or V, fp16) read by the tensor cores straight from the 128-byte-swizzled shared
//! tiles, plus the fences and the descriptor.  Included by sdpa_fp8_mma.cu inside its namespace
//! when compiling for sm_90a (and by sdpa_fp8_ws.cu); not a standalone header.

// Shared-memory matrix descriptor of a tile whose rows are 128 bytes (64 fp16) with the 16-byte
// chunk index XORed by (row & 7) — hswz() — from a 1024-byte-aligned base: the 128B-swizzle
// canonical layout.  Fields (PTX ISA, "Matrix Descriptor Format"): start address >> 4 (bits
// 0-13), leading byte offset >> 4 (16-29; unused here: K-major swizzled operands ignore it, and
// the MN-major V tile is one 64-element atom wide), stride byte offset >> 4 (32-45: 1024 bytes
// from one 8-row group to the next), swizzle mode 1 = 128B (bits 62-63).  `addr` may step inside
// a row (+32 bytes per 16-element k-block of K) or by whole 8-row groups (V's k-blocks).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
           (1ull << 62);
}

// Orders this thread's earlier register and shared-memory accesses before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// The accumulators are written asynchronously: after the wait, this empty asm (which "writes"
// each one) keeps the compiler from reading them any earlier.
template <int N>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// The A operand in registers is read asynchronously too: after the wait, this keeps the
// registers live (and unmodified) until then, so nothing is allocated into them earlier.
template <int N>
__device__ __forceinline__ void wgmma_fence_operand(uint32_t (&a)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

// Makes this thread's ordinary shared-memory stores (the fp16 conversion) visible to the async
// proxy that wgmma reads its B operand through; the barrier after it publishes them.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define WG_ACC8(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])

// d (+)= a * B over m64 x N x k16 (fp16 in, fp32 accumulate); d[n][e] is the m16n8 C fragment
// element e of n-tile n for this warp's 16 rows, as with mma.sync.  TRANS_B: 0 = B is K-major
// (K: [key][d], the key is N), 1 = MN-major (V: [key][d], the key is K).  accumulate 0 ignores d.
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[4][4], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %21, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, %22;\n\t}\n"
        : WG_ACC8(d, 0), WG_ACC8(d, 1), WG_ACC8(d, 2), WG_ACC8(d, 3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate), "n"(TRANS_B));
}
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n\t}\n"
        : WG_ACC8(d, 0), WG_ACC8(d, 1), WG_ACC8(d, 2), WG_ACC8(d, 3), WG_ACC8(d, 4), WG_ACC8(d, 5), WG_ACC8(d, 6),
          WG_ACC8(d, 7)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate), "n"(TRANS_B));
}
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n\t}\n"
        : WG_ACC8(d, 0), WG_ACC8(d, 1), WG_ACC8(d, 2), WG_ACC8(d, 3), WG_ACC8(d, 4), WG_ACC8(d, 5), WG_ACC8(d, 6),
          WG_ACC8(d, 7), WG_ACC8(d, 8), WG_ACC8(d, 9), WG_ACC8(d, 10), WG_ACC8(d, 11), WG_ACC8(d, 12),
          WG_ACC8(d, 13), WG_ACC8(d, 14), WG_ACC8(d, 15)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate), "n"(TRANS_B));
}
#undef WG_ACC8
