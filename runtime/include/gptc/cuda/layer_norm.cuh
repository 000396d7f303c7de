// gptc/cuda/layer_norm.cuh — LayerNorm and its input gradient on the GPU, the CPU's bits.
//
// One warp a row. Each statistic is the prelude's reduce_sum over the row (warp_reduce_sum),
// divided by the row's length as the CPU kernel divides it, and every element is computed by
// the CPU kernel's expression, operation for operation (codegen/EmitModelKernels.cpp):
//   mean = sum(x) / n     var = sum((x - mean)^2) / n     rstd = 1 / sqrt(var + eps)
//   y = ((x - mean) * rstd) * w + b
//   a = sum(g * w) / n    b = sum((g * w) * ((x - mean) * rstd)) / n
//   dx = rstd * ((g * w) - a - ((x - mean) * rstd) * b)
// The weight's and bias's gradients are sums over rows: column_reduce_sum_kernel (reduce.cuh).
#pragma once

#include "gptc/cuda/reduce.cuh"

namespace gptc::cuda {

namespace detail {
struct RowStats {
  float mean, rstd;
};
__device__ __forceinline__ RowStats row_stats(const float* x, int64_t n, float eps) {
  const float mean =
      warp_broadcast(warp_reduce_sum<float>(n, [&](int64_t k) { return x[k]; })) / float(n);
  const float var = warp_broadcast(warp_reduce_sum<float>(n, [&](int64_t k) {
                      const float d = x[k] - mean;
                      return d * d;
                    })) /
                    float(n);
  return {mean, 1.0f / gptc::sqrt(var + eps)};
}
}  // namespace detail

// y = layer_norm(x) over rows of n; w and b may be null (no affine step).
__global__ void layer_norm_kernel(int64_t rows, int64_t n, float eps, const float* __restrict x,
                                  const float* __restrict w, const float* __restrict b,
                                  float* __restrict y) {
  GPTC_CUDA_KERNEL_BEGIN();
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const float* xr = x + r * n;
    const detail::RowStats st = detail::row_stats(xr, n, eps);
    for (int64_t k = lane; k < n; k += 32) {
      float v = (xr[k] - st.mean) * st.rstd;
      if (w) v = v * w[k];
      if (b) v = v + b[k];
      y[r * n + k] = v;
    }
  }
}

// dx of layer_norm given the output's gradient g (w may be null: the identity).
__global__ void layer_norm_grad_kernel(int64_t rows, int64_t n, float eps,
                                       const float* __restrict g, const float* __restrict x,
                                       const float* __restrict w, float* __restrict dx) {
  GPTC_CUDA_KERNEL_BEGIN();
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const float* xr = x + r * n;
    const float* gr = g + r * n;
    const detail::RowStats st = detail::row_stats(xr, n, eps);
    auto gw = [&](int64_t k) { return w ? gr[k] * w[k] : gr[k]; };
    auto xhat = [&](int64_t k) { return (xr[k] - st.mean) * st.rstd; };
    const float a = warp_broadcast(warp_reduce_sum<float>(n, gw)) / float(n);
    const float bsum = warp_broadcast(warp_reduce_sum<float>(
                           n, [&](int64_t k) { return gw(k) * xhat(k); })) /
                       float(n);
    for (int64_t k = lane; k < n; k += 32) dx[r * n + k] = st.rstd * (gw(k) - a - xhat(k) * bsum);
  }
}

}  // namespace gptc::cuda
