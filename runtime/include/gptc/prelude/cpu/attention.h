// gptc/prelude/cpu/attention.h — attention on the CPU: key blocks, row lanes, the online
// softmax and its gradient (host only). Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_ATTENTION_H
#define GPTC_PRELUDE_CPU_ATTENTION_H

#include "gptc/prelude/cpu/math_arrays.h"
#include "gptc/prelude/cpu/scratch.h"
#include "gptc/prelude/cpu/vector.h"
#include "gptc/prelude/reduce.h"
#include "gptc/prelude/rng.h"

namespace gptc {

// Attention helpers: the scores of 32 keys at once, each lane one key, each lane summing
// its dot product over c = 0..D-1 in increasing order with fma: the same bits as dot_seq
// per key. kt is K transposed and padded: kt[c * ld + j] = K[j0 + j][c].
template <class T>
inline void block_dots(int64_t D, const T* q, const T* kt, int64_t ld, T* out) {
  T acc[32];
  for (int j = 0; j < 32; ++j) acc[j] = T(0);
  for (int64_t c = 0; c < D; ++c) {
    const T qc = q[c];
    const T* row = kt + c * ld;
    for (int j = 0; j < 32; ++j) acc[j] = gptc::fma(qc, row[j], acc[j]);
  }
  for (int j = 0; j < 32; ++j) out[j] = acc[j];
}

// The scores of rows [0, R) of a block of queries (rows `qs` apart) against keys [0, keys),
// 32 at a time: out[r * ldo + j] for j < keys rounded up to 32. Each score has the bits of
// block_dots (c = 0..D-1 in increasing order with fma); R rows share each load of kt, and
// R * 2 independent accumulators keep the FMA units busy. R <= 4.
template <class T>
inline void block_dots_rows(int64_t R, int64_t D, const T* q, int64_t qs, const T* kt,
                            int64_t ld, int64_t keys, T* out, int64_t ldo) {
#if defined(GPTC_VECTOR_FORMS)
  if constexpr (sizeof(T) == 4) {
    if (R == 4) {  // 2 vectors of keys at a time (8 accumulators), up to keys rounded to 32
      using W = detail::TileVec;
      constexpr int64_t L = W::kLanes;
      const int64_t end = (keys + 31) / 32 * 32;
      for (int64_t j0 = 0; j0 < end; j0 += 2 * L) {
        W::V acc[4][2];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = W::zero();
        for (int64_t c = 0; c < D; ++c) {
          W::V k0 = W::loadu(kt + c * ld + j0);
          W::V k1 = W::loadu(kt + c * ld + j0 + L);
          detail::hold(k0);
          detail::hold(k1);
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) {
            const W::V qc = W::broadcast(q + r * qs + c);
            acc[r][0] = W::fma(qc, k0, acc[r][0]);
            acc[r][1] = W::fma(qc, k1, acc[r][1]);
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          W::store(out + r * ldo + j0, acc[r][0]);
          W::store(out + r * ldo + j0 + L, acc[r][1]);
        }
      }
      return;
    }
  }
#endif
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j0 = 0; j0 < keys; j0 += 32) block_dots<T>(D, q + r * qs, kt + j0, ld, out + r * ldo + j0);
}

