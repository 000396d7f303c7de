// prelude_rng_test — Philox-4x32-10 against Random123's known-answer vectors, and the
// dropout draw built on it (a pure function of seed, step, op id and element index).
#include <gtest/gtest.h>

#include <cmath>

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
