// prelude_math_test.cpp — accuracy and special values of gptc's own elementary functions
// (runtime/include/gptc/prelude.h).
//
// Float versions: >= 1e6 points per function against the double-precision std:: function,
// bound 2 ulp. Double versions: >= 1e6 points against the long double std:: function
// (x86 80-bit: 11 extra bits, an excellent reference), bound 4 ulp. The error is measured
// as |got - ref| / ulp(ref) with ulp taken at ref's binade, and the worst is printed.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "gptc/prelude.h"

namespace {

// Size of one ulp of type T at the (exact) value r; denormal range uses the minimum ulp.
template <class T>
long double ulp_at(long double r) {
  r = std::fabs(r);
  const int digits = std::numeric_limits<T>::digits;  // 24 or 53
  const int min_exp = std::numeric_limits<T>::min_exponent;  // frexp convention
  int e;
  std::frexp(r, &e);
  if (r == 0 || e < min_exp) e = min_exp;
  return std::ldexp(1.0L, e - digits);
}

// Error in ulps of got vs the reference; both non-finite and equal counts as 0.
template <class T>
double ulp_err(T got, long double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(got) && (T)ref == got) return 0;  // ref beyond T's range, rounds to inf
  if (std::isinf(ref) || std::isinf(got)) return (long double)got == ref ? 0 : 1e30;
  // Clamp the reference to T's range: a reference just beyond the max finite value that
  // rounds to inf is handled above; here ref is finite.
  return (double)(std::fabs((long double)got - ref) / ulp_at<T>(ref));
}

// Float sample points: a stride through all bit patterns of [lo, hi] (both signs if asked)
// plus uniform points in the useful range.
std::vector<float> float_points(float lo, float hi, size_t n_uniform, bool bitsweep_pos,
                                bool bitsweep_neg) {
  std::vector<float> xs;
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(lo, hi);
  for (size_t i = 0; i < n_uniform; ++i) xs.push_back((float)u(rng));
  const uint32_t max_bits = 0x7f7fffffu;  // largest finite
  const uint32_t step = max_bits / 600000u;
  for (uint32_t b = 1; b <= max_bits - step; b += step) {
    float x = gptc::detail::from_bits32(b);
    if (x < FLT_MIN) continue;
    if (bitsweep_pos && x >= lo && x <= hi) xs.push_back(x);
    if (bitsweep_neg && -x >= lo && -x <= hi) xs.push_back(-x);
  }
  return xs;
}

std::vector<double> double_points(double lo, double hi, size_t n_uniform, bool bitsweep_pos,
                                  bool bitsweep_neg) {
  std::vector<double> xs;
  std::mt19937_64 rng(54321);
  std::uniform_real_distribution<double> u(lo, hi);
  for (size_t i = 0; i < n_uniform; ++i) xs.push_back(u(rng));
  const uint64_t max_bits = 0x7fefffffffffffffull;
  const uint64_t step = max_bits / 600000u;
  for (uint64_t b = 1; b <= max_bits - step; b += step) {
    double x = gptc::detail::from_bits(b);
    if (x < DBL_MIN) continue;
    if (bitsweep_pos && x >= lo && x <= hi) xs.push_back(x);
    if (bitsweep_neg && -x >= lo && -x <= hi) xs.push_back(-x);
  }
  return xs;
}

template <class T, class Got, class Ref>
double worst_ulp(const char* name, const std::vector<T>& xs, Got got, Ref ref, size_t* n_out) {
  double worst = 0;
  T worst_x = 0;
  for (T x : xs) {
    double e = ulp_err<T>(got(x), ref(x));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
  }
  *n_out = xs.size();
  std::printf("  %-22s %8zu points, worst %.4f ulp at x = %.9g\n", name, xs.size(), worst,
              (double)worst_x);
  return worst;
}

}  // namespace

