// gptc/checksum.h — FNV-1a (64 bits) of a byte string: the checksum of kernels.so that
// `gptc compile` writes into an artifact's manifest and the runtime checks before it loads
// the library (docs/artifact.md). It guards against a truncated, corrupt or swapped file, not
// against tampering. A few lines written here, so that the runtime needs no hashing library.
#ifndef GPTC_CHECKSUM_H
#define GPTC_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gptc {

inline uint64_t fnv1a64(const char* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // the offset basis
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;  // the FNV prime
  }
  return h;
}

// As the manifest spells it: 16 lowercase hex digits.
inline std::string fnv1a64_hex(const std::string& bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(fnv1a64(bytes.data(), bytes.size())));
  return text;
}

}  // namespace gptc

#endif  // GPTC_CHECKSUM_H
