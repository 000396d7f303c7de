// gptc/prelude/cpu/math_arrays.h — array forms of exp, erf and the exact GELU for the CPU's
// vector units, each element the scalar function's bits (host only). Part of
// gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_MATH_ARRAYS_H
#define GPTC_PRELUDE_CPU_MATH_ARRAYS_H

#include "gptc/prelude/math.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Float exp on several vectors at once (AVX2). A vectorised loop over exp_f keeps one or two
// of its dependency chains (~50 operations a vector, mostly in one chain) in flight, and
// waits on their latency; exp8 takes each of exp_f's operations, in exp_f's order, for all
// N vectors before the next, so that N chains run side by side (bench/NOTES.md,
// "Elementwise math"). Every lane's operations are exp_f's: the
// same bits (PreludeMathBits.Exp8 compares them).
// ---------------------------------------------------------------------------------------
#if defined(GPTC_AVX2)
namespace detail {
template <int N>
inline void exp8(__m256 (&x)[N]) {
  const __m256 ln2_hi = _mm256_set1_ps(kExpLn2Hi), ln2_lo = _mm256_set1_ps(kExpLn2Lo),
               inv_ln2 = _mm256_set1_ps(kExpInvLn2), shifter = _mm256_set1_ps(kExpShifter);
  const float P[6] = {kExpP0, kExpP1, kExpP2, kExpP3, kExpP4, kExpP5};
  __m256 kf[N], r[N], p[N];
  __m256i k[N];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {  // the main path on x with |x| < 104, else on 0
    const __m256i ua = _mm256_and_si256(_mm256_castps_si256(x[v]), _mm256_set1_epi32(0x7fffffff));
    const __m256 live =
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)kExpMain), ua));
    r[v] = _mm256_and_ps(x[v], live);  // xm
  }
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v)
    kf[v] = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(r[v], inv_ln2), shifter), shifter);
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v)
    r[v] = _mm256_sub_ps(_mm256_sub_ps(r[v], _mm256_mul_ps(kf[v], ln2_hi)),
                         _mm256_mul_ps(kf[v], ln2_lo));
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) p[v] = _mm256_mul_ps(r[v], _mm256_set1_ps(P[0]));
#pragma GCC unroll 4
  for (int c = 1; c < 6; ++c) {
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = _mm256_add_ps(_mm256_set1_ps(P[c]), p[v]);
    if (c == 5) break;
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = _mm256_mul_ps(r[v], p[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v)  // y = (r^2 p + r) + 1
    p[v] = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(r[v], r[v]), p[v]), r[v]),
                         _mm256_set1_ps(1.0f));
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) k[v] = _mm256_cvttps_epi32(kf[v]);
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {  // y * 2^(k/2) * 2^(k - k/2), k/2 rounded toward zero
    const __m256i ka = _mm256_srai_epi32(_mm256_add_epi32(k[v], _mm256_srli_epi32(k[v], 31)), 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ka, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(k[v], ka), bias), 23));
    p[v] = _mm256_mul_ps(_mm256_mul_ps(p[v], s1), s2);
  }
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {
    const __m256 over = _mm256_cmp_ps(x[v], _mm256_set1_ps(kExpOver), _CMP_GT_OQ);
    const __m256 under = _mm256_cmp_ps(x[v], _mm256_set1_ps(kExpUnder), _CMP_LT_OQ);
    const __m256 nan = _mm256_cmp_ps(x[v], x[v], _CMP_UNORD_Q);
    __m256 res = _mm256_blendv_ps(p[v], _mm256_set1_ps(__builtin_inff()), over);
    res = _mm256_blendv_ps(res, _mm256_setzero_ps(), under);
    x[v] = _mm256_blendv_ps(res, _mm256_add_ps(x[v], x[v]), nan);
  }
}
}  // namespace detail
#endif

