// gptc/cuda/reduce.cuh — the canonical reductions of the prelude (reduce_sum, reduce_max)
// as warp-level device code, giving the CPU's bits.
//
// The prelude sums n elements into 32 partials, partial j taking elements j, j + 32, ...
// in increasing order, then folds them as a butterfly: p[j] = p[j] + p[j + s] for
// s = 16, 8, 4, 2, 1 (docs/numerics.md). Here lane j of a warp is partial j, and the fold is
// p = p + shfl_down(p, s): lane j then holds p[j] + p[j + s], the partial j first, exactly
// the prelude's operation. Built with -fmad=false (no contraction), so the bits are the
// CPU's for every n.
#pragma once

#include "gptc/cuda/device.cuh"
#include "gptc/prelude.h"

namespace gptc::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// The butterfly over a warp's 32 partials; lane 0 returns the sum.
template <class T>
__device__ __forceinline__ T warp_butterfly_sum(T p) {
  for (int s = 16; s >= 1; s >>= 1) p = p + __shfl_down_sync(kFullMask, p, s);
  return p;
}
template <class T>
__device__ __forceinline__ T warp_butterfly_max(T p) {
  for (int s = 16; s >= 1; s >>= 1) p = gptc::maximum(p, __shfl_down_sync(kFullMask, p, s));
  return p;
}

// reduce_sum(n, elem) computed by one whole warp (every lane must call it); lane 0 returns
// the prelude's bits, the other lanes a partial result.
template <class T, class F>
__device__ __forceinline__ T warp_reduce_sum(int64_t n, F elem) {
  const int lane = threadIdx.x & 31;
  T p = T(0);
  for (int64_t k = lane; k < n; k += 32) p = p + T(elem(k));
  return warp_butterfly_sum(p);
}
template <class T, class F>
__device__ __forceinline__ T warp_reduce_max(int64_t n, F elem) {
  const int lane = threadIdx.x & 31;
  T p = gptc::max_identity<T>();
  for (int64_t k = lane; k < n; k += 32) p = gptc::maximum(p, T(elem(k)));
  return warp_butterfly_max(p);
}

// The two reductions of a row, as arguments of row_reduce_kernel.
struct RowSum {
  template <class T>
  __device__ T operator()(int64_t n, const T* row) const {
    return warp_reduce_sum<T>(n, [&](int64_t k) { return row[k]; });
  }
};
struct RowMax {
  template <class T>
  __device__ T operator()(int64_t n, const T* row) const {
    return warp_reduce_max<T>(n, [&](int64_t k) { return row[k]; });
  }
};

// out[r] = the reduction (RowSum, RowMax) of row r of a row-major [rows, n] array: one warp a
// row.
template <class T, class Reduce>
__global__ void row_reduce_kernel(int64_t rows, int64_t n, const T* __restrict__ in,
                                  T* __restrict__ out, Reduce reduce) {
  GPTC_CUDA_KERNEL_BEGIN();
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const T s = reduce(n, in + r * n);
    if ((threadIdx.x & 31) == 0) out[r] = s;
  }
}

// The same value on every lane of the warp: lane 0's (where warp_reduce_* leaves a result).
template <class T>
__device__ __forceinline__ T warp_broadcast(T v) {
  return __shfl_sync(kFullMask, v, 0);
}

// out[c] = reduce_sum over i < n of elem(i, c), for c < cols: sums along an outer dimension
// (a bias's or LayerNorm's weight gradient over the rows of a batch), each in the canonical
// order, as the prelude's reduce_sum16 forms them. A block of 32 warps takes 32 neighbouring
// outputs: warp w forms partial w (elements w, w + 32, ... in increasing order, lane l for
// output c0 + l, so a warp reads 32 neighbouring elements), then the butterfly runs over the
// 32 partials in shared memory, p[j] = p[j] + p[j + s], partial j first.
template <class T, class Elem>
__global__ void __launch_bounds__(1024)
    column_reduce_sum_kernel(int64_t n, int64_t cols, Elem elem, T* __restrict out) {
  GPTC_CUDA_KERNEL_BEGIN();
  __shared__ T p[32][33];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t c = (int64_t)blockIdx.x * 32 + lane;
  T acc = T(0);
  if (c < cols)
    for (int64_t i = w; i < n; i += 32) acc = acc + T(elem(i, c));
  p[w][lane] = acc;
  __syncthreads();
  for (int s = 16; s >= 1; s >>= 1) {
    if (w < s) p[w][lane] = p[w][lane] + p[w + s][lane];
    __syncthreads();
  }
  if (w == 0 && c < cols) out[c] = p[0][lane];
}

}  // namespace gptc::cuda
