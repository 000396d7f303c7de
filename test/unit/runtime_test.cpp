// runtime_test.cpp — gptc::rt::Model and the C API on a hand-made artifact
// (fixture_artifact.h): the test compiles its kernels.cpp with the host compiler like the
// code generator does, writes manifest.json and weights.safetensors, then loads, runs,
// saves weights, and checks the error messages.
#include <algorithm>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gptc/checksum.h"
#include "gptc/model.hpp"
#include "gptc/runtime.h"
#include "gptc/signature.h"
#include "gptc/safetensors.hpp"
#include "fixture_artifact.h"

namespace fs = std::filesystem;
namespace st = gptc::rt::safetensors;

namespace {

using gptc_test::compile_kernels;
using gptc_test::kKernels;
using gptc_test::kManifest;
using gptc_test::spit;

// One compiled artifact shared by all tests (compiling takes a second).
class RuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gptc_rt_testXXXXXX";
    dir_ = new fs::path(mkdtemp(tmpl));
    fs::path d = *dir_;
    spit(d / "kernels.cpp", kKernels);
    spit(d / "manifest.json", kManifest);
    std::vector<float> w = {1, 2, 3, 4, 5, 6};
    st::write((d / "weights.safetensors").string(), {{"w", "F32", {2, 3}, w.data()}});
    ASSERT_EQ(compile_kernels(d), "");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  // A copy of the artifact folder the test may break.
  fs::path copy_artifact(const std::string& name) {
    fs::path c = dir_->string() + "_" + name;
    fs::remove_all(c);
    fs::copy(*dir_, c);
    return c;
  }
  std::string load_error(const fs::path& d) {
    try {
      gptc::rt::Model::load(d.string());
    } catch (const gptc::rt::Error& e) {
      std::printf("  error: %s\n", e.what());
      return e.what();
    }
    ADD_FAILURE() << "load of " << d << " succeeded";
    return "";
  }
  // The load error of `d` with kManifest's first `from` replaced by `to`.
  std::string edited(const fs::path& d, const std::string& from, const std::string& to) {
    std::string text = kManifest;
    text.replace(text.find(from), from.size(), to);
    spit(d / "manifest.json", text);
    return load_error(d);
  }
  static fs::path* dir_;
};
fs::path* RuntimeTest::dir_ = nullptr;

}  // namespace