#if defined(GPTC_AVX512)
namespace detail {

// axpy_rows on columns [c0, c0 + 16 * V) (masked past D), accumulators in registers.
template <int V>
inline void axpy_rows_cols(int64_t n, const float* w, int64_t ws, const float* rows, int64_t rs,
                           int64_t D, int64_t c0, float* acc) {
  __mmask16 mask[V];
  __m512 a[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    mask[v] = lanes_mask(D - c0 - 16 * v);
    a[v] = _mm512_maskz_loadu_ps(mask[v], acc + c0 + 16 * v);
  }
  for (int64_t j = 0; j < n; ++j) {
    const __m512 wj = _mm512_set1_ps(w[j * ws]);
    const float* row = rows + j * rs + c0;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      a[v] = _mm512_fmadd_ps(wj, _mm512_maskz_loadu_ps(mask[v], row + 16 * v), a[v]);
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(acc + c0 + 16 * v, mask[v], a[v]);
}
}  // namespace detail
#elif defined(GPTC_AVX2)
namespace detail {
// axpy_rows on columns [c0, c0 + 8 * V), accumulators in registers; masked past D unless
// Full (all 8 * V columns below D).
template <int V, bool Full>
inline void axpy_rows_cols8(int64_t n, const float* w, int64_t ws, const float* rows,
                            int64_t rs, int64_t D, int64_t c0, float* acc) {
  __m256i mask[V];
  __m256 a[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    mask[v] = lanes_mask8(D - c0 - 8 * v);
    a[v] = Full ? _mm256_loadu_ps(acc + c0 + 8 * v) : _mm256_maskload_ps(acc + c0 + 8 * v, mask[v]);
  }
  for (int64_t j = 0; j < n; ++j) {
    const __m256 wj = _mm256_broadcast_ss(w + j * ws);
    const float* row = rows + j * rs + c0;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      a[v] = _mm256_fmadd_ps(wj, Full ? _mm256_loadu_ps(row + 8 * v) : _mm256_maskload_ps(row + 8 * v, mask[v]),
                             a[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    if (Full)
      _mm256_storeu_ps(acc + c0 + 8 * v, a[v]);
    else
      _mm256_maskstore_ps(acc + c0 + 8 * v, mask[v], a[v]);
  }
}
}  // namespace detail
#endif

// acc[c] = fma(w[j * ws], rows[j * rs + c], acc[c]) for j = 0..n-1 in increasing order,
// every c < D: a weighted sum of rows, each lane its own sequential sum (attention's dq,
// dk and dv). On AVX-512 and AVX2 the accumulators stay in registers, 64 columns at a time
// (32 for the last 32 or fewer).
template <class T>
inline void axpy_rows(int64_t n, const T* w, int64_t ws, const T* rows, int64_t rs, int64_t D,
                      T* acc) {
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    for (int64_t c0 = 0; c0 < D; c0 += 64) {
      if (D - c0 <= 32)
        detail::axpy_rows_cols<2>(n, w, ws, rows, rs, D, c0, acc);
      else
        detail::axpy_rows_cols<4>(n, w, ws, rows, rs, D, c0, acc);
    }
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {
    for (int64_t c0 = 0; c0 < D; c0 += 64) {
      if (D - c0 >= 64)
        detail::axpy_rows_cols8<8, true>(n, w, ws, rows, rs, D, c0, acc);
      else if (D - c0 <= 32)
        detail::axpy_rows_cols8<4, false>(n, w, ws, rows, rs, D, c0, acc);
      else
        detail::axpy_rows_cols8<8, false>(n, w, ws, rows, rs, D, c0, acc);
    }
    return;
  }
#endif
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < D; ++c) acc[c] = gptc::fma(w[j * ws], rows[j * rs + c], acc[c]);
}

#if defined(GPTC_AVX512)
namespace detail {
// axpy_rows4 on columns [c0, c0 + 16 * V): 4 outputs, each loaded row used 4 times.
template <int V>
inline void axpy_rows4_cols(int64_t n, const float* w, int64_t wj, int64_t wi,
                            const float* rows, int64_t rs, int64_t D, int64_t c0, float* acc,
                            int64_t as) {
  __mmask16 mask[V];
  __m512 a[4][V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    mask[v] = lanes_mask(D - c0 - 16 * v);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) a[i][v] = _mm512_maskz_loadu_ps(mask[v], acc + i * as + c0 + 16 * v);
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * rs + c0;
    __m512 r[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      r[v] = _mm512_maskz_loadu_ps(mask[v], row + 16 * v);
      hold(r[v]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 wij = _mm512_set1_ps(w[j * wj + i * wi]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[i][v] = _mm512_fmadd_ps(wij, r[v], a[i][v]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(acc + i * as + c0 + 16 * v, mask[v], a[i][v]);
}
}  // namespace detail
#elif defined(GPTC_AVX2)
namespace detail {
// axpy_rows4 on columns [c0, c0 + 8 * V): 4 outputs x V vectors of accumulators (12 for
// V = 3, which keeps the FMA units from waiting on the chains' latency), each loaded row
// used 4 times; masked past D unless Full.
template <int V, bool Full>
inline void axpy_rows4_cols8(int64_t n, const float* w, int64_t wj, int64_t wi,
                             const float* rows, int64_t rs, int64_t D, int64_t c0, float* acc,
                             int64_t as) {
  __m256i mask[V];
#pragma GCC unroll 3
  for (int v = 0; v < V; ++v) mask[v] = lanes_mask8(D - c0 - 8 * v);
  __m256 a[4][V];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) {
      const float* p = acc + i * as + c0 + 8 * v;
      a[i][v] = Full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[v]);
    }
  for (int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * rs + c0;
    __m256 r[V];
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) {
      r[v] = Full ? _mm256_loadu_ps(row + 8 * v) : _mm256_maskload_ps(row + 8 * v, mask[v]);
      hold(r[v]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256 wij = _mm256_broadcast_ss(w + j * wj + i * wi);
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) a[i][v] = _mm256_fmadd_ps(wij, r[v], a[i][v]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) {
      float* p = acc + i * as + c0 + 8 * v;
      if (Full)
        _mm256_storeu_ps(p, a[i][v]);
      else
        _mm256_maskstore_ps(p, mask[v], a[i][v]);
    }
}
}  // namespace detail
#endif

// axpy_rows for 4 outputs over the same rows: acc[i * as + c] = fma(w[j * wj + i * wi],
// rows[j * rs + c], acc[i * as + c]) for j = 0..n-1 in increasing order, i < 4, c < D; each
// output's sum is exactly axpy_rows's (attention's dq over a block's rows, dk and dv over
// four keys). On AVX-512 and AVX2 each row is loaded once for the four outputs.
template <class T>
inline void axpy_rows4(int64_t n, const T* w, int64_t wj, int64_t wi, const T* rows, int64_t rs,
                       int64_t D, T* acc, int64_t as) {
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    for (int64_t c0 = 0; c0 < D; c0 += 64) {
      if (D - c0 <= 32)
        detail::axpy_rows4_cols<2>(n, w, wj, wi, rows, rs, D, c0, acc, as);
      else
        detail::axpy_rows4_cols<4>(n, w, wj, wi, rows, rs, D, c0, acc, as);
    }
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {
    // 24 columns at a time (12 accumulators), then 16: a call takes about max(5, 2V) cycles
    // a row for V vectors (the fma's latency, or the two FMA units), so 32 columns go as
    // 16 + 16 rather than 24 + 8.
    int64_t c0 = 0;
    for (; D - c0 >= 24 && D - c0 != 32; c0 += 24)
      detail::axpy_rows4_cols8<3, true>(n, w, wj, wi, rows, rs, D, c0, acc, as);
    for (; D - c0 >= 16; c0 += 16)
      detail::axpy_rows4_cols8<2, true>(n, w, wj, wi, rows, rs, D, c0, acc, as);
    if (c0 < D) detail::axpy_rows4_cols8<2, false>(n, w, wj, wi, rows, rs, D, c0, acc, as);
    return;
  }
#endif
  for (int64_t i = 0; i < 4; ++i) axpy_rows<T>(n, w + i * wi, wj, rows, rs, D, acc + i * as);
}

#if defined(GPTC_AVX512)
namespace detail {
// Four rows r[0..3] of 16 by column: 128-bit lane k of u[i] holds the rows' elements
// 4k + i (a 4x4 transpose within each 128-bit lane). Moves bits only.
inline void quads(const __m512 r[4], __m512 u[4]) {
  const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]),
               t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
  u[0] = _mm512_shuffle_ps(t0, t2, 0x44);
  u[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
  u[2] = _mm512_shuffle_ps(t1, t3, 0x44);
  u[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
}

// r[i] = column i of the 16x16 block whose rows were r[0..15]: quads of each 4 rows, then
// the 128-bit lanes across the four groups. Moves bits only.
inline void transpose16(__m512 r[16]) {
  __m512 u[16];  // u[4g + i], lane k: rows 4g..4g+3 of column 4k + i
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) quads(r + 4 * g, u + 4 * g);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512 v = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x88);
    const __m512 w = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0x88);
    const __m512 w2 = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0xDD);
    r[i] = _mm512_shuffle_f32x4(v, v2, 0x88);
    r[4 + i] = _mm512_shuffle_f32x4(w, w2, 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(v, v2, 0xDD);
    r[12 + i] = _mm512_shuffle_f32x4(w, w2, 0xDD);
  }
}
}  // namespace detail
#elif defined(GPTC_AVX2)
namespace detail {
// r[i] = column i of the 8x8 block whose rows were r[0..7]. Moves bits only.
inline void transpose8(__m256 r[8]) {
  __m256 s[8];  // s[4h + i], 128-bit lane k: rows 4h..4h+3 of column 4k + i
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256* x = r + 4 * h;
    const __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]),
                 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
    s[4 * h + 0] = _mm256_shuffle_ps(t0, t2, 0x44);
    s[4 * h + 1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    s[4 * h + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
    s[4 * h + 3] = _mm256_shuffle_ps(t1, t3, 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
  }
}
}  // namespace detail
#endif

// dst[c * ld + j] = src[j * stride + c] for j < S (zero up to ld): K (or V) of one head,
// whose rows are `stride` apart, transposed so that block_dots reads 32 keys contiguously.
// On AVX-512, 16x16 blocks through registers; on AVX2, 8x8 blocks.
template <class T>
inline void transpose_keys(int64_t S, int64_t D, const T* src, int64_t stride, int64_t ld,
                           T* dst) {
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    for (int64_t j0 = 0; j0 < ld; j0 += 16) {
      const __mmask16 jm = detail::lanes_mask(ld - j0);
      for (int64_t c0 = 0; c0 < D; c0 += 16) {
        const __mmask16 cm = detail::lanes_mask(D - c0);
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          r[i] = j0 + i < S ? _mm512_maskz_loadu_ps(cm, src + (j0 + i) * stride + c0)
                            : _mm512_setzero_ps();
        detail::transpose16(r);
        const int64_t nc = D - c0 < 16 ? D - c0 : 16;
        for (int64_t c = 0; c < nc; ++c) _mm512_mask_storeu_ps(dst + (c0 + c) * ld + j0, jm, r[c]);
      }
    }
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {  // whole 8x8 blocks through registers, edges one by one
    for (int64_t j0 = 0; j0 < ld; j0 += 8)
      for (int64_t c0 = 0; c0 < D; c0 += 8) {
        if (j0 + 8 <= ld && c0 + 8 <= D) {
          __m256 r[8];
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i)
            r[i] = j0 + i < S ? _mm256_loadu_ps(src + (j0 + i) * stride + c0) : _mm256_setzero_ps();
          detail::transpose8(r);
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) _mm256_storeu_ps(dst + (c0 + c) * ld + j0, r[c]);
          continue;
        }
        for (int64_t c = c0; c < D && c < c0 + 8; ++c)
          for (int64_t j = j0; j < ld && j < j0 + 8; ++j) dst[c * ld + j] = j < S ? src[j * stride + c] : T(0);
      }
    return;
  }
