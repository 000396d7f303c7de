// runtime_fuzz.cpp — libFuzzer targets of the runtime's readers, built with clang's
// -fsanitize=fuzzer,address,undefined (test/fuzz/CMakeLists.txt), one binary per target:
//
//   GPTC_FUZZ_SAFETENSORS  the input is a weights file: it is opened (header, sizes,
//                          offsets, dtypes, shapes, overlaps) and every tensor read (its
//                          CRC-32 checked where the file records one);
//   GPTC_FUZZ_MANIFEST     the input is manifest.json, beside the runtime tests' hand-made
//                          artifact (test/unit/fixture_artifact.h, built at start-up): it is
//                          loaded through Model::load and the C API, and run where its inputs
//                          and results are the fixture's.
//
// Each input either works or is refused with a gptc::rt::Error of one line (the C API: NULL
// and a message). Anything else — a crash, a sanitizer's report, another exception, a
// message of two lines — stops the fuzzer with the input that did it. The corpora are in
// test/fuzz/corpus/; ctest runs each target briefly, long runs are in bench/NOTES.md
// ("Fuzzing").
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../unit/fixture_artifact.h"
#include "gptc/model.hpp"
#include "gptc/runtime.h"
#include "gptc/safetensors.hpp"

namespace fs = std::filesystem;
namespace st = gptc::rt::safetensors;

namespace {

fs::path g_dir;  // the fixture artifact (manifest target) or the weights file's folder

void remove_dir() { fs::remove_all(g_dir); }

// A refusal must be one line.
void check_message(const char* what) {
  if (std::string(what).find('\n') != std::string::npos) {
    std::fprintf(stderr, "runtime_fuzz: an error of more than one line:\n%s\n", what);
    std::abort();
  }
}

#if defined(GPTC_FUZZ_SAFETENSORS)
void run_one(const std::string& bytes) {
  const fs::path file = g_dir / "weights.safetensors";
  gptc_test::spit(file, bytes);
  try {
    st::Reader reader(file.string());
    std::vector<char> buf;
    for (const st::TensorInfo& t : reader.tensors()) {
      buf.resize(t.nbytes());
      reader.read(t, buf.data());
      (void)reader.checksum(t.name);
    }
  } catch (const gptc::rt::Error& e) {
    check_message(e.what());
  }
}
#elif defined(GPTC_FUZZ_MANIFEST)
void run_one(const std::string& bytes) {
  gptc_test::spit(g_dir / "manifest.json", bytes);
  try {
    auto m = gptc::rt::Model::load(g_dir.string());
    std::vector<float> x(6, 1.0f), y(6);
    float total;
    int64_t aligned;
    if (m->inputs().size() == 1 && m->inputs()[0].nbytes == x.size() * sizeof(float) &&
        m->results().size() == 3 && m->results()[0].nbytes == y.size() * sizeof(float) &&
        m->results()[1].nbytes == sizeof total && m->results()[2].nbytes == sizeof aligned)
      m->run({x.data()}, {y.data(), &total, &aligned});
  } catch (const gptc::rt::Error& e) {
    check_message(e.what());
  }
  if (gptc_model* c = gptc_model_load(g_dir.c_str())) {
    gptc_model_free(c);
  } else {
    const char* why = gptc_last_error();
    if (!why || !*why) {
      std::fprintf(stderr, "runtime_fuzz: the C API refused a load without a message\n");
      std::abort();
    }
    check_message(why);
  }
}
#else
#error "define GPTC_FUZZ_SAFETENSORS or GPTC_FUZZ_MANIFEST"
#endif

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/gptc_runtime_fuzzXXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("runtime_fuzz: mkdtemp");
    std::exit(1);
  }
  g_dir = tmpl;
  std::atexit(remove_dir);
#if defined(GPTC_FUZZ_MANIFEST)
  gptc_test::spit(g_dir / "kernels.cpp", gptc_test::kKernels);
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  st::write((g_dir / "weights.safetensors").string(), {{"w", "F32", {2, 3}, w.data()}});
  if (std::string cmd = gptc_test::compile_kernels(g_dir); !cmd.empty()) {
    std::fprintf(stderr, "runtime_fuzz: could not build the fixture: %s\n", cmd.c_str());
    std::exit(1);
  }
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run_one(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
