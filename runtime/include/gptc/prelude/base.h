// gptc/prelude/base.h — the configuration every prelude header builds on: the vector forms
// the CPU build takes (AVX-512, AVX2, or SIMDe's emulation), GPTC_HD and GPTC_INLINE, the
// parallel loops (GPTC_FOR and its kin) and GPTC_EXPORT. Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_BASE_H
#define GPTC_PRELUDE_BASE_H

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>
#include <type_traits>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if (defined(__AVX512F__) || defined(__AVX2__)) && !defined(__CUDACC__)
#include <immintrin.h>
#endif
// The AVX-512 forms of the vectorised helpers below: on a CPU with AVX-512, or emulated.
#if defined(__AVX512F__) && !defined(__CUDACC__)
#define GPTC_AVX512 1
#elif defined(GPTC_EMULATE_AVX512) && !defined(__CUDACC__)
// Tests only (test/unit's _avx512emu builds, -march=x86-64-v3): the AVX-512 forms on a CPU
// without AVX-512, their intrinsics from SIMDe's portable implementations (libsimde-dev),
// which run a 16-lane operation as two native 8-lane ones (an fma as two vfmadd, so the
// same roundings). It checks the forms' arithmetic, lanes and masks on any AVX2 machine;
// not the compiler's AVX-512 code, nor its speed.
#if !defined(__AVX2__) || !defined(__FMA__)
#error "GPTC_EMULATE_AVX512 needs AVX2 and FMA (-march=x86-64-v3): SIMDe's fma is exact only on them"
#endif
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
// What the prelude uses and SIMDe 0.7.4 lacks: four AVX-512F forms, lane by lane (the
// masked fma as a blend of the fma)...
inline __m512 gptc_emu_maskz_loadu_ps(__mmask16 m, const float* p) {
  alignas(64) float v[16];
  for (int j = 0; j < 16; ++j) v[j] = (m >> j) & 1 ? p[j] : 0.0f;
  return _mm512_loadu_ps(v);
}
inline void gptc_emu_mask_storeu_ps(float* p, __mmask16 m, __m512 x) {
  alignas(64) float v[16];
  _mm512_storeu_ps(v, x);
  for (int j = 0; j < 16; ++j)
    if ((m >> j) & 1) p[j] = v[j];
}
inline __m512 gptc_emu_mask3_fmadd_ps512(__m512 a, __m512 b, __m512 c, __mmask16 k) {
  return _mm512_mask_blend_ps(k, c, _mm512_fmadd_ps(a, b, c));
}
inline float gptc_emu_reduce_max_ps(__m512 x) {  // callers rule out NaNs and zeros
  alignas(64) float v[16];
  _mm512_storeu_ps(v, x);
  float r = v[0];
  for (int j = 1; j < 16; ++j) r = v[j] > r ? v[j] : r;
  return r;
}
// And two of AVX-512VL's 4-lane forms (dot_rows4), from AVX2 ones.
inline __mmask8 gptc_emu_cmpgt_epi32_mask(__m128i a, __m128i b) {
  return (__mmask8)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(a, b)));
}
inline __m128 gptc_emu_mask3_fmadd_ps(__m128 a, __m128 b, __m128 c, __mmask8 k) {
  const __m128i bits = _mm_and_si128(_mm_set1_epi32(k), _mm_setr_epi32(1, 2, 4, 8));
  const __m128 on = _mm_castsi128_ps(_mm_cmpgt_epi32(bits, _mm_setzero_si128()));
  return _mm_blendv_ps(c, _mm_fmadd_ps(a, b, c), on);
}
#define _mm_cmpgt_epi32_mask gptc_emu_cmpgt_epi32_mask
#define _mm_mask3_fmadd_ps gptc_emu_mask3_fmadd_ps
#define _mm512_mask3_fmadd_ps gptc_emu_mask3_fmadd_ps512
#define _mm512_maskz_loadu_ps gptc_emu_maskz_loadu_ps
#define _mm512_mask_storeu_ps gptc_emu_mask_storeu_ps
#define _mm512_reduce_max_ps gptc_emu_reduce_max_ps
#undef _mm512_shuffle_f32x4  // SIMDe has it, but no alias to it
#define _mm512_shuffle_f32x4 simde_mm512_shuffle_f32x4
#define GPTC_AVX512 1
#endif
// AVX2 with FMA but no AVX-512: the vectorised helpers below (erf's gather, the attention
// helpers, the matmul tile) have 8-lane forms with the same arithmetic, lane for lane, so
// they give the AVX-512 forms' bits.
#if defined(__AVX2__) && defined(__FMA__) && !defined(GPTC_AVX512) && !defined(__CUDACC__)
#define GPTC_AVX2 1
#endif
// Either of the two: the vector forms are on.
#if defined(GPTC_AVX512) || defined(GPTC_AVX2)
#define GPTC_VECTOR_FORMS 1
#endif

#if defined(__CUDACC__)
#define GPTC_HD __host__ __device__
#else
#define GPTC_HD
#endif