#endif
  for (int64_t c = 0; c < D; ++c)
    for (int64_t j = 0; j < ld; ++j) dst[c * ld + j] = j < S ? src[j * stride + c] : T(0);
}

// One key block of the online softmax, for 4 query rows: mb[rr] = the max of p[rr][0..31]
// and, once p holds exps, bsum[rr] = p[rr][0] + p[rr][1] + ... in increasing j from 0.
// Each is exactly the sequential loop (mb from -inf through gptc::maximum). On AVX-512 and
// AVX2 the max is a tree of vmaxps, whose value is the sequential one unless a NaN is
// present or the max is a zero (whose sign the sequence decides): then the sequential loop
// runs. The sums run as 4 lanes, one per row, each lane adding its row's terms in order.
template <class T>
inline void block_max4(const T (*p)[32], T* mb) {
  auto sequential = [&] {
    for (int64_t rr = 0; rr < 4; ++rr) mb[rr] = -INFINITY;
    for (int64_t j = 0; j < 32; ++j)
      for (int64_t rr = 0; rr < 4; ++rr) mb[rr] = gptc::maximum(mb[rr], p[rr][j]);
  };
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    bool fallback = false;  // a NaN, or a zero max
    for (int rr = 0; rr < 4; ++rr) {
      const __m512 a = _mm512_loadu_ps(p[rr]), b = _mm512_loadu_ps(p[rr] + 16);
      fallback |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) != 0;
      mb[rr] = _mm512_reduce_max_ps(_mm512_max_ps(a, b));
      fallback |= mb[rr] == 0.0f;
    }
    if (fallback) sequential();
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {
    bool fallback = false;  // a NaN, or a zero max
    for (int rr = 0; rr < 4; ++rr) {
      const __m256 a = _mm256_loadu_ps(p[rr]), b = _mm256_loadu_ps(p[rr] + 8),
                   c = _mm256_loadu_ps(p[rr] + 16), d = _mm256_loadu_ps(p[rr] + 24);
      fallback |= _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q),
                                                  _mm256_cmp_ps(c, d, _CMP_UNORD_Q))) != 0;
      const __m256 e = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
      __m128 f = _mm_max_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));
      f = _mm_max_ps(f, _mm_movehl_ps(f, f));
      mb[rr] = _mm_cvtss_f32(_mm_max_ss(f, _mm_movehdup_ps(f)));
      fallback |= mb[rr] == 0.0f;
    }
    if (fallback) sequential();
    return;
  }
#endif
  sequential();
}

#if defined(GPTC_AVX2)
namespace detail {
// Columns j0..j0+3 of 4 rows (`ps` apart): lane rr of u[i] is p[rr * ps + j0 + i].
inline void columns4x4(const float* p, int64_t ps, int64_t j0, __m128 u[4]) {
  u[0] = _mm_loadu_ps(p + j0);
  u[1] = _mm_loadu_ps(p + ps + j0);
  u[2] = _mm_loadu_ps(p + 2 * ps + j0);
  u[3] = _mm_loadu_ps(p + 3 * ps + j0);
  _MM_TRANSPOSE4_PS(u[0], u[1], u[2], u[3]);
}
}  // namespace detail
#endif