TEST_F(RuntimeTest, LoadAndRun) {
  auto m = gptc::rt::Model::load(dir_->string());
  ASSERT_EQ(m->params().size(), 1u);
  ASSERT_EQ(m->inputs().size(), 1u);
  ASSERT_EQ(m->results().size(), 3u);
  EXPECT_EQ(m->inputs()[0].name, "x");
  EXPECT_EQ(m->inputs()[0].nbytes, 24u);
  EXPECT_EQ(m->results()[1].shape, std::vector<int64_t>{});
  EXPECT_EQ(m->results()[1].nbytes, 4u);
  EXPECT_EQ(m->results()[2].dtype, "i64");
  std::vector<float> x = {10, 20, 30, 40, 50, 60}, y(6);
  float total = 0;
  int64_t aligned = 0;
  m->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(total, 231.0f);
  EXPECT_EQ(aligned, 1);
  EXPECT_EQ((uintptr_t)m->param_data("w") % 64, 0u);
  EXPECT_THROW(m->param_data("nope"), gptc::rt::Error);
  EXPECT_THROW(m->run({}, {y.data(), &total, &aligned}), gptc::rt::Error);
  // Past kMaxThreads OpenMP could not start the team and ended the process in the next run.
  EXPECT_NO_THROW(m->set_num_threads(gptc::rt::Model::kMaxThreads));
  try {
    m->set_num_threads(gptc::rt::Model::kMaxThreads + 1);
    ADD_FAILURE() << "a thread count past the limit was accepted";
  } catch (const gptc::rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("thread count must be from 0 to 1024, got 1025"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(m->save_weights(""), gptc::rt::Error);
}

// Resident memory (a CPU artifact's is the host's): rows copied with their pitches, zeros
// from a null source, a run reading an input and writing a result there in place.
TEST_F(RuntimeTest, ResidentMemory) {
  auto m = gptc::rt::Model::load(dir_->string());
  float* a = static_cast<float*>(m->alloc_resident(6 * sizeof(float)));
  float* b = static_cast<float*>(m->alloc_resident(12 * sizeof(float)));
  EXPECT_EQ((uintptr_t)a % 64, 0u);
  for (int i = 0; i < 6; ++i) a[i] = (float)(i + 1);
  std::fill_n(b, 12, -1.0f);
  // a's 3 rows of 2 into b's rows of 4, then b's last two columns to zero.
  m->copy_rows(b, 16, a, 8, 8, 3);
  m->copy_rows(b + 2, 16, nullptr, 0, 8, 3);
  EXPECT_EQ(std::vector<float>(b, b + 12),
            (std::vector<float>{1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0}));
  float total = 0;
  int64_t aligned = 0;
  m->run({a}, {b, &total, &aligned}, {true}, {true, false, false});  // y = w + x into b
  EXPECT_EQ(std::vector<float>(b, b + 6), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(total, 42.0f);
  EXPECT_EQ(m->transfers().to_device + m->transfers().to_host, 0u);  // none on the CPU
  EXPECT_THROW(m->run({a}, {b, &total, &aligned}, {true, true}, {}), gptc::rt::Error);
  EXPECT_THROW(m->copy_rows(b, 6, a, 8, 8, 1), gptc::rt::Error);  // a pitch not 4's multiple
  std::vector<float> elsewhere(6);
  EXPECT_THROW(m->free_resident(elsewhere.data()), gptc::rt::Error);
  m->free_resident(a);
  EXPECT_THROW(m->free_resident(a), gptc::rt::Error);  // freed once
  // b is freed with the Model.
}

TEST_F(RuntimeTest, SetParamAndSaveWeights) {
  fs::path d = copy_artifact("save");
  auto m = gptc::rt::Model::load(d.string());
  float* w = (float*)m->param_data("w");
  for (int i = 0; i < 6; ++i) w[i] = 100.0f * (float)i;
  m->save_weights((d / "weights.safetensors").string());
  auto m2 = gptc::rt::Model::load(d.string());
  std::vector<float> x(6, 1.0f), y(6);
  float total;
  int64_t aligned;
  m2->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y, (std::vector<float>{1, 101, 201, 301, 401, 501}));
  fs::remove_all(d);
}

TEST_F(RuntimeTest, WeightsSharedWithAnotherModel) {
  // A second model loaded with the first's weights holds w in the first's buffer: not
  // read from its own file (which here holds other values), a write seen by both.
  fs::path d = copy_artifact("shared");
  std::vector<float> other = {9, 9, 9, 9, 9, 9};
  st::write((d / "weights.safetensors").string(), {{"w", "F32", {2, 3}, other.data()}});
  auto first = gptc::rt::Model::load(dir_->string());
  auto second = gptc::rt::Model::load(d.string(), first.get());
  EXPECT_EQ(second->param_data("w"), first->param_data("w"));
  std::vector<float> x(6, 0.0f), y(6);
  float total;
  int64_t aligned;
  second->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  static_cast<float*>(first->param_data("w"))[0] = 50.0f;
  second->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y[0], 50.0f);
  first.reset();  // the buffer lives while a model holds it
  second->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y[0], 50.0f);
  // A param of another shape is its own; a training step's are never shared.
  // A copy with w's manifest entry and kernels.cpp's signature line edited, rebuilt.
  auto rebuilt = [&](const std::string& name, const std::string& entry,
                     const std::string& line) {
    fs::path c = copy_artifact(name);
    std::string manifest = kManifest, kernels = kKernels;
    const std::string oldEntry = "\"kind\": \"param\", \"dtype\": \"f32\", \"shape\": [2, 3]";
    const std::string oldLine = "param f32 [2, 3] w";
    EXPECT_NE(manifest.find(oldEntry), std::string::npos);
    EXPECT_NE(kernels.find(oldLine), std::string::npos);
    spit(c / "manifest.json", manifest.replace(manifest.find(oldEntry), oldEntry.size(), entry));
    spit(c / "kernels.cpp", kernels.replace(kernels.find(oldLine), oldLine.size(), line));
    EXPECT_EQ(compile_kernels(c), "");
    return c;
  };
  fs::path e = rebuilt("shared_shape",
                       "\"kind\": \"param\", \"dtype\": \"f32\", \"shape\": [3, 2]",
                       "param f32 [3, 2] w");
  st::write((e / "weights.safetensors").string(), {{"w", "F32", {3, 2}, other.data()}});
  auto third = gptc::rt::Model::load(e.string(), second.get());
  EXPECT_NE(third->param_data("w"), second->param_data("w"));
  EXPECT_TRUE(second->param_shared(0));
  EXPECT_FALSE(third->param_shared(0));
  // A shared param is its owner's to save: the second model's file leaves w out, and a
  // folder with that file loads beside a model that holds w, not alone.
  second->save_weights((d / "weights.safetensors").string());
  EXPECT_EQ(st::Reader((d / "weights.safetensors").string()).find("w"), nullptr);
  auto fourth = gptc::rt::Model::load(d.string(), second.get());
  EXPECT_EQ(fourth->param_data("w"), second->param_data("w"));
  EXPECT_TRUE(fourth->param_shared(0));
  try {
    gptc::rt::Model::load(d.string());
    ADD_FAILURE() << "loaded without the param it shares";
  } catch (const gptc::rt::Error& err) {
    EXPECT_NE(std::string(err.what()).find("missing tensor 'w'"), std::string::npos)
        << err.what();
  }
  // verify (gptc compile --weights-of): the folder without w checks beside an artifact
  // whose manifest has w alike, not alone, nor beside one whose w has another shape.
  EXPECT_NO_THROW(gptc::rt::Model::verify(d.string(), dir_->string()));
  for (const std::string& beside : {std::string(), e.string()}) {
    try {
      gptc::rt::Model::verify(d.string(), beside);
      ADD_FAILURE() << "verified without the param it shares, beside '" << beside << "'";
    } catch (const gptc::rt::Error& err) {
      EXPECT_NE(std::string(err.what()).find("missing tensor 'w'"), std::string::npos)
          << err.what();
    }
  }
  try {
    gptc::rt::Model::verify(d.string(), (d / "no-such-artifact").string());
    ADD_FAILURE() << "verified beside a folder that does not exist";
  } catch (const gptc::rt::Error& err) {
    EXPECT_NE(std::string(err.what()).find("does not exist"), std::string::npos) << err.what();
  }
  fs::path t = rebuilt("shared_state",
                       "\"kind\": \"state\", \"dtype\": \"f32\", \"shape\": [2, 3]",
                       "state f32 [2, 3] w");
  // A state is shared as a param is (gradient accumulation's two programs share the
  // summed gradients): taken from the model beside, not zeros of its own.
  auto state = gptc::rt::Model::load(t.string());
  static_cast<float*>(state->param_data("w"))[0] = 7.0f;
  auto besideState = gptc::rt::Model::load(t.string(), state.get());
  EXPECT_EQ(besideState->param_data("w"), state->param_data("w"));
  EXPECT_TRUE(besideState->param_shared(0));
  EXPECT_EQ(static_cast<const float*>(besideState->param_data("w"))[0], 7.0f);
  for (const fs::path& p : {d, e, t}) fs::remove_all(p);
}

