// prelude_math_bits_test.cpp — the vectorisable (branch-free) elementary functions of
// runtime/include/gptc/prelude.h give the same bits as the scalar fdlibm code they replaced,
// for every input checked: the numerics contract says a rewrite may change no bit.
//
// namespace ref below is a verbatim copy of that former code (prelude.h as of commit
// e229884, before it became branch-free; only gptc:: became ref:: in the gelu bodies). It
// must not be "fixed": it is the definition of the bits.
//
// Built like generated kernels (-O2 -march=native -fopenmp, -ffp-contract=off), and the new
// functions run in GPTC_FOR_SIMD loops, so what is compared is the vectorised code; a sample
// is also checked through lone (scalar) calls.
//
// Coverage (float log is widened to double inside, so it reaches the double kernels; float
// exp, erf and tanh have been float arithmetic since, a new definition whose accuracy
// prelude_math_test measures, so they, gelu_erf and the float gelu_tanh are no longer
// compared here):
//   float log: every 7th bit pattern of all 2^32, plus specials and every bit pattern
//     within 4096 of each range boundary;
//   erf_n, gelu_erf_n, gelu_erf_grad_n (the array forms) against the per-element
//     functions: every 13th bit pattern, and normal inputs at awkward lengths;
//   with GPTC_MATH_BITS_STRIDE=1 in the environment, all 2^32 patterns for both (many
//   times the default's run time: bench/NOTES.md, "The benchmark method");
//   double exp/log/expm1/tanh/erf: random bit patterns, random values in the working
//     ranges, specials, and dense neighbourhoods of every range boundary, including each
//     (k + 1/2) ln2 where exp's and expm1's k changes; double gelus and grads: random.
#include <gtest/gtest.h>

#include <cfloat>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gptc/prelude.h"

