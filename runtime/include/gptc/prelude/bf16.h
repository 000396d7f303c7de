// gptc/prelude/bf16.h — bf16 storage and its round-to-nearest-even conversion: portable.
// Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_BF16_H
#define GPTC_PRELUDE_BF16_H

#include "gptc/prelude/math.h"

namespace gptc {

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

}  // namespace gptc

#endif  // GPTC_PRELUDE_BF16_H
