// step_time — times a compiled training step on whatever its artifact targets (the CPU, or
// a GPU through the artifact's device layer), linking only gptc's runtime. For the GPU
// check (scripts/gpu_check.sh), where there is no MLIR and no gptc Python module: the
// artifact is compiled on another machine and copied over.
//
//   c++ -std=c++17 -O2 bench/step_time.cpp runtime/src/*.cpp -Iruntime/include -ldl -pthread
//   ./step_time STEP_ARTIFACT WARMUP STEPS
//
// Each step feeds a batch of token ids drawn once (a fixed linear congruential sequence
// over the vocabulary the embedding's index check allows), rng = {1, step}, lr = 1e-4 and
// the step number. A run returns once the step's results are back on the host (a GPU
// step's entry waits for its stream), so the wall time of each run is the step's. Prints
// one JSON object: the median, minimum and maximum step in ms over STEPS steps after
// WARMUP, the kernels a step, and the bytes the step keeps on its device: parameters and
// moments, the arena, the inputs and results. A GPU step's kernels are those of the CUDA
// graph it captured, with the longest chain of them each waiting for the one before
// (GPTC_CUDA_GRAPH_SHAPE, gptc/cuda/generated.cuh); otherwise (the CPU, or no graph) the
// manifest's count of kernel calls ("kernels_from" says which).
#include <gptc/model.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {
// The number after "key": in a JSON file (the manifest's kernels, the graph shape's), or -1.
long json_number(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string quoted = "\"" + key + "\":";
  const size_t at = text.find(quoted);
  return at == std::string::npos ? -1
                                 : std::strtol(text.c_str() + at + quoted.size(), nullptr, 10);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: step_time STEP_ARTIFACT WARMUP STEPS\n");
    return 2;
  }
  const long warmup = std::strtol(argv[2], nullptr, 10), steps = std::strtol(argv[3], nullptr, 10);
  if (warmup < 0 || steps < 1) {
    std::fprintf(stderr, "step_time: error: WARMUP must be >= 0 and STEPS >= 1\n");
    return 2;
  }
  // Where a GPU step's graph writes its shape when captured: the caller's file, or one of
  // ours, removed after.
  const char* asked = std::getenv("GPTC_CUDA_GRAPH_SHAPE");
  const bool ours = !asked || !*asked;
  const std::string shape =
      ours ? "/tmp/step_time_graph_" + std::to_string(getpid()) + ".json" : asked;
  if (ours) setenv("GPTC_CUDA_GRAPH_SHAPE", shape.c_str(), 1);
  std::remove(shape.c_str());
  try {
    auto m = gptc::rt::Model::load(argv[1]);
    m->set_num_threads(0);
    // The vocabulary: the first parameter's rows (nanoGPT's token embedding, wte).
    const int64_t vocab = m->params().at(0).shape.at(0);
    std::vector<std::vector<char>> buffers;
    std::vector<const void*> in;
    int64_t* rng = nullptr;
    double *lr = nullptr, *step = nullptr;
    uint64_t state = 12345;
    for (const gptc::rt::TensorSpec& s : m->inputs()) {
      buffers.emplace_back(s.nbytes);
      void* p = buffers.back().data();
      in.push_back(p);
      if (s.name == "rng") rng = static_cast<int64_t*>(p);
      else if (s.name == "lr") lr = static_cast<double*>(p);
      else if (s.name == "step") step = static_cast<double*>(p);
      else if (s.dtype == "i64")
        for (int64_t k = 0; k < s.numel; ++k) {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          static_cast<int64_t*>(p)[k] = (int64_t)((state >> 33) % (uint64_t)vocab);
        }
      else throw gptc::rt::Error("input '" + s.name + "' is not a training step's");
    }
    if (!lr || !step) throw gptc::rt::Error(std::string(argv[1]) + " is not a training step");
    std::vector<std::vector<char>> out_buffers;
    std::vector<void*> out;
    size_t device_bytes = m->arena_bytes();
    for (const gptc::rt::TensorSpec& s : m->results()) {
      out_buffers.emplace_back(s.nbytes);
      out.push_back(out_buffers.back().data());
      device_bytes += s.nbytes;
    }
    for (const gptc::rt::TensorSpec& s : m->params()) device_bytes += s.nbytes;
    for (const gptc::rt::TensorSpec& s : m->inputs()) device_bytes += s.nbytes;
    std::vector<double> ms;
    for (long k = 1; k <= warmup + steps; ++k) {
      if (rng) rng[0] = 1, rng[1] = k;
      *lr = 1e-4;
      *step = (double)k;
      const auto t0 = std::chrono::steady_clock::now();
      m->run(in, out);
      const auto t1 = std::chrono::steady_clock::now();
      if (k > warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const long graph_kernels = json_number(shape, "kernels");
    const long chain = json_number(shape, "longest_kernel_chain");
    if (ours) std::remove(shape.c_str());
    std::printf("{\"artifact\": \"%s\", \"steps\": %ld, \"warmup\": %ld, \"median_ms\": %.4f, "
                "\"min_ms\": %.4f, \"max_ms\": %.4f, \"kernels\": %ld, \"kernels_from\": \"%s\", "
                "\"longest_kernel_chain\": %ld, \"device_bytes\": %zu}\n",
                argv[1], steps, warmup, ms[ms.size() / 2], ms.front(), ms.back(),
                graph_kernels >= 0 ? graph_kernels
                                   : json_number(std::string(argv[1]) + "/manifest.json", "kernels"),
                graph_kernels >= 0 ? "graph" : "manifest", chain, device_bytes);
  } catch (const gptc::rt::Error& e) {
    std::fprintf(stderr, "step_time: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
