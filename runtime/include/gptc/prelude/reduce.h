// gptc/prelude/reduce.h — the canonical reductions (reduce_sum, reduce_sum16, reduce_max)
// and the matmul order (dot_seq): portable; the CPU's vector forms give the same bits. Part
// of gptc/prelude.h.
#ifndef GPTC_PRELUDE_REDUCE_H
#define GPTC_PRELUDE_REDUCE_H

#include "gptc/prelude/math.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Canonical reductions. THIS ORDER IS THE NUMERICS CONTRACT: do not "improve" it.
// ---------------------------------------------------------------------------------------

// sum_{k<n} elem(k): 32 partials, partial j = elem(j) + elem(j+32) + ... left to right,
// then a butterfly over the partials (pairs 16 apart, then 8, 4, 2, 1); result p[0].
// (On CUDA one warp: lane j holds p[j], the tree is the shuffle-down pattern.)
// Elements are visited 32 at a time, lane j of a block adding to p[j]: the same additions in
// the same order as visiting k one by one, but vectorised (one lane per partial).
namespace detail {
// The butterfly over 32 partials: p[j] = p[j] + p[j + s] for j < s, s = 16, 8, 4, 2, 1;
// returns p[0]. On AVX-512 and AVX2 the same additions as halves of vectors (two ymm pairs,
// ymm, xmm, then lanes), with the partial j first in each, instead of 31 scalar adds through
// memory, which made short rows several times slower (bench/NOTES.md, "Elementwise math").
// (A NaN result may carry either operand's NaN: compilers order a commutative add freely, in
// the scalar loop as here; every other bit is the loop's.)
template <class T>
GPTC_HD GPTC_INLINE T butterfly_sum32(T* p) {
#if defined(GPTC_VECTOR_FORMS)
  if constexpr (sizeof(T) == 4) {
    const __m256 a0 = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 16));
    const __m256 a1 = _mm256_add_ps(_mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 24));
    const __m256 b = _mm256_add_ps(a0, a1);
    const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
#endif
  for (int s = 16; s >= 1; s >>= 1)
    for (int j = 0; j < s; ++j) p[j] = p[j] + p[j + s];
  return p[0];
}

#if defined(GPTC_VECTOR_FORMS)
// gptc::maximum(a, b) per lane: a where a is NaN or a > b, else b.
inline __m128 maximum4(__m128 a, __m128 b) {
  return _mm_blendv_ps(b, a, _mm_or_ps(_mm_cmpunord_ps(a, a), _mm_cmpgt_ps(a, b)));
}
inline __m256 maximum8(__m256 a, __m256 b) {
  return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(a, b, _CMP_GT_OQ)));
}
#endif

// butterfly_sum32's shape with gptc::maximum, partial j the first operand.
template <class T>
GPTC_HD GPTC_INLINE T butterfly_max32(T* p) {
#if defined(GPTC_VECTOR_FORMS)
  if constexpr (sizeof(T) == 4) {
    const __m256 a0 = maximum8(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 16));
    const __m256 a1 = maximum8(_mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 24));
    const __m256 b = maximum8(a0, a1);
    const __m128 c = maximum4(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 d = maximum4(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(maximum4(d, _mm_movehdup_ps(d)));
  }
#endif
  for (int s = 16; s >= 1; s >>= 1)
    for (int j = 0; j < s; ++j) p[j] = maximum(p[j], p[j + s]);
  return p[0];
}
}  // namespace detail

template <class T, class F>
GPTC_HD GPTC_FLATTEN inline T reduce_sum(int64_t n, F elem) {
  T p[32];
  for (int j = 0; j < 32; ++j) p[j] = T(0);
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    GPTC_SIMD
    for (int j = 0; j < 32; ++j) p[j] = p[j] + T(elem(k + j));
  }
  for (int j = 0; k + j < n; ++j) p[j] = p[j] + T(elem(k + j));
  return detail::butterfly_sum32(p);
}

// reduce_sum for 16 outputs at once: out[l] = reduce_sum(n, k -> elem(k, l)) for l < 16,
// each lane exactly the canonical order above. For sums along an outer dimension (a column
// of a row-major matrix), whose 16 neighbouring outputs read neighbouring elements: the
// lanes vectorise, and each pass over k reads whole rows.
template <class T, class F>
GPTC_HD GPTC_FLATTEN inline void reduce_sum16(int64_t n, F elem, T* out) {
  T p[32][16];
  for (int j = 0; j < 32; ++j)
    GPTC_SIMD for (int l = 0; l < 16; ++l) p[j][l] = T(0);
  int64_t k = 0;
  for (; k + 32 <= n; k += 32)
    for (int j = 0; j < 32; ++j)
      GPTC_SIMD for (int l = 0; l < 16; ++l) p[j][l] = p[j][l] + T(elem(k + j, l));
  for (int j = 0; k + j < n; ++j)
    GPTC_SIMD for (int l = 0; l < 16; ++l) p[j][l] = p[j][l] + T(elem(k + j, l));
  for (int s = 16; s >= 1; s >>= 1)
    for (int j = 0; j < s; ++j)
      GPTC_SIMD for (int l = 0; l < 16; ++l) p[j][l] = p[j][l] + p[j + s][l];
  for (int l = 0; l < 16; ++l) out[l] = p[0][l];
}

// max_{k<n} elem(k) with the same shape as reduce_sum (-inf for n == 0; NaN propagates).
template <class T, class F>
GPTC_HD GPTC_FLATTEN inline T reduce_max(int64_t n, F elem) {
  T p[32];
  for (int j = 0; j < 32; ++j) p[j] = max_identity<T>();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    GPTC_SIMD
    for (int j = 0; j < 32; ++j) p[j] = maximum(p[j], T(elem(k + j)));
  }
  for (int j = 0; k + j < n; ++j) p[j] = maximum(p[j], T(elem(k + j)));
  return detail::butterfly_max32(p);
}

// sum_{k<n} a(k)*b(k) in the matmul order: acc = 0; acc = fma(a(k), b(k), acc) for
// k = 0..n-1. Call as gptc::dot_seq<float>(K, [&](int64_t k) {...}, [&](int64_t k) {...}).
template <class T, class F, class G>
GPTC_HD inline T dot_seq(int64_t n, F a, G b) {
  T acc = T(0);
  for (int64_t k = 0; k < n; ++k) acc = gptc::fma(T(a(k)), T(b(k)), acc);
  return acc;
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_REDUCE_H
