// gptc/prelude.h — the hand-written header every generated kernel file includes.
//
// It holds everything the generated kernels.cpp (and later kernels.cu) may call that is part
// of gptc's numerics contract (docs/artifact.md, docs/design.md, the determinism
// contract):
//   * GPTC_FOR(i, n)            a loop of int64_t i over [0, n)
//   * GPTC_FOR_SIMD(i, n)       the same, also vectorised (elementwise loops)
//   * exp/log/tanh/erf/sin/cos  gptc's own elementary functions, float and double, written
//                               with plain IEEE arithmetic only, so that one source gives the
//                               same bits on the CPU (-ffp-contract=off) and on CUDA
//                               (nvcc -fmad=false)
//   * sqrt/rsqrt/abs/pow/       built on the above (sqrt and abs are IEEE on both targets)
//     sigmoid/gelu_*
//   * reduce_sum/reduce_max     the canonical 32-partial + butterfly reduction order
//   * dot_seq                   the canonical matmul order: sequential explicit fma
//   * bf16                      storage type with round-to-nearest-even conversion
//
// Rules for this file: header-only C++17, valid CUDA (every function is GPTC_HD), no std::
// containers, only <cstdint>, <cmath>, <cstring>.
//
// The double-precision exp/log/expm1/erf follow fdlibm (algorithms and coefficients), whose
// notice is kept as it asks:
//   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
//   Developed at SunPro, a Sun Microsystems, Inc. business.
//   Permission to use, copy, modify, and distribute this software is freely granted,
//   provided that this notice is preserved.
// Float log and tanh evaluate the double ones and round once: the double result is within
// ~1 double ulp, so the float result is the correctly rounded value except in rare
// near-halfway cases, where it is off by at most one float ulp. Float exp (Cody-Waite
// reduction, Cephes's minimax polynomial) and erf (fdlibm's forms, float coefficients) are
// float arithmetic, which vectorises better than the double route (bench/NOTES.md,
// "Elementwise math"); over all 2^32 inputs they are within 1 ulp of the exact value.
#ifndef GPTC_PRELUDE_H
#define GPTC_PRELUDE_H

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

namespace gptc {

// ---------------------------------------------------------------------------------------
// Bit access (memcpy on the host, intrinsics on the device: both are exact reinterprets).
// ---------------------------------------------------------------------------------------
namespace detail {

GPTC_HD GPTC_INLINE uint64_t bits(double x) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
GPTC_HD GPTC_INLINE double from_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
GPTC_HD GPTC_INLINE uint32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
GPTC_HD GPTC_INLINE float from_bits32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

GPTC_HD GPTC_INLINE double inf_d() { return from_bits(0x7ff0000000000000ull); }
GPTC_HD GPTC_INLINE double nan_d() { return from_bits(0x7ff8000000000000ull); }
GPTC_HD GPTC_INLINE float inf_f() { return from_bits32(0x7f800000u); }
GPTC_HD GPTC_INLINE bool is_nan(double x) { return x != x; }
GPTC_HD GPTC_INLINE double fabs_d(double x) { return from_bits(bits(x) & 0x7fffffffffffffffull); }
// sel(c, a, b) = c ? a : b, branch-free: a mask select, so that no optimisation pass can
// turn it into control flow (a ternary can be: then a loop no longer vectorises); in a
// vectorised loop it becomes a blend. Conditions are single comparisons: nest sels rather
// than & or | two of them (GCC may merge the two setcc into a partial register write,
// a false dependency that serialises the iterations of a scalar loop).
GPTC_HD GPTC_INLINE uint64_t mask_of(bool c) { return (uint64_t)0 - (uint64_t)c; }
GPTC_HD GPTC_INLINE double sel(bool c, double a, double b) {
  const uint64_t m = mask_of(c);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}
GPTC_HD GPTC_INLINE int64_t sel(bool c, int64_t a, int64_t b) {
  const uint64_t m = mask_of(c);
  return (int64_t)(((uint64_t)a & m) | ((uint64_t)b & ~m));
}
// 2^k for -1022 <= k <= 1023, built from bits (exact). (int64_t: a vectorised loop keeps k
// in 64-bit lanes next to the doubles.)
GPTC_HD GPTC_INLINE double pow2i(int64_t k) { return from_bits((uint64_t)(0x3ff + k) << 52); }

// y * 2^k for any k in [-1100, 1100] and y in [0.5, 2) (or 0): the correctly rounded value,
// exact unless it is subnormal (one rounding) or overflows. fdlibm multiplies by two powers
// of 2 at the ends of the range (y * 2^1023 * 2^(k-1023), y * 2^(k+1000) * 2^-1000) and by
// one in between; the first product is always exact, so the result is y*2^k rounded once
// however k is split. Branch-free: always split it in halves (each factor a normal double).
GPTC_HD GPTC_INLINE double scale2(double y, int64_t k) {
  const int64_t ka = k / 2;
  return y * pow2i(ka) * pow2i(k - ka);
}

// ---------------------------------------------------------------------------------------
// Double-precision kernels (fdlibm). Each is < 1 ulp in fdlibm's analysis; the unit test
// measures them against long double libm.
//
// They are written branch-free so that an elementwise loop over them vectorises (a branch
// around arithmetic keeps GCC's vectoriser out): every range's candidate is computed with
// exactly the arithmetic of fdlibm's branchy code, so it has the bits that code returned for
// that range, and the result is picked with sel(). Special inputs (nan, inf, out of range,
// tiny) are sels too; where the main path would see one, it runs on a harmless stand-in
// instead (no float-to-integer conversion out of range). Where two ranges' arithmetic is
// merged, a comment says why the bits are the same. GPTC_INLINE puts the whole chain inside
// the caller's loop. Bit-identity with the former branchy code is checked by
// test/unit/prelude_math_bits_test.cpp (which keeps a verbatim copy of it).
// ---------------------------------------------------------------------------------------

// exp(x): x = k*ln2 + r, |r| <= ln2/2; exp(r) by a rational form of a degree-5 minimax
// polynomial R(r^2); result 2^k * exp(r). exp_parts gives y and k with exp(x) = y * 2^k;
// its callers keep |x| < 746, so k is in [-1077, 1077].
struct ExpParts {
  double y;
  int64_t k;
};
GPTC_HD GPTC_INLINE ExpParts exp_parts(double x) {
  const double ln2_hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000
  const double ln2_lo = 1.90821492927058770002e-10;  // 0x3dea39ef35793c76
  const double inv_ln2 = 1.44269504088896338700e+00;
  const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03,
               P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
               P5 = 4.13813679705723846039e-08;
  // |x| > ln2/2: reduce, k rounded half away from zero (truncating cast). Else k = 0, and
  // then hi = x, lo = 0, hi - lo = x exactly: the same as not reducing.
  const double kd = inv_ln2 * x;
  const double kd_down = kd - 0.5, kd_up = kd + 0.5;
  const int64_t k_round = (int64_t)sel(x < 0, kd_down, kd_up);
  const int64_t k = sel(fabs_d(x) > 3.46573590279972654709e-01, k_round, (int64_t)0);
  const double tk = (double)k;
  const double hi = x - tk * ln2_hi;  // exact: ln2_hi has 32 trailing zero bits
  const double lo = tk * ln2_lo;
  const double r = hi - lo;
  const double t = r * r;
  const double c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  // fdlibm's k == 0 form, 1 - ((r*c)/(c-2) - r), is this one with lo = 0, hi = r: c - 2 is
  // exactly -(2 - c) (|c| < 1), 0 - q = -q up to the sign of a zero that r absorbs, and
  // scaling by 2^0 multiplies by exactly 1. So one formula serves every k.
  return ExpParts{1.0 - ((lo - (r * c) / (2.0 - c)) - hi), k};
}

GPTC_HD GPTC_INLINE double exp_d(double x) {
  // Range tests on the bits, as integers (as cheap as it gets in scalar code too):
  const uint64_t o_threshold = 0x40862e42fefa39efull;   // 7.09782712893383973096e+02: above, inf
  const uint64_t u_threshold = 0xc0874910d52d3051ull;   // -7.45133219101941108420e+02: below, 0
  const uint64_t tiny = 0x3e2ffffffffdb73dull;          // 3.7252902984e-09 (~2^-28): below, 1 + x
  const uint64_t ux = bits(x), ua = ux & 0x7fffffffffffffffull;
  // The main path runs on x where |x| < 746 (k then stays within [-1077, 1077]), else on 0
  // (nan included); outside [u_threshold, o_threshold] its result is not used.
  const ExpParts p = exp_parts(sel(ua < 0x4087500000000000ull, x, 0.0));
  double res = scale2(p.y, p.k);
  res = sel(ua < tiny, 1.0 + x, res);
  res = sel(ux > u_threshold, 0.0, res);                        // unsigned: negative x only
  res = sel((int64_t)ux > (int64_t)o_threshold, inf_d(), res);  // signed: positive x only
  return sel(ua > 0x7ff0000000000000ull, x + x, res);           // nan
}

// exp_d(x) for |x| <= 708 only (erf's arguments): no special input, and k is in
// [-1022, 1022], where 2^k is a normal double and y * 2^k is scale2(y, k).
GPTC_HD GPTC_INLINE double exp_d_mid(double x) {
  const ExpParts p = exp_parts(x);
  return sel(fabs_d(x) < 3.7252902984e-09, 1.0 + x, p.y * pow2i(p.k));  // |x| < 2^-28
}

// log(x): x = 2^k * (1+f), 1+f in [sqrt(2)/2, sqrt(2)); s = f/(2+f);
// log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)) with a degree-14 even minimax R.
GPTC_HD GPTC_INLINE double log_d(double x) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01,
               Lg3 = 2.857142874366239149e-01, Lg4 = 2.222219843214978396e-01,
               Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01,
               Lg7 = 1.479819860511658591e-01;
  const uint64_t ix0 = bits(x);
  // Subnormal (or +0) x: scale up by 2^54 first. Negative, zero, inf and nan x run the main
  // path on junk (integer arithmetic only, no overflow) and are replaced at the end.
  const bool subnormal = ix0 < 0x0010000000000000ull;
  const double scaled = x * 1.8014398509481984e16;
  const double xs = sel(subnormal, scaled, x);
  const uint64_t ix = bits(xs);
  // Reduce x into [sqrt(2)/2, sqrt(2)) (64-bit arithmetic on the high word; for the finite
  // positive x that use the result it never exceeds 32 bits, as in fdlibm).
  uint64_t hx = (ix >> 32) + (0x3ff00000u - 0x3fe6a09eu);
  const int64_t k = sel(subnormal, (int64_t)-54, (int64_t)0) + ((int64_t)(hx >> 20) - 0x3ff);
  hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
  const double m = from_bits((hx << 32) | (ix & 0xffffffffull));
  const double f = m - 1.0;
  const double hfsq = 0.5 * f * f;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const double R = t2 + t1;
  const double dk = (double)k;
  double res = s * (hfsq + R) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
  res = sel(ix0 == 0x3ff0000000000000ull, 0.0, res);   // log(1) = +0
  res = sel((ix0 >> 63) != 0, nan_d(), res);            // log(negative) = nan
  res = sel((ix0 << 1) == 0, -inf_d(), res);            // log(+-0) = -inf
  res = sel(ix0 == 0x7ff0000000000000ull, x + x, res);  // log(+inf) = +inf
  return sel(is_nan(x), x + x, res);
}

// expm1(x) = exp(x) - 1 without cancellation near 0 (used by tanh). expm1_main is it for
// the x that are not special (nan, <= -56*ln2, > o_threshold), expm1_d for all x.
GPTC_HD GPTC_INLINE double expm1_main(double x) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double inv_ln2 = 1.44269504088896338700e+00;
  const double Q1 = -3.33333333333331316428e-02, Q2 = 1.58730158725481460165e-03,
               Q3 = -7.93650757867487942473e-05, Q4 = 4.00821782732936239552e-06,
               Q5 = -2.01099218183624371326e-07;
  const uint64_t ux = bits(x);
  const uint64_t hx = (ux >> 32) & 0x7fffffffu;
  const bool sign = (ux >> 63) != 0;
  // |x| > ln2/2: reduce; k = +-1 below 1.5*ln2, else rounded half away from zero. The
  // general hi/lo below are exactly fdlibm's x -+ ln2_hi, +-ln2_lo for k = +-1
  // (x - (-1 * ln2_hi) == x + ln2_hi), and for k = 0 they give hi = x, lo = 0, r = x,
  // c = 0: the unreduced values.
  const int64_t k_round = (int64_t)(inv_ln2 * x + sel(sign, -0.5, 0.5));
  const int64_t k_one = sel(sign, (int64_t)-1, (int64_t)1);
  const int64_t k = sel(hx > 0x3fd62e42u, sel(hx < 0x3FF0A2B2u, k_one, k_round), (int64_t)0);
  const double tk = (double)k;
  const double hi = x - tk * ln2_hi;
  const double lo = tk * ln2_lo;
  const double r = hi - lo;
  const double c = (hi - r) - lo;
  const double hfx = 0.5 * r;
  const double hxs = r * hfx;
  const double r1 = 1.0 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
  const double t = 3.0 - r1 * hfx;
  const double e0 = hxs * ((r1 - t) / (6.0 - r * t));
  const double e = (r * (e0 - c) - c) - hxs;  // k != 0
  // Every k's candidate (pow2i(+-k) is junk, unused, outside 2 <= k <= 56).
  const double res_k0 = r - (r * e0 - hxs);
  const double res_km1 = 0.5 * (r - e) - 0.5;
  const double res_k1 = sel(r < -0.25, -2.0 * (e - (r + 0.5)), 1.0 + 2.0 * (r - e));
  const double res_wide = scale2(r - e + 1.0, k) - 1.0;  // k < 0 or k > 56
  const double twopk = pow2i(k), twomk = pow2i(-k);
  const double res_lt20 = (r - e + (1.0 - twomk)) * twopk;
  const double res_ge20 = (r - (e + twomk) + 1.0) * twopk;
  double res = sel(k < 20, res_lt20, res_ge20);
  res = sel((uint64_t)k > 56, res_wide, res);  // k < 0 or k > 56
  res = sel(k == 1, res_k1, res);
  res = sel(k == -1, res_km1, res);
  res = sel(k == 0, res_k0, res);
  return sel(hx < 0x3c900000u, x, res);  // |x| < 2^-54: x
}