#if defined(GPTC_AVX512)
namespace detail {
// Columns j0..j0+15 of 4 rows (`ps` apart) by column: lane rr of 128-bit lane k of u[i] is
// p[rr * ps + j0 + 4k + i].
inline void columns4(const float* p, int64_t ps, int64_t j0, __m512 u[4]) {
  const __m512 r[4] = {_mm512_loadu_ps(p + j0), _mm512_loadu_ps(p + ps + j0),
                       _mm512_loadu_ps(p + 2 * ps + j0), _mm512_loadu_ps(p + 3 * ps + j0)};
  quads(r, u);
}
// Column j0 + 4k + i of columns4's rows, as 4 lanes.
inline __m128 column4(const __m512 u[4], int k, int i) {
  switch (k) {
    case 0: return _mm512_castps512_ps128(u[i]);
    case 1: return _mm512_extractf32x4_ps(u[i], 1);
    case 2: return _mm512_extractf32x4_ps(u[i], 2);
    default: return _mm512_extractf32x4_ps(u[i], 3);
  }
}
}  // namespace detail
#endif

// bsum[rr] = p[rr][0] + p[rr][1] + ... + p[rr][31] from 0, in order (see block_max4).
template <class T>
inline void block_sum4(const T (*p)[32], T* bsum) {
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    __m128 s = _mm_setzero_ps();
    for (int64_t j0 = 0; j0 < 32; j0 += 16) {
      __m512 u[4];
      detail::columns4(p[0], 32, j0, u);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) s = _mm_add_ps(s, detail::column4(u, j / 4, j % 4));
    }
    _mm_storeu_ps(bsum, s);
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {
    __m128 s = _mm_setzero_ps();
    for (int64_t j0 = 0; j0 < 32; j0 += 4) {
      __m128 u[4];
      detail::columns4x4(p[0], 32, j0, u);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) s = _mm_add_ps(s, u[j]);
    }
    _mm_storeu_ps(bsum, s);
    return;
  }
#endif
  for (int64_t rr = 0; rr < 4; ++rr) bsum[rr] = 0;
  for (int64_t j = 0; j < 32; ++j)
    for (int64_t rr = 0; rr < 4; ++rr) bsum[rr] = bsum[rr] + p[rr][j];
}

// out[rr] = fma(a[rr * as + j], b[rr * bs + j], out[rr]) for j = 0..n[rr]-1 in increasing
// order, rows rr < 4 (attention_grad's D = sum_j P dP per row). On AVX-512 and AVX2 one
// lane per row; a and b rows must be readable up to the largest n rounded up to 16.
template <class T>
inline void dot_rows4(const int64_t* n, const T* a, int64_t as, const T* b, int64_t bs, T* out) {
  int64_t nmax = 0;
  for (int64_t rr = 0; rr < 4; ++rr) nmax = n[rr] > nmax ? n[rr] : nmax;
#if defined(GPTC_AVX512)
  if constexpr (sizeof(T) == 4) {
    __m128 acc = _mm_loadu_ps(out);
    const __m128i nv = _mm_setr_epi32((int)n[0], (int)n[1], (int)n[2], (int)n[3]);
    for (int64_t j0 = 0; j0 < nmax; j0 += 16) {
      __m512 ua[4], ub[4];
      detail::columns4(a, as, j0, ua);
      detail::columns4(b, bs, j0, ub);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const __mmask8 live = _mm_cmpgt_epi32_mask(nv, _mm_set1_epi32((int)(j0 + j)));
        acc = _mm_mask3_fmadd_ps(detail::column4(ua, j / 4, j % 4), detail::column4(ub, j / 4, j % 4),
                                 acc, live);
      }
    }
    _mm_storeu_ps(out, acc);
    return;
  }
#elif defined(GPTC_AVX2)
  if constexpr (sizeof(T) == 4) {
    __m128 acc = _mm_loadu_ps(out);
    const __m128i nv = _mm_setr_epi32((int)n[0], (int)n[1], (int)n[2], (int)n[3]);
    for (int64_t j0 = 0; j0 < nmax; j0 += 4) {
      __m128 ua[4], ub[4];
      detail::columns4x4(a, as, j0, ua);
      detail::columns4x4(b, bs, j0, ub);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m128 live = _mm_castsi128_ps(_mm_cmpgt_epi32(nv, _mm_set1_epi32((int)(j0 + j))));
        acc = _mm_blendv_ps(acc, _mm_fmadd_ps(ua[j], ub[j], acc), live);
      }
    }
    _mm_storeu_ps(out, acc);
    return;
  }
#endif
  for (int64_t j = 0; j < nmax; ++j)
    for (int64_t rr = 0; rr < 4; ++rr)
      if (j < n[rr]) out[rr] = gptc::fma(a[rr * as + j], b[rr * bs + j], out[rr]);
}