// ---------------------------------------------------------------------------------------
// The reference: prelude.h's scalar implementations as they were (verbatim).
// ---------------------------------------------------------------------------------------
namespace ref {
namespace detail {

GPTC_HD inline uint64_t bits(double x) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
GPTC_HD inline double from_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
GPTC_HD inline uint32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
GPTC_HD inline float from_bits32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

GPTC_HD inline double inf_d() { return from_bits(0x7ff0000000000000ull); }
GPTC_HD inline double nan_d() { return from_bits(0x7ff8000000000000ull); }
GPTC_HD inline float inf_f() { return from_bits32(0x7f800000u); }
GPTC_HD inline bool is_nan(double x) { return x != x; }
GPTC_HD inline double fabs_d(double x) { return from_bits(bits(x) & 0x7fffffffffffffffull); }
// 2^k for -1022 <= k <= 1023, built from bits (exact).
GPTC_HD inline double pow2i(int k) { return from_bits((uint64_t)(0x3ff + k) << 52); }

// y * 2^k for any k in [-1100, 1100], exact unless the result is subnormal (one rounding)
// or overflows.
GPTC_HD inline double scale2(double y, int k) {
  if (k > 1023) return y * pow2i(1023) * pow2i(k - 1023);
  if (k < -1021) return y * pow2i(k + 1000) * pow2i(-1000);
  return y * pow2i(k);
}

// ---------------------------------------------------------------------------------------
// Double-precision kernels (fdlibm). Each is < 1 ulp in fdlibm's analysis; the unit test
// measures them against long double libm.
// ---------------------------------------------------------------------------------------

// exp(x): x = k*ln2 + r, |r| <= ln2/2; exp(r) by a rational form of a degree-5 minimax
// polynomial R(r^2); result 2^k * exp(r).
GPTC_HD inline double exp_d(double x) {
  const double o_threshold = 7.09782712893383973096e+02;   // above: overflow
  const double u_threshold = -7.45133219101941108420e+02;  // below: underflow to 0
  const double ln2_hi = 6.93147180369123816490e-01;        // 0x3fe62e42fee00000
  const double ln2_lo = 1.90821492927058770002e-10;        // 0x3dea39ef35793c76
  const double inv_ln2 = 1.44269504088896338700e+00;
  const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03,
               P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
               P5 = 4.13813679705723846039e-08;
  if (is_nan(x)) return x + x;
  if (x > o_threshold) return inf_d();
  if (x < u_threshold) return 0.0;
  double ax = fabs_d(x);
  if (ax < 3.7252902984e-09) return 1.0 + x;  // |x| < 2^-28
  int k = 0;
  double hi = x, lo = 0.0;
  if (ax > 3.46573590279972654709e-01) {  // |x| > ln2/2: reduce
    double kd = inv_ln2 * x;
    k = (int)(x < 0 ? kd - 0.5 : kd + 0.5);  // round half away from zero (truncating cast)
    double t = (double)k;
    hi = x - t * ln2_hi;  // exact: ln2_hi has 32 trailing zero bits
    lo = t * ln2_lo;
    x = hi - lo;
  }
  double t = x * x;
  double c = x - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  if (k == 0) return 1.0 - ((x * c) / (c - 2.0) - x);
  double y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi);
  return scale2(y, k);
}

// log(x): x = 2^k * (1+f), 1+f in [sqrt(2)/2, sqrt(2)); s = f/(2+f);
// log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)) with a degree-14 even minimax R.
GPTC_HD inline double log_d(double x) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01,
               Lg3 = 2.857142874366239149e-01, Lg4 = 2.222219843214978396e-01,
               Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01,
               Lg7 = 1.479819860511658591e-01;
  uint64_t ix = bits(x);
  uint32_t hx = (uint32_t)(ix >> 32);
  int k = 0;
  if (hx < 0x00100000u || (hx >> 31)) {  // subnormal, zero or negative (or -nan)
    if ((ix << 1) == 0) return -inf_d();   // log(+-0) = -inf
    if (is_nan(x)) return x + x;
    if (hx >> 31) return nan_d();          // log(negative) = nan
    k -= 54;                               // subnormal: scale up by 2^54
    x *= 1.8014398509481984e16;
    ix = bits(x);
    hx = (uint32_t)(ix >> 32);
  } else if (hx >= 0x7ff00000u) {
    return x + x;  // +inf or nan
  } else if (hx == 0x3ff00000u && (uint32_t)ix == 0) {
    return 0.0;
  }
  // Reduce x into [sqrt(2)/2, sqrt(2)).
  hx += 0x3ff00000u - 0x3fe6a09eu;
  k += (int)(hx >> 20) - 0x3ff;
  hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
  ix = ((uint64_t)hx << 32) | (ix & 0xffffffffull);
  x = from_bits(ix);
  double f = x - 1.0;
  double hfsq = 0.5 * f * f;
  double s = f / (2.0 + f);
  double z = s * s;
  double w = z * z;
  double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  double R = t2 + t1;
  double dk = (double)k;
  return s * (hfsq + R) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// expm1(x) = exp(x) - 1 without cancellation near 0 (used by tanh).
GPTC_HD inline double expm1_d(double x) {
  const double o_threshold = 7.09782712893383973096e+02;
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double inv_ln2 = 1.44269504088896338700e+00;
  const double Q1 = -3.33333333333331316428e-02, Q2 = 1.58730158725481460165e-03,
               Q3 = -7.93650757867487942473e-05, Q4 = 4.00821782732936239552e-06,
               Q5 = -2.01099218183624371326e-07;
  uint64_t ux = bits(x);
  uint32_t hx = (uint32_t)(ux >> 32) & 0x7fffffffu;
  int sign = (int)(ux >> 63);
  if (hx >= 0x4043687Au) {  // |x| >= 56*ln2
    if (is_nan(x)) return x + x;
    if (sign) return -1.0;
    if (x > o_threshold) return inf_d();
  }
  int k;
  double hi, lo, c = 0.0;
  if (hx > 0x3fd62e42u) {  // |x| > ln2/2
    if (hx < 0x3FF0A2B2u) {  // and |x| < 1.5*ln2
      if (!sign) { hi = x - ln2_hi; lo = ln2_lo; k = 1; }
      else { hi = x + ln2_hi; lo = -ln2_lo; k = -1; }
    } else {
      k = (int)(inv_ln2 * x + (sign ? -0.5 : 0.5));
      double t = (double)k;
      hi = x - t * ln2_hi;
      lo = t * ln2_lo;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (hx < 0x3c900000u) {  // |x| < 2^-54
    return x;
  } else {
    k = 0;
  }
  double hfx = 0.5 * x;
  double hxs = x * hfx;
  double r1 = 1.0 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
  double t = 3.0 - r1 * hfx;
  double e = hxs * ((r1 - t) / (6.0 - x * t));
  if (k == 0) return x - (x * e - hxs);
  e = x * (e - c) - c;
  e -= hxs;
  if (k == -1) return 0.5 * (x - e) - 0.5;
  if (k == 1) {
    if (x < -0.25) return -2.0 * (e - (x + 0.5));
    return 1.0 + 2.0 * (x - e);
  }
  if (k < 0 || k > 56) return scale2(x - e + 1.0, k) - 1.0;
  double twopk = pow2i(k);
  double twomk = pow2i(-k);
  if (k < 20) return (x - e + (1.0 - twomk)) * twopk;
  return (x - (e + twomk) + 1.0) * twopk;
}

// tanh(x) from expm1 in three ranges (musl's scheme, <= 2 ulp).
GPTC_HD inline double tanh_d(double x) {
  uint64_t ux = bits(x);
  int sign = (int)(ux >> 63);
  ux &= 0x7fffffffffffffffull;
  x = from_bits(ux);  // |x|
  uint32_t w = (uint32_t)(ux >> 32);
  double t;
  if (w > 0x3fe193eau) {        // |x| > log(3)/2 ~= 0.5493, or nan
    if (w > 0x40340000u) {      // |x| > 20 or nan
      t = is_nan(x) ? x + x : 1.0;
    } else {
      t = expm1_d(2.0 * x);
      t = 1.0 - 2.0 / (t + 2.0);
    }
  } else if (w > 0x3fd058aeu) {  // |x| > log(5/3)/2 ~= 0.2554
    t = expm1_d(2.0 * x);
    t = t / (t + 2.0);
  } else if (w >= 0x00100000u) {  // normal
    t = expm1_d(-2.0 * x);
    t = -t / (t + 2.0);
  } else {                        // subnormal or zero
    t = x;
  }
  return sign ? -t : t;
}

// erf(x): rational approximations on [0, 0.84375), [0.84375, 1.25), and erfc-based
// exp(-x^2 - 0.5625 + R/S)/x forms on [1.25, 6); +-1 beyond.
GPTC_HD inline double erf_d(double x) {
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
  uint64_t ux = bits(x);
  int32_t hx = (int32_t)(ux >> 32);
  uint32_t ix = (uint32_t)hx & 0x7fffffffu;
  if (ix >= 0x7ff00000u) {  // nan or +-inf
    if (is_nan(x)) return x + x;
    return hx < 0 ? -1.0 : 1.0;
  }
  if (ix < 0x3feb0000u) {  // |x| < 0.84375
    if (ix < 0x3e300000u) {  // |x| < 2^-28
      if (ix < 0x00800000u) return 0.125 * (8.0 * x + efx8 * x);  // avoid underflow
      return x + efx * x;
    }
    double z = x * x;
    double r = pp0 + z * (pp1 + z * (pp2 + z * (pp3 + z * pp4)));
    double s = 1.0 + z * (qq1 + z * (qq2 + z * (qq3 + z * (qq4 + z * qq5))));
    return x + x * (r / s);
  }
  if (ix < 0x3ff40000u) {  // 0.84375 <= |x| < 1.25
    double s = fabs_d(x) - 1.0;
    double P = pa0 + s * (pa1 + s * (pa2 + s * (pa3 + s * (pa4 + s * (pa5 + s * pa6)))));
    double Q = 1.0 + s * (qa1 + s * (qa2 + s * (qa3 + s * (qa4 + s * (qa5 + s * qa6)))));
    return hx >= 0 ? erx + P / Q : -erx - P / Q;
  }
  if (ix >= 0x40180000u) return hx >= 0 ? 1.0 : -1.0;  // |x| >= 6
  x = fabs_d(x);
  double s = 1.0 / (x * x);
  double R, S;
  if (ix < 0x4006DB6Eu) {  // |x| < 1/0.35
    R = ra0 + s * (ra1 + s * (ra2 + s * (ra3 + s * (ra4 + s * (ra5 + s * (ra6 + s * ra7))))));
    S = 1.0 + s * (sa1 + s * (sa2 + s * (sa3 + s * (sa4 + s * (sa5 + s * (sa6 + s * (sa7 +
        s * sa8)))))));
  } else {
    R = rb0 + s * (rb1 + s * (rb2 + s * (rb3 + s * (rb4 + s * (rb5 + s * rb6)))));
    S = 1.0 + s * (sb1 + s * (sb2 + s * (sb3 + s * (sb4 + s * (sb5 + s * (sb6 + s * sb7))))));
  }
  double z = from_bits(bits(x) & 0xffffffff00000000ull);  // x with the low word cleared
  double r = exp_d(-z * z - 0.5625) * exp_d((z - x) * (z + x) + R / S);
  return hx >= 0 ? 1.0 - r / x : r / x - 1.0;
}

}  // namespace detail

GPTC_HD inline double exp(double x) { return detail::exp_d(x); }
GPTC_HD inline double log(double x) { return detail::log_d(x); }
GPTC_HD inline double tanh(double x) { return detail::tanh_d(x); }
GPTC_HD inline double erf(double x) { return detail::erf_d(x); }
// float: evaluate in double, round once (see the header comment).
GPTC_HD inline float exp(float x) { return (float)detail::exp_d((double)x); }
GPTC_HD inline float log(float x) { return (float)detail::log_d((double)x); }
GPTC_HD inline float tanh(float x) { return (float)detail::tanh_d((double)x); }
GPTC_HD inline float erf(float x) { return (float)detail::erf_d((double)x); }

// GELU, exact (erf) form: 0.5*x*(1 + erf(x/sqrt(2))); x/sqrt(2) is computed as x*(1/sqrt(2)).
GPTC_HD inline float gelu_erf(float x) {
  return 0.5f * x * (1.0f + ref::erf(x * 0.70710678118654752440f));
}
GPTC_HD inline double gelu_erf(double x) {
  return 0.5 * x * (1.0 + ref::erf(x * 0.70710678118654752440));
}
// GELU, tanh form: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
GPTC_HD inline float gelu_tanh(float x) {
  float inner = 0.79788456080286535588f * (x + 0.044715f * (x * x * x));
  return 0.5f * x * (1.0f + ref::tanh(inner));
}
GPTC_HD inline double gelu_tanh(double x) {
  double inner = 0.79788456080286535588 * (x + 0.044715 * (x * x * x));
  return 0.5 * x * (1.0 + ref::tanh(inner));
}

// gelu's derivatives, for gpt.gelu_grad: g * d/dx gelu(x), same formulas on every target.
template <class T>
GPTC_HD inline T gelu_erf_grad(T g, T x) {
  const T inv_sqrt2 = T(0.70710678118654752440), inv_sqrt_2pi = T(0.39894228040143267794);
  T cdf = T(0.5) * (T(1) + ref::erf(x * inv_sqrt2));
  T pdf = inv_sqrt_2pi * ref::exp(T(-0.5) * x * x);
  return g * (cdf + x * pdf);
}
template <class T>
GPTC_HD inline T gelu_tanh_grad(T g, T x) {
  const T k = T(0.79788456080286535588), c = T(0.044715);
  T t = ref::tanh(k * (x + c * (x * x * x)));
  T du = k * (T(1) + T(3) * c * (x * x));
  return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
}

}  // namespace ref

namespace {

uint32_t fbits(float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; }
uint64_t fbits(double x) { uint64_t u; std::memcpy(&u, &x, 8); return u; }
float ffrom(uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; }
double dfrom(uint64_t u) { double x; std::memcpy(&x, &u, 8); return x; }

// One function under test: the new code in a kernel-style elementwise loop (vectorised), the
// same alone (a call the compiler keeps scalar), and the reference in a plain loop. x is the
// argument (g the incoming gradient of the gelu grads; unused otherwise).
template <class T>
struct Case {
  const char* name;
  void (*vec)(int64_t, const T*, const T*, T*);
  T (*one)(T, T);
  void (*ref)(int64_t, const T*, const T*, T*);
};

#define GPTC_BITS_CASE(T, name, NEW, REF)                                                  \
  Case<T>{#name,                                                                           \
          [](int64_t n, const T* xs, const T* gs, T* out) {                                \
            GPTC_FOR_SIMD(i, n) {                                                          \
              const T x = xs[i], g = gs[i];                                                \
              (void)g;                                                                     \
              out[i] = NEW;                                                                \
            }                                                                              \
          },                                                                               \
          [](T x, T g) __attribute__((noinline)) -> T { (void)g; return NEW; },            \
          [](int64_t n, const T* xs, const T* gs, T* out) {                                \
            GPTC_FOR(i, n) {                                                               \
              const T x = xs[i], g = gs[i];                                                \
              (void)g;                                                                     \
              out[i] = REF;                                                                \
            }                                                                              \
          }}

// Per-case tallies: inputs, mismatches, and the seconds spent in the vectorised loop and
// in the reference.
struct Tally {
  uint64_t checked = 0, bad = 0;
  double vec_s = 0, ref_s = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Checks one batch of inputs (lone calls on every `one_every`-th point); prints the first
// few mismatches.
template <class T>
void check(const Case<T>& c, const std::vector<T>& xs, const std::vector<T>& gs,
           int64_t one_every, Tally* tally) {
  const int64_t n = (int64_t)xs.size();
  static std::vector<T> got, want, alone;
  got.resize(n);
  want.resize(n);
  auto t0 = std::chrono::steady_clock::now();
  c.vec(n, xs.data(), gs.data(), got.data());
  tally->vec_s += seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  c.ref(n, xs.data(), gs.data(), want.data());
  tally->ref_s += seconds_since(t0);
  const int64_t n_alone = (n + one_every - 1) / one_every;
  alone.resize(n_alone);
  T* al = alone.data();
  const T* x = xs.data();
  const T* g = gs.data();
  auto one = c.one;
  GPTC_FOR(j, n_alone) al[j] = one(x[j * one_every], g[j * one_every]);
  bool same = std::memcmp(got.data(), want.data(), sizeof(T) * n) == 0;
  for (int64_t j = 0; same && j < n_alone; ++j) same = fbits(al[j]) == fbits(want[j * one_every]);
  if (!same) {
    for (int64_t i = 0; i < n; ++i) {
      const bool sampled = i % one_every == 0;
      const T lone = sampled ? al[i / one_every] : want[i];
      if (fbits(got[i]) != fbits(want[i]) || fbits(lone) != fbits(want[i])) {
        if (++tally->bad <= 5)
          std::printf("  MISMATCH %s(x=%a [0x%" PRIx64 "], g=%a): vectorised %a, alone %a%s, "
                      "reference %a\n", c.name, (double)xs[i], (uint64_t)fbits(xs[i]),
                      (double)gs[i], (double)got[i], (double)lone,
                      sampled ? "" : " (not run)", (double)want[i]);
      }
    }
  }
  tally->checked += n;
}

int64_t stride_from_env(int64_t fallback) {
  const char* s = std::getenv("GPTC_MATH_BITS_STRIDE");
  return s && std::atoll(s) > 0 ? std::atoll(s) : fallback;
}

// Float specials and the float neighbourhoods (+-4096 bit patterns, both signs) of the
// given double boundaries.
std::vector<float> float_specials(const std::vector<double>& boundaries) {
  std::vector<float> xs;
  const uint32_t fixed[] = {0x00000000u, 0x00000001u, 0x00000002u, 0x007fffffu, 0x00800000u,
                            0x00800001u, 0x3f800000u, 0x3f7fffffu, 0x3f800001u, 0x7f7fffffu,
                            0x7f800000u, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fc00001u,
                            0x7fffffffu, 0x7fa5a5a5u, 0x7fd5a5a5u};
  for (uint32_t u : fixed) {
    xs.push_back(ffrom(u));
    xs.push_back(ffrom(u | 0x80000000u));
  }
  for (double b : boundaries) {
    const uint32_t c = fbits((float)std::fabs(b));
    for (int64_t d = -4096; d <= 4096; ++d) {
      const int64_t u = (int64_t)c + d;
      if (u < 0 || u > 0x7f800000) continue;
      xs.push_back(ffrom((uint32_t)u));
      xs.push_back(ffrom((uint32_t)u | 0x80000000u));
    }
  }
  return xs;
}

// Double boundaries of a function, as values (a neighbourhood of +-radius bit patterns,
// both signs, is checked around each).
std::vector<double> double_neighbourhoods(const std::vector<double>& boundaries, int64_t radius) {
  std::vector<double> xs;
  for (double b : boundaries) {
    const uint64_t c = fbits(std::fabs(b));
    for (int64_t d = -radius; d <= radius; ++d) {
      const uint64_t u = c + (uint64_t)d;
      if (u > 0x7ff0000000000000ull) continue;
      xs.push_back(dfrom(u));
      xs.push_back(dfrom(u | 0x8000000000000000ull));
    }
  }
  return xs;
}

// A value whose high word is w and low word 0 (fdlibm's range tests compare high words).
double high_word(uint32_t w) { return dfrom((uint64_t)w << 32); }

// Range boundaries of each function (as double values).
std::vector<double> exp_boundaries(int k_lo, int k_hi) {
  const double ln2 = 0.693147180559945309417232121458176568;
  std::vector<double> b = {7.09782712893383973096e+02, -7.45133219101941108420e+02,
                           3.7252902984e-09, 3.46573590279972654709e-01, 1.0, 0.0};
  for (int k = k_lo; k <= k_hi; ++k) b.push_back((k + 0.5) * ln2);  // where k changes
  return b;
}
std::vector<double> log_boundaries(int e_lo, int e_hi) {
  std::vector<double> b = {1.0, DBL_MIN, 0.0, DBL_MAX};
  for (int e = e_lo; e <= e_hi; ++e) {
    b.push_back(std::ldexp(high_word(0x3fe6a09eu), e));  // the reduction's sqrt(2)/2 cut
    b.push_back(std::ldexp(1.0, e));
  }
  return b;
}
std::vector<double> expm1_boundaries() {
  const double ln2 = 0.693147180559945309417232121458176568;
  std::vector<double> b = {high_word(0x4043687Au), high_word(0x3fd62e42u),
                           high_word(0x3FF0A2B2u), high_word(0x3c900000u),
                           7.09782712893383973096e+02, ln2 - 0.25, 0.0};
  for (int k = -60; k <= 1030; ++k) b.push_back((k + 0.5) * ln2);
  return b;
}
std::vector<double> tanh_boundaries() {
  return {high_word(0x3fe193eau), high_word(0x40340000u), high_word(0x3fd058aeu),
          high_word(0x00100000u), 0.0};
}
std::vector<double> erf_boundaries() {
  return {high_word(0x3feb0000u), high_word(0x3e300000u), high_word(0x00800000u),
          high_word(0x3ff40000u), high_word(0x40180000u), high_word(0x4006DB6Eu), 0.0};
}

// Random doubles: uniform bit patterns, and |x| = 2^e * (1 + m) with e uniform in
// [e_lo, e_hi] (random sign, random mantissa).
std::vector<double> random_doubles(size_t n_bits, size_t n_ranged, int e_lo, int e_hi,
                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> ue(e_lo, e_hi);
  std::vector<double> xs;
  for (size_t i = 0; i < n_bits; ++i) xs.push_back(dfrom(rng()));
  for (size_t i = 0; i < n_ranged; ++i) {
    const uint64_t r = rng();
    const uint64_t e = (uint64_t)(ue(rng) + 1023);
    xs.push_back(dfrom((r & 0x800fffffffffffffull) | (e << 52)));
  }
  return xs;
}

std::vector<double> double_specials() {
  const uint64_t fixed[] = {0x0ull, 0x1ull, 0x2ull, 0x000fffffffffffffull, 0x0010000000000000ull,
                            0x3ff0000000000000ull, 0x7fefffffffffffffull, 0x7ff0000000000000ull,
                            0x7ff0000000000001ull, 0x7ff4000000000000ull, 0x7ff8000000000000ull,
                            0x7ff8000000000001ull, 0x7fffffffffffffffull, 0x7ffa5a5a5a5a5a5aull};
  std::vector<double> xs;
  for (uint64_t u : fixed) {
    xs.push_back(dfrom(u));
    xs.push_back(dfrom(u | 0x8000000000000000ull));
  }
  return xs;
}

// Incoming gradients for the gelu grads: random normals with a sprinkling of specials.
template <class T>
std::vector<T> gradients(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 2.0);
  const T sp[] = {T(0), -T(0), T(1), T(INFINITY), -T(INFINITY), T(NAN), T(1e-40), T(3e38)};
  std::vector<T> gs(n);
  for (size_t i = 0; i < n; ++i) gs[i] = (i % 1009 == 17) ? sp[(i / 1009) % 8] : T(nd(rng));
  return gs;
}

class PreludeMathBits : public ::testing::Test {
 protected:
  void SetUp() override { gptc::thread_count() = 0; }  // all cores
  void TearDown() override { gptc::thread_count() = 1; }
};

// Sweeps float bit patterns 0, stride, 2*stride, ... (all 2^32 of them for stride 1) in
// batches, plus `extra`, through each case; every case sees the same x.
void float_sweep(const std::vector<Case<float>>& cases, int64_t stride,
                 const std::vector<float>& extra) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t batch = 1 << 22;
  std::vector<Tally> tally(cases.size());
  std::vector<float> xs, gs = gradients<float>(batch, 99);
  for (uint64_t start = 0; start < (1ull << 32); start += (uint64_t)batch * stride) {
    const uint64_t left = ((1ull << 32) - start + stride - 1) / stride;
    const int64_t n = left < (uint64_t)batch ? (int64_t)left : batch;
    xs.resize(n);
    gs.resize(n);
    float* x = xs.data();
    GPTC_FOR(i, n) x[i] = ffrom((uint32_t)(start + (uint64_t)i * stride));
    for (size_t c = 0; c < cases.size(); ++c) check(cases[c], xs, gs, 97, &tally[c]);
  }
  std::vector<float> gx = gradients<float>(extra.size(), 7);
  for (size_t c = 0; c < cases.size(); ++c) check(cases[c], extra, gx, 1, &tally[c]);
  for (size_t c = 0; c < cases.size(); ++c) {
    std::printf("  %-15s %10" PRIu64 " inputs (bit stride %" PRId64 " + %zu near boundaries"
                " and specials), %" PRIu64 " mismatches; %.1f s vectorised, %.1f s reference\n",
                cases[c].name, tally[c].checked, stride, extra.size(), tally[c].bad,
                tally[c].vec_s, tally[c].ref_s);
    EXPECT_EQ(tally[c].bad, 0u) << cases[c].name;
  }
  std::printf("  (%.1f s)\n", seconds_since(t0));
}

void double_check(const Case<double>& c, const std::vector<double>& xs) {
  Tally tally;
  check(c, xs, gradients<double>(xs.size(), 5), 13, &tally);
  std::printf("  %-15s %10" PRIu64 " inputs, %" PRIu64 " mismatches\n", c.name, tally.checked,
              tally.bad);
  EXPECT_EQ(tally.bad, 0u) << c.name;
}

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_F(PreludeMathBits, FloatLog) {
  const std::vector<Case<float>> cases = {
      GPTC_BITS_CASE(float, log, gptc::log(x), ref::log(x)),
  };
  float_sweep(cases, stride_from_env(7), float_specials(log_boundaries(-160, 130)));
}

TEST_F(PreludeMathBits, Double) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<double> sp = double_specials();
  double_check(GPTC_BITS_CASE(double, exp, gptc::exp(x), ref::exp(x)),
               concat(concat(random_doubles(2000000, 2000000, -40, 10, 1), sp),
                      double_neighbourhoods(exp_boundaries(-1080, 1030), 256)));
  double_check(GPTC_BITS_CASE(double, log, gptc::log(x), ref::log(x)),
               concat(concat(random_doubles(2000000, 2000000, -1074, 1023, 2), sp),
                      concat(double_neighbourhoods(log_boundaries(-1074, 1023), 64),
                             double_neighbourhoods({1.0}, 1 << 20))));
  double_check(GPTC_BITS_CASE(double, expm1, gptc::detail::expm1_d(x), ref::detail::expm1_d(x)),
               concat(concat(random_doubles(2000000, 2000000, -60, 10, 3), sp),
                      double_neighbourhoods(expm1_boundaries(), 256)));
  double_check(GPTC_BITS_CASE(double, tanh, gptc::tanh(x), ref::tanh(x)),
               concat(concat(random_doubles(2000000, 2000000, -60, 6, 4), sp),
                      double_neighbourhoods(tanh_boundaries(), 1 << 16)));
  double_check(GPTC_BITS_CASE(double, erf, gptc::erf(x), ref::erf(x)),
               concat(concat(random_doubles(2000000, 2000000, -40, 4, 5), sp),
                      double_neighbourhoods(erf_boundaries(), 1 << 16)));
  const std::vector<double> xs = concat(random_doubles(500000, 1500000, -30, 5, 6), sp);
  double_check(GPTC_BITS_CASE(double, gelu_erf, gptc::gelu_erf(x), ref::gelu_erf(x)), xs);
  double_check(GPTC_BITS_CASE(double, gelu_tanh, gptc::gelu_tanh(x), ref::gelu_tanh(x)), xs);
  double_check(GPTC_BITS_CASE(double, gelu_erf_grad, gptc::gelu_erf_grad(g, x),
                              ref::gelu_erf_grad(g, x)), xs);
  double_check(GPTC_BITS_CASE(double, gelu_tanh_grad, gptc::gelu_tanh_grad(g, x),
                              ref::gelu_tanh_grad(g, x)), xs);
  std::printf("  (%.1f s)\n", seconds_since(t0));
}

