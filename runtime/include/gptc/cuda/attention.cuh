// gptc/cuda/attention.cuh — attention and its gradient on the GPU, the CPU's bits, no
// atomics.
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
//
// The gradient (emitAttentionGrad) per query row t, given the forward's (m, l) and the
// output's gradient g: P_j = exp(S_j scale - m) / l; dP_j = (g . v_j) K_j, with K_j the
// dropout's keep factor (1 without dropout); Dsum = the fma chain of P_j dP_j over the keys
// seen, in order from 0; dS_j = P_j (dP_j - Dsum); dq[c] = (the fma chain of dS_j k_j[c])
// scale. Then per key j: dk[c] = (the fma chain of dS_tj q_t[c] over the query rows t that see
// j, in increasing t from 0) scale, and dv[c] = the same chain of (P_tj K_tj) g_t[c]. The
// first kernel takes a query row a warp and leaves dS and P K in scratch ([heads, T, S] each,
// for a group of heads that fits the scratch); the second takes a (key, column) a thread and
// runs the chains over t: no atomics.
#pragma once

#include "gptc/cuda/check.cuh"
#include "gptc/prelude.h"

namespace gptc::cuda {

// Element (b, h, t, c) of q at q[b * q_b + h * q_h + t * q_t + c]; k and v by key s the same
// way, of H / kv_group heads (query head h reads head h / kv_group: grouped-query
// attention); y likewise; stats[(b * H + h) * T + t] holds (m, l). Dv <= 256.
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
  int64_t kv_group = 1;
  const bool* key_mask = nullptr;  // [B, S]: key s hidden from batch row b's queries if false
};

constexpr int kAttentionMaxColumnsPerLane = 8;  // Dv <= 256

__global__ void attention_kernel(AttentionArgs a) {
  GPTC_CUDA_KERNEL_BEGIN();
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.B * a.H * a.T;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
    const float* q = a.q + b * a.q_b + h * a.q_h + t * a.q_t;
    const float* kb = a.k + b * a.k_b + h / a.kv_group * a.k_h;
    const float* vb = a.v + b * a.v_b + h / a.kv_group * a.v_h;
    const int64_t vis = a.causal ? (t + 1 < a.S ? t + 1 : a.S) : a.S;
    const bool* km = a.key_mask ? a.key_mask + b * a.S : nullptr;
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
        p = km && !km[j0 + lane] ? -INFINITY : s * a.scale;
      }
      float mb = -INFINITY;
      for (int j = 0; j < 32; ++j) mb = gptc::maximum(mb, __shfl_sync(0xffffffffu, p, j));
      const float mn = gptc::maximum(m, mb);
      // -inf while every key seen is hidden (a key mask): the exps against 0, not -inf.
      const float me = mn == -INFINITY ? 0.0f : mn;
      const float corr = gptc::exp(m - me);
      p = gptc::exp(p - me);
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
      if (c < a.Dv) y[c] = acc[i] / (l == 0.0f ? 1.0f : l);  // 0: the row saw no key
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

// The gradient's operands and results, beside the forward's (AttentionArgs: q, k, v, the
// strides, the dropout; y unused, stats read): g like y; dq, dk and dv by their strides
// below, q's, k's and v's where those are 0; scratch holds 2 B H T S floats. With grouped
// heads (kv_group > 1) dk and dv are k's and v's shape: a kv head's sums its query heads'
// parts in the canonical order (gptc::reduce_sum).
struct AttentionGradArgs {
  AttentionArgs f;
  const float* g;
  float *dq, *dk, *dv;
  float* scratch;
  // The scratch's floats: the heads go in groups that fit it, 2 T S floats a head
  // (attention_grad); 0: every head at once (attention_grad_scratch_floats).
  int64_t scratch_floats = 0;
  int64_t dq_b = 0, dq_h = 0, dq_t = 0, dk_b = 0, dk_h = 0, dk_s = 0, dv_b = 0, dv_h = 0,
          dv_s = 0;
};

namespace detail {
// For key j0 + lane of row r (zeros past the block's nb keys): P = exp(S scale - m) / l, dP
// = (g . v) K and P K, K the dropout's keep factor (1 without dropout).
struct AttentionGradLane {
  float P, dP, PK;
};
__device__ __forceinline__ AttentionGradLane attention_grad_lane(
    const AttentionArgs& f, int64_t r, int64_t j0, int64_t nb, float m, float l, const float* q,
    const float* g, const float* kb, const float* vb) {
  const int lane = threadIdx.x % 32;
  if (lane >= nb) return {0, 0, 0};
  const float* kj = kb + (j0 + lane) * f.k_s;
  const float* vj = vb + (j0 + lane) * f.v_s;
  float s = 0, dp = 0;
  for (int64_t c = 0; c < f.D; ++c) s = gptc::fma(q[c], kj[c], s);
  for (int64_t c = 0; c < f.Dv; ++c) dp = gptc::fma(g[c], vj[c], dp);
  if (f.key_mask && !f.key_mask[r / (f.H * f.T) * f.S + j0 + lane]) s = -INFINITY;
  const float P = gptc::exp(s * f.scale - m) / l;
  float keep = 1.0f;
  if (f.rng)
    keep = gptc::dropout_keep((uint64_t)f.rng[0], (uint64_t)f.rng[1], (uint64_t)f.dropout_id,
                              (uint64_t)(r * f.S + j0 + lane), f.dropout_p)
               ? f.dropout_scale
               : 0.0f;
  return {P, dp * keep, P * keep};
}
}  // namespace detail