TEST_F(RuntimeTest, CApi) {
  gptc_model* m = gptc_model_load(dir_->c_str());
  ASSERT_NE(m, nullptr) << gptc_last_error();
  EXPECT_EQ(gptc_model_num_inputs(m), 1);
  EXPECT_EQ(gptc_model_num_results(m), 3);
  EXPECT_EQ(gptc_model_num_params(m), 1);
  gptc_tensor_info info;
  ASSERT_EQ(gptc_model_result_info(m, 0, &info), 0);
  EXPECT_STREQ(info.name, "y");
  EXPECT_STREQ(info.dtype, "f32");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.shape[1], 3);
  EXPECT_EQ(info.nbytes, 24u);
  ASSERT_EQ(gptc_model_result_info(m, 1, &info), 0);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(gptc_model_input_info(m, 5, &info), -1);
  EXPECT_NE(std::string(gptc_last_error()).find("out of range"), std::string::npos);
  // Lookup by name.
  EXPECT_EQ(gptc_model_result_index(m, "y"), 0);
  EXPECT_EQ(gptc_model_param_index(m, "w"), 0);
  EXPECT_EQ(gptc_model_input_index(m, "x"), 0);
  EXPECT_EQ(gptc_model_input_index(m, "nope"), -1);
  EXPECT_EQ(std::string(gptc_last_error()), "gptc: no input named 'nope' (the model has x)");
  EXPECT_EQ(gptc_model_param_index(m, nullptr), -1);
  EXPECT_EQ(gptc_model_param_index(nullptr, "w"), -1);
  EXPECT_STREQ(gptc_last_error(), "gptc_model_param_index: model is NULL");
  EXPECT_EQ(std::string(gptc_version()).find('.'), 1u);  // "0.1.0"
  std::vector<float> x = {1, 1, 1, 1, 1, 1}, y(6);
  float total;
  int64_t aligned;
  const void* in[] = {x.data()};
  void* out[] = {y.data(), &total, &aligned};
  ASSERT_EQ(gptc_model_run(m, in, out), 0) << gptc_last_error();
  EXPECT_EQ(y[5], 7.0f);
  EXPECT_EQ(total, 27.0f);
  // A second model sharing the first's parameter: a write through one, a run of the other,
  // and the buffer outlives the model that loaded it.
  gptc_model* beside = gptc_model_load_sharing(dir_->c_str(), m);
  ASSERT_NE(beside, nullptr) << gptc_last_error();
  EXPECT_EQ(gptc_model_param_data(beside, 0), gptc_model_param_data(m, 0));
  static_cast<float*>(gptc_model_param_data(m, 0))[5] = 100.0f;
  gptc_model_free(m);
  ASSERT_EQ(gptc_model_run(beside, in, out), 0) << gptc_last_error();
  EXPECT_EQ(y[5], 101.0f);
  gptc_model_free(beside);
  EXPECT_EQ(gptc_model_load_sharing(dir_->c_str(), nullptr), nullptr);
  EXPECT_STREQ(gptc_last_error(), "gptc_model_load_sharing: weights_of is NULL");
  EXPECT_EQ(gptc_model_num_params(nullptr), -1);  // with its own message, not a stale one
  EXPECT_STREQ(gptc_last_error(), "gptc_model_num_params: model is NULL");
  EXPECT_EQ(gptc_model_load("/nonexistent/gptc"), nullptr);
  EXPECT_NE(std::string(gptc_last_error()).find("does not exist"), std::string::npos);
}

