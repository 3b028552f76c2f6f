//! sdpa_fp8_mma_ptx.cuh — the inline-PTX wrappers of kernels/sdpa_fp8_mma.cu: cp.async, ldmatrix,
//! mma.sync (m16n8k16 fp16; m16n8k32 e4m3 with PV_FP8), the E4M3 -> fp16 conversion and the exp2.
//! Included by sdpa_fp8_mma.cu inside its namespace, after its config macros (MMA_DEQUANT_INT,
//! PV_FP8) are set; not a standalone header.

__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;  // 0 source bytes: the 16 destination bytes become zero
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four e4m3 bytes b0..b3 of w -> half2 (b0, b1) in lo and (b2, b3) in hi, element order kept.
__device__ __forceinline__ void e4m3x4_to_half2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if MMA_DEQUANT_INT
    // Per 16-bit lane, byte b = s.eeee.mmm -> s.0.eeee.mmm.0000000: an fp16 with the same
    // exponent field and mantissa bits, i.e. the E4M3 value * 2^(7-15) (subnormals included).
    uint32_t t0, t1;
    asm("prmt.b32 %0, %1, 0, 0x1404;\n" : "=r"(t0) : "r"(w));  // lanes (b0 << 8, b1 << 8)
    asm("prmt.b32 %0, %1, 0, 0x3424;\n" : "=r"(t1) : "r"(w));  // lanes (b2 << 8, b3 << 8)
    lo = ((t0 & 0x7f007f00u) >> 1) | (t0 & 0x80008000u);
    hi = ((t1 & 0x7f007f00u) >> 1) | (t1 & 0x80008000u);
#else
    asm("{\n\t.reg .b16 l, h;\n\t"
        "mov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;\n\t"
        "}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
#endif
}

// 2^x on the SFU (ex2.approx.ftz: relative error ~2^-22; 2^-inf = +0).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// c += a * b, m16n8k16, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#if PV_FP8
// c = a * b (fresh accumulators), m16n8k32, e4m3 inputs, fp32 accumulate.
__device__ __forceinline__ void mma16832_e4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

// Four floats -> four e4m3 bytes (x0 in the low byte), round to nearest even, saturating.
// (cvt ... e4m3x2.f32 d, a, b puts a in the upper byte.)
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
    uint32_t r;
    asm("{\n\t.reg .b16 lo, hi;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
        "mov.b32 %0, {lo, hi};\n\t"
        "}\n"
        : "=r"(r)
        : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
    return r;
}
#endif  // PV_FP8
