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

// Attention's forward for one query row (emitAttention's scalar path; attention_rows gives
// its bits): the row's output y[Dv] and stats (m, l). Strides as gptc::cuda::AttentionArgs.
struct Attention {
  int64_t H, T, S, D, Dv;
  bool causal;
  float scale;
  const float* q;
  int64_t q_b, q_h, q_t;
  const float* k;
  int64_t k_b, k_h, k_s;
  const float* v;
  int64_t v_b, v_h, v_s;
  const int64_t* rng;  // [seed, step], or null: no dropout
  int64_t dropout_id;
  float dropout_p, dropout_scale;
};
inline void attention_row(const Attention& a, int64_t r, float* y, float* stats) {
  const int64_t bh = r / a.T, t = r % a.T, b = bh / a.H, h = bh % a.H;
  const float* q = a.q + b * a.q_b + h * a.q_h + t * a.q_t;
  const float* kb = a.k + b * a.k_b + h * a.k_h;
  const float* vb = a.v + b * a.v_b + h * a.v_h;
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
