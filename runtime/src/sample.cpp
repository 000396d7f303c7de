// sample.cpp — gptc::rt::sample (gptc/sample.hpp): nanoGPT's sampler with its randomness
// and its arithmetic fixed, so that a seed gives the same text from every API.
#include "gptc/sample.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "gptc/model.hpp"  // gptc::rt::Error
#include "gptc/prelude/rng.h"  // philox4x32_10 and, through it, gptc::exp

namespace gptc::rt {

namespace {

// The draw's uniform in [0, 1): the top 24 bits of Philox's first word at key = seed,
// counter = (draw, "SAMP"): a stream of its own, apart from dropout's (counter word 2 is
// a dropout op's id there, small numbers).
float uniform(uint64_t seed, uint64_t draw) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t counter[4] = {(uint32_t)draw, (uint32_t)(draw >> 32), 0x53414D50u, 0};
  uint32_t out[4];
  gptc::philox4x32_10(counter, key, out);
  return (float)(out[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace

int64_t sample(const float* logits, int64_t vocab, float temperature, int64_t top_k,
               float top_p, uint64_t seed, uint64_t draw) {
  if (!logits || vocab < 1)
    throw Error("sample: no logits (vocab " + std::to_string(vocab) + ")");
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw Error("sample: temperature must be a finite number >= 0, got " +
                std::to_string(temperature));
  if (top_k == 0 || top_k < kAllTokens)
    throw Error("sample: top_k must be at least 1 (or -1 for every token), got " +
                std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw Error("sample: top_p must be in (0, 1], got " + std::to_string(top_p));
  int64_t best = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i]))
      throw Error("sample: logit " + std::to_string(i) + " is NaN");
    if (logits[i] > logits[best]) best = i;
  }
  if (logits[best] == -INFINITY) throw Error("sample: every logit is -inf");
  if (temperature == 0.0f || top_k == 1) return best;

  // The candidates, likeliest first (equal logits by id: a total order, so any sort gives
  // this one), cut to top_k.
  const int64_t k = top_k == kAllTokens ? vocab : std::min(top_k, vocab);
  std::vector<int64_t> order((size_t)vocab);
  std::iota(order.begin(), order.end(), int64_t{0});
  auto likelier = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), likelier);
  // exp((l - l_max) / T), summed in that order; the top_p cut on the running sum.
  const float top = logits[order[0]];
  std::vector<float> p((size_t)k);
  float total = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    p[(size_t)i] = gptc::exp((logits[order[(size_t)i]] - top) / temperature);
    total += p[(size_t)i];
  }
  int64_t n = k;
  if (top_p < 1.0f) {
    const float want = top_p * total;
    float run = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      run += p[(size_t)i];
      if (run >= want) {
        n = i + 1;
        break;
      }
    }
  }
  float kept = 0.0f;
  for (int64_t i = 0; i < n; ++i) kept += p[(size_t)i];
  const float target = uniform(seed, draw) * kept;
  float run = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    run += p[(size_t)i];
    if (target < run) return order[(size_t)i];
  }
  return order[(size_t)(n - 1)];
}

}  // namespace gptc::rt