// dq, and each row's dS and P K into the scratch: one warp a query row, of the heads
// (batch x head) [bh0, bh1).
__global__ void attention_grad_rows_kernel(AttentionGradArgs a, int64_t bh0, int64_t bh1) {
  GPTC_CUDA_KERNEL_BEGIN();
  const AttentionArgs& f = a.f;
  const int lane = threadIdx.x % 32;
  const int64_t row0 = bh0 * f.T, rows = (bh1 - bh0) * f.T;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t i = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < rows;
       i += warps) {
    const int64_t r = row0 + i;
    float* const dS_row = a.scratch + i * f.S;           // the group's rows: dS, then P K
    float* const PK_row = a.scratch + (rows + i) * f.S;
    const int64_t bh = r / f.T, t = r % f.T, b = bh / f.H, h = bh % f.H;
    const float* q = f.q + b * f.q_b + h * f.q_h + t * f.q_t;
    const float* g = a.g + b * f.y_b + h * f.y_h + t * f.y_t;
    const float* kb = f.k + b * f.k_b + h / f.kv_group * f.k_h;
    const float* vb = f.v + b * f.v_b + h / f.kv_group * f.v_h;
    const int64_t vis = f.causal ? (t + 1 < f.S ? t + 1 : f.S) : f.S;
    // A row that saw no key (sum 0, a key mask): max 0 and sum 1, so that its P is 0.
    const bool none = f.stats[r * 2 + 1] == 0.0f;
    const float m = none ? 0.0f : f.stats[r * 2], l = none ? 1.0f : f.stats[r * 2 + 1];
    // Dsum first (the lanes' operands are computed again below: the same bits).
    float Dsum = 0;
    for (int64_t j0 = 0; j0 < vis; j0 += 32) {
      const int64_t nb = vis - j0 < 32 ? vis - j0 : 32;
      const detail::AttentionGradLane op =
          detail::attention_grad_lane(f, r, j0, nb, m, l, q, g, kb, vb);
      for (int j = 0; j < (int)nb; ++j)
        Dsum = gptc::fma(__shfl_sync(0xffffffffu, op.P, j), __shfl_sync(0xffffffffu, op.dP, j),
                         Dsum);
    }
    float qacc[kAttentionMaxColumnsPerLane];
#pragma unroll
    for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) qacc[i] = 0;
    for (int64_t j0 = 0; j0 < vis; j0 += 32) {
      const int64_t nb = vis - j0 < 32 ? vis - j0 : 32;
      const detail::AttentionGradLane op =
          detail::attention_grad_lane(f, r, j0, nb, m, l, q, g, kb, vb);
      const float dS = op.P * (op.dP - Dsum);
      if (lane < nb) {
        dS_row[j0 + lane] = dS;
        PK_row[j0 + lane] = op.PK;
      }
      for (int j = 0; j < (int)nb; ++j) {
        const float dsj = __shfl_sync(0xffffffffu, dS, j);
        const float* kj = kb + (j0 + j) * f.k_s;
#pragma unroll
        for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) {
          const int64_t c = lane + 32 * i;
          if (c < f.D) qacc[i] = gptc::fma(dsj, kj[c], qacc[i]);
        }
      }
    }
    float* dq = a.dq + b * a.dq_b + h * a.dq_h + t * a.dq_t;
#pragma unroll
    for (int i = 0; i < kAttentionMaxColumnsPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < f.D) dq[c] = qacc[i] * f.scale;
    }
  }
}