GPTC_HD GPTC_INLINE double expm1_d(double x) {
  const double o_threshold = 7.09782712893383973096e+02;
  const uint64_t ux = bits(x);
  // |x| >= 56*ln2: nan -> nan, negative -> -1, above o_threshold -> inf; the main path
  // runs on 0 for these.
  const bool neg_big = (ux >> 32) >= 0xc043687Au;  // x <= -56*ln2 (or a negative nan)
  double res = expm1_main(sel(is_nan(x), 0.0, sel(neg_big, 0.0, sel(x > o_threshold, 0.0, x))));
  res = sel(x > o_threshold, inf_d(), res);
  res = sel(neg_big, -1.0, res);
  return sel(is_nan(x), x + x, res);
}

// tanh(x) from expm1 in three ranges (musl's scheme, <= 2 ulp).
GPTC_HD GPTC_INLINE double tanh_d(double x) {
  const uint64_t ux = bits(x);
  const bool sign = (ux >> 63) != 0;
  const uint64_t ua = ux & 0x7fffffffffffffffull;
  const double ax = from_bits(ua);  // |x|
  const uint64_t w = ua >> 32;
  // One expm1 serves every range: expm1(2|x|) above log(5/3)/2, expm1(-2|x|) below.
  const double two_ax = 2.0 * ax, minus_two_ax = -2.0 * ax;
  // (|2x| <= 40 is never special for expm1; above |x| = 20 it runs on 0, unused.)
  const double arg = sel(w > 0x3fd058aeu, two_ax, minus_two_ax);
  const double em = expm1_main(sel(w > 0x40340000u, 0.0, arg));
  // ... and one quotient: 2/(em+2) above log(3)/2, em/(em+2) below; fdlibm's -em/(em+2)
  // is exactly -(em/(em+2)).
  const bool upper = w > 0x3fe193eau;
  const double q = sel(upper, 2.0, em) / (em + 2.0);
  double t = sel(w >= 0x00100000u, -q, ax);          // normal; else subnormal or zero: x
  t = sel(w > 0x3fd058aeu, q, t);                    // |x| > log(5/3)/2 ~= 0.2554
  t = sel(upper, 1.0 - q, t);                        // |x| > log(3)/2 ~= 0.5493
  t = sel(w > 0x40340000u, sel(is_nan(ax), ax + ax, 1.0), t);  // |x| > 20 or nan
  return sel(sign, -t, t);
}

// erf(x): rational approximations on [0, 0.84375), [0.84375, 1.25), and erfc-based
// exp(-x^2 - 0.5625 + R/S)/x forms on [1.25, 6); +-1 beyond.
GPTC_HD GPTC_INLINE double erf_d(double x) {
  const double erx = 8.45062911510467529297e-01, efx = 1.28379167095512586316e-01,
               efx8 = 1.02703333676410069053e+00;
  const double pp0 = 1.28379167095512558561e-01, pp1 = -3.25042107247001499370e-01,
               pp2 = -2.84817495755985104766e-02, pp3 = -5.77027029648944159157e-03,
               pp4 = -2.37630166566501626084e-05, qq1 = 3.97917223959155352819e-01,
               qq2 = 6.50222499887672944485e-02, qq3 = 5.08130628187576562776e-03,
               qq4 = 1.32494738004321644526e-04, qq5 = -3.96022827877536812320e-06;
  const double pa0 = -2.36211856075265944077e-03, pa1 = 4.14856118683748331666e-01,
               pa2 = -3.72207876035701323847e-01, pa3 = 3.18346619901161753674e-01,
               pa4 = -1.10894694282396677476e-01, pa5 = 3.54783043256182359371e-02,
               pa6 = -2.16637559486879084300e-03, qa1 = 1.06420880400844228286e-01,
               qa2 = 5.40397917702171048937e-01, qa3 = 7.18286544141962662868e-02,
               qa4 = 1.26171219808761642112e-01, qa5 = 1.36370839120290507362e-02,
               qa6 = 1.19844998467991074170e-02;
  const double ra0 = -9.86494403484714822705e-03, ra1 = -6.93858572707181764372e-01,
               ra2 = -1.05586262253232909814e+01, ra3 = -6.23753324503260060396e+01,
               ra4 = -1.62396669462573470355e+02, ra5 = -1.84605092906711035994e+02,
               ra6 = -8.12874355063065934246e+01, ra7 = -9.81432934416914548592e+00,
               sa1 = 1.96512716674392571292e+01, sa2 = 1.37657754143519042600e+02,
               sa3 = 4.34565877475229228821e+02, sa4 = 6.45387271733267880336e+02,
               sa5 = 4.29008140027567833386e+02, sa6 = 1.08635005541779435134e+02,
               sa7 = 6.57024977031928170135e+00, sa8 = -6.04244152148580987438e-02;
  const double rb0 = -9.86494292470009928597e-03, rb1 = -7.99283237680523006574e-01,
               rb2 = -1.77579549177547519889e+01, rb3 = -1.60636384855821916062e+02,
               rb4 = -6.37566443368389627722e+02, rb5 = -1.02509513161107724954e+03,
               rb6 = -4.83519191608651397019e+02, sb1 = 3.03380607434824582924e+01,
               sb2 = 3.25792512996573918826e+02, sb3 = 1.53672958608443695994e+03,
               sb4 = 3.19985821950859553908e+03, sb5 = 2.55305040643316442583e+03,
               sb6 = 4.74528541206955367215e+02, sb7 = -2.24409524465858183362e+01;
  const uint64_t ux = bits(x);
  const bool negative = (ux >> 63) != 0;
  const uint64_t ix = (ux >> 32) & 0x7fffffffu;
  const double ax = fabs_d(x);
  // |x| < 2^-28 (below 2^-1015 scaled by 8 to avoid underflow).
  const double res_tiny = x + efx * x;
  const double res_sub = 0.125 * (8.0 * x + efx8 * x);
  // The three rational forms (one per range below) share one division: every range's
  // numerator and denominator are computed, and the lane's pair is selected and divided.
  // |x| < 0.84375: in x^2.
  const double z = x * x;
  const double rs = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)));
  const double ss = 1.0 + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))));
  // 0.84375 <= |x| < 1.25: in |x| - 1.
  const double sm = ax - 1.0;
  const double P =
      pa0 + sm * (pa1 + sm * (pa2 + sm * (pa3 + sm * (pa4 + sm * (pa5 + sm * pa6)))));
  const double Q =
      1.0 + sm * (qa1 + sm * (qa2 + sm * (qa3 + sm * (qa4 + sm * (qa5 + sm * qa6)))));
  // 1.25 <= |x| < 6: in 1/x^2, two forms split at 1/0.35.
  const double s = 1.0 / (ax * ax);
  const double Ra =
      ra0 + s * (ra1 + s * (ra2 + s * (ra3 + s * (ra4 + s * (ra5 + s * (ra6 + s * ra7))))));
  const double Sa = 1.0 + s * (sa1 + s * (sa2 + s * (sa3 + s * (sa4 + s * (sa5 + s * (sa6 +
                    s * (sa7 + s * sa8)))))));
  const double Rb = rb0 + s * (rb1 + s * (rb2 + s * (rb3 + s * (rb4 + s * (rb5 + s * rb6)))));
  const double Sb =
      1.0 + s * (sb1 + s * (sb2 + s * (sb3 + s * (sb4 + s * (sb5 + s * (sb6 + s * sb7))))));
  const bool small = ix < 0x3feb0000u, mid = ix < 0x3ff40000u, near = ix < 0x4006DB6Eu;
  const double quo = sel(small, rs, sel(mid, P, sel(near, Ra, Rb))) /
                     sel(small, ss, sel(mid, Q, sel(near, Sa, Sb)));
  const double res_small = x + x * quo;
  const double res_mid = sel(negative, -erx - quo, erx + quo);
  const double zt = from_bits(bits(ax) & 0xffffffff00000000ull);  // |x| with the low word cleared
  // exp_d of |a1| < 37 and |a2| < 1 (on |x| < 6; 0 elsewhere, where the result is unused).
  const bool below6 = ix < 0x40180000u;
  const double a1 = -zt * zt - 0.5625, a2 = (zt - ax) * (zt + ax) + quo;
  const double et = exp_d_mid(sel(below6, a1, 0.0)) * exp_d_mid(sel(below6, a2, 0.0));
  const double ex = et / ax;
  const double res_tail = sel(negative, ex - 1.0, 1.0 - ex);
  double res = sel(negative, -1.0, 1.0);  // |x| >= 6, inf
  res = sel(below6, res_tail, res);
  res = sel(mid, res_mid, res);
  res = sel(small, res_small, res);
  res = sel(ix < 0x3e300000u, res_tiny, res);
  res = sel(ix < 0x00800000u, res_sub, res);
  return sel(is_nan(x), x + x, res);
}