TEST_F(RuntimeTest, ClearErrors) {
  EXPECT_NE(load_error("/nonexistent/gptc_artifact").find("does not exist"), std::string::npos);

  fs::path d = copy_artifact("errors");
  fs::remove(d / "manifest.json");
  std::string e = load_error(d);
  EXPECT_NE(e.find("manifest.json: cannot open"), std::string::npos) << e;

  spit(d / "manifest.json", "{ not json");
  e = load_error(d);
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;

  // A file name with a newline in it (found by the fuzz test below): still one line.
  e = edited(d, "\"weights\": \"weights.safetensors\"", "\"weights\": \"w\\nx\\u0001.safetensors\"");
  EXPECT_NE(e.find("w\\nx\\x01.safetensors: cannot open"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;

  std::string bad_dtype = kManifest;
  bad_dtype.replace(bad_dtype.find("\"f32\", \"shape\": [2, 3]} ]"), 5, "\"f16\"");
  spit(d / "manifest.json", bad_dtype);
  e = load_error(d);
  EXPECT_NE(e.find("unknown dtype 'f16'"), std::string::npos) << e;

  // the manifest says w is [2, 3], the weights file has [3, 2]
  spit(d / "manifest.json", kManifest);
  std::vector<float> w32(6, 1.0f);
  st::write((d / "weights.safetensors").string(), {{"w", "F32", {3, 2}, w32.data()}});
  e = load_error(d);
  EXPECT_NE(e.find("weights.safetensors: tensor 'w' has shape [3, 2] but the manifest says [2, 3]"),
            std::string::npos) << e;

  // gptc compile --sanitize: not a boolean; or this process has no AddressSanitizer (the
  // unit tests are not built with it), which must be said before the library is loaded.
  std::string sanitized = kManifest;
  sanitized.replace(sanitized.find("\"kernels\": 1"), 12, "\"kernels\": 1, \"sanitize\": 1");
  spit(d / "manifest.json", sanitized);
  e = load_error(d);
  EXPECT_NE(e.find("\"sanitize\" is not a boolean"), std::string::npos) << e;
  sanitized.replace(sanitized.find("\"sanitize\": 1"), 13, "\"sanitize\": true");
  spit(d / "manifest.json", sanitized);
  if (!dlsym(RTLD_DEFAULT, "__asan_init")) {
    e = load_error(d);
    EXPECT_NE(e.find("built with gptc compile --sanitize; run it with the sanitizers' runtimes "
                     "preloaded: LD_PRELOAD="), std::string::npos) << e;
  }

  // An artifact for another target, or another numerics mode: refused in one line (before
  // the library is loaded; a "cuda" one once its library turns out to lack the device layer).
  for (const auto& [field, message] :
       {std::pair<std::string, std::string>{"\"target\": \"tpu\"",
                                            "an artifact for target \"tpu\"; this runtime runs "
                                            "\"cpu\", \"cuda\" and \"cuda-emulated\" artifacts"},
        // A CUDA artifact whose library has no device layer (this one is a CPU library).
        {"\"target\": \"cuda\"", "missing the device layer (gptc_device_*) of a cuda artifact"},
        {"\"numerics\": \"fast\"", "numerics \"fast\" is not one this runtime knows"}}) {
    std::string other = kManifest;
    other.replace(other.find("\"kernels\": 1"), 12, "\"kernels\": 1, " + field);
    spit(d / "manifest.json", other);
    e = load_error(d);
    EXPECT_NE(e.find(message), std::string::npos) << e;
  }

  // A CUDA library from a gptc whose device layer had less (all but
  // gptc_device_step_status): the function named, and the remedy.
  {
    fs::path old = copy_artifact("old_device_layer");
    std::string stubs = kKernels;
    for (const char* f : {"init", "alloc", "free", "host_alloc", "host_free", "copy_async",
                          "sync", "adopt", "copy_rows", "defer_wait"})
      stubs += std::string("GPTC_EXPORT const char* gptc_device_") + f + "() { return 0; }\n";
    spit(old / "kernels.cpp", stubs);
    ASSERT_EQ(compile_kernels(old), "");
    std::string cuda = kManifest;
    cuda.replace(cuda.find("\"kernels\": 1"), 12, "\"kernels\": 1, \"target\": \"cuda\"");
    spit(old / "manifest.json", cuda);
    e = load_error(old);
    EXPECT_NE(e.find("kernels.so: its device layer lacks gptc_device_step_status (built by another "
                     "version of gptc): compile the model again"), std::string::npos) << e;
    fs::remove_all(old);
  }

  spit(d / "manifest.json", kManifest);
  std::vector<double> wd(6, 1.0);
  st::write((d / "weights.safetensors").string(), {{"w", "F64", {2, 3}, wd.data()}});
  e = load_error(d);
  EXPECT_NE(e.find("has dtype F64 but the manifest says f32"), std::string::npos) << e;

  st::write((d / "weights.safetensors").string(), {{"v", "F64", {2, 3}, wd.data()}});
  e = load_error(d);
  EXPECT_NE(e.find("missing tensor 'w'"), std::string::npos) << e;

  fs::remove(d / "kernels.so");
  e = load_error(d);
  EXPECT_NE(e.find("kernels.so: cannot load"), std::string::npos) << e;
  fs::remove_all(d);
}

// FNV-1a's published 64-bit test vectors (the FNV authors' list).
TEST(Checksum, Fnv1a64KnownValues) {
  EXPECT_EQ(gptc::fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(gptc::fnv1a64_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(gptc::fnv1a64_hex("foobar"), "85944171f73967e8");
}

// kernels.so is checked against the manifest's size and checksum and as an ELF file before
// dlopen: a truncated library was a SIGBUS inside dlopen, and one from another artifact
// would have run kernels laid out for another arena.
TEST_F(RuntimeTest, LibraryCheckedBeforeLoading) {
  fs::path d = copy_artifact("library");
  std::ifstream so(d / "kernels.so", std::ios::binary);
  const std::string lib((std::istreambuf_iterator<char>(so)), std::istreambuf_iterator<char>());
  std::string checked = kManifest;
  checked.replace(checked.find("\"kernels\": 1"), 12,
                  "\"kernels\": 1, \"library_bytes\": " + std::to_string(lib.size()) +
                      ", \"library_fnv1a64\": \"" + gptc::fnv1a64_hex(lib) + "\"");
  spit(d / "manifest.json", checked);
  EXPECT_NO_THROW(gptc::rt::Model::load(d.string()));

  std::string flipped = lib;
  flipped[lib.size() / 2] ^= 1;
  spit(d / "kernels.so", flipped);
  std::string e = load_error(d);
  EXPECT_NE(e.find("kernels.so: its checksum is not the manifest's: truncated, corrupt or not "
                   "this artifact's library; compile the model again"), std::string::npos) << e;

  spit(d / "kernels.so", lib.substr(0, 5000));
  e = load_error(d);
  EXPECT_NE(e.find("kernels.so: 5000 bytes where the manifest says " + std::to_string(lib.size())),
            std::string::npos) << e;

  // A manifest without them (an artifact from before they were written): the ELF check.
  spit(d / "manifest.json", kManifest);
  e = load_error(d);
  EXPECT_NE(e.find("kernels.so: not a whole shared library ("), std::string::npos) << e;
  EXPECT_NE(e.find("past the end of the file)"), std::string::npos) << e;
  spit(d / "kernels.so", "junk");
  e = load_error(d);
  EXPECT_NE(e.find("not a whole shared library (not an ELF file)"), std::string::npos) << e;
  fs::remove_all(d);
}

// A model compiled again into the same artifact directory while an earlier Model of it is
// alive (a notebook cell run twice): the compiler replaces kernels.so. The earlier Model
// keeps running its own kernels, and a new load runs the new ones. (Loading the library
// in place, a second dlopen of the same path returned the earlier library, and a file
// rewritten in place under a live mapping crashed the process.)
TEST_F(RuntimeTest, KernelsReplacedWhileLoaded) {
  fs::path d = copy_artifact("replaced");
  auto before = gptc::rt::Model::load(d.string());
  // The other library: y = w - x (instead of w + x), built aside.
  std::string other = kKernels;
  other.replace(other.find("w[i] + x[i]"), 11, "w[i] - x[i]");
  spit(d / "other.cpp", other);
  std::string cmd = std::string(GPTC_TEST_CXX) + " -std=c++17 -O2 -shared -fPIC -I" +
                    GPTC_TEST_RUNTIME_INCLUDE + " " + (d / "other.cpp").string() + " -o " +
                    (d / "other.so").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream so(d / "other.so", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(so)), std::istreambuf_iterator<char>());
  spit(d / "kernels.so", bytes);  // rewritten in place: the same file, new contents

  auto after = gptc::rt::Model::load(d.string());
  std::vector<float> x = {10, 20, 30, 40, 50, 60}, y(6);
  float total;
  int64_t aligned;
  before->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 44, 55, 66}));
  after->run({x.data()}, {y.data(), &total, &aligned});
  EXPECT_EQ(y, (std::vector<float>{-9, -18, -27, -36, -45, -54}));
  // The private copies are gone from TMPDIR once loaded.
  const char* tmp = std::getenv("TMPDIR");
  for (const auto& e : fs::directory_iterator(tmp && *tmp ? tmp : "/tmp"))
    EXPECT_NE(e.path().filename().string().rfind(
                  "gptc-kernels-" + std::to_string((long)getpid()) + "-", 0),
              0u)
        << e.path();
  fs::remove_all(d);
}

