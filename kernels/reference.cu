// reference.cu — obviously-correct fp32 reference for sdpa_fp8_fwd (see kernels/README.md).
//
// Same inputs and the same dequantisation as the kernel under test:
//   Kd[j][d] = e4m3_to_float(K[b,h,j,d]) * k_scale[b*H+h]
//   Vd[j][d] = e4m3_to_float(V[b,h,j,d]) * v_scale[b*H+h]
//   O[b,h,i,:] = sum_j softmax_j(softmax_scale * Q[b,h,i,:] . Kd[j,:]) * Vd[j,:]   (fp32 out)
//
// One thread per (b, h, query row); no shared memory, no tiling, no fast math.
// Launch: block = (128, 1, 1), grid = (ceil(B*H*S / 128), 1, 1), no dynamic shared memory.
// D (the head dimension) is a run-time argument, 1 <= D <= 256.
//
// E4M3 (the "fn" variant used by cuda_fp8.h and torch.float8_e4m3fn): 1 sign bit, 4 exponent
// bits (bias 7), 3 mantissa bits, no infinities, S.1111.111 is NaN, largest finite 448.
// Decoded here from the bits, independently of cuda_fp8.h.

#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float e4m3_to_float_ref(uint8_t byte) {
    const int sign = byte >> 7;
    const int exponent = (byte >> 3) & 0xF;
    const int mantissa = byte & 0x7;
    float mag;
    if (exponent == 0xF && mantissa == 0x7) {
        mag = __int_as_float(0x7fc00000);  // NaN
    } else if (exponent == 0) {
        mag = ldexpf(static_cast<float>(mantissa) / 8.0f, -6);  // subnormal: 2^-6 * m/8
    } else {
        mag = ldexpf(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
    }
    return sign ? -mag : mag;
}

extern "C" __global__ void __launch_bounds__(128)
    sdpa_reference_f32(const __half* Q, const uint8_t* K, const uint8_t* V, const float* k_scale,
                       const float* v_scale, float* O, int B, int H, int S, int D, float softmax_scale) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const long long total = static_cast<long long>(B) * H * S;
    if (idx >= total || D < 1 || D > 256) return;
    const long long bh = idx / S;  // b*H + h
    const long long i = idx % S;   // query row
    const long long base = bh * S * D;
    const float ks = k_scale[bh];
    const float vs = v_scale[bh];

    float q[256];
    for (int d = 0; d < D; ++d) q[d] = __half2float(Q[base + i * D + d]);

    // Pass 1: the row maximum of the scores.
    float m = -INFINITY;
    for (long long j = 0; j < S; ++j) {
        float dot = 0.f;
        for (int d = 0; d < D; ++d) dot += q[d] * (e4m3_to_float_ref(K[base + j * D + d]) * ks);
        m = fmaxf(m, dot * softmax_scale);
    }

    // Pass 2: exponentials, their sum and the weighted sum of V.
    float acc[256];
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    float l = 0.f;
    for (long long j = 0; j < S; ++j) {
        float dot = 0.f;
        for (int d = 0; d < D; ++d) dot += q[d] * (e4m3_to_float_ref(K[base + j * D + d]) * ks);
        const float p = expf(dot * softmax_scale - m);
        l += p;
        for (int d = 0; d < D; ++d) acc[d] += p * (e4m3_to_float_ref(V[base + j * D + d]) * vs);
    }
    for (int d = 0; d < D; ++d) O[base + i * D + d] = acc[d] / l;
}