// ---------------------------------------------------------------------------------------
// Single-precision kernels: float arithmetic throughout (16 lanes per AVX-512 vector, no
// double division), branch-free like the double ones.
// ---------------------------------------------------------------------------------------
GPTC_HD GPTC_INLINE uint32_t mask_of32(bool c) { return (uint32_t)0 - (uint32_t)c; }
GPTC_HD GPTC_INLINE float sel(bool c, float a, float b) {
  const uint32_t m = mask_of32(c);
  return from_bits32((bits(a) & m) | (bits(b) & ~m));
}
GPTC_HD GPTC_INLINE int32_t sel(bool c, int32_t a, int32_t b) {
  const uint32_t m = mask_of32(c);
  return (int32_t)(((uint32_t)a & m) | ((uint32_t)b & ~m));
}
// 2^k for -126 <= k <= 127, built from bits (exact).
GPTC_HD GPTC_INLINE float pow2f(int32_t k) { return from_bits32((uint32_t)(127 + k) << 23); }

// exp(x) for float x: x = k*ln2 + r with k = rint(x/ln2) (|r| <= ln2/2, Cody-Waite with
// ln2 in two parts, the first exact times any k here); exp(r) = 1 + r + r^2 * P(r), P a
// degree-5 minimax polynomial (Cephes expf's); the result y*2^k as y*2^(k/2)*2^(k-k/2),
// whose first product is exact, so a subnormal result is rounded once.
// Its constants, which its vector form (exp8, AVX2) shares: the main path runs on x with
// |x| < 104 (bits below kExpMain; k in [-150, 150]), else on 0; adding kExpShifter (1.5 *
// 2^23) rounds to an integer (even); above kExpOver exp(x) > FLT_MAX, below kExpUnder
// exp(x) < FLT_TRUE_MIN/2.
constexpr float kExpLn2Hi = 0.693359375f, kExpLn2Lo = -2.12194440e-4f,
                kExpInvLn2 = 1.44269504088896341f, kExpShifter = 12582912.0f;
constexpr float kExpP0 = 1.9875691500e-4f, kExpP1 = 1.3981999507e-3f, kExpP2 = 8.3334519073e-3f,
                kExpP3 = 4.1665795894e-2f, kExpP4 = 1.6666665459e-1f, kExpP5 = 5.0000001201e-1f;
constexpr float kExpOver = 88.72283935546875f, kExpUnder = -103.972076416015625f;
constexpr uint32_t kExpMain = 0x42d00000u;
GPTC_HD GPTC_INLINE float exp_f(float x) {
  const uint32_t ux = bits(x), ua = ux & 0x7fffffffu;
  const float xm = sel(ua < kExpMain, x, 0.0f);
  const float kf = (xm * kExpInvLn2 + kExpShifter) - kExpShifter;
  const float r = (xm - kf * kExpLn2Hi) - kf * kExpLn2Lo;
  const float r2 = r * r;
  const float p =
      kExpP5 + r * (kExpP4 + r * (kExpP3 + r * (kExpP2 + r * (kExpP1 + r * kExpP0))));
  const float y = (r2 * p + r) + 1.0f;
  const int32_t k = (int32_t)kf, ka = k / 2;
  float res = y * pow2f(ka) * pow2f(k - ka);
  res = sel(x > kExpOver, inf_f(), res);
  res = sel(x < kExpUnder, 0.0f, res);
  return sel(x != x, x + x, res);
}

// erf(x) for float x: fdlibm's erf in float (its coefficients rounded to float, as in
// FreeBSD's s_erff.c): x + x*R(x^2)/S(x^2) below 0.84375, erx + P(|x|-1)/Q(|x|-1) below
// 1.25, 1 - exp(-z^2 - 0.5625) * exp((z-|x|)(z+|x|) + R/S)/|x| below 6 (z = |x| with its low
// 12 bits cleared, so z*z is exact), +-1 beyond. Branch-free: erf_f_low covers |x| < 1.25
// (both rational forms computed, the lane's one divided), erf_f_high the rest (inf and NaN
// too), and erf_f takes the lane's one; erf_n runs erf_f_high only on the lanes that need it.
GPTC_HD GPTC_INLINE bool erf_f_is_high(float x) { return (bits(x) & 0x7fffffffu) >= 0x3fa00000u; }

// erf(x) for |x| < 0.84375 given quo = R(x^2)/S(x^2): x + x*quo, and its forms for tiny x.
GPTC_HD GPTC_INLINE float erf_f_small_given(float x, uint32_t ix, float quo) {
  const float efx = 1.28379167095512586316e-01f, efx8 = 1.02703333676410069053e+00f;
  const float res = sel(ix < 0x31800000u, x + efx * x, x + x * quo);  // |x| < 2^-28
  return sel(ix < 0x04000000u, 0.125f * (8.0f * x + efx8 * x), res);  // avoids underflow
}
// R(z) and S(z) of the range |x| < 0.84375 (z = x^2).
GPTC_HD GPTC_INLINE void erf_f_small_rs(float z, float& rs, float& ss) {
  const float pp0 = 1.28379167095512558561e-01f, pp1 = -3.25042107247001499370e-01f,
               pp2 = -2.84817495755985104766e-02f, pp3 = -5.77027029648944159157e-03f,
               pp4 = -2.37630166566501626084e-05f, qq1 = 3.97917223959155352819e-01f,
               qq2 = 6.50222499887672944485e-02f, qq3 = 5.08130628187576562776e-03f,
               qq4 = 1.32494738004321644526e-04f, qq5 = -3.96022827877536812320e-06f;
  rs = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)));
  ss = 1.0f + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))));
}
// erf(x) for |x| < 0.84375 (other x: some finite value): erf_f_low's bits there, without
// the rational form of [0.84375, 1.25). (erf_n takes it for runs with no larger argument.)
GPTC_HD GPTC_INLINE float erf_f_small(float x) {
  float rs, ss;
  erf_f_small_rs(x * x, rs, ss);
  return erf_f_small_given(x, bits(x) & 0x7fffffffu, rs / ss);
}

// erf(x) for |x| < 1.25 (other x: some finite value).
GPTC_HD GPTC_INLINE float erf_f_low(float x) {
  const float erx = 8.45062911510467529297e-01f;
  const float pa0 = -2.36211856075265944077e-03f, pa1 = 4.14856118683748331666e-01f,
               pa2 = -3.72207876035701323847e-01f, pa3 = 3.18346619901161753674e-01f,
               pa4 = -1.10894694282396677476e-01f, pa5 = 3.54783043256182359371e-02f,
               pa6 = -2.16637559486879084300e-03f, qa1 = 1.06420880400844228286e-01f,
               qa2 = 5.40397917702171048937e-01f, qa3 = 7.18286544141962662868e-02f,
               qa4 = 1.26171219808761642112e-01f, qa5 = 1.36370839120290507362e-02f,
               qa6 = 1.19844998467991074170e-02f;
  const uint32_t ux = bits(x), ix = ux & 0x7fffffffu;
  const bool negative = (ux >> 31) != 0;
  const float ax = from_bits32(ix);
  float rs, ss;
  erf_f_small_rs(x * x, rs, ss);
  const float sm = ax - 1.0f;
  const float P = pa0 + sm * (pa1 + sm * (pa2 + sm * (pa3 + sm * (pa4 + sm * (pa5 + sm * pa6)))));
  const float Q =
      1.0f + sm * (qa1 + sm * (qa2 + sm * (qa3 + sm * (qa4 + sm * (qa5 + sm * qa6)))));
  const bool small = ix < 0x3f580000u;
  const float quo = sel(small, rs, P) / sel(small, ss, Q);
  return sel(small, erf_f_small_given(x, ix, quo), sel(negative, -erx - quo, erx + quo));
}

