// gptc/cuda/matmul.cuh — the portable matmul on the GPU: the prelude's matmul, same bits.
//
// C[b, m, n] = sum_{k<K} A(b, m, k) * B(b, k, n) in the canonical matmul order: one
// accumulator per output element, starting at +0, k = 0, 1, ..., K-1, each step one explicit
// fma (dot_seq in the prelude). Each thread owns a block of outputs and runs each of their
// chains itself: no split-k, no k shared across threads, no tensor cores, so the
// tiling changes where operands come from, never the order of the arithmetic. Then the
// epilogue (MatmulEpilogue::apply_one: bias, dropout, residual add) as on the CPU.
//
// Tiles: a block of 256 threads computes a 128x128 (or 64x64) tile of C, walking k in steps
// of 16 through two stages of shared memory, each thread 8x8 (4x4) outputs read from shared
// memory as 16-byte vectors. The last k step of a K that is not a multiple of 16 runs only
// its K % 16 fmas: an fma past K would add 0 * 0 to the accumulator and turn a -0 (an
// underflowed product) into +0.
//
// Strides as in the prelude: A(b, m, k) = A[b*sab + m*sam + k*sak],
// B(b, k, n) = B[b*sbb + k*sbk + n*sbn], C dense [batch, M, N]. Which operand dimension is
// contiguous only changes how a tile is loaded (coalesced either way).
#pragma once

#include "gptc/cuda/check.cuh"
#include "gptc/prelude.h"

namespace gptc::cuda {

struct MatmulShape {
  int64_t batch, M, N, K;
  int64_t sab, sam, sak;
  int64_t sbb, sbk, sbn;
};

namespace detail {
constexpr int kTileK = 16, kThreads = 256;  // a block: 16 x 16 threads
constexpr int kPad = 4;  // keeps rows 16-byte aligned and spreads the tile stores over banks
// Blocks a multiprocessor should hold at once (__launch_bounds__'s second argument: 2 caps a
// thread at 128 registers).
#ifndef GPTC_CUDA_MATMUL_MIN_BLOCKS
#define GPTC_CUDA_MATMUL_MIN_BLOCKS 1
#endif

// A block's tile of C: R x R outputs a thread (R = 8: 128 x 128; R = 4: 64 x 64, for
// products too small to fill the GPU with the large tile). Thread (ty, tx) owns rows
// ty*4 + {0..3} + 64 g and columns tx*4 + {0..3} + 64 g, g < R/4.
template <int R>
struct Tile {
  static constexpr int kM = 16 * R, kN = 16 * R;
  static constexpr int kLoads = kM * kTileK / kThreads;  // of each operand, per thread
  float a[2][kTileK][kM + kPad];                         // two stages: load one, use the other
  float b[2][kTileK][kN + kPad];
};

// One k step of a thread's R x R outputs: acc[i][j] = fma(a[i], b[j], acc[i][j]).
template <int R>
__device__ __forceinline__ void matmul_step(const float (*As)[16 * R + kPad],
                                            const float (*Bs)[16 * R + kPad], int kk, int ty,
                                            int tx, float (&acc)[R][R]) {
  float a[R], b[R];
#pragma unroll
  for (int g = 0; g < R / 4; ++g) {
    const float4 av = *reinterpret_cast<const float4*>(&As[kk][ty * 4 + 64 * g]);
    const float4 bv = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4 + 64 * g]);
    a[4 * g] = av.x, a[4 * g + 1] = av.y, a[4 * g + 2] = av.z, a[4 * g + 3] = av.w;
    b[4 * g] = bv.x, b[4 * g + 1] = bv.y, b[4 * g + 2] = bv.z, b[4 * g + 3] = bv.w;
  }
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < R; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

// kAK: A's k is its contiguous dimension (sak == 1); kBN: B's n is (sbn == 1). While a
// stage's k step runs, the next stage's operands are read from global memory into
// registers, then stored into the other stage: one barrier a k step.
template <int R, bool kAK, bool kBN>
__global__ void __launch_bounds__(kThreads, GPTC_CUDA_MATMUL_MIN_BLOCKS)
    matmul_kernel(MatmulShape s, const float* __restrict__ A, const float* __restrict__ B,
                  float* __restrict__ C, MatmulEpilogue<float> ep) {
  using T = Tile<R>;
  __shared__ __align__(16) T tile;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t b = blockIdx.z, m0 = (int64_t)blockIdx.y * T::kM, n0 = (int64_t)blockIdx.x * T::kN;
  const float* a = A + b * s.sab;
  const float* bm = B + b * s.sbb;

  // Operands of the k step at k0 (zeros outside the matrices: never used past K, see above).
  float ra[T::kLoads], rb[T::kLoads];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int l = 0; l < T::kLoads; ++l) {
      const int idx = tid + kThreads * l;
      const int kk = kAK ? idx % kTileK : idx / T::kM, mm = kAK ? idx / kTileK : idx % T::kM;
      const int64_t m = m0 + mm, k = k0 + kk;
      ra[l] = (m < s.M && k < s.K) ? a[m * s.sam + k * s.sak] : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < T::kLoads; ++l) {
      const int idx = tid + kThreads * l;
      const int kk = kBN ? idx / T::kN : idx % kTileK, nn = kBN ? idx % T::kN : idx / kTileK;
      const int64_t n = n0 + nn, k = k0 + kk;
      rb[l] = (n < s.N && k < s.K) ? bm[k * s.sbk + n * s.sbn] : 0.0f;
    }
  };
  auto store = [&](int stage) {
#pragma unroll
    for (int l = 0; l < T::kLoads; ++l) {
      const int idx = tid + kThreads * l;
      tile.a[stage][kAK ? idx % kTileK : idx / T::kM][kAK ? idx / kTileK : idx % T::kM] = ra[l];
      tile.b[stage][kBN ? idx / T::kN : idx % kTileK][kBN ? idx % T::kN : idx / kTileK] = rb[l];
    }
  };

  float acc[R][R];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < R; ++j) acc[i][j] = 0.0f;

  load(0);
  store(0);
  __syncthreads();
  int stage = 0;
  for (int64_t k0 = 0; k0 < s.K; k0 += kTileK) {
    const bool next = k0 + kTileK < s.K;
    if (next) load(k0 + kTileK);
    if (s.K - k0 >= kTileK) {
#pragma unroll
      for (int kk = 0; kk < kTileK; ++kk)
        matmul_step<R>(tile.a[stage], tile.b[stage], kk, ty, tx, acc);
    } else {
      for (int kk = 0; kk < (int)(s.K - k0); ++kk)
        matmul_step<R>(tile.a[stage], tile.b[stage], kk, ty, tx, acc);
    }
    if (next) store(stage ^ 1);
    __syncthreads();
    stage ^= 1;
  }

  const bool epilogue = ep.any();
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int64_t m = m0 + ty * 4 + (i % 4) + 64 * (i / 4);
    if (m >= s.M) continue;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t n = n0 + tx * 4 + (j % 4) + 64 * (j / 4);
      if (n >= s.N) continue;
      const int64_t e = (b * s.M + m) * s.N + n;
      C[e] = epilogue ? ep.apply_one(e, n, acc[i][j]) : acc[i][j];
    }
  }
}

