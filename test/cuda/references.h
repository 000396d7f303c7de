// The CPU kernels' arithmetic for the CUDA kernel families' checks, evaluated by the
// prelude on the host: each function is the expression codegen/EmitModelKernels.cpp (or the
// prelude's matmul) writes for the CPU, operation for operation, so that a family's output
// must match it bit for bit. Shared by kernel_families.cu (on a GPU) and
// emulated_families.cpp (the same kernels run by gptc/cuda/emulate.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gptc/cuda/attention.cuh"
#include "gptc/prelude.h"

namespace ref {

// rowStats: mean, biased variance (canonical sums), rstd.
inline void row_stats(const float* x, int64_t n, float eps, float& mean, float& rstd) {
  mean = gptc::reduce_sum<float>(n, [&](int64_t k) { return x[k]; }) / float(n);
  const float var =
      gptc::reduce_sum<float>(n, [&](int64_t k) { float d = x[k] - mean; return d * d; }) /
      float(n);
  rstd = float(1) / gptc::sqrt(var + eps);
}

// emitLayerNorm and emitLayerNormGrad for row r (w, b null: no affine step).
inline void layer_norm_row(int64_t n, float eps, const float* x, const float* w, const float* b,
                           float* y) {
  float mean, rstd;
  row_stats(x, n, eps, mean, rstd);
  for (int64_t k = 0; k < n; ++k) {
    float v = (x[k] - mean) * rstd;
    if (w) v = v * w[k];
    if (b) v = v + b[k];
    y[k] = v;
  }
}
inline void layer_norm_grad_row(int64_t n, float eps, const float* g, const float* x,
                                const float* w, float* dx) {
  float mean, rstd;
  row_stats(x, n, eps, mean, rstd);
  auto dxhat = [&](int64_t k) { return w ? g[k] * w[k] : g[k]; };
  const float a = gptc::reduce_sum<float>(n, [&](int64_t k) { return dxhat(k); }) / float(n);
  const float bb = gptc::reduce_sum<float>(n, [&](int64_t k) {
                     return (dxhat(k)) * ((x[k] - mean) * rstd);
                   }) / float(n);
  for (int64_t k = 0; k < n; ++k) dx[k] = rstd * ((dxhat(k)) - a - ((x[k] - mean) * rstd) * bb);
}

// emitCrossEntropy and emitCrossEntropyGrad: returns the loss, fills d (targets valid or
// `ignore`).
inline float cross_entropy(int64_t rows, int64_t v, int64_t ignore, const float* x,
                           const int64_t* t, float g, float* d) {
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; ++r) kept += t[r] != ignore;
  std::vector<float> row_loss(rows);
  const float scale = g / float(kept);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * v;
    float* dr = d + r * v;
    row_loss[r] = 0;
    if (t[r] == ignore) {
      for (int64_t k = 0; k < v; ++k) dr[k] = 0;
      continue;
    }
    const float m = gptc::reduce_max<float>(v, [&](int64_t k) { return xr[k]; });
    const float s = gptc::reduce_sum<float>(v, [&](int64_t k) { return gptc::exp(xr[k] - m); });
    row_loss[r] = gptc::log(s) + m - xr[t[r]];
    for (int64_t k = 0; k < v; ++k)
      dr[k] = (gptc::exp(xr[k] - m) / s - gptc::detail::sel(k == t[r], float(1), float(0))) * scale;
  }
  const float total = gptc::reduce_sum<float>(rows, [&](int64_t r) { return row_loss[r]; });
  return total / float(kept);
}

// emitEmbeddingGrad: zeros, then each position's row added in order (ids out of range skipped).
inline void embedding_grad(int64_t n, int64_t vocab, int64_t cols, const float* g,
                           const int64_t* idx, float* out) {
  std::fill(out, out + vocab * cols, 0.0f);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t row = idx[p];
    if (row < 0 || row >= vocab) continue;
    for (int64_t c = 0; c < cols; ++c) out[row * cols + c] = out[row * cols + c] + g[p * cols + c];
  }
}

// The arguments of an attention over contiguous [B, H, T, W] (bhtd) or [B, T, H, W] (bthd)
// tensors, no pointers yet: scale 1/sqrt(D), dropout on the weights (p 0.1, id 4) if asked.
// With kv_group > 1, k and v have H / kv_group heads (grouped-query attention).
inline gptc::cuda::AttentionArgs attention_args(int64_t B, int64_t H, int64_t T, int64_t S,
                                                int64_t D, int64_t Dv, bool causal, bool bthd,
                                                bool dropout, int64_t kv_group = 1) {
  auto strides = [&](int64_t heads, int64_t rows, int64_t W, int64_t& sb, int64_t& sh,
                     int64_t& st) {
    sb = rows * heads * W;
    sh = bthd ? W : rows * W;
    st = bthd ? heads * W : W;
  };
  gptc::cuda::AttentionArgs a{};
  a.B = B, a.H = H, a.T = T, a.S = S, a.D = D, a.Dv = Dv;
  a.causal = causal;
  a.scale = 1.0f / std::sqrt((float)D);
  a.kv_group = kv_group;
  strides(H, T, D, a.q_b, a.q_h, a.q_t);
  strides(H / kv_group, S, D, a.k_b, a.k_h, a.k_s);
  strides(H / kv_group, S, Dv, a.v_b, a.v_h, a.v_s);
  strides(H, T, Dv, a.y_b, a.y_h, a.y_t);
  if (dropout) a.dropout_id = 4, a.dropout_p = 0.1f, a.dropout_scale = 1.0f / 0.9f;
  return a;
}