// The lines gptc compile builds into kernels.so and the runtime builds from the manifest.
TEST(Signature, Lines) {
  EXPECT_EQ(gptc::signature_arena(24), "arena 24");
  EXPECT_EQ(gptc::signature_tensor("param", "f32", {2, 3}, "h.0.w"), "param f32 [2, 3] h.0.w");
  EXPECT_EQ(gptc::signature_tensor("result", "i64", {}, "loss"), "result i64 [] loss");
  // A C literal: printable ASCII but for " \ ? as is, every other byte in octal.
  EXPECT_EQ(gptc::signature_literal({"a \"b\\", "c?\xc3\xa9"}),
            "\"a \\042b\\134\\012c\\077\\303\\251\"");
}

// A hand-edited manifest (another arena, a shape, an argument dropped) would have the kernels
// read and write past their buffers: the runtime checks it against the lines the library was
// built for, and names the first that differs.
TEST_F(RuntimeTest, ManifestCheckedAgainstLibrary) {
  fs::path d = copy_artifact("signature");
  const std::string tail = " was built for ";
  std::string e = edited(d, "\"arena_bytes\": 24", "\"arena_bytes\": 8");
  EXPECT_NE(e.find("manifest.json: says 'arena 8' where " + (d / "kernels.so").string() + tail +
                   "'arena 24'; the manifest was edited or is another build's: compile the "
                   "model again"), std::string::npos) << e;
  e = edited(d, "\"input\", \"dtype\": \"f32\", \"shape\": [2, 3]", "\"input\", \"dtype\": \"f32\", \"shape\": [1]");
  EXPECT_NE(e.find("says 'input f32 [1] x' where"), std::string::npos) << e;
  EXPECT_NE(e.find(tail + "'input f32 [2, 3] x'"), std::string::npos) << e;
  e = edited(d, ",\n            {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [2, 3]}", "");
  EXPECT_NE(e.find("says 'result f32 [2, 3] y' where"), std::string::npos) << e;
  e = edited(d, ",\n               {\"name\": \"aligned\", \"dtype\": \"i64\", \"shape\": []}", "");
  EXPECT_NE(e.find("says nothing more where"), std::string::npos) << e;
  EXPECT_NE(e.find(tail + "'result i64 [] aligned'"), std::string::npos) << e;
  fs::remove_all(d);
}

