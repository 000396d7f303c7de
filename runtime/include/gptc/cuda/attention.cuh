// gptc/cuda/attention.cuh — attention's forward on the GPU, the CPU's bits, no atomics.
//
// The CPU kernel (codegen/EmitModelKernels.cpp, emitAttention; gptc::attention_rows on
// AVX-512 and AVX2, the same bits) runs an online softmax per query row over key blocks of
// 32 in increasing order. For each block: the scores S_j = q . k_j (an fma chain over the
// head dimension from 0), scaled; the block's max by the sequential fold of gptc::maximum
// from -inf; mn = max(m, that); corr = exp(m - mn); p_j = exp(S_j scale - mn); the block's
// sum of p_j from 0 in order; dropout's keep factors on p_j; sacc[c] = the fma chain of
// p_j v_j[c] over the block's keys in order from 0; then l = l corr + bsum and
// acc[c] = acc[c] corr + sacc[c]. Finally y[c] = acc[c] / l, and (m, l) kept for the
// gradient. Here one warp takes one query row: lane j scores key j0 + j, the folds run in
// order through shuffles (every lane computes the same fold), and lane c owns output
// columns c, c + 32, ...
#pragma once

#include "gptc/cuda/check.cuh"
#include "gptc/prelude.h"

namespace gptc::cuda {

// Element (b, h, t, c) of q at q[b * q_b + h * q_h + t * q_t + c]; k and v by key s the same
// way; y likewise; stats[(b * H + h) * T + t] holds (m, l). Dv <= 256.
struct AttentionArgs {
  int64_t B, H, T, S, D, Dv;
  bool causal;
  float scale;
  const float* q;
  int64_t q_b, q_h, q_t;
  const float* k;
  int64_t k_b, k_h, k_s;
  const float* v;
  int64_t v_b, v_h, v_s;
  float* y;
  int64_t y_b, y_h, y_t;
  float* stats;
  const int64_t* rng = nullptr;  // device [seed, step]: dropout on the weights
  int64_t dropout_id = 0;
  float dropout_p = 0, dropout_scale = 1;
};

constexpr int kAttentionMaxColumnsPerLane = 8;  // Dv <= 256

__global__ void attention_kernel(AttentionArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.B * a.H * a.T;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
    const float* q = a.q + b * a.q_b + h * a.q_h + t * a.q_t;
    const float* kb = a.k + b * a.k_b + h * a.k_h;
    const float* vb = a.v + b * a.v_b + h * a.v_h;
    const int64_t vis = a.causal ? (t + 1 < a.S ? t + 1 : a.S) : a.S;
    float m = -INFINITY, l = 0;
    float acc[kAttentionMaxColumnsPerLane];
#pragma unroll
    for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) acc[i] = 0;
    for (int64_t j0 = 0; j0 < vis; j0 += 32) {
      const int64_t nb = vis - j0 < 32 ? vis - j0 : 32;
      float p = -INFINITY;
      if (lane < nb) {
        const float* kj = kb + (j0 + lane) * a.k_s;
        float s = 0;
        for (int64_t c = 0; c < a.D; ++c) s = gptc::fma(q[c], kj[c], s);
        p = s * a.scale;
      }
      float mb = -INFINITY;
      for (int j = 0; j < 32; ++j) mb = gptc::maximum(mb, __shfl_sync(0xffffffffu, p, j));
      const float mn = gptc::maximum(m, mb);
      const float corr = gptc::exp(m - mn);
      p = gptc::exp(p - mn);
      float bsum = 0;
      for (int j = 0; j < 32; ++j) bsum = bsum + __shfl_sync(0xffffffffu, p, j);
      if (a.rng && lane < nb)
        p = p * (gptc::dropout_keep((uint64_t)a.rng[0], (uint64_t)a.rng[1],
                                    (uint64_t)a.dropout_id, (uint64_t)(r * a.S + j0 + lane),
                                    a.dropout_p)
                     ? a.dropout_scale
                     : 0.0f);
      float sacc[kAttentionMaxColumnsPerLane];
#pragma unroll
      for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) sacc[i] = 0;
      for (int64_t j = 0; j < nb; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, (int)j);
        const float* vj = vb + (j0 + j) * a.v_s;
#pragma unroll
        for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) {
          const int64_t c = lane + 32 * i;
          if (c < a.Dv) sacc[i] = gptc::fma(pj, vj[c], sacc[i]);
        }
      }
      l = l * corr + bsum;
#pragma unroll
      for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) acc[i] = acc[i] * corr + sacc[i];
      m = mn;
    }
    float* y = a.y + b * a.y_b + h * a.y_h + t * a.y_t;
#pragma unroll
    for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < a.Dv) y[c] = acc[i] / l;
    }
    if (lane == 0) {
      a.stats[r * 2] = m;
      a.stats[r * 2 + 1] = l;
    }
  }
}

// Launches the forward: one warp a query row.
inline void attention(cudaStream_t stream, const AttentionArgs& a) {
  if (a.Dv > 32 * kAttentionMaxColumnsPerLane) {
    std::fprintf(stderr, "gptc: error: gptc::cuda::attention: Dv %lld is over %d\n",
                 (long long)a.Dv, 32 * kAttentionMaxColumnsPerLane);
    std::exit(1);
  }
  const int64_t rows = a.B * a.H * a.T;
  const int64_t blocks = (rows + 7) / 8;
  GPTC_LAUNCH(attention_kernel, (unsigned)(blocks < 65535 ? blocks : 65535), 256, stream)(a);
  GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::attention_kernel");
}

}  // namespace gptc::cuda