// erf(x) for |x| >= 1.25, inf and NaN (other x: some finite value).
GPTC_HD GPTC_INLINE float erf_f_high(float x) {
  const float ra0 = -9.86494403484714822705e-03f, ra1 = -6.93858572707181764372e-01f,
               ra2 = -1.05586262253232909814e+01f, ra3 = -6.23753324503260060396e+01f,
               ra4 = -1.62396669462573470355e+02f, ra5 = -1.84605092906711035994e+02f,
               ra6 = -8.12874355063065934246e+01f, ra7 = -9.81432934416914548592e+00f,
               sa1 = 1.96512716674392571292e+01f, sa2 = 1.37657754143519042600e+02f,
               sa3 = 4.34565877475229228821e+02f, sa4 = 6.45387271733267880336e+02f,
               sa5 = 4.29008140027567833386e+02f, sa6 = 1.08635005541779435134e+02f,
               sa7 = 6.57024977031928170135e+00f, sa8 = -6.04244152148580987438e-02f;
  const float rb0 = -9.86494292470009928597e-03f, rb1 = -7.99283237680523006574e-01f,
               rb2 = -1.77579549177547519889e+01f, rb3 = -1.60636384855821916062e+02f,
               rb4 = -6.37566443368389627722e+02f, rb5 = -1.02509513161107724954e+03f,
               rb6 = -4.83519191608651397019e+02f, sb1 = 3.03380607434824582924e+01f,
               sb2 = 3.25792512996573918826e+02f, sb3 = 1.53672958608443695994e+03f,
               sb4 = 3.19985821950859553908e+03f, sb5 = 2.55305040643316442583e+03f,
               sb6 = 4.74528541206955367215e+02f, sb7 = -2.24409524465858183362e+01f;
  const uint32_t ux = bits(x), ix = ux & 0x7fffffffu;
  const bool negative = (ux >> 31) != 0;
  // 1/x^2 on the range that uses it (1.25 <= |x| < 6), else on 1.
  const float at = sel(ix >= 0x3fa00000u && ix < 0x40c00000u, from_bits32(ix), 1.0f);
  const float s = 1.0f / (at * at);
  const float Ra =
      ra0 + s * (ra1 + s * (ra2 + s * (ra3 + s * (ra4 + s * (ra5 + s * (ra6 + s * ra7))))));
  const float Sa = 1.0f + s * (sa1 + s * (sa2 + s * (sa3 + s * (sa4 + s * (sa5 + s * (sa6 +
                   s * (sa7 + s * sa8)))))));
  const float Rb = rb0 + s * (rb1 + s * (rb2 + s * (rb3 + s * (rb4 + s * (rb5 + s * rb6)))));
  const float Sb =
      1.0f + s * (sb1 + s * (sb2 + s * (sb3 + s * (sb4 + s * (sb5 + s * (sb6 + s * sb7))))));
  const bool near = ix < 0x4036db6du;
  const float quo = sel(near, Ra, Rb) / sel(near, Sa, Sb);
  const float zt = from_bits32(bits(at) & 0xffffe000u);
  const float et = exp_f(-zt * zt - 0.5625f) * exp_f((zt - at) * (zt + at) + quo);
  const float ex = et / at;
  const float res = sel(ix < 0x40c00000u, sel(negative, ex - 1.0f, 1.0f - ex),
                        sel(negative, -1.0f, 1.0f));  // |x| >= 6, inf: +-1
  return sel(x != x, x + x, res);
}

GPTC_HD GPTC_INLINE float erf_f(float x) {
  return sel(erf_f_is_high(x), erf_f_high(x), erf_f_low(x));
}

// sin and cos: x = n pi/2 + r, |r| <= pi/4, with pi/2 cut into five 24-bit pieces (Cody and
// Waite), so that each n * piece is exact for |n| < 2^28 and each subtraction exact where r
// is small; then fdlibm's polynomials for sin and cos on [-pi/4, pi/4], chosen and signed
// by n mod 4. Without a Payne-Hanek reduction the range stops at |x| = 2^28: from there on
// (and for inf) the result is NaN.
struct SinCos {
  double s, c;  // sin(x), cos(x)
};
GPTC_HD GPTC_INLINE SinCos sincos_d(double x) {
  const double invpio2 = 6.36619772367581382433e-01;
  const double p1 = 0x1.921fb4p+0, p2 = 0x1.4442d0p-24, p3 = 0x1.846988p-48,
               p4 = 0x1.8cc516p-72, p5 = 0x1.01b838p-96;  // pi/2 = p1 + ... + p5 + 1.2e-36
  const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
               S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
               S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
  const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
               C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
               C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
  const bool big = !(fabs_d(x) < 268435456.0);  // 2^28, inf or NaN
  const double xs = sel(big, 0.0, x);
  const double shifter = 6755399441055744.0;    // 1.5 * 2^52: rounds to the nearest integer
  const double n = (xs * invpio2 + shifter) - shifter;
  const double r = ((((xs - n * p1) - n * p2) - n * p3) - n * p4) - n * p5;
  const double z = r * r;
  const double sr = r + r * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))));
  const double cr = 1.0 - 0.5 * z + z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
  const int64_t q = (int64_t)n & 3;
  // n mod 4 = 0: (s, c); 1: (c, -s); 2: (-s, -c); 3: (-c, s).
  double sn = sel((q & 1) != 0, cr, sr), cs = sel((q & 1) != 0, sr, cr);
  sn = sel((q & 2) != 0, -sn, sn);
  cs = sel(((q + 1) & 2) != 0, -cs, cs);
  const bool tiny = fabs_d(x) < 7.450580596923828125e-09;  // 2^-27: sin x = x (and -0 stays -0)
  return {sel(big, nan_d(), sel(tiny, x, sn)), sel(big, nan_d(), cs)};
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Public elementary functions.
// ---------------------------------------------------------------------------------------
GPTC_HD GPTC_INLINE double exp(double x) { return detail::exp_d(x); }
GPTC_HD GPTC_INLINE double log(double x) { return detail::log_d(x); }
GPTC_HD GPTC_INLINE double tanh(double x) { return detail::tanh_d(x); }
GPTC_HD GPTC_INLINE double erf(double x) { return detail::erf_d(x); }
// float exp and erf (the ones a GPT's softmax, attention and GELU spend their time in) are
// float arithmetic, within 1 ulp; log and tanh evaluate in double and round once.
GPTC_HD GPTC_INLINE float exp(float x) { return detail::exp_f(x); }
GPTC_HD GPTC_INLINE float log(float x) { return (float)detail::log_d((double)x); }
GPTC_HD GPTC_INLINE float tanh(float x) { return (float)detail::tanh_d((double)x); }
GPTC_HD GPTC_INLINE float erf(float x) { return detail::erf_f(x); }

// IEEE sqrt (correctly rounded on the CPU and on CUDA with the default -prec-sqrt=true).
GPTC_HD inline float sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
GPTC_HD inline double sqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}
GPTC_HD inline float rsqrt(float x) { return 1.0f / gptc::sqrt(x); }
GPTC_HD inline double rsqrt(double x) { return 1.0 / gptc::sqrt(x); }
// sin and cos in double (float: rounded once), detail::sincos_d's range.
GPTC_HD GPTC_INLINE double sin(double x) { return detail::sincos_d(x).s; }
GPTC_HD GPTC_INLINE double cos(double x) { return detail::sincos_d(x).c; }
GPTC_HD GPTC_INLINE float sin(float x) { return (float)detail::sincos_d((double)x).s; }
GPTC_HD GPTC_INLINE float cos(float x) { return (float)detail::sincos_d((double)x).c; }
// |x|: the sign bit cleared (|-0| = +0, NaN stays NaN), exact on both targets.
GPTC_HD inline float abs(float x) { return ::fabsf(x); }
GPTC_HD inline double abs(double x) { return ::fabs(x); }
// 1 / (1 + exp(-x)): 0 where exp(-x) overflows, 1 where it underflows.
GPTC_HD GPTC_INLINE float sigmoid(float x) { return 1.0f / (1.0f + gptc::exp(-x)); }
GPTC_HD GPTC_INLINE double sigmoid(double x) { return 1.0 / (1.0 + gptc::exp(-x)); }

// Explicit fused multiply-add (one rounding), the only place fma is allowed to appear.
GPTC_HD inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return ::fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
GPTC_HD inline double fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// pow(x, y). Small integer exponents (|y| <= 64) use binary powering (pow(x,2) == x*x
// exactly, pow(x,3) == x*(x*x)); y == 0.5 is sqrt; otherwise exp(y*log|x|) with C's sign
// and special-value rules for the common cases (x < 0 needs an integer y, else nan).
GPTC_HD inline double pow(double x, double y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (detail::is_nan(x) || detail::is_nan(y)) return x + y;
  if (y == 0.5) {
    if (x == -detail::inf_d()) return detail::inf_d();
    return gptc::sqrt(x) + 0.0;  // + 0.0 turns sqrt(-0) = -0 into pow's +0
  }
  double ay = detail::fabs_d(y);
  bool is_int = ay < 4503599627370496.0 ? (double)(int64_t)y == y : ay != detail::inf_d();
  if (is_int && ay <= 64.0) {
    int64_t n = (int64_t)ay;
    double r = 1.0, b = x;
    while (n) {
      if (n & 1) r = r * b;
      n >>= 1;
      if (n) b = b * b;
    }
    return y < 0 ? 1.0 / r : r;
  }
  bool odd = is_int && ay < 9007199254740992.0 && (((int64_t)ay) & 1);
  double ax = detail::fabs_d(x);
  double r;
  if (ax == 0.0) r = y > 0 ? 0.0 : detail::inf_d();
  else r = detail::exp_d(y * detail::log_d(ax));
  if (x < 0 || (x == 0.0 && (detail::bits(x) >> 63))) {
    // (-inf) ** y for a y that is not an integer: +inf for y > 0, +0 below (C's and PyTorch's)
    if (!is_int) return x == 0.0 || x == -detail::inf_d() ? r : detail::nan_d();
    return odd ? -r : r;
  }
  return r;
}
GPTC_HD inline float pow(float x, float y) { return (float)gptc::pow((double)x, (double)y); }

// GELU, exact (erf) form: 0.5*x*(1 + erf(x/sqrt(2))); x/sqrt(2) is computed as x*(1/sqrt(2)).
// gelu_erf_of is that erf, the one value the GELU and its gradient share (gpt.gelu_keep_erf
// keeps it); gelu_erf_given takes it computed elsewhere (the array form's, in bulk).
template <class T>
GPTC_HD GPTC_INLINE T gelu_erf_of(T x) {
  return gptc::erf(x * T(0.70710678118654752440));
}
template <class T>
GPTC_HD GPTC_INLINE T gelu_erf_given(T x, T e) {
  return T(0.5) * x * (T(1) + e);
}
GPTC_HD GPTC_INLINE float gelu_erf(float x) { return gelu_erf_given(x, gelu_erf_of(x)); }
GPTC_HD GPTC_INLINE double gelu_erf(double x) { return gelu_erf_given(x, gelu_erf_of(x)); }
// GELU, tanh form: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
GPTC_HD GPTC_INLINE float gelu_tanh(float x) {
  float inner = 0.79788456080286535588f * (x + 0.044715f * (x * x * x));
  return 0.5f * x * (1.0f + gptc::tanh(inner));
}
GPTC_HD GPTC_INLINE double gelu_tanh(double x) {
  double inner = 0.79788456080286535588 * (x + 0.044715 * (x * x * x));
  return 0.5 * x * (1.0 + gptc::tanh(inner));
}

// NaN-propagating max/min (either operand NaN -> NaN), used by reduce_max.
template <class T>
GPTC_HD inline T maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <class T>
GPTC_HD inline T minimum(T a, T b) { return (a != a || a < b) ? a : b; }

