// prelude_reduce_test.cpp — the canonical reduction orders of gptc/prelude.h (reduce_sum,
// reduce_max, dot_seq) against independent implementations of the spec, plus bf16 rounding
// and GPTC_FOR.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gptc/prelude.h"

namespace {

// The spec, written out the long way: partial j sums x[j], x[j+32], ... left to right; the
// butterfly is materialized level by level into fresh arrays of 16, 8, 4, 2, 1.
template <class T>
T spec_sum(const std::vector<T>& x) {
  std::vector<T> level(32, T(0));
  for (int j = 0; j < 32; ++j)
    for (size_t k = (size_t)j; k < x.size(); k += 32) level[j] = level[j] + x[k];
  while (level.size() > 1) {
    size_t half = level.size() / 2;
    std::vector<T> next(half);
    for (size_t j = 0; j < half; ++j) next[j] = level[j] + level[j + half];
    level = next;
  }
  return level[0];
}

template <class T>
T naive_sum(const std::vector<T>& x) {
  T acc = 0;
  for (T v : x) acc = acc + v;
  return acc;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(PreludeReduce, SumMatchesSpecBitwise) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  for (int64_t n : {0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 1023, 4097}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> x(n);
      for (auto& v : x) v = std::ldexp(mant(rng), expo(rng));  // wide magnitudes: order matters
      float got = gptc::reduce_sum<float>(n, [&](int64_t k) { return x[k]; });
      EXPECT_EQ(bits(got), bits(spec_sum(x))) << "n=" << n << " rep=" << rep;
      std::vector<double> xd(x.begin(), x.end());
      double gotd = gptc::reduce_sum<double>(n, [&](int64_t k) { return xd[k]; });
      EXPECT_EQ(gotd, spec_sum(xd)) << "n=" << n;
    }
  }
}

// reduce_sum16 (16 column sums at once, vectorised across the columns): each column's
// bits are the canonical reduce_sum's, for lengths around the 32-partial edges.
TEST(PreludeReduce, Sum16IsSixteenCanonicalSums) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  for (int64_t n : {0, 1, 4, 31, 32, 33, 100, 1024, 1031}) {
    const int64_t ld = 40;  // rows of a matrix wider than the 16 columns summed
    std::vector<float> x(n * ld);
    for (auto& v : x) v = std::ldexp(mant(rng), expo(rng));
    float got[16];
    gptc::reduce_sum16<float>(n, [&](int64_t k, int64_t l) { return x[k * ld + 3 + l]; }, got);
    for (int64_t l = 0; l < 16; ++l) {
      float want = gptc::reduce_sum<float>(n, [&](int64_t k) { return x[k * ld + 3 + l]; });
      ASSERT_EQ(bits(got[l]), bits(want)) << "n=" << n << " column " << l;
    }
  }
}

TEST(PreludeReduce, SumDiffersFromNaiveOrder) {
  // Constructed: canonical order gives p[0] = 1e8 + -1e8 = 0 and p[1] = 1, total 1; naive
  // left to right loses the 1 in 1e8 + 1 and ends at 0.
  std::vector<float> x(33, 0.0f);
  x[0] = 1e8f;
  x[1] = 1.0f;
  x[32] = -1e8f;
  float canon = gptc::reduce_sum<float>(33, [&](int64_t k) { return x[k]; });
  EXPECT_EQ(canon, 1.0f);
  EXPECT_EQ(naive_sum(x), 0.0f);
  // And on random data of mixed magnitudes the two orders disagree somewhere.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int differ = 0;
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<float> y(1000);
    for (auto& v : y) v = u(rng) * (rep % 2 ? 1e4f : 1.0f);
    float a = gptc::reduce_sum<float>(1000, [&](int64_t k) { return y[k]; });
    differ += bits(a) != bits(naive_sum(y));
  }
  EXPECT_GT(differ, 0);
}

TEST(PreludeReduce, Max) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  for (int64_t n : {1, 31, 33, 1000}) {
    std::vector<float> x(n);
    for (auto& v : x) v = u(rng);
    float ref = x[0];
    for (float v : x) ref = std::max(ref, v);
    EXPECT_EQ(gptc::reduce_max<float>(n, [&](int64_t k) { return x[k]; }), ref);
    x[n / 2] = NAN;
    EXPECT_TRUE(std::isnan(gptc::reduce_max<float>(n, [&](int64_t k) { return x[k]; })));
  }
  EXPECT_EQ(gptc::reduce_max<float>(0, [](int64_t) { return 0.0f; }), -INFINITY);
  EXPECT_EQ(gptc::reduce_max<int64_t>(3, [](int64_t k) { return -10 + k; }), -8);
}