template <int R>
void launch_matmul(cudaStream_t stream, const MatmulShape& s, const float* A, const float* B,
                   float* C, const MatmulEpilogue<float>& ep) {
  const dim3 grid((unsigned)((s.N + Tile<R>::kN - 1) / Tile<R>::kN),
                  (unsigned)((s.M + Tile<R>::kM - 1) / Tile<R>::kM), (unsigned)s.batch);
  const bool ak = s.sak == 1, bn = s.sbn == 1;
  if (ak && bn)
    matmul_kernel<R, true, true><<<grid, kThreads, 0, stream>>>(s, A, B, C, ep);
  else if (ak)
    matmul_kernel<R, true, false><<<grid, kThreads, 0, stream>>>(s, A, B, C, ep);
  else if (bn)
    matmul_kernel<R, false, true><<<grid, kThreads, 0, stream>>>(s, A, B, C, ep);
  else
    matmul_kernel<R, false, false><<<grid, kThreads, 0, stream>>>(s, A, B, C, ep);
}

// The multiprocessors of the current device (read once).
inline int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    GPTC_CUDA_CHECK(cudaGetDevice(&device));
    GPTC_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}
}  // namespace detail

// Launches the matmul on a stream: 128 x 128 tiles, or 64 x 64 ones where the large tiles
// would not give every multiprocessor two (a weight gradient's long K and small M x N, say).
// The tile never changes the bits. The epilogue's pointers (bias, addend, rng) are device
// pointers.
inline void matmul(cudaStream_t stream, const MatmulShape& s, const float* A, const float* B,
                   float* C, const MatmulEpilogue<float>& ep = {}) {
  if (s.batch <= 0 || s.M <= 0 || s.N <= 0) return;
  const int64_t large = s.batch * ((s.M + 127) / 128) * ((s.N + 127) / 128);
  if (large >= 2 * detail::multiprocessors())
    detail::launch_matmul<8>(stream, s, A, B, C, ep);
  else
    detail::launch_matmul<4>(stream, s, A, B, C, ep);
  GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::matmul");
}

}  // namespace gptc::cuda