// The identity of max for a type: -inf for floating point, the lowest value for integers.
template <class T> GPTC_HD inline T max_identity() { return T(-detail::inf_d()); }
template <> GPTC_HD inline int64_t max_identity<int64_t>() { return INT64_MIN; }
template <> GPTC_HD inline int32_t max_identity<int32_t>() { return INT32_MIN; }

// ---------------------------------------------------------------------------------------
// Errors found in data (an index out of range). A kernel reports and carries on with a
// safe value, so nothing reads out of bounds; the entry returns the first message to the
// runtime, which fails the run with it. (CPU only; CUDA gets a device flag later.)
// ---------------------------------------------------------------------------------------
// One slot per kernels.so, shared by the threads of a GPTC_FOR: the first report wins.
inline const char*& error_slot() {
  static const char* slot = nullptr;
  return slot;
}
inline void report_error(const char* message) {
  const char* expected = nullptr;
  __atomic_compare_exchange_n(&error_slot(), &expected, message, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
}
inline const char* take_error() { return __atomic_exchange_n(&error_slot(), nullptr, __ATOMIC_SEQ_CST); }
// Whether every id of ids[0, n) lies in [0, bound) or, with `ignore` (cross_entropy's
// ignore_index), equals it. The entry checks the indices its caller gave this way before
// any kernel runs, so that a step with a bad one fails whole: the kernels' own checks come
// after parameters and optimizer state may have been updated.
inline bool ids_in_range(const int64_t* ids, int64_t n, int64_t bound, const int64_t* ignore) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i)
    ok &= (ids[i] >= 0 && ids[i] < bound) || (ignore && ids[i] == *ignore);
  return ok;
}

// gptc compile --sanitize: while a step runs, the arena's bytes that no buffer holds (the
// redzones gpt-plan-memory left between buffers) are poisoned, so that AddressSanitizer
// reports a kernel that reads or writes past its buffer instead of letting it touch the
// next one. Without -fsanitize=address it does nothing.
struct ArenaRedzones {
  ArenaRedzones(char* arena, int64_t bytes, const int64_t (*gaps)[2], int64_t n)
      : arena(arena), bytes(bytes) {
#if defined(__SANITIZE_ADDRESS__)
    for (int64_t i = 0; i < n; ++i) __asan_poison_memory_region(arena + gaps[i][0], gaps[i][1]);
#else
    (void)gaps, (void)n;
#endif
  }
  ~ArenaRedzones() {
#if defined(__SANITIZE_ADDRESS__)
    __asan_unpoison_memory_region(arena, bytes);
#endif
  }
  ArenaRedzones(const ArenaRedzones&) = delete;
  ArenaRedzones& operator=(const ArenaRedzones&) = delete;
  char* arena;
  int64_t bytes;
};

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

// ---------------------------------------------------------------------------------------
// bf16: storage only (arithmetic happens in float).
// ---------------------------------------------------------------------------------------
struct bf16 {
  uint16_t bits;
};