#if defined(GPTC_VECTOR_FORMS)
// Attention for a block of query rows at once, each row a lane of the vectors: 16 rows
// (kAttentionRows; float) on AVX-512 and on AVX2 with FMA (there as two ymm, or, for short
// sequences, two blocks of 8: kWideRowsFrom). The same arithmetic as the per-row
// code the emitter writes for other builds (f64, plain x86-64), in the same order, so the
// same bits (prelude_matmul_test checks them against a plain per-row transcription, and the
// training-step tests across builds). Per row, key blocks of 32 in increasing order: the
// scores (each an fma chain over c = 0..D-1 from 0), scaled, -inf past the row's keys; the
// block's max and sum taken sequentially; m, l and the output's sums carried over as the
// online softmax does; each output element's block sum an fma chain over the row's keys in
// increasing order from 0, folded in as acc * corr + sum. As lanes, every per-row step is
// one vector operation: no horizontal reductions, no transposes inside the key loop, and
// the FMA loops' register tiles hold kTileKeys keys (the scores) or as many output columns
// (p.v). (Faster than the 4-row code, forward and gradient: bench/NOTES.md, "Attention
// forward" and "Attention gradient".)
//
// Rows [0, nr) of the block, row rr seeing keys [0, vis[rr]) (vis[rr] = 0 for rr >= nr);
// q, y: the block's first row, rows qs / ys apart; k, v: the head's first key row; stats:
// the block's first row's (max, sum) pair. keep(rr, j0, n, kf), unless NoKeep, writes the
// dropout keep factors of row rr's keys j0..j0+n-1 to kf[0..n). km, unless null, is the
// head's key mask (gpt.attention's key_mask): key j hidden from every row where !km[j], its
// score -inf. A row whose keys so far are all hidden takes its exps against 0 rather than
// its max, -inf (no NaN), and keeps sum 0; a row that sees no key gets zeros.
struct NoKeep {};
namespace detail {
// The lanes' vector: the register tiles' (TileVec: zero, load, store, fma, add, kLanes) and
// what the attention blocks need besides. `M` is a lane mask.
#if defined(GPTC_AVX512)
struct RowVec : TileVec {
  using M = __mmask16;
  static constexpr int kTileKeys = 16;  // 16 accumulators of 32 registers
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma_if(M m, V a, V b, V c) { return _mm512_mask3_fmadd_ps(a, b, c, m); }  // c off m
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  // gptc::maximum(a, b) per lane: a where a is NaN or a > b, else b.
  static V maximum(V a, V b) {
    const M keepA = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ);
    return _mm512_mask_blend_ps(keepA, b, a);
  }
  static V select(M m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); }  // a on m, else b
};
#else
// AVX2: 8 rows, one ymm (short sequences: below kWideRowsFrom keys).
struct RowVec8 : TileVec {
  using M = __m256;
  static constexpr int kTileKeys = 8;  // 8 accumulators of 16 registers
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma_if(M m, V a, V b, V c) { return _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), m); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static V maximum(V a, V b) { return maximum8(a, b); }
  static V select(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
};
// AVX2: 16 rows as two ymm, so that a register tile of 6 keys (or output columns) holds 12
// accumulators, as the matmul's 6x16 tile does: 8 accumulators (one ymm of rows by 8 keys)
// leave the FMA units waiting on the chains' latency, and load a broadcast per fma.
struct Pair {
  __m256 lo, hi;
};
inline void hold(Pair& v) {
  hold(v.lo);
  hold(v.hi);
}
struct RowVec {
  using V = Pair;
  using M = Pair;
  static constexpr int64_t kLanes = 16;
  static constexpr int kTileKeys = 6;  // 12 accumulators of 16 registers
  static V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V load(const float* p) { return {_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }
  static void store(float* p, V v) {
    _mm256_store_ps(p, v.lo);
    _mm256_store_ps(p + 8, v.hi);
  }
  static V set1(float x) {
    const __m256 b = _mm256_set1_ps(x);
    return {b, b};
  }
  static V fma(V a, V b, V c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static V fma_if(M m, V a, V b, V c) {
    return {_mm256_blendv_ps(c.lo, _mm256_fmadd_ps(a.lo, b.lo, c.lo), m.lo),
            _mm256_blendv_ps(c.hi, _mm256_fmadd_ps(a.hi, b.hi, c.hi), m.hi)};
  }
  static V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static M lt(V a, V b) {
    return {_mm256_cmp_ps(a.lo, b.lo, _CMP_LT_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_LT_OQ)};
  }
  static V maximum(V a, V b) { return {maximum8(a.lo, b.lo), maximum8(a.hi, b.hi)}; }
  static V select(M m, V a, V b) {
    return {_mm256_blendv_ps(b.lo, a.lo, m.lo), _mm256_blendv_ps(b.hi, a.hi, m.hi)};
  }
};
#endif
}  // namespace detail
constexpr int64_t kAttentionRows = detail::RowVec::kLanes;

namespace detail {
// tile(std::integral_constant<int, C>(), c0) over [0, width): n tiles of G = kTileKeys, then
// m of G - 1 (width = n G + m (G - 1)) where width allows it, so that every tile keeps
// (nearly) all of its accumulators busy; else tiles of G and then single columns.
template <class W, class F>
inline void for_tiles(int64_t width, F&& tile) {
  constexpr int G = W::kTileKeys;
  const int64_t q = width / G, r = width % G, m = r ? G - r : 0, n = q + 1 + r - G;
  int64_t c = 0;
  if (r == 0 || n >= 0) {
    for (int64_t i = 0; i < (r ? n : q); ++i, c += G) tile(std::integral_constant<int, G>(), c);
    for (int64_t i = 0; i < m; ++i, c += G - 1) tile(std::integral_constant<int, G - 1>(), c);
    return;
  }
  for (; c + G <= width; c += G) tile(std::integral_constant<int, G>(), c);
  for (; c < width; ++c) tile(std::integral_constant<int, 1>(), c);
}

// The scores of keys key0..key0+G-1 (rows of k past S-1 read as row S-1: their scores are
// masked by the caller) for the rows of qt (qt[c * L + r]): s[jj * ld + r], s and ld
// aligned to a vector.
template <class W, int G>
inline void block_scores(int64_t key0, int64_t S, int64_t D, const float* qt, const float* k,
                         int64_t ks, float* s, int64_t ld) {
  constexpr int L = W::kLanes;
  typename W::V a[G];
#pragma GCC unroll 16
  for (int jj = 0; jj < G; ++jj) a[jj] = W::zero();
  if (key0 + G <= S) {
    const float* kr = k + key0 * ks;
    for (int64_t c = 0; c < D; ++c) {
      typename W::V q = W::load(qt + c * L);
      hold(q);
#pragma GCC unroll 16
      for (int jj = 0; jj < G; ++jj) a[jj] = W::fma(W::set1(kr[jj * ks + c]), q, a[jj]);
    }
  } else {
    const float* kr[G];
    for (int jj = 0; jj < G; ++jj) kr[jj] = k + (key0 + jj < S ? key0 + jj : S - 1) * ks;
    for (int64_t c = 0; c < D; ++c) {
      typename W::V q = W::load(qt + c * L);
      hold(q);
#pragma GCC unroll 16
      for (int jj = 0; jj < G; ++jj) a[jj] = W::fma(W::set1(kr[jj][c]), q, a[jj]);
    }
  }
#pragma GCC unroll 16
  for (int jj = 0; jj < G; ++jj) W::store(s + jj * ld, a[jj]);
}

// How the forward's p.v folds a key block's sums into the running ones: accT * corr + sums
// in the lanes that see the block (seen); the other lanes keep accT.
template <class W>
struct RowFold {
  typename W::M seen;
  typename W::V corr;
};

// For c in [c0, c0 + C), an fma chain per lane over keys j < n in increasing order of
// w[j * ld + r] * x[j][c] (keys j >= common only in the lanes that see them, visf), into
// accT[c * L + r]: Fold, a chain from 0 folded in as `fold` says (the forward's p.v); else
// the chain continues from accT (the gradient's dq), and `fold` is not used.
template <class W, int C, bool Fold>
inline void rows_axpy_cols(int64_t common, int64_t n, int64_t j0, const float* w, int64_t ld,
                           const float* x, int64_t xs, int64_t c0, typename W::V visf,
                           float* accT, RowFold<W> fold) {
  constexpr int L = W::kLanes;
  typename W::V a[C];
#pragma GCC unroll 16
  for (int cc = 0; cc < C; ++cc) a[cc] = Fold ? W::zero() : W::load(accT + (c0 + cc) * L);
  for (int64_t j = 0; j < common; ++j) {
    typename W::V wj = W::load(w + j * ld);
    hold(wj);
    const float* xr = x + j * xs + c0;
#pragma GCC unroll 16
    for (int cc = 0; cc < C; ++cc) a[cc] = W::fma(W::set1(xr[cc]), wj, a[cc]);
  }
  for (int64_t j = common; j < n; ++j) {
    const typename W::M live = W::lt(W::set1(float(j0 + j)), visf);
    typename W::V wj = W::load(w + j * ld);
    hold(wj);
    const float* xr = x + j * xs + c0;
#pragma GCC unroll 16
    for (int cc = 0; cc < C; ++cc) a[cc] = W::fma_if(live, W::set1(xr[cc]), wj, a[cc]);
  }
#pragma GCC unroll 16
  for (int cc = 0; cc < C; ++cc) {
    float* at = accT + (c0 + cc) * L;
    if (Fold) {
      const typename W::V old = W::load(at);
      W::store(at, W::select(fold.seen, W::add(W::mul(old, fold.corr), a[cc]), old));
    } else {
      W::store(at, a[cc]);
    }
  }
}

// rows_axpy_cols over every column c < width, in for_tiles's tiles.
template <class W, bool Fold>
inline void rows_axpy(int64_t common, int64_t n, int64_t j0, const float* w, int64_t ld,
                      const float* x, int64_t xs, int64_t width, typename W::V visf,
                      float* accT, RowFold<W> fold = RowFold<W>()) {
  for_tiles<W>(width, [&](auto cols, int64_t c0) {
    rows_axpy_cols<W, decltype(cols)::value, Fold>(common, n, j0, w, ld, x, xs, c0, visf, accT,
                                                   fold);
  });
}

// The block's exps, rows of L lanes: p[j * L + r] = exp(p[j * L + r] - mn[r]) for j < n,
// r < L (the forward), or with Grad exp(p[j * L + r] * scale - mn[r]) / l[r] (the gradient's
// P). On AVX2 four vectors at a time through exp8; elsewhere a vectorised loop.
template <int L, bool Grad>
inline void exp_rows(int64_t n, float* p, const float* mn, float scale, const float* l) {
#if defined(GPTC_AVX2)
  constexpr int V = L / 8, R = 4 / V;  // vectors a row, rows a pass
  static_assert(L % 8 == 0 && 4 % V == 0, "rows of 8 or 16 lanes");
  __m256 m[V], d[V];
  for (int v = 0; v < V; ++v) {
    m[v] = _mm256_load_ps(mn + 8 * v);
    d[v] = Grad ? _mm256_load_ps(l + 8 * v) : m[v];
  }
  const __m256 sc = _mm256_set1_ps(scale);
  auto pass = [&](auto vectors, int64_t j) {
    constexpr int N = decltype(vectors)::value;
    __m256 x[N];
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) {
      const __m256 a = _mm256_load_ps(p + j * L + 8 * i);
      x[i] = _mm256_sub_ps(Grad ? _mm256_mul_ps(a, sc) : a, m[i % V]);
    }
    exp8(x);
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i)
      _mm256_store_ps(p + j * L + 8 * i, Grad ? _mm256_div_ps(x[i], d[i % V]) : x[i]);
  };
  int64_t j = 0;
  for (; j + R <= n; j += R) pass(std::integral_constant<int, 4>(), j);
  for (; j < n; ++j) pass(std::integral_constant<int, V>(), j);
#else
  for (int64_t j = 0; j < n; ++j)
    GPTC_SIMD for (int r = 0; r < L; ++r) p[j * L + r] =
        Grad ? gptc::exp(p[j * L + r] * scale - mn[r]) / l[r] : gptc::exp(p[j * L + r] - mn[r]);
#endif
}