TEST(PreludeMath, FloatAccuracy) {
  size_t n;
  auto fexp = float_points(-87.0f, 88.0f, 1000000, true, true);
  EXPECT_LE(worst_ulp<float>("exp(float)", fexp, [](float x) { return gptc::exp(x); },
                             [](float x) { return (long double)std::exp((double)x); }, &n), 2.0);
  EXPECT_GE(n, 1000000u);
  auto flog = float_points(FLT_MIN, FLT_MAX, 1000000, true, false);
  // uniform points concentrate near the top; add [0.5, 2] where cancellation is hardest
  {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    for (int i = 0; i < 500000; ++i) flog.push_back(u(rng));
  }
  EXPECT_LE(worst_ulp<float>("log(float)", flog, [](float x) { return gptc::log(x); },
                             [](float x) { return (long double)std::log((double)x); }, &n), 2.0);
  auto ftanh = float_points(-12.0f, 12.0f, 1000000, true, true);
  EXPECT_LE(worst_ulp<float>("tanh(float)", ftanh, [](float x) { return gptc::tanh(x); },
                             [](float x) { return (long double)std::tanh((double)x); }, &n), 2.0);
  auto ferf = float_points(-6.0f, 6.0f, 1000000, true, true);
  auto ferf_wide = float_points(-FLT_MAX, FLT_MAX, 0, true, true);
  ferf.insert(ferf.end(), ferf_wide.begin(), ferf_wide.end());
  ftanh.insert(ftanh.end(), ferf_wide.begin(), ferf_wide.end());
  EXPECT_LE(worst_ulp<float>("erf(float)", ferf, [](float x) { return gptc::erf(x); },
                             [](float x) { return (long double)std::erf((double)x); }, &n), 2.0);
  EXPECT_LE(worst_ulp<float>("tanh(float, all reals)", ftanh, [](float x) { return gptc::tanh(x); },
                             [](float x) { return (long double)std::tanh((double)x); }, &n), 2.0);
}

TEST(PreludeMath, DoubleAccuracy) {
  size_t n;
  auto dexp = double_points(-708.0, 709.0, 1000000, true, true);
  {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (int i = 0; i < 300000; ++i) dexp.push_back(u(rng));
  }
  EXPECT_LE(worst_ulp<double>("exp(double)", dexp, [](double x) { return gptc::exp(x); },
                              [](double x) { return std::exp((long double)x); }, &n), 4.0);
  EXPECT_GE(n, 1000000u);
  auto dlog = double_points(DBL_MIN, DBL_MAX, 1000000, true, false);
  {
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<double> u(0.5, 2.0);
    for (int i = 0; i < 500000; ++i) dlog.push_back(u(rng));
  }
  EXPECT_LE(worst_ulp<double>("log(double)", dlog, [](double x) { return gptc::log(x); },
                              [](double x) { return std::log((long double)x); }, &n), 4.0);
  auto dtanh = double_points(-25.0, 25.0, 1000000, true, true);
  {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int i = 0; i < 300000; ++i) dtanh.push_back(u(rng));
  }
  EXPECT_LE(worst_ulp<double>("tanh(double)", dtanh, [](double x) { return gptc::tanh(x); },
                              [](double x) { return std::tanh((long double)x); }, &n), 4.0);
  auto derf = double_points(-7.0, 7.0, 1000000, true, true);
  EXPECT_LE(worst_ulp<double>("erf(double)", derf, [](double x) { return gptc::erf(x); },
                              [](double x) { return std::erf((long double)x); }, &n), 4.0);
}

// Float exp, erf and tanh are float arithmetic of their own (not the double kernels
// rounded), so they get a sweep through the bit patterns of all floats: every 61st of the
// 2^32 (70 million inputs, each sign). Over all 2^32 the worst measured is under 1 ulp for
// exp and erf, 1.2926 for tanh (at 0.650151789, just inside its exponential form).
TEST(PreludeMath, FloatExpErfTanhSweep) {
  double worst_exp = 0, worst_erf = 0, worst_tanh = 0;
  float at_exp = 0, at_erf = 0, at_tanh = 0;
  size_t n = 0;
  for (uint64_t b = 0; b < (1ull << 32); b += 61, ++n) {
    const float x = gptc::detail::from_bits32((uint32_t)b);
    const double e = ulp_err<float>(gptc::exp(x), (long double)std::exp((double)x));
    const double r = ulp_err<float>(gptc::erf(x), (long double)std::erf((double)x));
    const double t = ulp_err<float>(gptc::tanh(x), (long double)std::tanh((double)x));
    if (e > worst_exp) worst_exp = e, at_exp = x;
    if (r > worst_erf) worst_erf = r, at_erf = x;
    if (t > worst_tanh) worst_tanh = t, at_tanh = x;
  }
  for (auto [name, worst, at] : {std::tuple{"exp", worst_exp, at_exp},
                                 std::tuple{"erf", worst_erf, at_erf},
                                 std::tuple{"tanh", worst_tanh, at_tanh}})
    std::printf("  %s(float) sweep %zu points, worst %.4f ulp at x = %.9g\n", name, n, worst,
                (double)at);
  EXPECT_LE(worst_exp, 1.0);
  EXPECT_LE(worst_erf, 1.0);
  EXPECT_LE(worst_tanh, 1.3);
  // Either side of the switch between tanh's two forms, and where 2|x| passes exp's
  // overflow: each form's value, the sign kept.
  EXPECT_EQ(gptc::tanh(44.5f), 1.0f);
  EXPECT_EQ(gptc::tanh(-10.0f), -1.0f);
  for (float x : {0.6499999f, 0.65f, -0.65f})
    EXPECT_LE(ulp_err<float>(gptc::tanh(x), (long double)std::tanh((double)x)), 1.3) << x;
}

