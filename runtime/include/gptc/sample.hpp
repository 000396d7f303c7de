// gptc/sample.hpp — the sampler of gptc's generation: a token drawn from a row of logits
// with temperature, top-k and top-p (nucleus), from a Philox stream keyed by a seed. The
// same logits, settings, seed and draw number give the same token in C, C++ and Python
// (gptc.generate and the C API's gptc_sample call this one function), on any machine: the
// order, the exp (gptc's own) and every sum are fixed.
#ifndef GPTC_SAMPLE_HPP
#define GPTC_SAMPLE_HPP

#include <cstdint>

namespace gptc::rt {

// top_k: how many of the likeliest tokens may be drawn, or kAllTokens; top_p: in (0, 1],
// the smallest set of the likeliest tokens whose probability reaches it (1: all).
constexpr int64_t kAllTokens = -1;

// The token drawn from logits[0 .. vocab): at temperature 0 (or top_k 1) the likeliest (the
// lowest id among equal logits); else the candidates are ordered by logit (then by id), cut
// to top_k, their probabilities exp((l - l_max) / temperature) summed in that order, cut
// to top_p, and u = the 24-bit uniform of Philox-4x32-10 at (seed, draw) picks the first
// candidate whose running sum exceeds u times the total. Throws gptc::rt::Error (one line)
// for a vocab below 1, a temperature that is negative or not finite, a top_k of 0 or below
// kAllTokens, a top_p outside (0, 1], a NaN logit, or logits that are all -inf.
int64_t sample(const float* logits, int64_t vocab, float temperature, int64_t top_k,
               float top_p, uint64_t seed, uint64_t draw);

}  // namespace gptc::rt

#endif  // GPTC_SAMPLE_HPP