// How many of the keys j0..j0+n-1 a row that sees keys [0, seen) sees.
inline int64_t keys_in_block(int64_t seen, int64_t j0, int64_t n) {
  const int64_t left = seen - j0;
  return left < 0 ? 0 : left < n ? left : n;
}

// The lanes' key counts vis[0..L-1] as floats (for lane masks), their largest and smallest.
template <class W>
inline typename W::V rows_seen(const int64_t* vis, int64_t& kmax, int64_t& vmin) {
  alignas(64) float visv[W::kLanes];
  kmax = 0;
  vmin = vis[0];
  for (int r = 0; r < W::kLanes; ++r) {
    visv[r] = float(vis[r]);
    kmax = vis[r] > kmax ? vis[r] : kmax;
    vmin = vis[r] < vmin ? vis[r] : vmin;
  }
  return W::load(visv);
}

// attention_rows with the rows as W's lanes (nr <= W::kLanes).
template <class W, class Keep>
inline void attention_lanes(int64_t nr, const int64_t* vis, int64_t S, int64_t D, int64_t Dv,
                            float scale, const float* q, int64_t qs, const float* k,
                            int64_t ks, const float* v, int64_t vs, float* y, int64_t ys,
                            float* stats, Keep keep, const bool* km) {
  constexpr int L = W::kLanes;
  float* const qt = gptc::scratch<float>(1, (D + 2 * Dv) * L);
  float* const accT = qt + D * L;  // accT[c * L + r]: row r's output sums
  float* const accR = accT + Dv * L;
  transpose_keys<float>(nr, D, q, qs, L, qt);
  alignas(64) float m[L], l[L];
  int64_t kmax, vmin;
  const typename W::V visf = rows_seen<W>(vis, kmax, vmin);
  for (int r = 0; r < L; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
  }
  for (int64_t i = 0; i < Dv * L; ++i) accT[i] = 0;
  for (int64_t j0 = 0; j0 < kmax; j0 += 32) {
    const int64_t nk = kmax - j0 < 32 ? kmax - j0 : 32;
    // Past nkt every lane's score is -inf (exp 0): no change to the max or the sum.
    alignas(64) float p[32][L], mn[L], corr[L], bsum[L];
    int64_t nkt = 0;
    for_tiles<W>(32, [&](auto keys, int64_t g) {
      constexpr int G = decltype(keys)::value;
      if (g >= nk) return;
      block_scores<W, G>(j0 + g, S, D, qt, k, ks, p[g], L);
      nkt = g + G;
    });
    // Scaled, -inf past each row's keys; the block's max in key order (gptc::maximum).
    typename W::V mb = W::set1(-INFINITY);
    for (int64_t j = 0; j < nkt; ++j) {
      typename W::V x = W::select(W::lt(W::set1(float(j0 + j)), visf),
                                        W::mul(W::load(p[j]), W::set1(scale)),
                                        W::set1(-INFINITY));
      if (km && j0 + j < S && !km[j0 + j]) x = W::set1(-INFINITY);
      W::store(p[j], x);
      mb = W::maximum(mb, x);
    }
    W::store(mn, mb);
    // mn (the new max) is -inf only in rows that have seen no key, or only hidden ones: their
    // exps are taken against 0 (exp(-inf) = 0) rather than -inf (NaN).
    alignas(64) float me[L];
    GPTC_SIMD for (int r = 0; r < L; ++r) {
      mn[r] = gptc::maximum(m[r], mn[r]);
      me[r] = mn[r] == -INFINITY ? 0.0f : mn[r];
      corr[r] = gptc::exp(m[r] - me[r]);
    }
    exp_rows<L, false>(nkt, p[0], me, 0.0f, nullptr);
    typename W::V sum = W::zero();
    for (int64_t j = 0; j < nkt; ++j) sum = W::add(sum, W::load(p[j]));
    W::store(bsum, sum);
    // The rows that see the block carry its max and sum on; the others keep theirs.
    const typename W::M seen = W::lt(W::set1(float(j0)), visf);
    const typename W::V lv = W::load(l);
    W::store(l, W::select(seen, W::add(W::mul(lv, W::load(corr)), W::load(bsum)), lv));
    W::store(m, W::select(seen, W::load(mn), W::load(m)));
    if constexpr (!std::is_same<Keep, NoKeep>::value) {
      for (int64_t rr = 0; rr < nr; ++rr) {
        const int64_t nb = keys_in_block(vis[rr], j0, nk);
        if (nb == 0) continue;
        float kf[32];
        keep(rr, j0, nb, kf);
        for (int64_t j = 0; j < nb; ++j) p[j][rr] = p[j][rr] * kf[j];
      }
    }
    const int64_t common = keys_in_block(vmin, j0, nk);
    rows_axpy<W, true>(common, nk, j0, p[0], L, v + j0 * vs, vs, Dv, visf, accT,
                       {seen, W::load(corr)});
  }
  transpose_keys<float>(Dv, L, accT, L, Dv, accR);
  for (int64_t rr = 0; rr < nr; ++rr) {
    const float lr = l[rr] == 0.0f ? 1.0f : l[rr];  // 0: the row saw no key (its sums are 0)
    GPTC_SIMD for (int64_t c = 0; c < Dv; ++c) y[rr * ys + c] = accR[rr * Dv + c] / lr;
    stats[2 * rr] = m[rr];
    stats[2 * rr + 1] = l[rr];
  }
}