// GPTC_INLINE: always inlined, so that the elementary functions below (and the whole chain
// under them) end up inside the caller's elementwise loop, where they can vectorise; a call
// (through the PLT in a kernels.so) would keep the loop scalar.
#if defined(__CUDACC__)
#define GPTC_INLINE __forceinline__
#elif defined(__GNUC__)
#define GPTC_INLINE __attribute__((always_inline)) inline
#else
#define GPTC_INLINE inline
#endif
// GPTC_OUTLINE: a device function kept a call, where inlining would copy a long body into
// each of a thread's unrolled outputs (the matmul epilogue's GELU gradient).
#if defined(__CUDACC__)
#define GPTC_OUTLINE __noinline__
#else
#define GPTC_OUTLINE
#endif

// GPTC_FOR(i, n): a loop of int64_t i over [0, n) whose iterations are independent. Built
// with OpenMP (generated kernels are), it is split statically over gptc::thread_count()
// threads; each iteration computes its outputs alone, in its own fixed order, so the
// thread count never changes a bit. Without OpenMP it is a plain loop.
#if defined(_OPENMP) && !defined(__CUDACC__)
#include <omp.h>
namespace gptc {
// 1 until the runtime asks for more (Model::set_num_threads); 0: one per core.
inline int& thread_count() {
  static int n = 1;
  return n;
}
inline int threads_for_loop() { return thread_count() > 0 ? thread_count() : omp_get_max_threads(); }
// The threads of the enclosing parallel region (1 outside one).
inline int team_size() { return omp_get_num_threads(); }
// The processors this process may run on.
inline int processors() { return omp_get_num_procs(); }

}  // namespace gptc
#define GPTC_FOR(i, n)                                                                    \
  _Pragma("omp parallel for schedule(static) num_threads(gptc::threads_for_loop())")      \
  for (int64_t i = 0; i < (int64_t)(n); ++i)
// GPTC_FOR_SIMD(i, n): GPTC_FOR for elementwise loops, also vectorised within each thread
// (omp simd). Lanes are iterations, and every iteration still computes its outputs alone
// and in its own order (no reduction clause): vectorising never changes a bit.
#define GPTC_FOR_SIMD(i, n)                                                               \
  _Pragma("omp parallel for simd schedule(static) num_threads(gptc::threads_for_loop())") \
  for (int64_t i = 0; i < (int64_t)(n); ++i)
// Horizontal fusion (gpt.horizontal): one parallel region, GPTC_PARALLEL { ... }, in which
// each member's loop is a GPTC_FOR_WS: the region's threads share its iterations
// (statically, or dynamically for loops too short to split) and go on to the next loop
// without waiting. Members never read one another's results, so no wait is needed, and each
// iteration still computes its outputs alone: the schedule never changes a bit.
#define GPTC_PARALLEL _Pragma("omp parallel num_threads(gptc::threads_for_loop())")
// GPTC_OMP("omp ..."): an OpenMP directive where OpenMP is on (nothing without it).
#define GPTC_OMP(directive) _Pragma(directive)
#define GPTC_FOR_WS(i, n)                                                                 \
  _Pragma("omp for schedule(static) nowait") for (int64_t i = 0; i < (int64_t)(n); ++i)
#define GPTC_FOR_WS_DYNAMIC(i, n)                                                         \
  _Pragma("omp for schedule(dynamic) nowait") for (int64_t i = 0; i < (int64_t)(n); ++i)
#define GPTC_FOR_WS_SIMD(i, n)                                                            \
  _Pragma("omp for simd schedule(static) nowait") for (int64_t i = 0; i < (int64_t)(n); ++i)
#else
#define GPTC_FOR(i, n) for (int64_t i = 0, gptc_for_end_##i = (n); i < gptc_for_end_##i; ++i)
#if defined(__CUDACC__)
#define GPTC_FOR_SIMD(i, n) GPTC_FOR(i, n)
#else  // omp simd: honoured under -fopenmp-simd, ignored otherwise (canonical loop form)
#define GPTC_FOR_SIMD(i, n) _Pragma("omp simd") for (int64_t i = 0; i < (int64_t)(n); ++i)
#endif
#define GPTC_PARALLEL
#define GPTC_OMP(directive)
namespace gptc {
inline int team_size() { return 1; }
inline int processors() { return 1; }
}  // namespace gptc
#define GPTC_FOR_WS(i, n) GPTC_FOR(i, n)
#define GPTC_FOR_WS_DYNAMIC(i, n) GPTC_FOR(i, n)
#define GPTC_FOR_WS_SIMD(i, n) GPTC_FOR_SIMD(i, n)
#endif

// GPTC_SIMD: vectorise the next loop (its iterations independent); GPTC_FLATTEN: inline
// everything a function calls (the lambdas handed to reduce_sum, exp inside them), so that
// such a loop has no calls left in it. Host compilers only.
#if defined(__CUDACC__)
#define GPTC_SIMD
#define GPTC_FLATTEN
#else
#define GPTC_SIMD _Pragma("omp simd")
#if defined(__GNUC__)
#define GPTC_FLATTEN __attribute__((flatten))
#else
#define GPTC_FLATTEN
#endif
#endif

// GPTC_EXPORT: marks the extern "C" entry points of a generated kernels.so as visible.
#if defined(__GNUC__)
#define GPTC_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define GPTC_EXPORT extern "C"
#endif

#endif  // GPTC_PRELUDE_BASE_H