// The butterflies over 32 partials (vector halves on AVX-512 and AVX2) against the scalar loops,
// bit for bit, with NaNs of both signs, signed zeros and infinities among the partials.
// (max picks one of its operands explicitly, so even its NaNs match bit for bit.)
TEST(PreludeReduce, ButterfliesMatchTheScalarLoops) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-50.0f, 50.0f);
  std::uniform_int_distribution<int> pick(0, 30);
  for (int trial = 0; trial < 5000; ++trial) {
    float p[32];
    for (float& v : p) {
      const int k = pick(rng);
      v = k == 0 ? NAN : k == 1 ? -NAN : k == 2 ? 0.0f : k == 3 ? -0.0f : k == 4 ? -INFINITY
          : k == 5 ? INFINITY : u(rng);
    }
    if (trial % 2 == 0)  // finite partials only
      for (float& v : p) v = u(rng);
    float a[32], b[32];
    std::memcpy(a, p, sizeof p);
    std::memcpy(b, p, sizeof p);
    const float sum = gptc::detail::butterfly_sum32(a), max = gptc::detail::butterfly_max32(b);
    float rs[32], rm[32];
    std::memcpy(rs, p, sizeof p);
    std::memcpy(rm, p, sizeof p);
    for (int w = 16; w >= 1; w >>= 1)
      for (int j = 0; j < w; ++j) {
        rs[j] = rs[j] + rs[j + w];
        rm[j] = gptc::maximum(rm[j], rm[j + w]);
      }
    // A NaN sum: x86 keeps the first operand's NaN, and the compiler may order a
    // commutative add either way (here or in the reference loop), so only NaN-ness counts.
    if (std::isnan(rs[0]))
      ASSERT_TRUE(std::isnan(sum)) << "trial " << trial;
    else
      ASSERT_EQ(bits(sum), bits(rs[0])) << "trial " << trial;
    ASSERT_EQ(bits(max), bits(rm[0])) << "trial " << trial;
  }
}

TEST(PreludeReduce, DotSeqIsSequentialFma) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t n : {0, 1, 7, 64, 1000}) {
    std::vector<float> a(n), b(n);
    for (auto& v : a) v = u(rng);
    for (auto& v : b) v = u(rng);
    float ref = 0.0f;
    for (int64_t k = 0; k < n; ++k) ref = std::fma(a[k], b[k], ref);
    float got = gptc::dot_seq<float>(n, [&](int64_t k) { return a[k]; }, [&](int64_t k) { return b[k]; });
    EXPECT_EQ(bits(got), bits(ref)) << "n=" << n;
  }
  // The fma is real: -1 + (1+2^-12)^2 = 2^-11 + 2^-24 exactly with fma; a separate multiply
  // rounds (1+2^-12)^2 to 1 + 2^-11 first and gives 2^-11.
  std::vector<float> a = {-1.0f, 1.0f + std::ldexp(1.0f, -12)};
  std::vector<float> b = {1.0f, 1.0f + std::ldexp(1.0f, -12)};
  float got = gptc::dot_seq<float>(2, [&](int64_t k) { return a[k]; }, [&](int64_t k) { return b[k]; });
  EXPECT_EQ(got, std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  volatile float prod = a[1] * b[1];
  EXPECT_EQ(a[0] * b[0] + prod, std::ldexp(1.0f, -11));
}

TEST(PreludeBf16, Rounding) {
  auto to = [](uint32_t fbits) { return gptc::to_bf16(from_bits(fbits)).bits; };
  EXPECT_EQ(to(0x3f800000u), 0x3f80);  // 1.0 exact
  EXPECT_EQ(to(0x3f808000u), 0x3f80);  // tie, even stays
  EXPECT_EQ(to(0x3f818000u), 0x3f82);  // tie, odd rounds up to even
  EXPECT_EQ(to(0x3f808001u), 0x3f81);  // above half rounds up
  EXPECT_EQ(to(0x3f807fffu), 0x3f80);  // below half rounds down
  EXPECT_EQ(to(0xbf808001u), 0xbf81);  // sign symmetric
  EXPECT_EQ(to(0x7f800000u), 0x7f80);  // +inf
  EXPECT_EQ(to(0xff800000u), 0xff80);  // -inf
  EXPECT_EQ(to(0x7f7fffffu), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(to(0x80000000u), 0x8000);  // -0
  EXPECT_EQ(to(0x00000001u), 0x0000);  // smallest denormal rounds to 0
  uint16_t n = to(0x7f800001u);         // signalling-ish NaN with low payload stays NaN
  EXPECT_EQ(n & 0x7f80, 0x7f80);
  EXPECT_NE(n & 0x007f, 0);
  EXPECT_TRUE(std::isnan(gptc::to_float(gptc::to_bf16(NAN))));
  // to_float is exact and round trips every non-NaN bf16.
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    gptc::bf16 h{(uint16_t)b};
    float f = gptc::to_float(h);
    EXPECT_EQ(bits(f), b << 16);
    if (!std::isnan(f)) EXPECT_EQ(gptc::to_bf16(f).bits, b);
  }
}

TEST(PreludeFor, LoopsOnceEvaluatesBoundOnce) {
  int calls = 0;
  auto bound = [&] { ++calls; return int64_t(5); };
  int64_t sum = 0;
  GPTC_FOR(i, bound()) sum += i;
  EXPECT_EQ(sum, 10);
  EXPECT_EQ(calls, 1);
  GPTC_FOR(i, 0) FAIL();
}
