// gptc/cuda/cross_entropy.cuh — the loss and its gradient on the GPU, the CPU's bits.
//
// As the CPU kernels (codegen/EmitModelKernels.cpp) compute them: per row of logits x and
// target t, m = reduce_max(x), s = reduce_sum(exp(x - m)); the row's loss log(s) + m - x[t];
// the loss the canonical sum of the rows' losses over the rows kept (t != ignore_index);
// the gradient (exp(x - m) / s - [k == t]) * g / kept. One warp a row. A target out of range
// is a data error: the row gets 0 (its gradient zeros) and *error is set, as the CPU kernel
// reports and carries on (`error` null: the targets were checked before, none can be).
#pragma once

#include "gptc/cuda/reduce.cuh"

namespace gptc::cuda {

// *kept = the rows whose target is not `ignore` (one block; integer sums, any order exact).
__global__ void cross_entropy_kept_kernel(int64_t rows, int64_t ignore,
                                          const int64_t* __restrict targets,
                                          int64_t* __restrict kept) {
  GPTC_CUDA_KERNEL_BEGIN();
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) mine += targets[r] != ignore;
  atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) *kept = (int64_t)count;
}

namespace detail {
struct LogitStats {
  float m, s;
};
__device__ __forceinline__ LogitStats logit_stats(const float* x, int64_t v) {
  const float m = warp_broadcast(warp_reduce_max<float>(v, [&](int64_t k) { return x[k]; }));
  const float s = warp_broadcast(
      warp_reduce_sum<float>(v, [&](int64_t k) { return gptc::exp(x[k] - m); }));
  return {m, s};
}
}  // namespace detail

// row_loss[r] = log(s) + m - x[t] (0 for an ignored row or a target out of range).
__global__ void cross_entropy_rows_kernel(int64_t rows, int64_t v, int64_t ignore,
                                          const float* __restrict x,
                                          const int64_t* __restrict targets,
                                          float* __restrict row_loss, unsigned* error) {
  GPTC_CUDA_KERNEL_BEGIN();
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const int64_t t = targets[r];
    float loss = 0;
    if (t != ignore) {
      if (t < 0 || t >= v) {
        if (error && lane == 0) atomicOr(error, 1u);
      } else {
        const float* xr = x + r * v;
        const detail::LogitStats st = detail::logit_stats(xr, v);
        loss = gptc::log(st.s) + st.m - xr[t];
      }
    }
    if (lane == 0) row_loss[r] = loss;
  }
}

// *out = the canonical sum of row_loss / kept, kept the rows whose target is not `ignore`
// (one warp; the count an integer sum, exact in any order).
__global__ void cross_entropy_total_kernel(int64_t rows, int64_t ignore,
                                           const int64_t* __restrict targets,
                                           const float* __restrict row_loss,
                                           float* __restrict out) {
  GPTC_CUDA_KERNEL_BEGIN();
  const float total = warp_reduce_sum<float>(rows, [&](int64_t r) { return row_loss[r]; });
  long long kept = 0;
  for (int64_t r = threadIdx.x; r < rows; r += 32) kept += targets[r] != ignore;
  for (int s = 16; s >= 1; s >>= 1) kept += __shfl_down_sync(kFullMask, kept, s);
  if (threadIdx.x == 0) out[0] = total / float(kept);
}

// d = (exp(x - m) / s - [k == t]) * g[0] / kept; zeros for an ignored row or a bad target.
__global__ void cross_entropy_grad_kernel(int64_t rows, int64_t v, int64_t ignore,
                                          const float* __restrict x,
                                          const int64_t* __restrict targets,
                                          const float* __restrict g,
                                          const int64_t* __restrict kept, float* __restrict d,
                                          unsigned* error) {
  GPTC_CUDA_KERNEL_BEGIN();
  const float scale = g[0] / float(*kept);
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const float* xr = x + r * v;
    float* dr = d + r * v;
    const int64_t t = targets[r];
    if (t == ignore || t < 0 || t >= v) {
      if (t != ignore && error && lane == 0) atomicOr(error, 1u);
      for (int64_t k = lane; k < v; k += 32) dr[k] = 0;
      continue;
    }
    const detail::LogitStats st = detail::logit_stats(xr, v);
    for (int64_t k = lane; k < v; k += 32)
      dr[k] = (gptc::exp(xr[k] - st.m) / st.s - (k == t ? 1.0f : 0.0f)) * scale;
  }
}

}  // namespace gptc::cuda