#if defined(GPTC_AVX2)
// exp8 (AVX2: exp_f's operations on four vectors at once, which attention's exps and
// gelu_erf_grad_given_n take) gives every lane gptc::exp's bits: every 13th float bit pattern
// (all with GPTC_MATH_BITS_STRIDE=1) and the specials, in each of the 32 lanes.
TEST_F(PreludeMathBits, Exp8) {
  const int64_t stride = stride_from_env(13);
  std::vector<float> xs;
  for (uint64_t u = 0; u < (1ull << 32); u += stride) xs.push_back(ffrom((uint32_t)u));
  for (float b : float_specials({88.72283935546875, -103.972076416015625, 0.0})) xs.push_back(b);
  uint64_t bad = 0;
  for (size_t i0 = 0; i0 < xs.size(); i0 += 32) {
    alignas(32) float in[32], out[32];
    for (int k = 0; k < 32; ++k) in[k] = xs[(i0 + k) % xs.size()];
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_load_ps(in + 8 * k);
    gptc::detail::exp8(v);
    for (int k = 0; k < 4; ++k) _mm256_store_ps(out + 8 * k, v[k]);
    for (int k = 0; k < 32; ++k) bad += fbits(out[k]) != fbits(gptc::exp(in[k]));
  }
  std::printf("  %zu inputs, %" PRIu64 " mismatches\n", xs.size(), bad);
  EXPECT_EQ(bad, 0u);
}
#endif