// Manifest values that used to overflow or be taken on trust.
TEST_F(RuntimeTest, ManifestLimits) {
  fs::path d = copy_artifact("limits");
  const std::string xShape = "\"input\", \"dtype\": \"f32\", \"shape\": [2, 3]";
  // 2^32 * 2^32 elements wrapped to 0 bytes (then a null buffer was accepted); 2^63 became
  // a negative dimension.
  std::string e = edited(d, xShape, "\"input\", \"dtype\": \"f32\", \"shape\": [4294967296, 4294967296]");
  EXPECT_NE(e.find("args[1]: tensor 'x': shape is too large"), std::string::npos) << e;
  e = edited(d, xShape, "\"input\", \"dtype\": \"f32\", \"shape\": [9223372036854775808]");
  EXPECT_NE(e.find("args[1]: tensor 'x': shape is too large"), std::string::npos) << e;
  e = edited(d, "\"name\": \"x\"", "\"name\": \"w\"");
  EXPECT_NE(e.find("two arguments named 'w'"), std::string::npos) << e;
  e = edited(d, "\"name\": \"x\"", "\"name\": \"x\\ny\"");
  EXPECT_NE(e.find("args[1]: a tensor name holds a control character"), std::string::npos) << e;
  e = edited(d, "\"version\": 1", "\"version\": 4294967297");  // not 1 after a cast to int
  EXPECT_NE(e.find("unsupported \"version\""), std::string::npos) << e;
  e = edited(d, "\"format\": \"gptc-artifact\"", "\"format\": 7");
  EXPECT_NE(e.find("\"format\" is not \"gptc-artifact\""), std::string::npos) << e;
  e = edited(d, "\"kind\": \"input\"", "\"kind\": 1");
  EXPECT_NE(e.find("args[1]: \"kind\" must be"), std::string::npos) << e;
  e = edited(d, "\"library\": \"kernels.so\"", "\"library\": \"\"");
  EXPECT_NE(e.find("\"library\" is not a file name"), std::string::npos) << e;

  // Directories where files belong: one line each, not a stream error or an unread length.
  spit(d / "manifest.json", kManifest);
  for (auto [file, said] : {std::pair{"weights.safetensors", "cannot open (not a regular file)"},
                            std::pair{"kernels.so", "cannot load (not a regular file)"},
                            std::pair{"manifest.json", "cannot open (not a regular file)"}}) {
    fs::rename(d / file, d / "aside");
    fs::create_directory(d / file);
    e = load_error(d);
    EXPECT_NE(e.find(std::string(file) + ": " + said), std::string::npos) << e;
    fs::remove(d / file);
    fs::rename(d / "aside", d / file);
  }
  fs::remove_all(d);
}