// dk and dv from the scratch: one thread a (kv head, key, column) of the query heads
// [bh0, bh1) (whole groups), per query head its chains over the query rows that see the
// key, in increasing order; a group's parts summed in the canonical order.
__global__ void attention_grad_keys_kernel(AttentionGradArgs a, int64_t bh0, int64_t bh1) {
  GPTC_CUDA_KERNEL_BEGIN();
  const AttentionArgs& f = a.f;
  const int64_t W = f.D > f.Dv ? f.D : f.Dv, G = f.kv_group, Hkv = f.H / G;
  const int64_t total = (bh1 - bh0) / G * f.S * W, row0 = bh0 * f.T, rows = (bh1 - bh0) * f.T;
  const float* dS_all = a.scratch;  // the heads' rows, as the rows kernel left them
  const float* PK_all = a.scratch + rows * f.S;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t bkv = bh0 / G + e / (f.S * W), j = (e / W) % f.S, c = e % W,
                  b = bkv / Hkv, kvh = bkv % Hkv;
    const int64_t first = f.causal ? j : 0;  // row t sees key j from t = j on
    // Query head h = kvh G + i's part of dk (dv) at (j, c), as the single-head chain.
    auto part = [&](int64_t i, const float* rowsOf, const float* x, int64_t x_b, int64_t x_h,
                    int64_t x_t) {
      const int64_t h = kvh * G + i, bh = b * f.H + h;
      const float* xb = x + b * x_b + h * x_h;
      float acc = 0;
      for (int64_t t = first; t < f.T; ++t)
        acc = gptc::fma(rowsOf[(bh * f.T + t - row0) * f.S + j], xb[t * x_t + c], acc);
      return acc;
    };
    if (c < f.D) {
      auto dk = [&](int64_t i) { return part(i, dS_all, f.q, f.q_b, f.q_h, f.q_t) * f.scale; };
      a.dk[b * a.dk_b + kvh * a.dk_h + j * a.dk_s + c] =
          G == 1 ? dk(0) : gptc::reduce_sum<float>(G, dk);
    }
    if (c < f.Dv) {
      auto dv = [&](int64_t i) { return part(i, PK_all, a.g, f.y_b, f.y_h, f.y_t); };
      a.dv[b * a.dv_b + kvh * a.dv_h + j * a.dv_s + c] =
          G == 1 ? dv(0) : gptc::reduce_sum<float>(G, dv);
    }
  }
}

// The scratch attention_grad needs for every head at once, in floats (2 T S a head).
inline int64_t attention_grad_scratch_floats(const AttentionArgs& f) {
  return 2 * f.B * f.H * f.T * f.S;
}

// Launches the gradient: per group of heads that fits the scratch, the rows kernel, then the
// keys kernel. Which launch computes a head changes no bit: each output is its own chain.
inline void attention_grad(cudaStream_t stream, const AttentionGradArgs& given) {
  AttentionGradArgs a = given;
  const AttentionArgs& f = a.f;
  if (!a.dq_b) a.dq_b = f.q_b, a.dq_h = f.q_h, a.dq_t = f.q_t;
  if (!a.dk_b) a.dk_b = f.k_b, a.dk_h = f.k_h, a.dk_s = f.k_s;
  if (!a.dv_b) a.dv_b = f.v_b, a.dv_h = f.v_h, a.dv_s = f.v_s;
  if (f.D > 32 * kAttentionMaxColumnsPerLane) {
    std::fprintf(stderr, "gptc: error: gptc::cuda::attention_grad: D %lld is over %d\n",
                 (long long)f.D, 32 * kAttentionMaxColumnsPerLane);
    std::exit(1);
  }
  // Heads go in whole groups of kv_group (the keys kernel sums a group's parts).
  const int64_t heads = f.B * f.H, perGroup = 2 * f.T * f.S * f.kv_group;
  if (a.scratch_floats && a.scratch_floats < perGroup) {
    std::fprintf(stderr, "gptc: error: gptc::cuda::attention_grad: a scratch of %lld floats "
                 "holds no group of heads (%lld a group)\n", (long long)a.scratch_floats,
                 (long long)perGroup);
    std::exit(1);
  }
  const int64_t group =
      a.scratch_floats ? std::min(heads, a.scratch_floats / perGroup * f.kv_group) : heads;
  const int64_t W = f.D > f.Dv ? f.D : f.Dv;
  for (int64_t bh0 = 0; bh0 < heads; bh0 += group) {
    const int64_t bh1 = std::min(heads, bh0 + group);
    const int64_t blocks = ((bh1 - bh0) * f.T + 7) / 8;
    GPTC_LAUNCH(attention_grad_rows_kernel, (unsigned)(blocks < 65535 ? blocks : 65535), 256,
                stream)(a, bh0, bh1);
    GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::attention_grad_rows_kernel");
    const int64_t kblocks = ((bh1 - bh0) / f.kv_group * f.S * W + 255) / 256;
    GPTC_LAUNCH(attention_grad_keys_kernel, (unsigned)(kblocks < 65535 ? kblocks : 65535), 256,
                stream)(a, bh0, bh1);
    GPTC_CUDA_CHECK_LAUNCH("gptc::cuda::attention_grad_keys_kernel");
  }
}

}  // namespace gptc::cuda