// sin and cos: float against the long double std:: functions over every 61st bit pattern
// below 2^28 (where the range reduction holds; NaN from there on), bound 1 ulp; double
// against long double on random points below 2^20 pi/2, bound 4 ulp; and the specials.
TEST(PreludeMath, SinCos) {
  double worst_f = 0, worst_d = 0;
  for (uint64_t b = 0; b < 0x4d800000ull; b += 61) {  // up to 2^28, each sign
    for (float x : {gptc::detail::from_bits32((uint32_t)b), -gptc::detail::from_bits32((uint32_t)b)}) {
      worst_f = std::max(worst_f, ulp_err<float>(gptc::sin(x), std::sin((long double)x)));
      worst_f = std::max(worst_f, ulp_err<float>(gptc::cos(x), std::cos((long double)x)));
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1647099.0, 1647099.0), small(-4.0, 4.0);
  for (int i = 0; i < 1000000; ++i) {
    const double x = i % 2 ? u(rng) : small(rng);
    worst_d = std::max(worst_d, ulp_err<double>(gptc::sin(x), std::sin((long double)x)));
    worst_d = std::max(worst_d, ulp_err<double>(gptc::cos(x), std::cos((long double)x)));
  }
  std::printf("  sin/cos(float) worst %.4f ulp, sin/cos(double) worst %.4f ulp\n", worst_f,
              worst_d);
  EXPECT_LE(worst_f, 1.0);
  EXPECT_LE(worst_d, 4.0);
  EXPECT_TRUE(std::signbit(gptc::sin(-0.0f)) && gptc::sin(-0.0f) == 0.0f);
  EXPECT_EQ(gptc::cos(-0.0), 1.0);
  EXPECT_EQ(gptc::sin(1e-30f), 1e-30f);
  for (float x : {INFINITY, -INFINITY, NAN, 268435456.0f, -3e38f}) {
    EXPECT_TRUE(std::isnan(gptc::sin(x)) && std::isnan(gptc::cos(x))) << x;
  }
}

TEST(PreludeMath, SqrtPowGelu) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 100.0f), uy(-4.0f, 4.0f), ug(-8.0f, 8.0f);
  double worst_pow = 0, worst_pow3 = 0, worst_ge = 0, worst_gt = 0;
  for (int i = 0; i < 200000; ++i) {
    float x = u(rng), y = uy(rng);
    EXPECT_EQ(gptc::pow(x, 2.0f), x * x);
    EXPECT_EQ(gptc::pow(x, 0.5f), std::sqrt(x));
    EXPECT_EQ(gptc::sqrt(x), std::sqrt(x));
    EXPECT_EQ(gptc::rsqrt(x), 1.0f / std::sqrt(x));
    worst_pow3 = std::max(worst_pow3, ulp_err<float>(gptc::pow(x, 3.0f),
                                                     std::pow((long double)x, 3.0L)));
    if (x > 0)
      worst_pow = std::max(worst_pow, ulp_err<float>(gptc::pow(x, y),
                                                     std::pow((long double)x, (long double)y)));
    float g = ug(rng);
    double ref_e = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
    double ref_t = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    // The formula itself cancels (1 + erf -> 0 for negative g), so in float the error is
    // absolute, about ulp(1) * |g|/2: measure |err| / (1 + |g|).
    worst_ge = std::max(worst_ge, std::fabs(gptc::gelu_erf(g) - ref_e) / (1.0 + std::fabs(g)));
    worst_gt = std::max(worst_gt, std::fabs(gptc::gelu_tanh(g) - ref_t) / (1.0 + std::fabs(g)));
    EXPECT_NEAR(gptc::gelu_erf((double)g), ref_e, 1e-15 + 1e-14 * std::fabs(ref_e));
  }
  std::printf("  pow(float) worst %.3f ulp, pow(x,3) worst %.3f ulp, gelu_erf |err|/(1+|x|) %.2e, "
              "gelu_tanh |err|/(1+|x|) %.2e\n", worst_pow, worst_pow3, worst_ge, worst_gt);
  EXPECT_LE(worst_pow, 1.0);
  EXPECT_LE(worst_pow3, 1.0);
  EXPECT_LE(worst_ge, 3e-7);
  EXPECT_LE(worst_gt, 3e-7);
  // pow corner cases (C semantics)
  EXPECT_EQ(gptc::pow(-2.0, 3.0), -8.0);
  EXPECT_EQ(gptc::pow(-2.0, -2.0), 0.25);
  EXPECT_TRUE(std::isnan(gptc::pow(-2.0, 0.3)));
  EXPECT_EQ(gptc::pow(0.0, 3.5), 0.0);
  EXPECT_EQ(gptc::pow(0.0, -1.0), INFINITY);
  EXPECT_EQ(gptc::pow(5.0, 0.0), 1.0);
  EXPECT_LT(gptc::pow(-8.0, 101.0), 0.0);
  EXPECT_GT(gptc::pow(-8.0, 100.0), 0.0);
  EXPECT_NEAR(gptc::pow(2.0, 1000.5) / std::pow(2.0, 1000.5), 1.0, 1e-13);
  EXPECT_EQ(gptc::pow(-0.0, 3.0), -0.0);
  EXPECT_TRUE(std::signbit(gptc::pow(-0.0, 3.0)));
  EXPECT_EQ(gptc::pow(-(double)INFINITY, 0.5), (double)INFINITY);
}