// The array forms (erf_n, gelu_erf_n, gelu_erf_grad_n, gelu_erf_keep_n: erf's upper range
// gathered into a dense run and scattered back; gelu_erf_grad_given_n from the kept erf)
// give each element the bits of the per-element function:
// every 13th float bit pattern (all with GPTC_MATH_BITS_STRIDE=1), g random, and normal
// inputs of three spreads at lengths around the vector and block edges.
TEST_F(PreludeMathBits, ArrayForms) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t stride = stride_from_env(13), batch = 1 << 20;
  std::vector<float> xs(batch), ys(batch), rs(batch), es(batch), gs = gradients<float>(batch, 11);
  uint64_t checked = 0, bad_erf = 0, bad_gelu = 0, bad_grad = 0, bad_kept = 0;
  auto count = [&](int64_t n, uint64_t* bad) {
    for (int64_t i = 0; i < n; ++i) *bad += fbits(ys[i]) != fbits(rs[i]);
  };
  auto compare = [&](int64_t n, const float* x, const float* g) {
    float *y = ys.data(), *r = rs.data();
    gptc::erf_n(n, x, y);
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) r[i] = gptc::erf(x[i]);
    count(n, &bad_erf);
    gptc::gelu_erf_n(n, x, y);
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) r[i] = gptc::gelu_erf(x[i]);
    count(n, &bad_gelu);
    gptc::gelu_erf_grad_n(n, g, x, y);
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) r[i] = gptc::gelu_erf_grad(g[i], x[i]);
    count(n, &bad_grad);
    // gpt.gelu_keep_erf's GELU (r still holds the gradient): the gradient given its erf,
    // the GELU itself, and the kept erf against the scalar one.
    float* e = es.data();
    gptc::gelu_erf_keep_n(n, x, y, e);
    gptc::gelu_erf_grad_given_n(n, g, x, e, y);
    count(n, &bad_kept);
    gptc::gelu_erf_keep_n(n, x, y, e);
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) r[i] = gptc::gelu_erf(x[i]);
    count(n, &bad_kept);
    for (int64_t i = 0; i < n; ++i) y[i] = e[i];
    GPTC_SIMD for (int64_t i = 0; i < n; ++i) r[i] = gptc::gelu_erf_of(x[i]);
    count(n, &bad_kept);
    checked += n;
  };
  for (uint64_t start = 0; start < (1ull << 32); start += (uint64_t)batch * stride) {
    const uint64_t left = ((1ull << 32) - start + stride - 1) / stride;
    const int64_t n = left < (uint64_t)batch ? (int64_t)left : batch;
    for (int64_t i = 0; i < n; ++i) xs[i] = ffrom((uint32_t)(start + (uint64_t)i * stride));
    compare(n, xs.data(), gs.data());
  }
  // Spreads whose runs take each path of the array forms: every argument below 0.84375
  // (0.2, a GELU's inputs at initialisation), none in the upper range, and mixed runs.
  std::mt19937 rng(5);
  for (float sigma : {0.2f, 0.6f, 1.5f}) {
    std::normal_distribution<float> normal(0.0f, sigma);
    for (int64_t n : {1, 15, 16, 17, 255, 256, 257, 1000, 4099}) {
      for (int64_t i = 0; i < n; ++i) xs[i] = normal(rng);
      compare(n, xs.data(), gs.data());
    }
  }
  std::printf("  %" PRIu64 " inputs; mismatches: erf_n %" PRIu64 ", gelu_erf_n %" PRIu64
              ", gelu_erf_grad_n %" PRIu64 ", gelu_erf_keep_n and gelu_erf_grad_given_n %" PRIu64
              " (%.1f s)\n",
              checked, bad_erf, bad_gelu, bad_grad, bad_kept, seconds_since(t0));
  EXPECT_EQ(bad_erf, 0u);
  EXPECT_EQ(bad_gelu, 0u);
  EXPECT_EQ(bad_grad, 0u);
  EXPECT_EQ(bad_kept, 0u);
}