// Attention's forward for one query row (emitAttention's scalar path; attention_rows gives
// its bits; test/unit/prelude_matmul_test.cpp holds them to the same order): the row's
// output y[Dv] and stats (m, l). `a` holds host pointers (y and stats unused).
inline void attention_row(const gptc::cuda::AttentionArgs& a, int64_t r, float* y,
                          float* stats) {
  const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
  const float* q = a.q + b * a.q_b + h * a.q_h + t * a.q_t;
  const float* kb = a.k + b * a.k_b + h / a.kv_group * a.k_h;
  const float* vb = a.v + b * a.v_b + h / a.kv_group * a.v_h;
  const int64_t vis = a.causal ? std::min(t + 1, a.S) : a.S;
  float m = -INFINITY, l = 0;
  std::vector<float> acc(a.Dv, 0.0f), sacc(a.Dv);
  for (int64_t j0 = 0; j0 < vis; j0 += 32) {
    const int64_t nb = std::min<int64_t>(vis - j0, 32);
    float p[32];
    for (int64_t j = 0; j < 32; ++j) {
      if (j >= nb) {
        p[j] = -INFINITY;
        continue;
      }
      const float s = gptc::dot_seq<float>(a.D, [&](int64_t c) { return q[c]; },
                                           [&](int64_t c) { return kb[(j0 + j) * a.k_s + c]; });
      p[j] = s * a.scale;
    }
    float mb = -INFINITY;
    for (int64_t j = 0; j < 32; ++j) mb = gptc::maximum(mb, p[j]);
    const float mn = gptc::maximum(m, mb), corr = gptc::exp(m - mn);
    for (int64_t j = 0; j < 32; ++j) p[j] = gptc::exp(p[j] - mn);
    float bsum = 0;
    for (int64_t j = 0; j < 32; ++j) bsum = bsum + p[j];
    if (a.rng)
      for (int64_t j = 0; j < nb; ++j)
        p[j] = p[j] * (gptc::dropout_keep(a.rng[0], a.rng[1], a.dropout_id, r * a.S + j0 + j,
                                          a.dropout_p) ? a.dropout_scale : 0.0f);
    std::fill(sacc.begin(), sacc.end(), 0.0f);
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t c = 0; c < a.Dv; ++c)
        sacc[c] = gptc::fma(p[j], vb[(j0 + j) * a.v_s + c], sacc[c]);
    l = l * corr + bsum;
    for (int64_t c = 0; c < a.Dv; ++c) acc[c] = acc[c] * corr + sacc[c];
    m = mn;
  }
  for (int64_t c = 0; c < a.Dv; ++c) y[c] = acc[c] / l;
  stats[0] = m, stats[1] = l;
}

// Every row's attention_row, written into y (laid out by a's y strides) and stats.
inline void attention(const gptc::cuda::AttentionArgs& a, float* y, float* stats) {
  const int64_t rows = a.B * a.H * a.T;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(a.Dv);
    attention_row(a, r, row.data(), stats + r * 2);
    const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
    std::copy(row.begin(), row.end(), y + b * a.y_b + h * a.y_h + t * a.y_t);
  }
}

