// gptc/cuda/matmul.cuh — the portable matmul on the GPU: the prelude's matmul, same bits.
//
// C[b, m, n] = sum_{k<K} A(b, m, k) * B(b, k, n) in the canonical matmul order: one
// accumulator per output element, starting at +0, k = 0, 1, ..., K-1, each step one explicit
// fma (dot_seq in the prelude). Each thread owns a block of outputs and runs each of their
// chains itself: no split-k, no k shared across threads, no tensor cores, so the
// tiling changes where operands come from, never the order of the arithmetic. Then the
// epilogue (MatmulEpilogue::apply_one: bias, dropout, residual add) as on the CPU.
//
// Tiles: a block of 256 threads computes a 128x128 (or 128x64, 64x64) tile of C, walking k in
// steps of 16 through two stages of shared memory, each thread 8x8 (8x4, 4x4) outputs read
// from shared memory as 16-byte vectors (and from global memory too, where the operands'
// strides allow). Where both operands' rows are contiguous (a weight gradient), the stages
// are filled by asynchronous copies up to 3 steps ahead instead (matmul_async_kernel).
// The last k step of a K that is not a multiple of 16 runs only its K % 16 fmas: an fma past
// K would add 0 * 0 to the accumulator and turn a -0 (an underflowed product) into +0.
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

// A block's tile of C: RM x RN outputs a thread (8 x 8: 128 x 128; 8 x 4: 128 x 64; 4 x 4:
// 64 x 64, for products too small to fill the GPU with the large tile). Thread (ty, tx)
// owns rows ty*4 + {0..3} + 64 g (g < RM/4) and columns tx*4 + {0..3} + 64 g (g < RN/4).
template <int RM, int RN>
struct Tile {
  static_assert(RM % 4 == 0 && RN % 4 == 0, "a thread's rows and columns in fours");
  static constexpr int kM = 16 * RM, kN = 16 * RN;
  float a[2][kTileK][kM + kPad];  // two stages: load one, use the other
  float b[2][kTileK][kN + kPad];
};

// One k step of a thread's RM x RN outputs: acc[i][j] = fma(a[i], b[j], acc[i][j]).
template <int RM, int RN>
__device__ __forceinline__ void matmul_step(const float (*As)[16 * RM + kPad],
                                            const float (*Bs)[16 * RN + kPad], int kk, int ty,
                                            int tx, float (&acc)[RM][RN]) {
  float a[RM], b[RN];
#pragma unroll
  for (int g = 0; g < (RM > RN ? RM : RN) / 4; ++g) {  // a's and b's loads interleaved
    if (g < RM / 4) {
      const float4 av = *reinterpret_cast<const float4*>(&As[kk][ty * 4 + 64 * g]);
      a[4 * g] = av.x, a[4 * g + 1] = av.y, a[4 * g + 2] = av.z, a[4 * g + 3] = av.w;
    }
    if (g < RN / 4) {
      const float4 bv = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4 + 64 * g]);
      b[4 * g] = bv.x, b[4 * g + 1] = bv.y, b[4 * g + 2] = bv.z, b[4 * g + 3] = bv.w;
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

// The k step of a stage, all of it or the K tail's first K - k0 k's.
template <int RM, int RN>
__device__ __forceinline__ void matmul_stage(const float (*As)[16 * RM + kPad],
                                             const float (*Bs)[16 * RN + kPad], int64_t K,
                                             int64_t k0, int ty, int tx, float (&acc)[RM][RN]) {
  if (K - k0 >= kTileK) {
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) matmul_step<RM, RN>(As, Bs, kk, ty, tx, acc);
  } else {
    for (int kk = 0; kk < (int)(K - k0); ++kk) matmul_step<RM, RN>(As, Bs, kk, ty, tx, acc);
  }
}

// The next k step's elements of one operand, kRows (m or n) x kTileK, held in registers
// while the current step runs, then stored into shared memory as [k][row]. kKContig: the
// operand's k is its contiguous dimension (stride 1), else its row is. kVec: the contiguous
// dimension, the other stride and the base are multiples of 4 floats, so each thread reads
// 16-byte vectors (4 elements along the contiguous dimension, all in range or none).
template <int kRows, bool kKContig, bool kVec>
struct OperandStage {
  static constexpr int kElems = kRows * kTileK / kThreads;  // per thread
  static constexpr int kLoads = kVec ? kElems / 4 : kElems;
  float r[kElems];