// float -> bf16, round to nearest, ties to even; NaN stays a (quiet) NaN, overflow -> inf.
GPTC_HD inline bf16 to_bf16(float f) {
  uint32_t u = detail::bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{(uint16_t)((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{(uint16_t)(u >> 16)};
}
// bf16 -> float, exact.
GPTC_HD inline float to_float(bf16 b) { return detail::from_bits32((uint32_t)b.bits << 16); }

namespace detail {
// 1/sqrt(2 pi), rounded to T where it is used (gelu_erf_grad_given and its AVX2 array form).
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
}  // namespace detail
// gelu's derivatives, for gpt.gelu_grad: g * d/dx gelu(x), same formulas on every target.
// gelu_erf_grad_given takes e = erf(x * T(1/sqrt(2))) computed elsewhere.
template <class T>
GPTC_HD GPTC_INLINE T gelu_erf_grad_given(T g, T x, T e) {
  const T inv_sqrt_2pi = T(detail::kInvSqrt2Pi);
  T cdf = T(0.5) * (T(1) + e);
  T pdf = inv_sqrt_2pi * gptc::exp(T(-0.5) * x * x);
  return g * (cdf + x * pdf);
}
template <class T>
GPTC_HD GPTC_INLINE T gelu_erf_grad(T g, T x) {
  return gelu_erf_grad_given(g, x, gelu_erf_of(x));
}
template <class T>
GPTC_HD GPTC_INLINE T gelu_tanh_grad(T g, T x) {
  const T k = T(0.79788456080286535588), c = T(0.044715);
  T t = gptc::tanh(k * (x + c * (x * x * x)));
  T du = k * (T(1) + T(3) * c * (x * x));
  return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
}

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

// ---------------------------------------------------------------------------------------
// Scratch: a per-thread buffer per slot, 64-byte aligned, grown once to the largest size a
// kernel asked for (packing panels, transposed keys, a matmul's transposed operand copied to
// rows, which the whole team reads). No allocation in steady state.
// ---------------------------------------------------------------------------------------
template <class T>
inline T* scratch(int slot, int64_t count) {
  static thread_local void* bufs[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  static thread_local int64_t sizes[5] = {0, 0, 0, 0, 0};
  const int64_t bytes = count * (int64_t)sizeof(T);
  if (sizes[slot] < bytes) {
    ::operator delete[](bufs[slot], std::align_val_t(64));
    bufs[slot] = ::operator new[](bytes, std::align_val_t(64));
    sizes[slot] = bytes;
  }
  return static_cast<T*>(bufs[slot]);
}

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
// dropout keep factors of row rr's keys j0..j0+n-1 to kf[0..n).
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
                            float* stats, Keep keep) {
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
      const typename W::V x = W::select(W::lt(W::set1(float(j0 + j)), visf),
                                        W::mul(W::load(p[j]), W::set1(scale)),
                                        W::set1(-INFINITY));
      W::store(p[j], x);
      mb = W::maximum(mb, x);
    }
    W::store(mn, mb);
    GPTC_SIMD for (int r = 0; r < L; ++r) {
      mn[r] = gptc::maximum(m[r], mn[r]);
      corr[r] = gptc::exp(m[r] - mn[r]);
    }
    exp_rows<L, false>(nkt, p[0], mn, 0.0f, nullptr);
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
    GPTC_SIMD for (int64_t c = 0; c < Dv; ++c) y[rr * ys + c] = accR[rr * Dv + c] / l[rr];
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
                                 int64_t dqs, float* dST, float* PKT, int64_t ldt, Keep keep) {
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
  for (int r = 0; r < L; ++r) {  // rows past the last: any finite values (never stored)
    m[r] = r < nr ? stats[2 * r] : 0.0f;
    l[r] = r < nr ? stats[2 * r + 1] : 1.0f;
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
                           Keep keep = {}) {
#if defined(GPTC_AVX2)
  if (S < kWideRowsFrom) {
    using W = detail::RowVec8;
    const int64_t h = W::kLanes;
    detail::attention_lanes<W>(nr < h ? nr : h, vis, S, D, Dv, scale, q, qs, k, ks, v, vs, y,
                               ys, stats, keep);
    if (nr > h)
      detail::attention_lanes<W>(nr - h, vis + h, S, D, Dv, scale, q + h * qs, qs, k, ks, v,
                                 vs, y + h * ys, ys, stats + 2 * h, detail::keep_from(keep, h));
    return;
  }
#endif
  detail::attention_lanes<detail::RowVec>(nr, vis, S, D, Dv, scale, q, qs, k, ks, v, vs, y, ys,
                                          stats, keep);
}

template <class Keep = NoKeep>
inline void attention_grad_rows(int64_t nr, const int64_t* vis, int64_t S, int64_t D,
                                int64_t Dv, float scale, const float* q, int64_t qs,
                                const float* k, int64_t ks, const float* v, int64_t vs,
                                const float* g, int64_t gs, const float* stats, float* dq,
                                int64_t dqs, float* dST, float* PKT, int64_t ldt,
                                Keep keep = {}) {
#if defined(GPTC_AVX2)
  if (S < kWideRowsFrom) {
    using W = detail::RowVec8;
    const int64_t h = W::kLanes;
    detail::attention_grad_lanes<W>(nr < h ? nr : h, vis, S, D, Dv, scale, q, qs, k, ks, v, vs,
                                    g, gs, stats, dq, dqs, dST, PKT, ldt, keep);
    if (nr > h)
      detail::attention_grad_lanes<W>(nr - h, vis + h, S, D, Dv, scale, q + h * qs, qs, k, ks,
                                      v, vs, g + h * gs, gs, stats + 2 * h, dq + h * dqs, dqs,
                                      dST + h, PKT + h, ldt, detail::keep_from(keep, h));
    return;
  }
#endif
  detail::attention_grad_lanes<detail::RowVec>(nr, vis, S, D, Dv, scale, q, qs, k, ks, v, vs,
                                               g, gs, stats, dq, dqs, dST, PKT, ldt, keep);
}
#endif

// ---------------------------------------------------------------------------------------
// Matmul: C[b, m, n] = sum_{k<K} A(b, m, k) * B(b, k, n), k = 0..K-1 in increasing order
// with one fma accumulator per element: the canonical matmul order, the same bits as
// dot_seq whatever the tiling, vector width or thread count.
//   A(b, m, k) = A[b*sab + m*sam + k*sak]    B(b, k, n) = B[b*sbb + k*sbk + n*sbn]
//   C is dense [batch, M, N]. An epilogue (MatmulEpilogue: a fused bias, dropout and
//   residual add) is applied to each element once its product is complete.
// On AVX-512 a 6x32 register tile runs over a packed 32-column panel of B, on AVX2 with FMA
// a 6x16 tile over a 16-column panel (each lane is one output element, so vectorising never
// reorders a sum, and both give dot_seq's bits); elsewhere, dot_seq per element.
// ---------------------------------------------------------------------------------------
// What a matmul applies to each finished product before storing it (gpt.matmul's
// epilogue, gpt-fuse-matmul-epilogue), in this order: + bias[n]; gpt.dropout's inverted
// dropout of result element i (its index in C, batch members one after another: the same
// draw and the same scaling); then addend[i] + that value. A null pointer skips its step.
// Each step is the unfused op's expression, so the bits are the unfused program's.
template <class T>
struct MatmulEpilogue {
  const T* addend = nullptr;     // like C
  const T* bias = nullptr;       // [N]
  const int64_t* rng = nullptr;  // [seed, step]: dropout with dropout_id, _p and _scale
  int64_t dropout_id = 0;
  float dropout_p = 0;
  T dropout_scale = 1;

  GPTC_HD bool any() const { return addend || bias || rng; }
  // The same steps for one product v of C's element i, in column col: the form a GPU
  // thread applies to each element it owns (gptc/cuda/matmul.cuh).
  GPTC_HD T apply_one(int64_t i, int64_t col, T v) const {
    if (bias) v = v + bias[col];
    if (rng)
      v = dropout_keep((uint64_t)rng[0], (uint64_t)rng[1], (uint64_t)dropout_id, (uint64_t)i,
                       dropout_p)
              ? v * dropout_scale
              : T(0);
    if (addend) v = addend[i] + v;
    return v;
  }
  // v[r * ldv + j] holds the product of C's element i0 + r * ldc + j, in column col0 + j,
  // for r < rows and j < n (a run of a row each). The masks of several rows are drawn
  // before any is applied, so that their Philox chains overlap.
  void apply(int64_t rows, int64_t i0, int64_t ldc, int64_t col0, int64_t n, T* v,
             int64_t ldv) const {
    if (rows <= 0 || n <= 0) return;
#if defined(__CUDACC__)
    // Element by element (dropout_keep_block, below, is the CPU's vector form of the draws).
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        v[r * ldv + j] = apply_one(i0 + r * ldc + j, col0 + j, v[r * ldv + j]);
#else
    if (bias)
      for (int64_t r = 0; r < rows; ++r)
        GPTC_SIMD for (int64_t j = 0; j < n; ++j)
          v[r * ldv + j] = v[r * ldv + j] + bias[col0 + j];
    if (rng) {
      constexpr int64_t kMax = 256;                  // masks drawn per pass
      const int64_t width = n < kMax ? n : kMax;     // of a row's run
      const int64_t per = kMax / width;              // rows
      alignas(64) uint32_t keep[kMax];
      for (int64_t j0 = 0; j0 < n; j0 += width) {
        const int64_t len = n - j0 < width ? n - j0 : width;
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
          const int64_t nr = rows - r0 < per ? rows - r0 : per;
          for (int64_t r = 0; r < nr; ++r)
            dropout_keep_block((uint64_t)rng[0], (uint64_t)rng[1], (uint64_t)dropout_id,
                               (uint64_t)(i0 + (r0 + r) * ldc + j0), len, dropout_p,
                               keep + r * width);
          for (int64_t r = 0; r < nr; ++r) {
            T* x = v + (r0 + r) * ldv + j0;
            const uint32_t* k = keep + r * width;
            GPTC_SIMD for (int64_t j = 0; j < len; ++j)
              x[j] = detail::sel(k[j] != 0, x[j] * dropout_scale, T(0));
          }
        }
      }
    }
    if (addend)
      for (int64_t r = 0; r < rows; ++r)
        GPTC_SIMD for (int64_t j = 0; j < n; ++j)
          v[r * ldv + j] = addend[i0 + r * ldc + j] + v[r * ldv + j];
#endif
  }
};

#if defined(GPTC_VECTOR_FORMS)
#define GPTC_TILED_MATMUL 1
#endif

#if defined(GPTC_TILED_MATMUL)
namespace detail {
constexpr int64_t kPanel = 2 * TileVec::kLanes;  // columns per packed panel (two vectors)
constexpr int64_t kRows = 6;                      // rows per register tile (12 accumulators)

// Rows [0, R) of a tile: acc[r] += a(r, k) * panel[k] for k in order. Stored as C's rows
// (ldc apart), or with CT as C's columns: the tile's row r, column j to C[j * ldc + r].
// The accumulators start from zero, or with Carry from C's rows (the same tile's sums over
// the k before this call, which it continues: the one fma chain, cut where k is blocked).
template <int R, bool CT = false, bool Carry = false>
inline void matmul_tile(int64_t K, const float* A, int64_t sam, int64_t sak,
                        const float* panel, float* C, int64_t ldc, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  W::V acc[R][2];
  if constexpr (Carry) {
    static_assert(!CT, "a carried tile is stored as C's rows");
    const W::Mask m0 = W::first(cols), m1 = W::first(cols - L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = cols == kPanel ? W::loadu(C + r * ldc) : W::load_first(C + r * ldc, m0);
      acc[r][1] = cols == kPanel ? W::loadu(C + r * ldc + L) : W::load_first(C + r * ldc + L, m1);
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = W::zero();
  }
  for (int64_t k = 0; k < K; ++k) {
    const W::V b0 = W::load(panel + k * kPanel);
    const W::V b1 = W::load(panel + k * kPanel + L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const W::V a = W::broadcast(A + r * sam + k * sak);
      acc[r][0] = W::fma(a, b0, acc[r][0]);
      acc[r][1] = W::fma(a, b1, acc[r][1]);
    }
  }
  if constexpr (CT) {
    float t[R][kPanel];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      W::store(t[r], acc[r][0]);
      W::store(t[r] + L, acc[r][1]);
    }
    for (int64_t j = 0; j < cols; ++j)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) C[j * ldc + r] = t[r][j];
    return;
  }
  // The panel's first `cols` columns.
  const W::Mask m0 = W::first(cols), m1 = W::first(cols - L);
  if (cols == kPanel) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      W::store(C + r * ldc, acc[r][0]);
      W::store(C + r * ldc + L, acc[r][1]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {  // masked stores past the columns
    W::store_first(C + r * ldc, m0, acc[r][0]);
    W::store_first(C + r * ldc + L, m1, acc[r][1]);
  }
}

// A batch whose members share B (sbb == 0) and whose A rows run on from one member into
// the next (sab == M * sam) is one product with batch * M rows: the same dots, bit for
// bit, with B's panels packed once instead of once per member.
inline void fold_batch(int64_t& batch, int64_t& M, int64_t& sab, int64_t sam, int64_t sbb) {
  if (batch > 1 && sbb == 0 && sab == M * sam) {
    M *= batch;
    batch = 1;
    sab = 0;
  }
}

// B's columns [0, cols) (element (k, j) at Bb[k * sbk + j * sbn]), k = 0..K-1, as a panel:
// panel[k * kPanel + j], zero past `cols`.
inline void pack_panel(int64_t K, const float* Bb, int64_t sbk, int64_t sbn, int64_t cols,
                       float* panel) {
  if (sbn == 1 && cols == kPanel) {  // rows of B are contiguous: copy them
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(panel + k * kPanel, Bb + k * sbk, sizeof(float) * kPanel);
  } else if (sbk == 1) {  // B transposed (a linear layer's weight): 16x16 register blocks
    transpose_keys<float>(cols, K, Bb, sbn, kPanel, panel);
  } else {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < kPanel; ++j)
        panel[k * kPanel + j] = j < cols ? Bb[k * sbk + j * sbn] : 0.0f;
  }
}

// tile(std::integral_constant<int, R>(), m) for rows [m, m + R) of [0, M): kRows at a time,
// then the rest (R a compile-time constant, so that each height has its register code).
template <class F>
inline void for_row_tiles(int64_t M, F&& tile) {
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows) tile(std::integral_constant<int, kRows>(), m);
  switch (M - m) {
    case 5: tile(std::integral_constant<int, 5>(), m); break;
    case 4: tile(std::integral_constant<int, 4>(), m); break;
    case 3: tile(std::integral_constant<int, 3>(), m); break;
    case 2: tile(std::integral_constant<int, 2>(), m); break;
    case 1: tile(std::integral_constant<int, 1>(), m); break;
    default: break;
  }
}

// A product's panel tasks: each member's output columns in panels of kPanel, and each panel's
// rows in `chunks` chunks of `rows` rows (the last may hold fewer). Rows are split only where
// that gives the busiest thread fewer rows to compute: the lm_head product's 65 columns are 3
// panels (the last one column, but a full tile's fmas), so on two threads one would take 2
// and the other 1; split in two, each takes 3 halves. On 16 threads a 384-column product's
// 12 panels would leave 4 idle; 4 chunks give each 3 tasks. A panel is packed once per task,
// so each chunk costs its packing again (counted as kPackRows rows). Which thread computes
// which element never changes its bits: each is the same k = 0..K-1 fma chain from zero.
struct PanelTasks {
  int64_t panels, members, chunks, rows;
  int64_t count() const { return chunks * members * panels; }
};
inline PanelTasks panel_tasks(int64_t batch, int64_t M, int64_t N, int64_t team) {
  constexpr int64_t kPackRows = 2 * kRows;
  const int64_t panels = (N + kPanel - 1) / kPanel, tasks = batch * panels;
  PanelTasks best{panels, batch, 1, M};
  int64_t bestLoad = (tasks + team - 1) / team * (M + kPackRows);
  for (int64_t c = 2; c <= team && c * kRows <= M; ++c) {
    const int64_t rows = ((M + c - 1) / c + kRows - 1) / kRows * kRows;
    const int64_t chunks = (M + rows - 1) / rows;
    const int64_t load = (chunks * tasks + team - 1) / team * (rows + kPackRows);
    if (load < bestLoad) best = {panels, batch, chunks, rows}, bestLoad = load;
  }
  return best;
}

// Task t of a product's PanelTasks g: output columns [n0, n0 + kPanel) of member b, rows
// [m0, m0 + g.rows) (chunks outermost, so that a thread's tasks share its rows of A). With CT
// (one member, no epilogue), the product is C's transpose: its element (m, n) is C[n * M + m].
template <bool CT = false>
inline void matmul_task(int64_t t, const PanelTasks& g, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t sab, int64_t sam, int64_t sak, const float* B,
                        int64_t sbb, int64_t sbk, int64_t sbn, float* C,
                        const MatmulEpilogue<float>* ep) {
  const int64_t perChunk = g.members * g.panels;
  const int64_t m0 = t / perChunk * g.rows, mc = M - m0 < g.rows ? M - m0 : g.rows;
  const int64_t b = t % perChunk / g.panels, n0 = t % g.panels * kPanel;
  const int64_t cols = N - n0 < kPanel ? N - n0 : kPanel;
  float* panel = gptc::scratch<float>(0, K * kPanel);
  pack_panel(K, B + b * sbb + n0 * sbn, sbk, sbn, cols, panel);
  const float* Ab = A + b * sab;
  const int64_t c0 = b * M * N + n0;  // C's index of the member's first element in the panel
  // A tile, then its epilogue on the rows just stored (still in L1), so that the tile's
  // register code is the same with an epilogue or without.
  auto tile = [&](auto rows, int64_t i) {
    constexpr int R = decltype(rows)::value;
    const int64_t m = m0 + i;
    if constexpr (CT) {
      matmul_tile<R, true>(K, Ab + m * sam, sam, sak, panel, C + n0 * M + m, M, cols);
      return;
    }
    float* Ct = C + c0 + m * N;
    matmul_tile<R>(K, Ab + m * sam, sam, sak, panel, Ct, N, cols);
    if (ep) ep->apply(R, c0 + m * N, N, n0, cols, Ct, N);
  };
  for_row_tiles(mc, tile);
}
}  // namespace detail

