// gptc/prelude/math.h — the elementary functions (double: fdlibm; float: gptc's own), fma,
// GELU and its gradients, the NaN-propagating max and min: portable (host and device), the
// same bits on both. Part of gptc/prelude.h.
//
// The double-precision exp/log/expm1/erf follow fdlibm (algorithms and coefficients), whose
// notice is kept as it asks:
//   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
//   Developed at SunPro, a Sun Microsystems, Inc. business.
//   Permission to use, copy, modify, and distribute this software is freely granted,
//   provided that this notice is preserved.
// Float log evaluates the double one and rounds once: the double result is within ~1
// double ulp, so the float result is the correctly rounded value except in rare
// near-halfway cases, where it is off by at most one float ulp. Float exp (Cody-Waite
// reduction, Cephes's minimax polynomial), erf (fdlibm's forms, float coefficients) and
// tanh (Cephes's forms) are float arithmetic, which vectorises better than the double route
// (bench/NOTES.md, "Elementwise math"); over all 2^32 inputs exp and erf are within 1 ulp of
// the exact value, tanh within 1.3.
#ifndef GPTC_PRELUDE_MATH_H
#define GPTC_PRELUDE_MATH_H

#include "gptc/prelude/base.h"

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

// tanh(x) for float x: Cephes tanhf's two forms in float arithmetic, the odd polynomial
// x + x*z*P(z) (z = x^2) below |x| = 0.65 and 1 - 2/(exp(2|x|) + 1) above (exp_f gives +inf
// past 2|x| = 88.7, so 1); the sign of x put back (tanh(-0) = -0). Within 1.3 ulp over all
// 2^32 inputs (prelude_math_test); the polynomial alone drifts past 0.65 (8 ulp at 0.7).
GPTC_HD GPTC_INLINE float tanh_f(float x) {
  const uint32_t ux = bits(x);
  const float ax = from_bits32(ux & 0x7fffffffu);
  const float z = ax * ax;
  const float p = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                   1.33314422036e-1f) * z - 3.33332819422e-1f;
  const float small = p * z * ax + ax;
  const float large = 1.0f - 2.0f / (exp_f(2.0f * ax) + 1.0f);
  const float t = sel(x != x, x + x, sel(ax < 0.65f, small, large));
  return from_bits32(bits(t) | (ux & 0x80000000u));
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
// float arithmetic, within 1 ulp, and tanh within 1.3; log evaluates in double and rounds
// once.
GPTC_HD GPTC_INLINE float exp(float x) { return detail::exp_f(x); }
GPTC_HD GPTC_INLINE float log(float x) { return (float)detail::log_d((double)x); }
GPTC_HD GPTC_INLINE float tanh(float x) { return detail::tanh_f(x); }
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


}  // namespace gptc

#endif  // GPTC_PRELUDE_MATH_H
