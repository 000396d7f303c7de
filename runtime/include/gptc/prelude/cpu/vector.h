// gptc/prelude/cpu/vector.h — the vector types the CPU tiles share: AVX-512 and AVX2 forms
// (host only). Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_CPU_VECTOR_H
#define GPTC_PRELUDE_CPU_VECTOR_H

#include "gptc/prelude/math.h"

namespace gptc {

#if defined(GPTC_AVX512)
namespace detail {
// Keeps a loaded vector in its register for the several FMAs that use it: GCC otherwise
// folds the load into each of them, loading it again per use, which slows attention's
// loops markedly (bench/NOTES.md, "Attention forward"). Changes no value.
#if defined(__AVX512F__)
inline void hold(__m512& v) { asm("" : "+v"(v)); }
#else
inline void hold(__m512&) {}  // emulated: no zmm to hold it in
#endif
// The first `left` of 16 lanes (none for left <= 0, all for left >= 16).
inline __mmask16 lanes_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

// The vector of the register tiles (matmul_tile, block_dots_rows) on AVX-512: a zmm, 16
// lanes. One lane is one output, so the AVX2 form below gives the same bits.
struct TileVec {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static Mask first(int64_t left) { return lanes_mask(left); }
  static V load_first(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_first(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
};
}  // namespace detail
#elif defined(GPTC_AVX2)
namespace detail {
inline void hold(__m256& v) { asm("" : "+x"(v)); }
// The first `left` of 8 lanes (none for left <= 0, all for left >= 8), as a maskload mask.
inline __m256i lanes_mask8(int64_t left) {
  const int live = left >= 8 ? 8 : left <= 0 ? 0 : (int)left;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The register tiles' vector on AVX2 with FMA: a ymm, 8 lanes.
struct TileVec {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int64_t kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static Mask first(int64_t left) { return lanes_mask8(left); }
  static V load_first(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_first(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
};
}  // namespace detail
#endif

}  // namespace gptc

#endif  // GPTC_PRELUDE_CPU_VECTOR_H