// Attention's gradient for a block of query rows at once, each row a lane, with the same
// arithmetic in the same order as the emitter's 4-row code: per row, over its keys j:
// P = exp(s * scale - m) / l (m, l the forward's, from stats), dP = g.v (an fma chain over
// c from 0), times the keep factor with dropout (P * keep kept as PK); D = sum_j P dP (an
// fma chain in increasing j from 0); dS = P * (dP - D); dq = scale * (an fma chain over the
// row's keys in increasing j of dS * k). dS and PK go, transposed, to the caller's buffers
// (dST[j * ldt + r], PKT likewise; aligned to 64 bytes, ldt a multiple of 16), from which it
// takes dk and dv (each key's sums over the rows in increasing order). Arguments as
// attention_rows's; g: the block's first row of the output's gradient, rows gs apart; dq:
// the block's first row of q's gradient, rows dqs apart.
// attention_grad_rows with the rows as W's lanes (nr <= W::kLanes).
template <class W, class Keep>
inline void attention_grad_lanes(int64_t nr, const int64_t* vis, int64_t S, int64_t D,
                                 int64_t Dv, float scale, const float* q, int64_t qs,
                                 const float* k, int64_t ks, const float* v, int64_t vs,
                                 const float* g, int64_t gs, const float* stats, float* dq,
                                 int64_t dqs, float* dST, float* PKT, int64_t ldt, Keep keep,
                                 const bool* km) {
  constexpr int L = W::kLanes;
  alignas(64) float m[L], l[L];
  int64_t kmax, vmin;
  const typename W::V visf = rows_seen<W>(vis, kmax, vmin);
  const int64_t kp = (kmax + 31) / 32 * 32;
  float* const qt = gptc::scratch<float>(1, (3 * D + Dv + kp) * L);
  float* const gt = qt + D * L;
  float* const qaccT = gt + Dv * L;  // qaccT[c * L + r]: row r's dq sums
  float* const qaccR = qaccT + D * L;
  float* const PT = qaccR + D * L;  // the scores, then P, PT[j * L + r]
  transpose_keys<float>(nr, D, q, qs, L, qt);
  transpose_keys<float>(nr, Dv, g, gs, L, gt);
  // Rows past the last: any finite values (never stored); a row that saw no key (sum 0):
  // max 0 and sum 1, so that its P (its keys' scores all -inf) is 0.
  for (int r = 0; r < L; ++r) {
    const bool none = r >= nr || stats[2 * r + 1] == 0.0f;
    m[r] = none ? 0.0f : stats[2 * r];
    l[r] = none ? 1.0f : stats[2 * r + 1];
  }
  typename W::V dsum = W::zero();
  for (int64_t j0 = 0; j0 < kmax; j0 += 32) {
    const int64_t nk = kmax - j0 < 32 ? kmax - j0 : 32;
    float* const pb = PT + j0 * L;
    float* const dp = dST + j0 * ldt;
    for_tiles<W>(32, [&](auto keys, int64_t g0) {
      constexpr int G = decltype(keys)::value;
      if (g0 >= nk) return;
      block_scores<W, G>(j0 + g0, S, D, qt, k, ks, pb + g0 * L, L);
      block_scores<W, G>(j0 + g0, S, Dv, gt, v, vs, dp + g0 * ldt, ldt);
    });
    if (km)
      for (int64_t j = 0; j < nk; ++j)
        if (!km[j0 + j]) W::store(pb + j * L, W::set1(-INFINITY));
    exp_rows<L, true>(nk, pb, m, scale, l);
    if constexpr (!std::is_same<Keep, NoKeep>::value) {
      for (int64_t rr = 0; rr < nr; ++rr) {
        const int64_t nb = keys_in_block(vis[rr], j0, nk);
        float kf[32];
        if (nb > 0) keep(rr, j0, nb, kf);
        for (int64_t j = 0; j < nb; ++j) {
          dp[j * ldt + rr] = dp[j * ldt + rr] * kf[j];
          PKT[(j0 + j) * ldt + rr] = pb[j * L + rr] * kf[j];
        }
      }
    } else {
      for (int64_t j = 0; j < nk; ++j) W::store(PKT + (j0 + j) * ldt, W::load(pb + j * L));
    }
    for (int64_t j = 0; j < nk; ++j) {
      const typename W::M live = W::lt(W::set1(float(j0 + j)), visf);
      dsum = W::fma_if(live, W::load(pb + j * L), W::load(dp + j * ldt), dsum);
    }
  }
  for (int64_t j = 0; j < kmax; ++j) {  // in place; a lane's dS past its keys is never read
    float* const d = dST + j * ldt;
    W::store(d, W::mul(W::load(PT + j * L), W::sub(W::load(d), dsum)));
  }
  for (int64_t i = 0; i < D * L; ++i) qaccT[i] = 0;
  const int64_t common = keys_in_block(vmin, 0, kmax);
  rows_axpy<W, false>(common, kmax, 0, dST, ldt, k, ks, D, visf, qaccT);
  transpose_keys<float>(D, L, qaccT, L, D, qaccR);
  for (int64_t rr = 0; rr < nr; ++rr)
    GPTC_SIMD for (int64_t c = 0; c < D; ++c) dq[rr * dqs + c] = qaccR[rr * D + c] * scale;
}
}  // namespace detail

