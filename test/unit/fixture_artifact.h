// fixture_artifact.h — the runtime tests' hand-made artifact: a tiny kernels.cpp (y = w + x,
// plus a canonical sum and an arena-alignment flag), its manifest, and the host compiler
// command that builds it as the code generator does. Shared by test/unit/runtime_test.cpp
// and the runtime's fuzz targets (test/fuzz/runtime_fuzz.cpp). GPTC_TEST_CXX and
// GPTC_TEST_RUNTIME_INCLUDE name the compiler and the runtime's headers.
#ifndef GPTC_TEST_FIXTURE_ARTIFACT_H
#define GPTC_TEST_FIXTURE_ARTIFACT_H

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace gptc_test {

inline const char* kKernels = R"(// fixture: args = {w: param f32 [2,3], x: input f32 [2,3]}
// results = {y: f32 [2,3], total: f32 [], aligned: i64 []}
#include "gptc/prelude.h"
GPTC_EXPORT int gptc_entry_abi(void) { return 1; }
GPTC_EXPORT const char* gptc_entry(void* const* args, void* const* results, void* arena) {
  const float* w = (const float*)args[0];
  const float* x = (const float*)args[1];
  float* y = (float*)results[0];
  float* tmp = (float*)arena;  // stage through the arena to exercise it
  GPTC_FOR(i, 6) tmp[i] = w[i] + x[i];
  GPTC_FOR(i, 6) y[i] = tmp[i];
  *(float*)results[1] = gptc::reduce_sum<float>(6, [&](int64_t i) { return tmp[i]; });
  *(int64_t*)results[2] = ((uintptr_t)arena % 64 == 0) ? 1 : 0;
  return nullptr;
}
GPTC_EXPORT const char* gptc_signature(void) {
  return "arena 24\nparam f32 [2, 3] w\ninput f32 [2, 3] x\nresult f32 [2, 3] y\n"
         "result f32 [] total\nresult i64 [] aligned";
}
)";

inline const char* kManifest = R"({
  "format": "gptc-artifact", "version": 1,
  "library": "kernels.so", "source": "kernels.cpp", "weights": "weights.safetensors",
  "arena_bytes": 24, "kernels": 1,
  "args": [ {"name": "w", "kind": "param", "dtype": "f32", "shape": [2, 3]},
            {"name": "x", "kind": "input", "dtype": "f32", "shape": [2, 3]} ],
  "results": [ {"name": "y", "dtype": "f32", "shape": [2, 3]},
               {"name": "total", "dtype": "f32", "shape": []},
               {"name": "aligned", "dtype": "i64", "shape": []} ]
})";

inline void spit(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// Builds <d>/kernels.cpp into <d>/kernels.so as the code generator does; the command, or
// empty on success.
inline std::string compile_kernels(const std::filesystem::path& d) {
  std::string cmd = std::string(GPTC_TEST_CXX) +
                    " -std=c++17 -O2 -shared -fPIC -ffp-contract=off -I" +
                    GPTC_TEST_RUNTIME_INCLUDE + " " + (d / "kernels.cpp").string() + " -o " +
                    (d / "kernels.so").string();
  return std::system(cmd.c_str()) == 0 ? "" : cmd;
}

}  // namespace gptc_test

#endif  // GPTC_TEST_FIXTURE_ARTIFACT_H