// Attention's gradient (emitAttentionGrad's scalar path; attention_grad_rows gives its bits):
// dq like q, dk like k, dv like v, or dk and dv by `own`'s strides where they are set (with
// grouped heads, a kv head's the canonical sum of its query heads' parts); g laid out as y,
// stats as the forward's.
inline void attention_grad(const gptc::cuda::AttentionArgs& a, const float* g,
                           const float* stats, float* dq, float* dk, float* dv,
                           const gptc::cuda::AttentionGradArgs* own = nullptr) {
  const bool k_own = own && own->dk_b, v_own = own && own->dv_b;
  const int64_t dk_b = k_own ? own->dk_b : a.k_b, dk_h = k_own ? own->dk_h : a.k_h,
                dk_s = k_own ? own->dk_s : a.k_s, dv_b = v_own ? own->dv_b : a.v_b,
                dv_h = v_own ? own->dv_h : a.v_h, dv_s = v_own ? own->dv_s : a.v_s;
  const int64_t B = a.B, g_b = a.y_b, g_h = a.y_h, g_t = a.y_t;
  const int64_t rows = B * a.H * a.T;
  std::vector<float> dS(rows * a.S, 0.0f), PK(rows * a.S, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
    const float* q = a.q + b * a.q_b + h * a.q_h + t * a.q_t;
    const float* gr = g + b * g_b + h * g_h + t * g_t;
    const float* kb = a.k + b * a.k_b + h / a.kv_group * a.k_h;
    const float* vb = a.v + b * a.v_b + h / a.kv_group * a.v_h;
    const int64_t vis = a.causal ? std::min(t + 1, a.S) : a.S;
    const float m = stats[r * 2], l = stats[r * 2 + 1];
    std::vector<float> P(vis), dP(vis);
    for (int64_t j = 0; j < vis; ++j) {
      const float s = gptc::dot_seq<float>(a.D, [&](int64_t c) { return q[c]; },
                                           [&](int64_t c) { return kb[j * a.k_s + c]; });
      const float d = gptc::dot_seq<float>(a.Dv, [&](int64_t c) { return gr[c]; },
                                           [&](int64_t c) { return vb[j * a.v_s + c]; });
      P[j] = gptc::exp(s * a.scale - m) / l;
      const float keep = a.rng ? (gptc::dropout_keep(a.rng[0], a.rng[1], a.dropout_id,
                                                     r * a.S + j, a.dropout_p)
                                      ? a.dropout_scale
                                      : 0.0f)
                               : 1.0f;
      dP[j] = d * keep;
      PK[r * a.S + j] = P[j] * keep;
    }
    const float Dsum = gptc::dot_seq<float>(vis, [&](int64_t j) { return P[j]; },
                                            [&](int64_t j) { return dP[j]; });
    for (int64_t j = 0; j < vis; ++j) dS[r * a.S + j] = P[j] * (dP[j] - Dsum);
    float* dqr = dq + b * a.q_b + h * a.q_h + t * a.q_t;
    for (int64_t c = 0; c < a.D; ++c)
      dqr[c] = gptc::dot_seq<float>(vis, [&](int64_t j) { return dS[r * a.S + j]; },
                                    [&](int64_t j) { return kb[j * a.k_s + c]; }) *
               a.scale;
  }
  // Each query head's part of dk and dv ([B H, S, D] and [B H, S, Dv]).
  std::vector<float> pk(B * a.H * a.S * a.D), pv(B * a.H * a.S * a.Dv);
  for (int64_t bh = 0; bh < B * a.H; ++bh) {
    const int64_t b = bh / a.H, h = bh % a.H;
    for (int64_t j = 0; j < a.S; ++j) {
      const int64_t first = a.causal ? j : 0;
      for (int64_t c = 0; c < a.D; ++c) {
        float acc = 0;
        for (int64_t t = first; t < a.T; ++t)
          acc = gptc::fma(dS[(bh * a.T + t) * a.S + j], a.q[b * a.q_b + h * a.q_h + t * a.q_t + c],
                          acc);
        pk[(bh * a.S + j) * a.D + c] = acc * a.scale;
      }
      for (int64_t c = 0; c < a.Dv; ++c) {
        float acc = 0;
        for (int64_t t = first; t < a.T; ++t)
          acc = gptc::fma(PK[(bh * a.T + t) * a.S + j], g[b * g_b + h * g_h + t * g_t + c], acc);
        pv[(bh * a.S + j) * a.Dv + c] = acc;
      }
    }
  }
  // A kv head's: its one query head's part, or its G query heads' parts summed canonically.
  const int64_t G = a.kv_group;
  auto group = [&](const std::vector<float>& parts, int64_t bkv, int64_t j, int64_t c,
                   int64_t width) {
    auto at = [&](int64_t i) { return parts[((bkv * G + i) * a.S + j) * width + c]; };
    return G == 1 ? at(0) : gptc::reduce_sum<float>(G, at);
  };
  for (int64_t bkv = 0; bkv < B * a.H / G; ++bkv) {
    const int64_t b = bkv / (a.H / G), kvh = bkv % (a.H / G);
    for (int64_t j = 0; j < a.S; ++j) {
      for (int64_t c = 0; c < a.D; ++c)
        dk[b * dk_b + kvh * dk_h + j * dk_s + c] = group(pk, bkv, j, c, a.D);
      for (int64_t c = 0; c < a.Dv; ++c)
        dv[b * dv_b + kvh * dv_h + j * dv_s + c] = group(pv, bkv, j, c, a.Dv);
    }
  }
}

// The prelude's matmul for output element i (dot_seq, then the epilogue).
inline float matmul_element(int64_t i, int64_t M, int64_t N, int64_t K, const float* A,
                            int64_t sab, int64_t sam, int64_t sak, const float* B, int64_t sbb,
                            int64_t sbk, int64_t sbn, const gptc::MatmulEpilogue<float>& ep) {
  const int64_t n = i % N, m = (i / N) % M, b = i / (M * N);
  const float* a = A + b * sab + m * sam;
  const float* bb = B + b * sbb + n * sbn;
  const float v = gptc::dot_seq<float>(K, [&](int64_t k) { return a[k * sak]; },
                                       [&](int64_t k) { return bb[k * sbk]; });
  return ep.any() ? ep.apply_one(i, n, v) : v;
}

}  // namespace ref