// Where no private copy of the library can be made (TMPDIR unwritable, or noexec), a Model
// runs the artifact's file in place. A second Model of that file would share the first's
// library (its error slot and thread count), so a kernel error of one failed the other's
// run: it is refused until the first is gone.
TEST_F(RuntimeTest, OneInPlaceModelPerLibrary) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", "/nonexistent/gptc", 1);
  auto first = gptc::rt::Model::load(dir_->string());
  std::string e = load_error(*dir_);
  EXPECT_NE(e.find("kernels.so: cannot load (no private copy could be made in /nonexistent/gptc "
                   "and another Model of this process already runs this file in place"),
            std::string::npos) << e;
  first.reset();
  EXPECT_NO_THROW(gptc::rt::Model::load(dir_->string()));
  if (old) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  // With private copies, any number.
  auto a = gptc::rt::Model::load(dir_->string()), b = gptc::rt::Model::load(dir_->string());
  EXPECT_NE(a->symbol("gptc_entry"), b->symbol("gptc_entry"));
}

// A causal mask that gpt-raise-attention compiled into attention is a param the kernels no
// longer read ("tril_ones" in the manifest): weights, or a caller's write through
// param_data, that change it would otherwise be silently ignored.
TEST_F(RuntimeTest, TrilOnesParamChecked) {
  char tmpl[] = "/tmp/gptc_rt_maskXXXXXX";
  const fs::path d = mkdtemp(tmpl);
  spit(d / "kernels.cpp", R"(#include "gptc/prelude.h"
GPTC_EXPORT int gptc_entry_abi(void) { return 1; }
GPTC_EXPORT const char* gptc_entry(void* const* args, void* const* results, void*) {
  *(float*)results[0] = *(const float*)args[1];  // the mask is compiled in: not read
  return nullptr;
}
GPTC_EXPORT const char* gptc_signature(void) {
  return "arena 0\nparam+tril_ones f32 [1, 3, 3] mask\ninput f32 [1] x\nresult f32 [1] y";
}
)");
  ASSERT_EQ(compile_kernels(d), "");
  const std::string manifest = R"({"format": "gptc-artifact", "version": 1, "arena_bytes": 0,
  "args": [ {"name": "mask", "kind": "param", "dtype": "f32", "shape": [1, 3, 3], "tril_ones": true},
            {"name": "x", "kind": "input", "dtype": "f32", "shape": [1]} ],
  "results": [ {"name": "y", "dtype": "f32", "shape": [1]} ]})";
  spit(d / "manifest.json", manifest);
  std::vector<float> tril = {1, 0, 0, 1, 1, 0, 1, 1, 1};
  auto weights = [&](const std::vector<float>& mask) {
    st::write((d / "weights.safetensors").string(), {{"mask", "F32", {1, 3, 3}, mask.data()}});
  };
  auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const gptc::rt::Error& e) {
      return e.what();
    }
    return "no error";
  };
  weights(tril);
  auto m = gptc::rt::Model::load(d.string());
  EXPECT_TRUE(m->params()[0].tril_ones);
  float x = 5, y = 0;
  m->run({&x}, {&y});
  EXPECT_EQ(y, 5.0f);

  // Overwritten after the load: every run refuses it until it is tril(ones) again.
  float* mask = static_cast<float*>(m->param_data("mask"));
  mask[1] = 1;  // [0, 0, 1], above the diagonal
  std::string e = error_of([&] { m->run({&x}, {&y}); });
  EXPECT_NE(e.find(d.string() + ": run: param 'mask' no longer holds the causal mask tril(ones) "
                   "the model's attention was compiled for (element [0, 0, 1] is not 0); "
                   "restore it, or compile the model again with the new mask"),
            std::string::npos) << e;
  mask[1] = -0.0f;  // the value 0, as torch.equal sees it
  mask[8] = 0.5f;
  e = error_of([&] { m->run({&x}, {&y}); });
  EXPECT_NE(e.find("(element [0, 2, 2] is not 1)"), std::string::npos) << e;
  mask[8] = 1;
  EXPECT_NO_THROW(m->run({&x}, {&y}));

  // In the weights file.
  std::vector<float> upper = tril;
  upper[3] = 0;  // [0, 1, 0]
  weights(upper);
  e = load_error(d);
  EXPECT_NE(e.find("weights.safetensors: tensor 'mask' is not the causal mask tril(ones) the "
                   "model's attention was compiled for (element [0, 1, 0] is not 1); compile "
                   "the model again with these weights"), std::string::npos) << e;
  weights(tril);

  // A manifest that drops the flag is not the library's; one that spells it wrong is refused.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = manifest;
    text.replace(text.find(from), from.size(), to);
    spit(d / "manifest.json", text);
    return load_error(d);
  };
  e = with(", \"tril_ones\": true", "");
  EXPECT_NE(e.find("says 'param f32 [1, 3, 3] mask' where " + (d / "kernels.so").string() +
                   " was built for 'param+tril_ones f32 [1, 3, 3] mask'"), std::string::npos) << e;
  e = with("\"tril_ones\": true", "\"tril_ones\": 1");
  EXPECT_NE(e.find("args[0]: \"tril_ones\" must be a boolean of a \"param\""), std::string::npos) << e;
  fs::remove_all(d);
}

