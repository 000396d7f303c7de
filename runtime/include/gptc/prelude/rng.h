// gptc/prelude/rng.h — Philox-4x32-10 and the dropout masks drawn from it: portable (the
// vector block form is the CPU's). Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_RNG_H
#define GPTC_PRELUDE_RNG_H

#include "gptc/prelude/math.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Counter-based randomness: Philox-4x32-10 (Salmon et al., SC'11). The dropout mask bit of
// element i of random op `id` at (seed, step) is a pure function of those four numbers:
// key = (seed_lo, seed_hi), counter = (i_lo, i_hi, id, step); the first output word's top
// 24 bits give u in [0, 1); the element is kept iff u >= p. Same bits on CPU and GPU,
// whatever the thread count or the split of the work.
// ---------------------------------------------------------------------------------------
GPTC_HD inline void philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                                  uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

GPTC_HD inline float dropout_uniform(uint64_t seed, uint64_t step, uint64_t id, uint64_t i) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t counter[4] = {(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)id, (uint32_t)step};
  uint32_t out[4];
  philox4x32_10(counter, key, out);
  return (float)(out[0] >> 8) * (1.0f / 16777216.0f);
}

GPTC_HD inline bool dropout_keep(uint64_t seed, uint64_t step, uint64_t id, uint64_t i, float p) {
  return dropout_uniform(seed, step, id, i) >= p;
}

// Dropout masks of a run of elements (CPU): keep[j] = all ones if dropout_keep(seed, step,
// id, i0 + j, p), else 0, for j < n. The same draws as dropout_keep, 8 elements at a time
// on AVX2 and AVX-512 (Philox's 32x32-bit products as even and odd lanes of vpmuludq): a
// scalar loop of dropout_keep does not vectorise, and is several times slower than this
// (bench/NOTES.md, "Elementwise math").
#if !defined(__CUDACC__)
namespace detail {
#if defined(GPTC_VECTOR_FORMS)
// Lanes of a * m: the low and high 32 bits of each 64-bit product.
inline void mul_hilo8(__m256i a, __m256i m, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
// dropout_keep of elements i .. i + 7 (which share i's high 32 bits), as lane masks.
inline __m256i dropout_keep8(uint64_t seed, uint64_t step, uint64_t id, uint64_t i, float p) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(uint32_t)i),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32((int32_t)(uint32_t)(i >> 32));
  __m256i c2 = _mm256_set1_epi32((int32_t)(uint32_t)id);
  __m256i c3 = _mm256_set1_epi32((int32_t)(uint32_t)step);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32((int32_t)0xD2511F53u), m1 = _mm256_set1_epi32((int32_t)0xCD9E8D57u);
  for (int round = 0; round < 10; ++round) {
    __m256i lo0, hi0, lo1, hi1;
    mul_hilo8(c0, m0, lo0, hi0);
    mul_hilo8(c2, m1, lo1, hi1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int32_t)k0));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int32_t)k1));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // (float)(w >> 8) * 2^-24 >= p: both exact, as in dropout_uniform.
  const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c0, 8)),
                                 _mm256_set1_ps(1.0f / 16777216.0f));
  return _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_set1_ps(p), _CMP_GE_OQ));
}
#endif
}  // namespace detail

inline void dropout_keep_block(uint64_t seed, uint64_t step, uint64_t id, uint64_t i0,
                               int64_t n, float p, uint32_t* keep) {
  int64_t j = 0;
#if defined(GPTC_VECTOR_FORMS)
  // Eight lanes share i's high word unless the run crosses a multiple of 2^32.
  for (; j + 8 <= n && ((i0 + j) >> 32) == ((i0 + j + 7) >> 32); j += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(keep + j),
                        detail::dropout_keep8(seed, step, id, i0 + j, p));
  if (j < n && ((i0 + j) >> 32) == ((i0 + j + 7) >> 32)) {  // the last few: 8 lanes drawn
    alignas(32) uint32_t last[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(last),
                       detail::dropout_keep8(seed, step, id, i0 + j, p));
    for (const int64_t first = j; j < n; ++j) keep[j] = last[j - first];
  }
#endif
  for (; j < n; ++j) keep[j] = dropout_keep(seed, step, id, i0 + j, p) ? ~0u : 0u;
}

// f[j] = scale if element i0 + j is kept, else 0, for j < n (attention's keep factors).
template <class T>
inline void dropout_factors(uint64_t seed, uint64_t step, uint64_t id, uint64_t i0, int64_t n,
                            float p, T scale, T* f) {
  constexpr int64_t kBlock = 64;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = n - b < kBlock ? n - b : kBlock;
    alignas(64) uint32_t keep[kBlock];
    dropout_keep_block(seed, step, id, i0 + b, len, p, keep);
    GPTC_SIMD for (int64_t j = 0; j < len; ++j) f[b + j] = detail::sel(keep[j] != 0, scale, T(0));
  }
}
#endif

}  // namespace gptc

#endif  // GPTC_PRELUDE_RNG_H