namespace detail {
// A transposed (sam == 1, sak > 1: a weight gradient's dY^T) spreads a tile's row over K rows
// of memory, a new cache line and page for each k, and the tile waits on memory
// (bench/NOTES.md, "matmul: transposed operands"). Such an A is first
// copied with its rows contiguous, once per product, by register-block transposes: a pass
// over A, and then the same dots of the same values, bit for bit. Not when A is small (at
// most 256K floats, 1 MB, a member): its rows then come from cache anyway, and the copy
// and its barriers cost more than they save (as the tiny model's weight gradients showed).
inline bool copies_a(int64_t M, int64_t K, int64_t sam, int64_t sak) {
  return sam == 1 && sak > 1 && M * K > (int64_t(1) << 18);
}

// The copy's rows are `copy_pitch(K)` floats apart: a pitch that is a multiple of 1 KB
// would put the 64 rows a copy block writes in at most 4 of L1's 64 sets, evicting one
// another's lines half-written; 64 bytes more spreads them (bench/NOTES.md, "matmul:
// transposed operands").
inline int64_t copy_pitch(int64_t K) { return K % 256 == 0 ? K + 16 : K; }

// Rows [0, n) of a transposed operand X (element (r, k) of member b at X[b * sxb + r + k * sxk])
// copied to rows copy_pitch(K) floats apart, by every thread of a parallel region; returns the
// copy. It goes into the scratch (slot 4) of whichever thread takes the `single`; the others
// get its address. Every thread grows its own slot first, so that all of them are grown in the
// first step, whichever thread the `single` falls to later: a step never allocates after that.
// The copy is complete when this returns (the loop's barrier); the caller's loop over the
// tasks ends in a barrier too, so every task is done before the scratch can be reused.
// (Splitting rows by thread instead, each copying its own rows, needs no barrier, but every
// thread then packs all of B, which was slower on the step's weight gradients.)
inline const float* copied_rows_ws(int64_t batch, int64_t n, int64_t K, const float* X,
                                   int64_t sxb, int64_t sxk) {
  const int64_t ld = copy_pitch(K);
  float* const mine = gptc::scratch<float>(4, batch * n * ld);
  float* rows = nullptr;
  GPTC_OMP("omp single copyprivate(rows)")
  rows = mine;
  const int64_t chunks = (n + 63) / 64;  // 64 rows of the copy per iteration
  GPTC_OMP("omp for schedule(static)")
  for (int64_t i = 0; i < batch * chunks; ++i) {
    const int64_t b = i / chunks, r0 = (i % chunks) * 64, rc = n - r0 < 64 ? n - r0 : 64;
    transpose_keys<float>(K, rc, X + b * sxb + r0, sxk, ld, rows + (b * n + r0) * ld);
  }
  return rows;
}

// The product with A copied to rows, called by every thread of a parallel region.
inline void matmul_copied_a_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                               int64_t sab, int64_t sak, const float* B, int64_t sbb,
                               int64_t sbk, int64_t sbn, float* C,
                               const MatmulEpilogue<float>* ep) {
  const int64_t ld = copy_pitch(K);
  const float* rows = copied_rows_ws(batch, M, K, A, sab, sak);
  int64_t sabRows = M * ld;
  fold_batch(batch, M, sabRows, ld, sbb);
  const PanelTasks g = panel_tasks(batch, M, N, gptc::team_size());
  GPTC_OMP("omp for schedule(static)")
  for (int64_t t = 0; t < g.count(); ++t)
    matmul_task(t, g, M, N, K, rows, sabRows, ld, 1, B, sbb, sbk, sbn, C, ep);
}

// The same product when B is the smaller operand and its rows are contiguous (one member, no
// epilogue: a weight gradient dY^T X whose layer widens, q/k/v's or the MLP's first): C^T =
// B^T A^T, with B^T copied to rows instead of A, and A's columns (contiguous) packed as the
// panels; each tile is stored as C's columns. Every element is the same fmas of the same
// products in the same k order (an fma's two factors swap, which changes no bit).
inline bool copies_b(int64_t batch, int64_t M, int64_t N, int64_t sbn,
                     const MatmulEpilogue<float>* ep) {
  return batch == 1 && !ep && sbn == 1 && N < M;
}
inline void matmul_copied_b_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sak,
                               const float* B, int64_t sbk, float* C) {
  const float* rows = copied_rows_ws(1, N, K, B, 0, sbk);
  const PanelTasks g = panel_tasks(1, N, M, gptc::team_size());
  GPTC_OMP("omp for schedule(static)")
  for (int64_t t = 0; t < g.count(); ++t)
    matmul_task<true>(t, g, N, M, K, rows, 0, copy_pitch(K), 1, A, 0, sak, 1, C, nullptr);
}

// The blocked order (BLIS's): k in blocks of at most kBlockDepth (one block up to K = 512);
// each thread takes a contiguous share of A's rows and, per block, packs all of B's panels
// itself (at most 512 x N floats, in its L2 and L3; where B's rows are contiguous, a row at
// a time into every panel), then goes through its rows in blocks of kBlockRows: it copies the
// block into 6-row micro-panels (kRows x depth, k-major: 192 KB at most, in L2) and runs
// every panel (depth x 16, at most 32 KB) over them. A tile past the first block continues
// from the sums C holds (matmul_tile's Carry): every output is still one k = 0..K-1 fma
// chain from zero, the same bits as the panel-task order above; the epilogue runs in the
// last block. The panel-task order reads all of A once per 16-column panel (for q/k/v at
// Shakespeare size, 72 times 1.5 MB) from the L3 that the machine's other tenants share;
// this order reads A once per k block and B once per row block, and was the faster one for
// AVX2's 16-column panels. It is AVX2's order only: with AVX-512's 32-column panels the
// panel-task order reads A half as often, and on an AVX-512 machine with 1 MB of L2 a core
// it was the faster one for every product timed, so AVX-512 builds keep it. Each thread
// packs B for itself, not a share of it for the team: the packing is a small part of the
// thread's fmas, and no thread then reads panels another core wrote, nor waits for the
// others at a barrier per block, which matters where the host places the two virtual CPUs
// far apart. (bench/NOTES.md, "matmul: loop order and blocking" and "matmul: splits and
// threading", has the measurements.)
constexpr int64_t kBlockRows = 96, kBlockDepth = 384;
constexpr bool kBlockedOrder = kPanel == 16;
inline bool blocks_k(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return kBlockedOrder && batch == 1 && N >= 8 * kPanel && M >= 2 * kBlockRows &&
         M * K >= (int64_t(1) << 16);
}
// Rows [m0, m0 + mc) of A, k in [k0, k0 + kc), as micro-panels: block[i * kc + k * kRows + r]
// = A(m0 + i + r, k0 + k), zero past the rows. (Writes up to 2 floats past the block: the
// scratch holds kPanel more.) Only the blocked order calls it, so only AVX2 builds run it.
inline void pack_rows(int64_t m0, int64_t mc, int64_t k0, int64_t kc, const float* A,
                      int64_t sam, int64_t sak, float* block) {
  for (int64_t i = 0; i < mc; i += kRows) {
    const int64_t R = mc - i < kRows ? mc - i : kRows;
    const float* a = A + (m0 + i) * sam + k0 * sak;
    float* mp = block + i * kc;
    int64_t k = 0;
#if defined(GPTC_AVX2)
    if (sak == 1) {  // rows contiguous: 6 rows x 8 k through registers, 8 x 6 stored
      for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          r[j] = j < R ? _mm256_loadu_ps(a + j * sam + k) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(mp + (k + c) * kRows, r[c]);  // 6 + 2 spare
      }
    }
    if (sam == 1) {  // A transposed (a weight gradient's dY^T): each k's R values contiguous
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)R),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      for (; k < kc; ++k)  // 8 lanes stored, the last 2 overwritten by the next k's
        _mm256_storeu_ps(mp + k * kRows, _mm256_maskload_ps(a + k * sak, live));
      continue;
    }
#endif
    for (; k < kc; ++k)
      for (int64_t r = 0; r < kRows; ++r) mp[k * kRows + r] = r < R ? a[r * sam + k * sak] : 0.0f;
  }
}
// A k block of B whose rows are contiguous (element (k, j) at Bk[k * sbk + j], k < kc)
// into every one of the block's panels (kc rows each, zero past N): each
// row read whole, once. (Packed a panel at a time, each row gave 64 bytes to a panel
// before the next row, 6 KB on, a miss per row that the prefetchers do not follow
// across pages; row by row is faster: bench/NOTES.md, "matmul: packing and prefetch".
// The forwards, whose B is transposed, keep the panel-at-a-time packing.) The same values
// in the same places.
inline void pack_panel_rows(int64_t kc, int64_t N, const float* Bk, int64_t sbk, float* packed) {
  const int64_t full = N / kPanel, left = N - full * kPanel;
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = Bk + k * sbk;
    for (int64_t p = 0; p < full; ++p)
      std::memcpy(packed + (p * kc + k) * kPanel, row + p * kPanel, sizeof(float) * kPanel);
    if (left) {
      float* last = packed + (full * kc + k) * kPanel;
      for (int64_t j = 0; j < kPanel; ++j) last[j] = j < left ? row[full * kPanel + j] : 0.0f;
    }
  }
}
inline void matmul_blocked_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam,
                              int64_t sak, const float* B, int64_t sbk, int64_t sbn, float* C,
                              const MatmulEpilogue<float>* ep) {
  const int64_t panels = (N + kPanel - 1) / kPanel;
  const int64_t depths = K <= 512 ? 1 : (K + kBlockDepth - 1) / kBlockDepth;
  const int64_t maxDepth = (K + depths - 1) / depths;
  // One iteration per thread: its contiguous share of the micro-panels (a static split;
  // which thread computes a row never changes its bits). It reads only its own scratch, so it
  // goes on to the region's next loop without waiting.
  const int team = gptc::team_size();
  GPTC_OMP("omp for schedule(static) nowait")
  for (int t = 0; t < team; ++t) {
    float* const packed = gptc::scratch<float>(4, panels * maxDepth * kPanel);
    float* const block = gptc::scratch<float>(0, kBlockRows * maxDepth + kPanel);
    const int64_t micro = (M + kRows - 1) / kRows;
    const int64_t lo = micro * t / team * kRows, hiRows = micro * (t + 1) / team * kRows;
    const int64_t hi = hiRows < M ? hiRows : M;
    for (int64_t d = 0; d < depths; ++d) {
      const int64_t k0 = K * d / depths, kc = K * (d + 1) / depths - k0;
      const bool first = d == 0, last = d == depths - 1;
      if (sbn == 1) {  // B's rows contiguous
        pack_panel_rows(kc, N, B + k0 * sbk, sbk, packed);
      } else {
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t n0 = p * kPanel;
          pack_panel(kc, B + k0 * sbk + n0 * sbn, sbk, sbn, N - n0 < kPanel ? N - n0 : kPanel,
                     packed + p * kc * kPanel);
        }
      }
      for (int64_t m0 = lo; m0 < hi; m0 += kBlockRows) {
        const int64_t mc = hi - m0 < kBlockRows ? hi - m0 : kBlockRows;
        pack_rows(m0, mc, k0, kc, A, sam, sak, block);
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t n0 = p * kPanel, cols = N - n0 < kPanel ? N - n0 : kPanel;
          const float* panel = packed + p * kc * kPanel;
          auto tile = [&](auto rows, int64_t i) {
            constexpr int R = decltype(rows)::value;
            const int64_t m = m0 + i;
            float* Ct = C + m * N + n0;
            if (first)
              matmul_tile<R>(kc, block + i * kc, 1, kRows, panel, Ct, N, cols);
            else
              matmul_tile<R, false, true>(kc, block + i * kc, 1, kRows, panel, Ct, N, cols);
            if (ep && last) ep->apply(R, m * N + n0, N, n0, cols, Ct, N);
          };
          for_row_tiles(mc, tile);
        }
      }
    }
  }
}