TEST(PreludeMath, SpecialValues) {
  const float finf = INFINITY, fnan = NAN;
  const double dinf = INFINITY, dnan = NAN;
  // exp
  EXPECT_EQ(gptc::exp(-finf), 0.0f);
  EXPECT_EQ(gptc::exp(finf), finf);
  EXPECT_TRUE(std::isnan(gptc::exp(fnan)));
  EXPECT_EQ(gptc::exp(0.0f), 1.0f);
  EXPECT_EQ(gptc::exp(89.0f), finf);
  EXPECT_EQ(gptc::exp(-200.0f), 0.0f);
  EXPECT_EQ(gptc::exp(-dinf), 0.0);
  EXPECT_EQ(gptc::exp(dinf), dinf);
  EXPECT_EQ(gptc::exp(710.0), dinf);
  EXPECT_EQ(gptc::exp(-746.0), 0.0);
  EXPECT_TRUE(std::isnan(gptc::exp(dnan)));
  EXPECT_GT(gptc::exp(-740.0), 0.0);  // subnormal result, not flushed
  EXPECT_NEAR(gptc::exp(-740.0) / std::exp(-740.0), 1.0, 1e-10);
  // log
  EXPECT_EQ(gptc::log(0.0f), -finf);
  EXPECT_EQ(gptc::log(-0.0f), -finf);
  EXPECT_TRUE(std::isnan(gptc::log(-1.0f)));
  EXPECT_TRUE(std::isnan(gptc::log(-finf)));
  EXPECT_TRUE(std::isnan(gptc::log(fnan)));
  EXPECT_EQ(gptc::log(finf), finf);
  EXPECT_EQ(gptc::log(1.0f), 0.0f);
  EXPECT_EQ(gptc::log(0.0), -dinf);
  EXPECT_TRUE(std::isnan(gptc::log(-1e-300)));
  EXPECT_EQ(gptc::log(dinf), dinf);
  EXPECT_EQ(gptc::log(1.0), 0.0);
  EXPECT_NEAR(gptc::log(4.9406564584124654e-324), std::log(4.9406564584124654e-324), 1e-12);
  EXPECT_NEAR(gptc::log(1e-40f), std::log(1e-40), 1e-5);  // float denormal input
  // tanh
  EXPECT_EQ(gptc::tanh(finf), 1.0f);
  EXPECT_EQ(gptc::tanh(-finf), -1.0f);
  EXPECT_EQ(gptc::tanh(dinf), 1.0);
  EXPECT_EQ(gptc::tanh(-dinf), -1.0);
  EXPECT_TRUE(std::isnan(gptc::tanh(fnan)));
  EXPECT_TRUE(std::isnan(gptc::tanh(dnan)));
  EXPECT_EQ(gptc::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(gptc::tanh(-0.0f)));
  EXPECT_EQ(gptc::tanh(1e-30f), 1e-30f);
  // erf
  EXPECT_EQ(gptc::erf(finf), 1.0f);
  EXPECT_EQ(gptc::erf(-finf), -1.0f);
  EXPECT_EQ(gptc::erf(dinf), 1.0);
  EXPECT_EQ(gptc::erf(-dinf), -1.0);
  EXPECT_TRUE(std::isnan(gptc::erf(fnan)));
  EXPECT_TRUE(std::isnan(gptc::erf(dnan)));
  EXPECT_EQ(gptc::erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(gptc::erf(-0.0)));
  // sqrt / rsqrt
  EXPECT_EQ(gptc::rsqrt(4.0f), 0.5f);
  EXPECT_EQ(gptc::rsqrt(0.0f), finf);
  EXPECT_TRUE(std::isnan(gptc::sqrt(-1.0f)));
  EXPECT_EQ(gptc::gelu_erf(0.0f), 0.0f);
  EXPECT_EQ(gptc::gelu_tanh(0.0f), 0.0f);
}