  // Shared-memory coordinates of load l: its k and row (the first of 4 for a vector).
  __device__ static void place(int tid, int l, int& kk, int& row) {
    const int idx = tid + kThreads * l;
    if (kVec && kKContig) kk = 4 * (idx % (kTileK / 4)), row = idx / (kTileK / 4);
    else if (kVec) row = 4 * (idx % (kRows / 4)), kk = idx / (kRows / 4);
    else if (kKContig) kk = idx % kTileK, row = idx / kTileK;
    else row = idx % kRows, kk = idx / kRows;
  }
  // Element (row0 + row, k) is base[row * rs + k * ks]; zeros outside [rows) x [K).
  __device__ void load(const float* __restrict base, int64_t row0, int64_t rows, int64_t rs,
                       int64_t ks, int64_t k0, int64_t K, int tid) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      int kk, row;
      place(tid, l, kk, row);
      const int64_t m = row0 + row, k = k0 + kk;
      const bool in = m < rows && k < K;
      if (kVec) {
        const float4 v = in ? *reinterpret_cast<const float4*>(base + m * rs + k * ks)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
        r[4 * l] = v.x, r[4 * l + 1] = v.y, r[4 * l + 2] = v.z, r[4 * l + 3] = v.w;
      } else {
        r[l] = in ? base[m * rs + k * ks] : 0.0f;
      }
    }
  }
  __device__ void store(float (*s)[kRows + kPad], int tid) const {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      int kk, row;
      place(tid, l, kk, row);
      if (kVec && kKContig) {
#pragma unroll
        for (int c = 0; c < 4; ++c) s[kk + c][row] = r[4 * l + c];
      } else if (kVec) {
        *reinterpret_cast<float4*>(&s[kk][row]) =
            make_float4(r[4 * l], r[4 * l + 1], r[4 * l + 2], r[4 * l + 3]);
      } else {
        s[kk][row] = r[l];
      }
    }
  }
};

// A thread's outputs to C (dense [batch, M, N]) through the epilogue, those inside M x N.
template <int RM, int RN>
__device__ __forceinline__ void store_outputs(const MatmulShape& s, float* __restrict C,
                                              const MatmulEpilogue<float>& ep,
                                              const float (&acc)[RM][RN], int64_t b,
                                              int64_t m0, int64_t n0, int ty, int tx) {
  const bool epilogue = ep.any();
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t m = m0 + ty * 4 + (i % 4) + 64 * (i / 4);
    if (m >= s.M) continue;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int64_t n = n0 + tx * 4 + (j % 4) + 64 * (j / 4);
      if (n >= s.N) continue;
      const int64_t e = (b * s.M + m) * s.N + n;
      C[e] = epilogue ? ep.apply_one(e, n, acc[i][j]) : acc[i][j];
    }
  }
}

// kAK: A's k is its contiguous dimension (sak == 1), else its m is; kBN: B's n is its
// contiguous dimension (sbn == 1), else its k is; kVec: both are read as 16-byte vectors.
// While a stage's k step runs, the next stage's operands are read from global memory into
// registers, then stored into the other stage: one barrier a k step.
template <int RM, int RN, bool kAK, bool kBN, bool kVec>
__global__ void __launch_bounds__(kThreads, GPTC_CUDA_MATMUL_MIN_BLOCKS)
    matmul_kernel(MatmulShape s, const float* __restrict A, const float* __restrict B,
                  float* __restrict C, MatmulEpilogue<float> ep) {
  GPTC_CUDA_KERNEL_BEGIN();
  using T = Tile<RM, RN>;
  __shared__ __align__(16) T tile;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t b = blockIdx.z, m0 = (int64_t)blockIdx.y * T::kM, n0 = (int64_t)blockIdx.x * T::kN;
  const float* a = A + b * s.sab;
  const float* bm = B + b * s.sbb;

  OperandStage<T::kM, kAK, kVec> sa;   // A's rows are m: element (m, k) at m*sam + k*sak
  OperandStage<T::kN, !kBN, kVec> sb;  // B's rows are n: element (n, k) at n*sbn + k*sbk
  auto load = [&](int64_t k0) {
    sa.load(a, m0, s.M, s.sam, s.sak, k0, s.K, tid);
    sb.load(bm, n0, s.N, s.sbn, s.sbk, k0, s.K, tid);
  };
  auto store = [&](int stage) {
    sa.store(tile.a[stage], tid);
    sb.store(tile.b[stage], tid);
  };

  float acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

  load(0);
  store(0);
  __syncthreads();
  int stage = 0;
  for (int64_t k0 = 0; k0 < s.K; k0 += kTileK) {
    const bool next = k0 + kTileK < s.K;
    if (next) load(k0 + kTileK);
    matmul_stage<RM, RN>(tile.a[stage], tile.b[stage], s.K, k0, ty, tx, acc);
    if (next) store(stage ^ 1);
    __syncthreads();
    stage ^= 1;
  }

  store_outputs<RM, RN>(s, C, ep, acc, b, m0, n0, ty, tx);
}