// Where the data is. On two cores that share no cache (virtual CPUs the host placed apart,
// where a cache line's round trip between them is slow), every line one thread writes and
// the other then reads or writes moves between them, and a step of small kernels spends
// much of its time waiting for those lines (bench/NOTES.md, "The two CPUs' round trip").
// Two orders keep a small product's data where it already is:
//
// By rows: where A's rows are contiguous (a forward, an input gradient: rows are tokens),
// the panel tasks take one chunk of rows per thread, chunks outermost, so that thread t
// computes rows [t r, (t + 1) r), r = ceil(M / T): the rows GPTC_FOR's static split gives
// it in the row and elementwise kernels before and after (the same on two threads, within
// a row on more), and it packs every panel of B for itself. Only while a thread's rows of A
// fit in 256 KB: the larger products (the blocked order's on AVX2, the panel tasks' above
// on AVX-512, the faster there) keep their order.
inline bool splits_rows(int64_t batch, int64_t M, int64_t K, int64_t sak, int team) {
  return team > 1 && batch == 1 && sak == 1 && M >= team * 4 * kRows &&
         M * K <= team * (int64_t(1) << 16);
}
inline PanelTasks row_tasks(int64_t M, int64_t N, int64_t team) {
  const int64_t rows = (M + team - 1) / team;
  return {(N + kPanel - 1) / kPanel, 1, (M + rows - 1) / rows, rows};
}

// By k: a weight gradient (A transposed, dY^T, small enough not to be copied) sums over the
// tokens, which the threads hold in halves. Stage t of T sums k in [K t/T, K (t+1)/T) of
// every unit (16 columns, 48 rows), reading only its own tokens of A and B, and continues
// from the sums stage t - 1 left in C (matmul_tile's Carry): each output is still the one
// k = 0..K-1 fma chain from zero, the same bits on any thread count. The stages go through
// the units in the same order, a pipeline: a unit's flag counts the stages done with it,
// and only partial sums move between the cores. (Only the two orders together speed up a
// small step: the k order needs its tokens where the row order leaves them. bench/NOTES.md,
// "matmul: splits and threading".)
constexpr int64_t kPipelineRows = 8 * kRows;
inline int64_t pipeline_units(int64_t M, int64_t N) {
  return (N + kPanel - 1) / kPanel * ((M + kPipelineRows - 1) / kPipelineRows);
}
inline bool pipelines_k(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t sam,
                        int64_t sak, const MatmulEpilogue<float>* ep, int team) {
  return team > 1 && batch == 1 && !ep && sam == 1 && sak > 1 && K >= 4 * team &&
         pipeline_units(M, N) >= 2 * team;
}
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
inline void matmul_k_pipeline_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sak,
                                 const float* B, int64_t sbk, int64_t sbn, float* C) {
  const int team = gptc::team_size();
  const int64_t chunks = (M + kPipelineRows - 1) / kPipelineRows;
  const int64_t units = pipeline_units(M, N);
  constexpr int64_t kApart = 16;  // a flag per cache line
  // The flags in the scratch (slot 3) of the thread that takes the `single`, zeroed there.
  std::atomic<int>* flags = nullptr;
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "flags in an int scratch");
  auto* const mine = reinterpret_cast<std::atomic<int>*>(gptc::scratch<int>(3, units * kApart));
  GPTC_OMP("omp single copyprivate(flags)")
  {
    flags = mine;
    for (int64_t u = 0; u < units; ++u) new (&flags[u * kApart]) std::atomic<int>(0);
  }
  // With more threads than processors the stage waited for may not be running: give it
  // the processor at once rather than spin (spinning first slowed an oversubscribed step:
  // bench/NOTES.md, "matmul: splits and threading").
  const int spinLimit = team > gptc::processors() ? 0 : 4096;
  GPTC_FOR_WS(t, team) {  // one iteration per thread: its stage
    const int64_t k0 = K * t / team, kc = K * (t + 1) / team - k0;
    float* panel = gptc::scratch<float>(0, K * kPanel);
    for (int64_t n0 = 0, u = 0; n0 < N; n0 += kPanel) {
      const int64_t cols = N - n0 < kPanel ? N - n0 : kPanel;
      pack_panel(kc, B + k0 * sbk + n0 * sbn, sbk, sbn, cols, panel);
      for (int64_t c = 0; c < chunks; ++c, ++u) {
        std::atomic<int>& done = flags[u * kApart];
        for (int spins = 0; done.load(std::memory_order_acquire) != t; ++spins) {
          spin_pause();
          if (spins > spinLimit) std::this_thread::yield();
        }
        const int64_t m0 = c * kPipelineRows, mc = M - m0 < kPipelineRows ? M - m0 : kPipelineRows;
        auto tile = [&](auto rows, int64_t i) {
          constexpr int R = decltype(rows)::value;
          const int64_t m = m0 + i;
          if (t == 0)
            matmul_tile<R>(kc, A + m + k0 * sak, 1, sak, panel, C + m * N + n0, N, cols);
          else
            matmul_tile<R, false, true>(kc, A + m + k0 * sak, 1, sak, panel, C + m * N + n0, N,
                                        cols);
        };
        for_row_tiles(mc, tile);
        done.store(t + 1, std::memory_order_release);
      }
    }
  }
  // Every stage done before a thread leaves: the next pipeline's `single` zeroes flags.
  GPTC_OMP("omp barrier")
}
}  // namespace detail

// The float matmul inside a GPTC_PARALLEL region (a gpt.horizontal member): the region's
// threads share the tasks.
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                      int64_t sab, int64_t sam, int64_t sak, const float* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, float* C,
                      const MatmulEpilogue<float>& epilogue = {}) {
  const MatmulEpilogue<float>* ep = epilogue.any() ? &epilogue : nullptr;
  // The members folded into one taller product where they can be (the copies below fold
  // after copying, with the copy's strides).
  int64_t fbatch = batch, fM = M, fsab = sab;
  detail::fold_batch(fbatch, fM, fsab, sam, sbb);
  if (detail::blocks_k(fbatch, fM, N, K)) {
    detail::matmul_blocked_ws(fM, N, K, A, sam, sak, B, sbk, sbn, C, ep);
    return;
  }
  if (detail::copies_a(M, K, sam, sak)) {
    if (detail::copies_b(batch, M, N, sbn, ep))
      detail::matmul_copied_b_ws(M, N, K, A, sak, B, sbk, C);
    else
      detail::matmul_copied_a_ws(batch, M, N, K, A, sab, sak, B, sbb, sbk, sbn, C, ep);
    return;
  }
  const int team = gptc::team_size();
  if (detail::pipelines_k(batch, M, N, K, sam, sak, ep, team)) {
    detail::matmul_k_pipeline_ws(M, N, K, A, sak, B, sbk, sbn, C);
    return;
  }
  const detail::PanelTasks g = detail::splits_rows(fbatch, fM, K, sak, team)
                                   ? detail::row_tasks(fM, N, team)
                                   : detail::panel_tasks(fbatch, fM, N, team);
  GPTC_FOR_WS(t, g.count())
    detail::matmul_task(t, g, fM, N, K, A, fsab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
// The same in a parallel region of its own (the same static split of the tasks).
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, int64_t sab,
                   int64_t sam, int64_t sak, const float* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, float* C, const MatmulEpilogue<float>& epilogue = {}) {
  GPTC_PARALLEL
  matmul_ws(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, epilogue);
}
#endif

// The reference (and untiled: no AVX2 or AVX-512, or f64) path: dot_seq per output element,
// then the epilogue.
namespace detail {
template <class T>
inline void matmul_element(int64_t i, int64_t M, int64_t N, int64_t K, const T* A, int64_t sab,
                           int64_t sam, int64_t sak, const T* B, int64_t sbb, int64_t sbk,
                           int64_t sbn, T* C, const MatmulEpilogue<T>& ep) {
  const int64_t n = i % N, m = (i / N) % M, b = i / (M * N);
  const T* a = A + b * sab + m * sam;
  const T* bb = B + b * sbb + n * sbn;
  T v = dot_seq<T>(K, [&](int64_t k) { return a[k * sak]; }, [&](int64_t k) { return bb[k * sbk]; });
  if (ep.any()) ep.apply(1, i, N, n, 1, &v, 1);
  C[i] = v;
}
}  // namespace detail
template <class T>
inline void matmul_reference(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                             int64_t sab, int64_t sam, int64_t sak, const T* B, int64_t sbb,
                             int64_t sbk, int64_t sbn, T* C, const MatmulEpilogue<T>& ep = {}) {
  GPTC_FOR(i, batch * M * N)
    detail::matmul_element<T>(i, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
template <class T>
inline void matmul_reference_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                                int64_t sab, int64_t sam, int64_t sak, const T* B, int64_t sbb,
                                int64_t sbk, int64_t sbn, T* C, const MatmulEpilogue<T>& ep = {}) {
  GPTC_FOR_WS(i, batch * M * N)
    detail::matmul_element<T>(i, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}

#if !defined(GPTC_TILED_MATMUL)
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, int64_t sab,
                   int64_t sam, int64_t sak, const float* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, float* C, const MatmulEpilogue<float>& ep = {}) {
  matmul_reference<float>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                      int64_t sab, int64_t sam, int64_t sak, const float* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, float* C, const MatmulEpilogue<float>& ep = {}) {
  matmul_reference_ws<float>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
#endif
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const double* A, int64_t sab,
                   int64_t sam, int64_t sak, const double* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, double* C, const MatmulEpilogue<double>& ep = {}) {
  matmul_reference<double>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
                      int64_t sab, int64_t sam, int64_t sak, const double* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, double* C, const MatmulEpilogue<double>& ep = {}) {
  matmul_reference_ws<double>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_H
