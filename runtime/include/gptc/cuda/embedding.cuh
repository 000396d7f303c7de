// gptc/cuda/embedding.cuh — the embedding's gradient on the GPU without atomics on floats,
// the CPU's bits.
//
// The CPU kernel (codegen/EmitModelKernels.cpp, emitEmbeddingGrad) sets out[v, c] = 0, then
// for p = 0, 1, ..., n-1 adds g[p, c] into out[idx[p], c] (an index out of range is reported
// and skipped). Floating-point atomics would add in whatever order the threads arrive. Here
// the positions are sorted by token id with CUB's radix sort, which is stable (the positions
// of one id stay in increasing order), each id's run is located by a count of ids (integer
// atomics: exact in any order) and its exclusive scan, and one thread per (id, column) adds
// its run's rows in order from 0: the CPU's additions, in the CPU's order.
#pragma once

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gptc/cuda/check.cuh"

namespace gptc::cuda {

namespace detail {
// Ids in [0, vocab) keep their value; others become `vocab` (sorted last, never summed) and
// set *error.
__global__ void embedding_keys_kernel(int64_t n, int64_t vocab, const int64_t* __restrict idx,
                                      int* __restrict keys, int* __restrict positions,
                                      int* __restrict counts, unsigned* error) {
  GPTC_CUDA_KERNEL_BEGIN();
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = idx[p];
    const bool in = t >= 0 && t < vocab;
    if (!in) atomicOr(error, 1u);
    keys[p] = in ? (int)t : (int)vocab;
    positions[p] = (int)p;
    atomicAdd(&counts[in ? t : vocab], 1);
  }
}

__global__ void embedding_sum_kernel(int64_t vocab, int64_t cols, const float* __restrict g,
                                     const int* __restrict positions,
                                     const int* __restrict starts, const int* __restrict counts,
                                     float* __restrict out) {
  GPTC_CUDA_KERNEL_BEGIN();
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < vocab * cols;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t v = e / cols, c = e % cols;
    float acc = 0;
    for (int i = starts[v], end = starts[v] + counts[v]; i < end; ++i)
      acc = acc + g[(int64_t)positions[i] * cols + c];
    out[e] = acc;
  }
}

inline size_t align256(size_t b) { return (b + 255) / 256 * 256; }
inline int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 31 && ((int64_t)1 << bits) <= vocab) ++bits;
  return bits;
}
struct EmbeddingScratch {
  int *keys, *sorted_keys, *positions, *sorted_positions, *counts, *starts;
  void* temp;
  size_t temp_bytes;
};
// The scratch's layout in `base` (null: only its size, in *bytes).
inline EmbeddingScratch embedding_scratch(int64_t n, int64_t vocab, char* base, size_t* bytes) {
  size_t sort_bytes = 0, scan_bytes = 0;
  GPTC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (int*)nullptr,
                                                  (int*)nullptr, (int*)nullptr, (int*)nullptr,
                                                  (int)n, 0, key_bits(vocab)));
  GPTC_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, (int*)nullptr,
                                                (int*)nullptr, (int)vocab + 1));
  const size_t ints_n = align256(n * sizeof(int)), ints_v = align256((vocab + 1) * sizeof(int));
  EmbeddingScratch s{};
  size_t at = 0;
  auto take = [&](size_t b) {
    char* p = base ? base + at : nullptr;
    at += b;
    return p;
  };
  s.keys = (int*)take(ints_n);
  s.sorted_keys = (int*)take(ints_n);
  s.positions = (int*)take(ints_n);
  s.sorted_positions = (int*)take(ints_n);
  s.counts = (int*)take(ints_v);
  s.starts = (int*)take(ints_v);
  s.temp_bytes = align256(sort_bytes > scan_bytes ? sort_bytes : scan_bytes);
  s.temp = take(s.temp_bytes);
  *bytes = at;
  return s;
}
}  // namespace detail

// The device scratch embedding_grad needs for n positions and a vocabulary of `vocab`.
inline size_t embedding_grad_scratch_bytes(int64_t n, int64_t vocab) {
  size_t bytes = 0;
  detail::embedding_scratch(n, vocab, nullptr, &bytes);
  return bytes;
}

// out[vocab, cols] = the gradient of an embedding lookup of idx[n] given g[n, cols]: for each
// id, its positions' rows of g summed in increasing position order from 0. `scratch` holds
// embedding_grad_scratch_bytes(n, vocab) device bytes; *error is set for an id out of range.
inline void embedding_grad(cudaStream_t stream, int64_t n, int64_t vocab, int64_t cols,
                           const float* g, const int64_t* idx, float* out, void* scratch,
                           unsigned* error) {
  size_t bytes = 0;
  detail::EmbeddingScratch s =
      detail::embedding_scratch(n, vocab, static_cast<char*>(scratch), &bytes);
  GPTC_CUDA_CHECK(cudaMemsetAsync(s.counts, 0, (vocab + 1) * sizeof(int), stream));
  if (n > 0) {
    GPTC_LAUNCH(detail::embedding_keys_kernel,
                (unsigned)std::min<int64_t>((n + 255) / 256, 4096), 256, stream)(
        n, vocab, idx, s.keys, s.positions, s.counts, error);
    GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::embedding_keys_kernel");
    size_t temp = s.temp_bytes;
    GPTC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp, temp, s.keys, s.sorted_keys,
                                                    s.positions, s.sorted_positions, (int)n, 0,
                                                    detail::key_bits(vocab), stream));
  }
  size_t temp = s.temp_bytes;
  GPTC_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(s.temp, temp, s.counts, s.starts, (int)vocab + 1, stream));
  const int64_t total = vocab * cols;
  GPTC_LAUNCH(detail::embedding_sum_kernel,
              (unsigned)std::min<int64_t>((total + 255) / 256, 65536), 256, stream)(
      vocab, cols, g, s.sorted_positions, s.starts, s.counts, out);
  GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::embedding_sum_kernel");
}

}  // namespace gptc::cuda
