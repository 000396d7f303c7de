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

// A loop of int64_t i over [0, n) in groups of 8 neighbouring iterations a block of 256
// threads (column_sum): thread t runs iteration t % 8 of its block's group. Every thread
// runs every group of its block, so that all of them reach column_sum's barriers: past n,
// the last group's threads repeat iteration n - 1, and only GPTC_CUDA_COLUMN_OWNER, one
// thread an iteration, stores its results.
#define GPTC_CUDA_FOR_COLUMNS(i, n)                                                          \
  for (int64_t gptc_group = gptc_block * 8, gptc_groups_end = (n);                           \
       gptc_group < gptc_groups_end; gptc_group += gptc_blocks * 8)                           \
    if (const int64_t i = gptc_group + (int64_t)threadIdx.x % 8 < gptc_groups_end             \
                              ? gptc_group + (int64_t)threadIdx.x % 8                       \
                              : gptc_groups_end - 1;                                        \
        true)
#define GPTC_CUDA_COLUMN_OWNER \
  (threadIdx.x < 8 && gptc_group + (int64_t)threadIdx.x < gptc_groups_end)

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

// The canonical sum of elem(0..n-1) for each of the 8 outputs of a block of 256 threads
// (GPTC_CUDA_FOR_COLUMNS; every thread calls it with its output's elem, and gets that
// output's sum): thread t forms partial t / 8 of output t % 8, elements p, p + 32, ... in
// increasing order from T(0) as warp_reduce_sum forms them, its loads issued 8 ahead of
// their adds; then the butterfly over the 32 partials in shared memory, p[j] = p[j] +
// p[j + s]. Where neighbouring outputs are neighbouring elements (a bias's gradient:
// columns of a row-major array), a partial's 8 threads read one 32-byte sector and a warp 4
// of them, where a warp or a block an output would read one element a row's stride from
// the next. (A [16384, 384] sum is 48 blocks; with 32 outputs a block it was 12.)
// (Its partials' shared memory is one per element type for a whole kernel, whatever the
// call: see block_reduce_shared in gptc/cuda/generated.cuh.)
template <class T>
__device__ __forceinline__ T (&column_sum_shared())[32][8] {
  __shared__ T p[32][8];  // a warp's 32 stores and loads in 32 banks
  return p;
}
template <class T, class F>
__device__ T column_sum(int64_t n, F elem) {
  constexpr int kAhead = 8;
  T (&p)[32][8] = column_sum_shared<T>();
  const int c = (int)threadIdx.x % 8, w = (int)threadIdx.x / 8;
  T acc = T(0);
  int64_t k = w;
  for (; k + 32 * (kAhead - 1) < n; k += 32 * kAhead) {
    T v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) v[u] = T(elem(k + 32 * u));
#pragma unroll
    for (int u = 0; u < kAhead; ++u) acc = acc + v[u];
  }
  for (; k < n; k += 32) acc = acc + T(elem(k));
  __syncthreads();  // (an earlier call's sums read by every thread)
  p[w][c] = acc;
  __syncthreads();
  for (int s = 16; s >= 1; s >>= 1) {
    if (w < s) p[w][c] = p[w][c] + p[w + s][c];
    __syncthreads();
  }
  return p[0][c];
}

// out[c] = reduce_sum over i < n of elem(i, c), for c < cols: sums along an outer dimension
// (a bias's or LayerNorm's weight gradient over the rows of a batch) by column_sum, each in
// the canonical order as the prelude's reduce_sum16 forms them. Launched with blocks of 256
// threads, (cols + 7) / 8 of them (fewer loop over the rest).
template <class T, class Elem>
__global__ void __launch_bounds__(256)
    column_reduce_sum_kernel(int64_t n, int64_t cols, Elem elem, T* __restrict out) {
  GPTC_CUDA_KERNEL_BEGIN();
  GPTC_CUDA_GRID();
  GPTC_CUDA_FOR_COLUMNS(c, cols) {
    const T s = column_sum<T>(n, [&](int64_t i) { return elem(i, c); });
    if (GPTC_CUDA_COLUMN_OWNER) out[c] = s;
  }
}

}  // namespace gptc::cuda