// The stages of the asynchronous pipeline: as many as fit 46 KB of shared memory (under
// the 48 KB a block may declare statically), at most 4.
template <int RM, int RN>
struct AsyncTile {
  static constexpr int kM = 16 * RM, kN = 16 * RN;
  static constexpr int kStageBytes = kTileK * (kM + kN + 2 * kPad) * (int)sizeof(float);
  static constexpr int kStages = 46 * 1024 / kStageBytes < 4 ? 46 * 1024 / kStageBytes : 4;
  static_assert(kStages >= 2, "two stages at least");
  float a[kStages][kTileK][kM + kPad];
  float b[kStages][kTileK][kN + kPad];
};

// One stage's rows [row0, row0 + kRows) x k's [k0, k0 + kTileK) of an operand whose rows
// are contiguous (element (row, k) at base[row + k * ks]), copied asynchronously into
// s[k][row] as 16-byte vectors: zeros outside [rows) x [K) (rows a multiple of 4).
template <int kRows>
__device__ __forceinline__ void copy_stage(float (*s)[kRows + kPad], const float* base,
                                           int64_t row0, int64_t rows, int64_t ks, int64_t k0,
                                           int64_t K, int tid) {
#pragma unroll
  for (int l = 0; l < kRows * kTileK / 4 / kThreads; ++l) {
    const int idx = tid + kThreads * l;
    const int row = 4 * (idx % (kRows / 4)), kk = idx / (kRows / 4);
    const int64_t m = row0 + row, k = k0 + kk;
    const bool in = m < rows && k < K;
    copy16_async(&s[kk][row], in ? base + m + k * ks : base, in);
  }
}

// The product where both operands' rows are contiguous and 16-byte aligned (A's m and B's
// n: a weight gradient's X^T dY): each stage's tiles are copied straight into shared
// memory, kStages - 1 stages ahead of their use, with no registers held for them (the
// register-staged kernel above is one stage ahead). The same fma chains, the same bits.
template <int RM, int RN>
__global__ void __launch_bounds__(kThreads, GPTC_CUDA_MATMUL_MIN_BLOCKS)
    matmul_async_kernel(MatmulShape s, const float* __restrict A, const float* __restrict B,
                        float* __restrict C, MatmulEpilogue<float> ep) {
  GPTC_CUDA_KERNEL_BEGIN();
  using T = AsyncTile<RM, RN>;
  constexpr int S = T::kStages;
  __shared__ __align__(16) T tile;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t b = blockIdx.z, m0 = (int64_t)blockIdx.y * T::kM, n0 = (int64_t)blockIdx.x * T::kN;
  const float* a = A + b * s.sab;  // element (m, k) at a[m + k * sak]
  const float* bm = B + b * s.sbb;  // element (k, n) at bm[n + k * sbk]
  const int64_t steps = (s.K + kTileK - 1) / kTileK;
  auto copy = [&](int64_t step) {
    copy_stage<T::kM>(tile.a[step % S], a, m0, s.M, s.sak, step * kTileK, s.K, tid);
    copy_stage<T::kN>(tile.b[step % S], bm, n0, s.N, s.sbk, step * kTileK, s.K, tid);
  };

  float acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

  // A group a stage (empty past the last), so that waiting for all but the newest S - 2
  // groups at step t always means step t's stage has landed.
  for (int step = 0; step < S - 1; ++step) {
    if (step < steps) copy(step);
    copies_commit();
  }
  for (int64_t step = 0; step < steps; ++step) {
    copies_wait<S - 2>();
    __syncthreads();  // the stage is the block's; and every thread is done with step - 1's
    if (step + S - 1 < steps) copy(step + S - 1);  // (into step - 1's buffer)
    copies_commit();
    const int stage = (int)(step % S);
    matmul_stage<RM, RN>(tile.a[stage], tile.b[stage], s.K, step * kTileK, ty, tx, acc);
  }
  store_outputs<RM, RN>(s, C, ep, acc, b, m0, n0, ty, tx);
}

