// prelude_rng_test — Philox-4x32-10 against Random123's known-answer vectors, and the
// dropout draw built on it (a pure function of seed, step, op id and element index).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gptc/prelude.h"

namespace {

struct Kat {
  uint32_t counter[4], key[2], expect[4];
};

// Random123's kat_vectors, "philox4x32 10" lines: counter, key -> output.
const Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, KnownAnswers) {
  for (const Kat& k : kKats) {
    uint32_t out[4];
    gptc::philox4x32_10(k.counter, k.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], k.expect[i]) << "word " << i;
  }
}

TEST(Dropout, DrawIsUniformAndKeyed) {
  // Mean and spread of 2^16 draws, and the keep rate at p = 0.1.
  const int n = 1 << 16;
  double sum = 0, kept = 0;
  for (int i = 0; i < n; ++i) {
    float u = gptc::dropout_uniform(1337, 1, 0, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    kept += gptc::dropout_keep(1337, 1, 0, i, 0.1f);
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(kept / n, 0.9, 0.01);
  // Every coordinate changes the draw.
  float base = gptc::dropout_uniform(1, 2, 3, 4);
  EXPECT_NE(base, gptc::dropout_uniform(9, 2, 3, 4));
  EXPECT_NE(base, gptc::dropout_uniform(1, 9, 3, 4));
  EXPECT_NE(base, gptc::dropout_uniform(1, 2, 9, 4));
  EXPECT_NE(base, gptc::dropout_uniform(1, 2, 3, 9));
  EXPECT_EQ(base, gptc::dropout_uniform(1, 2, 3, 4));
}

// The block form (8 lanes at a time on AVX2 and AVX-512) draws exactly dropout_keep's
// masks: random seeds, steps, ids and run lengths, runs that start anywhere, and runs that
// cross a multiple of 2^32 (where the counter's high word changes inside a vector).
TEST(Dropout, BlockMatchesTheScalarDraw) {
  std::mt19937_64 rng(7);
  const uint64_t starts[] = {0, 5, 1000, (uint64_t(1) << 32) - 3, (uint64_t(1) << 32) - 8,
                             (uint64_t(3) << 32) + 11};
  for (int trial = 0; trial < 400; ++trial) {
    const uint64_t seed = rng(), step = rng() % 100000, id = rng() % 50;
    const uint64_t i0 = trial < 60 ? starts[trial % 6] : rng() >> (rng() % 40);
    const int64_t n = (int64_t)(rng() % 131);
    const float p = trial % 4 == 0 ? 0.5f : trial % 4 == 1 ? 0.1f : trial % 4 == 2 ? 0.9f : 0.0f;
    uint32_t keep[131];
    float f[131];
    gptc::dropout_keep_block(seed, step, id, i0, n, p, keep);
    gptc::dropout_factors<float>(seed, step, id, i0, n, p, 1.25f, f);
    for (int64_t j = 0; j < n; ++j) {
      const bool want = gptc::dropout_keep(seed, step, id, i0 + j, p);
      ASSERT_EQ(keep[j], want ? ~0u : 0u) << "trial " << trial << " element " << j;
      ASSERT_EQ(f[j], want ? 1.25f : 0.0f) << "trial " << trial << " element " << j;
    }
  }
}

TEST(GeluGrad, MatchesCentralDifferences) {
  for (double x = -6; x <= 6; x += 0.37) {
    double h = 1e-6;
    double erfNum = (gptc::gelu_erf(x + h) - gptc::gelu_erf(x - h)) / (2 * h);
    double tanhNum = (gptc::gelu_tanh(x + h) - gptc::gelu_tanh(x - h)) / (2 * h);
    EXPECT_NEAR(gptc::gelu_erf_grad(1.0, x), erfNum, 1e-8) << x;
    EXPECT_NEAR(gptc::gelu_tanh_grad(1.0, x), tanhNum, 1e-8) << x;
  }
}

}  // namespace