// ---------------------------------------------------------------------------------------
// Array forms of erf and the exact GELU (CPU): each y[i] the bits of the scalar function,
// with erf's costly upper range (|argument| >= 1.25: two exps, three divisions) evaluated
// only on the elements that need it, gathered into a dense run and scattered back. A GPT's
// GELU inputs are mostly below it, so most of erf's cost is skipped. Runs of 256 with every
// |argument| < 0.84375 (a GELU's inputs at initialisation) take only that range's rational
// form (bench/NOTES.md, "Elementwise math", has what it gains at each input spread).
// ---------------------------------------------------------------------------------------
#if !defined(__CUDACC__)
namespace detail {
constexpr int64_t kErfBlock = 256;

#if defined(GPTC_AVX2)
// AVX2 has no compress: for each 8-lane mask, the lanes it selects, packed to the left (one
// byte each), as a permutation for vpermps.
struct LeftPack8 {
  uint64_t lanes[256];
};
constexpr LeftPack8 make_left_pack8() {
  LeftPack8 t{};
  for (int mask = 0; mask < 256; ++mask) {
    int n = 0;
    for (int l = 0; l < 8; ++l)
      if (mask >> l & 1) t.lanes[mask] |= uint64_t(l) << (8 * n++);
  }
  return t;
}
inline constexpr LeftPack8 kLeftPack8 = make_left_pack8();
#endif

// The largest |z[i]|'s bits, i < n (NaN above every number).
inline uint32_t max_abs_bits(int64_t n, const float* z) {
  uint32_t top = 0;
  _Pragma("omp simd reduction(max : top)")
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = bits(z[i]) & 0x7fffffffu;
    top = a > top ? a : top;
  }
  return top;
}

// e[i] = erf(z[i]) for i < n <= kErfBlock; `top` is max_abs_bits(n, z).
inline void erf_block(int64_t n, const float* z, float* e, uint32_t top) {
  // A run with every |z| < 0.84375 (a GPT's GELU at initialisation, mostly) needs neither
  // the rational form of [0.84375, 1.25) nor the upper range: about half of the work.
  if (top < 0x3f580000u) {
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) e[i] = erf_f_small(z[i]);
    return;
  }
  GPTC_SIMD for (int64_t i = 0; i < n; ++i) e[i] = erf_f_low(z[i]);
  if (top < 0x3fa00000u) return;  // no argument in the upper range
  // The upper range's arguments and their places, packed (and padded to whole vectors).
  alignas(64) float high[kErfBlock + 16];
  alignas(64) int32_t where[kErfBlock + 16];
  int64_t m = 0, i = 0;
#if defined(GPTC_AVX512)
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(z + i);
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 up = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x3fa00000));
    _mm512_storeu_ps(high + m, _mm512_maskz_compress_ps(up, v));
    _mm512_storeu_si512(where + m, _mm512_maskz_compress_epi32(
                                       up, _mm512_add_epi32(lanes, _mm512_set1_epi32((int32_t)i))));
    m += __builtin_popcount((unsigned)up);
  }
#elif defined(GPTC_AVX2)
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(z + i);
    // |bits| >= 0x3fa00000, as a signed compare (the sign bit is cleared)
    const __m256i a = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
    const int up = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3f9fffff))));
    const __m256i pack = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)kLeftPack8.lanes[up]));
    _mm256_storeu_ps(high + m, _mm256_permutevar8x32_ps(v, pack));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(where + m),
                        _mm256_permutevar8x32_epi32(_mm256_add_epi32(lanes, _mm256_set1_epi32((int32_t)i)), pack));
    m += __builtin_popcount((unsigned)up);
  }
#endif
  for (; i < n; ++i) {  // branch-free
    high[m] = z[i];
    where[m] = (int32_t)i;
    m += erf_f_is_high(z[i]);
  }
  for (int64_t k = m; k < ((m + 15) & ~int64_t(15)); ++k) high[k] = 1.5f;
  for (int64_t k0 = 0; k0 < m; k0 += 16) {
    GPTC_SIMD for (int64_t k = k0; k < k0 + 16; ++k) high[k] = erf_f_high(high[k]);
  }
  for (int64_t k = 0; k < m; ++k) e[where[k]] = high[k];
}
}  // namespace detail

// y[i] = gptc::erf(x[i]).
inline void erf_n(int64_t n, const float* x, float* y) {
  for (int64_t b = 0; b < n; b += detail::kErfBlock) {
    const int64_t len = n - b < detail::kErfBlock ? n - b : detail::kErfBlock;
    detail::erf_block(len, x + b, y + b, detail::max_abs_bits(len, x + b));
  }
}