// Whether an operand can be read as 16-byte vectors along the dimension of stride
// `unit_stride`: that stride 1, the base aligned, that dimension's extent and every other
// stride multiples of 4 floats.
inline bool vectorizable(const float* p, int64_t unit_stride, int64_t extent,
                         int64_t other_stride, int64_t batch_stride) {
  return unit_stride == 1 && reinterpret_cast<uintptr_t>(p) % 16 == 0 && extent % 4 == 0 &&
         other_stride % 4 == 0 && batch_stride % 4 == 0;
}

// How a product's tiles reach shared memory: Best takes the asynchronous copies where the
// layout allows them (both operands' rows contiguous and aligned) unless
// GPTC_CUDA_ASYNC_COPIES=0, else the register-staged loads; Staged always the latter (for
// the GPU check's timings). Either gives the same bits.
enum class Loads { Best, Staged };
inline bool async_copies() {
  static const bool on = !env_is("GPTC_CUDA_ASYNC_COPIES", "0");
  return on;
}

// Whether Loads::Best takes the asynchronous copies for this product.
inline bool takes_async_copies(const MatmulShape& s, const float* A, const float* B) {
  return s.sak != 1 && s.sbn == 1 && vectorizable(A, s.sam, s.M, s.sak, s.sab) &&
         vectorizable(B, s.sbn, s.N, s.sbk, s.sbb) && async_copies();
}

template <int RM, int RN, bool kAK, bool kBN, Loads L>
void launch_matmul(cudaStream_t stream, const MatmulShape& s, const float* A, const float* B,
                   float* C, const MatmulEpilogue<float>& ep) {
  using T = Tile<RM, RN>;
  const dim3 grid((unsigned)((s.N + T::kN - 1) / T::kN), (unsigned)((s.M + T::kM - 1) / T::kM),
                  (unsigned)s.batch);
  const bool vec =
      vectorizable(A, kAK ? s.sak : s.sam, kAK ? s.K : s.M, kAK ? s.sam : s.sak, s.sab) &&
      vectorizable(B, kBN ? s.sbn : s.sbk, kBN ? s.N : s.K, kBN ? s.sbk : s.sbn, s.sbb);
  if constexpr (!kAK && kBN && L == Loads::Best) {
    if (takes_async_copies(s, A, B)) {
      GPTC_LAUNCH((matmul_async_kernel<RM, RN>), grid, kThreads, stream)(s, A, B, C, ep);
      return;
    }
  }
  if (vec)
    GPTC_LAUNCH((matmul_kernel<RM, RN, kAK, kBN, true>), grid, kThreads, stream)(s, A, B, C, ep);
  else
    GPTC_LAUNCH((matmul_kernel<RM, RN, kAK, kBN, false>), grid, kThreads, stream)(s, A, B, C, ep);
}

// The product with RM x RN outputs a thread (the tile: 16 RM x 16 RN). gptc::cuda::matmul
// picks one by the shape; the GPU check times each (test/cuda/kernel_families.cu).
template <int RM, int RN, Loads L = Loads::Best>
void launch_matmul(cudaStream_t stream, const MatmulShape& s, const float* A, const float* B,
                   float* C, const MatmulEpilogue<float>& ep) {
  const bool ak = s.sak == 1, bn = s.sbn == 1;
  if (ak && bn) launch_matmul<RM, RN, true, true, L>(stream, s, A, B, C, ep);
  else if (ak) launch_matmul<RM, RN, true, false, L>(stream, s, A, B, C, ep);
  else if (bn) launch_matmul<RM, RN, false, true, L>(stream, s, A, B, C, ep);
  else launch_matmul<RM, RN, false, false, L>(stream, s, A, B, C, ep);
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
    detail::launch_matmul<8, 8>(stream, s, A, B, C, ep);
  else
    detail::launch_matmul<4, 4>(stream, s, A, B, C, ep);
  GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::matmul");
}

}  // namespace gptc::cuda
