// The RMSNorm reference: the same inputs as rmsnorm_fwd, fp64 arithmetic, fp32 output.
//
//   extern "C" __global__ void rmsnorm_reference(const __half* x, const __half* weight,
//                                                float* y, int rows, int hidden, float eps);
//   grid (rows), block (256): one block per row.

#include <cuda_fp16.h>

constexpr int kThreads = 256;

extern "C" __global__ void __launch_bounds__(kThreads)
rmsnorm_reference(const __half* x, const __half* weight, float* y, int rows, int hidden,
                  float eps) {
    __shared__ double partial[kThreads];
    const int row = blockIdx.x;
    if (row >= rows) {
        return;  // the whole block: no thread reaches the barrier below
    }
    const __half* xr = x + static_cast<size_t>(row) * hidden;
    double sum = 0.0;
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
        const double f = __half2float(xr[i]);
        sum += f * f;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const double inv_rms = 1.0 / sqrt(partial[0] / hidden + static_cast<double>(eps));
    float* yr = y + static_cast<size_t>(row) * hidden;
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
        const double w = __half2float(weight[i]);
        yr[i] = static_cast<float>(static_cast<double>(__half2float(xr[i])) * inv_rms * w);
    }
}
