// gptc/signature.h — what an artifact's kernels.so was built for, as lines of text: the
// arena's size, then every argument's kind, dtype, shape and name and every result's, in
// the manifest's order. `gptc compile` compiles these lines into the library (the
// gptc_signature entry point) from the same values it writes into manifest.json; the
// runtime builds them again from the manifest it reads and refuses a manifest that differs
// (docs/artifact.md). A hand-edited manifest (a batch size changed, an argument dropped, a
// smaller arena) would otherwise have the kernels read and write past their buffers.
// Shared by codegen and the runtime, so that both spell the lines the same way.
#ifndef GPTC_SIGNATURE_H
#define GPTC_SIGNATURE_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gptc {

// A shape as messages and signatures print it: "[2, 3]", "[]" for a scalar.
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// An argument's role in its line: its kind, and for a param the kernels assume holds a
// causal mask (the manifest's "tril_ones") "param+tril_ones".
inline std::string signature_kind(const std::string& kind, bool trilOnes) {
  return trilOnes ? kind + "+tril_ones" : kind;
}

inline std::string signature_arena(uint64_t bytes) { return "arena " + std::to_string(bytes); }

// role: an argument's kind ("param", "state", "input") or "result"; a param that must hold
// a causal mask (the manifest's "tril_ones") is "param+tril_ones".
inline std::string signature_tensor(const std::string& role, const std::string& dtype,
                                    const std::vector<int64_t>& shape, const std::string& name) {
  return role + " " + dtype + " " + shape_text(shape) + " " + name;
}

// The lines as one C string literal for the generated source: printable ASCII as is, every
// other byte (the lines' separating newlines among them) as a three-digit octal escape.
inline std::string signature_literal(const std::vector<std::string>& lines) {
  std::string out = "\"";
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = lines[i] + (i + 1 < lines.size() ? "\n" : "");
    for (unsigned char c : line) {
      if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
        out += static_cast<char>(c);
      } else {
        char esc[5];
        std::snprintf(esc, sizeof esc, "\\%03o", c);
        out += esc;
      }
    }
  }
  return out + "\"";
}

}  // namespace gptc

#endif  // GPTC_SIGNATURE_H