// Mutated weights files and manifests, thousands of them from a fixed seed: each is loaded
// (Model::load and the C API) and, when it loads, run. A mutation may leave a valid
// artifact or be refused with gptc::rt::Error (the C API: NULL and a one-line message); it
// may never crash, hang or read out of bounds — runtime_test_asan runs this under
// AddressSanitizer and UBSan, where any such access ends the test.
// GPTC_FUZZ_ROUNDS and GPTC_FUZZ_SEED run it longer or from another seed (bench/NOTES.md,
// "Fuzzing" records the long runs).
TEST_F(RuntimeTest, FuzzedWeightsAndManifestsAreRefusedNotCrashed) {
  auto from_env = [](const char* name, uint64_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
  };
  const uint64_t rounds = from_env("GPTC_FUZZ_ROUNDS", 1500);
  std::mt19937_64 rng(from_env("GPTC_FUZZ_SEED", 20261204));
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  const std::string manifest = kManifest;
  std::string weights;
  {
    std::ifstream f(*dir_ / "weights.safetensors", std::ios::binary);
    weights.assign(std::istreambuf_iterator<char>(f), {});
  }
  // One mutation of `s`: flipped bytes, a cut, a copied run, an inserted number or byte.
  auto mutate = [&](std::string s) {
    const char* tokens[] = {"-1", "1e309", "18446744073709551615", "{}", "[]", "\"\"",
                            "null", "\"f64\"", "[2,3,4]", "0", "\"param\"", "\\u0000"};
    for (int edits = 1 + (int)pick(3); edits > 0 && !s.empty(); --edits) {
      switch (pick(5)) {
        case 0: s[pick(s.size())] ^= (char)(1 << pick(8)); break;
        case 1: s.resize(pick(s.size())); break;
        case 2: {
          size_t at = pick(s.size()), len = pick(16);
          s.insert(pick(s.size()), s.substr(at, len));
          break;
        }
        case 3: s.insert(pick(s.size()), tokens[pick(std::size(tokens))]); break;
        default: s[pick(s.size())] = (char)pick(256); break;
      }
    }
    return s;
  };
  fs::path d = copy_artifact("fuzz");
  std::vector<float> x(6, 1.0f), y(6);
  float total;
  int64_t aligned;
  int loaded = 0, refused = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    const bool weights_round = round % 2 == 0;
    spit(d / "manifest.json", weights_round ? manifest : mutate(manifest));
    spit(d / "weights.safetensors", weights_round ? mutate(weights) : weights);
    try {
      auto m = gptc::rt::Model::load(d.string());
      if (m->inputs().size() == 1 && m->inputs()[0].nbytes == x.size() * sizeof(float) &&
          m->results().size() == 3 && m->results()[0].nbytes == y.size() * sizeof(float) &&
          m->results()[1].nbytes == sizeof total && m->results()[2].nbytes == sizeof aligned)
        m->run({x.data()}, {y.data(), &total, &aligned});
      ++loaded;
    } catch (const gptc::rt::Error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    gptc_model* c = gptc_model_load(d.c_str());
    if (c) gptc_model_free(c);
    else EXPECT_NE(std::string(gptc_last_error()), "");
  }
  // Both outcomes happen: the mutations are neither all harmless nor all fatal.
  EXPECT_GT(loaded, (int)(rounds / 150));
  EXPECT_GT(refused, (int)(rounds / 3));
  std::printf("fuzz: %llu rounds, %d loaded, %d refused\n", (unsigned long long)rounds, loaded,
              refused);
  fs::remove_all(d);
}