namespace detail {
// gelu_erf_of's scale in float, for the array forms.
constexpr float kInvSqrt2f = float(0.70710678118654752440);
// For each block of up to kErfBlock elements from b: e = erf(x * c) over the block, then
// finish(b, len, e). The erfs go to keep + b where `keep` is given (an array like x), else
// to a block on the stack.
template <class F>
inline void erf_scaled_blocks(int64_t n, const float* x, float c, float* keep, F&& finish) {
  for (int64_t b = 0; b < n; b += kErfBlock) {
    const int64_t len = n - b < kErfBlock ? n - b : kErfBlock;
    alignas(64) float z[kErfBlock], local[kErfBlock];
    float* const e = keep ? keep + b : local;
    uint32_t top = 0;
    _Pragma("omp simd reduction(max : top)")
    for (int64_t i = 0; i < len; ++i) {
      z[i] = x[b + i] * c;
      const uint32_t a = bits(z[i]) & 0x7fffffffu;
      top = a > top ? a : top;
    }
    erf_block(len, z, e, top);
    finish(b, len, e);
  }
}
}  // namespace detail

// y[i] = gelu_erf(x[i]).
inline void gelu_erf_n(int64_t n, const float* x, float* y) {
  detail::erf_scaled_blocks(n, x, detail::kInvSqrt2f, nullptr,
                            [&](int64_t b, int64_t len, const float* e) {
    GPTC_SIMD for (int64_t i = 0; i < len; ++i) y[b + i] = gelu_erf_given(x[b + i], e[i]);
  });
}

// y[i] = gelu_erf_grad(g[i], x[i]).
inline void gelu_erf_grad_n(int64_t n, const float* g, const float* x, float* y) {
  detail::erf_scaled_blocks(n, x, detail::kInvSqrt2f, nullptr,
                            [&](int64_t b, int64_t len, const float* e) {
    GPTC_SIMD for (int64_t i = 0; i < len; ++i) y[b + i] = gelu_erf_grad_given(g[b + i], x[b + i], e[i]);
  });
}

// y[i] = gelu_erf(x[i]) and e[i] = erf(x[i] / sqrt(2)), the value its gradient reuses
// (gpt.gelu_keep_erf). The erfs go straight to e, which is faster than copying them
// there from a block on the stack (bench/NOTES.md, "Elementwise math").
inline void gelu_erf_keep_n(int64_t n, const float* x, float* y, float* e) {
  detail::erf_scaled_blocks(n, x, detail::kInvSqrt2f, e,
                            [&](int64_t b, int64_t len, const float* eb) {
    GPTC_SIMD for (int64_t i = 0; i < len; ++i) y[b + i] = gelu_erf_given(x[b + i], eb[i]);
  });
}

// y[i] = gelu_erf_grad(g[i], x[i]) given e[i] = erf(x[i] / sqrt(2)) (gelu_erf_keep_n's).
inline void gelu_erf_grad_given_n(int64_t n, const float* g, const float* x, const float* e,
                                  float* y) {
  int64_t done = 0;
#if defined(GPTC_AVX2)
  // gelu_erf_grad_given's operations, 32 elements at a time, the exps through exp8.
  done = n / 32 * 32;
  for (int64_t i = 0; i < done; i += 32) {
    __m256 t[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256 xv = _mm256_loadu_ps(x + i + 8 * v);
      t[v] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), xv), xv);
    }
    detail::exp8(t);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256 xv = _mm256_loadu_ps(x + i + 8 * v);
      const __m256 ev = _mm256_loadu_ps(e + i + 8 * v);
      const __m256 cdf =
          _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.0f), ev));
      const __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(float(detail::kInvSqrt2Pi)), t[v]);
      _mm256_storeu_ps(y + i + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(g + i + 8 * v),
                                                    _mm256_add_ps(cdf, _mm256_mul_ps(xv, pdf))));
    }
  }
#endif
  GPTC_SIMD for (int64_t k = done; k < n; ++k) y[k] = gelu_erf_grad_given(g[k], x[k], e[k]);
}
#endif

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_MATH_ARRAYS_H