// The block's rows as lanes: AVX-512's 16; AVX2's 16 (two ymm) from kWideRowsFrom keys on,
// and below it two halves of 8 (one ymm each), which waste fewer of a causal block's fmas
// past the diagonal; on longer heads the 16 lanes' wider tiles win (bench/NOTES.md,
// "Attention forward"). Every row's arithmetic is the same either way.
constexpr int64_t kWideRowsFrom = 128;
namespace detail {
// Keep's factors for the rows from r0 on, as a block of its own sees them.
template <class Keep>
struct KeepFrom {
  Keep keep;
  int64_t r0;
  void operator()(int64_t rr, int64_t j0, int64_t n, float* kf) const { keep(rr + r0, j0, n, kf); }
};
inline NoKeep keep_from(NoKeep, int64_t) { return {}; }
template <class Keep>
inline KeepFrom<Keep> keep_from(const Keep& keep, int64_t r0) { return {keep, r0}; }
}  // namespace detail

template <class Keep = NoKeep>
inline void attention_rows(int64_t nr, const int64_t* vis, int64_t S, int64_t D, int64_t Dv,
                           float scale, const float* q, int64_t qs, const float* k, int64_t ks,
                           const float* v, int64_t vs, float* y, int64_t ys, float* stats,
                           Keep keep = {}, const bool* km = nullptr) {
#if defined(GPTC_AVX2)
  if (S < kWideRowsFrom) {
    using W = detail::RowVec8;
    const int64_t h = W::kLanes;
    detail::attention_lanes<W>(nr < h ? nr : h, vis, S, D, Dv, scale, q, qs, k, ks, v, vs, y,
                               ys, stats, keep, km);
    if (nr > h)
      detail::attention_lanes<W>(nr - h, vis + h, S, D, Dv, scale, q + h * qs, qs, k, ks, v,
                                 vs, y + h * ys, ys, stats + 2 * h, detail::keep_from(keep, h),
                                 km);
    return;
  }
#endif
  detail::attention_lanes<detail::RowVec>(nr, vis, S, D, Dv, scale, q, qs, k, ks, v, vs, y, ys,
                                          stats, keep, km);
}

template <class Keep = NoKeep>
inline void attention_grad_rows(int64_t nr, const int64_t* vis, int64_t S, int64_t D,
                                int64_t Dv, float scale, const float* q, int64_t qs,
                                const float* k, int64_t ks, const float* v, int64_t vs,
                                const float* g, int64_t gs, const float* stats, float* dq,
                                int64_t dqs, float* dST, float* PKT, int64_t ldt,
                                Keep keep = {}, const bool* km = nullptr) {
#if defined(GPTC_AVX2)
  if (S < kWideRowsFrom) {
    using W = detail::RowVec8;
    const int64_t h = W::kLanes;
    detail::attention_grad_lanes<W>(nr < h ? nr : h, vis, S, D, Dv, scale, q, qs, k, ks, v, vs,
                                    g, gs, stats, dq, dqs, dST, PKT, ldt, keep, km);
    if (nr > h)
      detail::attention_grad_lanes<W>(nr - h, vis + h, S, D, Dv, scale, q + h * qs, qs, k, ks,
                                      v, vs, g + h * gs, gs, stats + 2 * h, dq + h * dqs, dqs,
                                      dST + h, PKT + h, ldt, detail::keep_from(keep, h), km);
    return;
  }
#endif
  detail::attention_grad_lanes<detail::RowVec>(nr, vis, S, D, Dv, scale, q, qs, k, ks, v, vs,
                                               g, gs, stats, dq, dqs, dST, PKT, ldt, keep, km);
}
#endif

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_ATTENTION_H
