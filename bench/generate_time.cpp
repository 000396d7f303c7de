// generate_time — times a saved generator (gptc.Generator.save's folder: the decode step, its
// prefill/ and its shorter steps) on whatever its programs target (the CPU, or a GPU through
// their device layer), linking only gptc's runtime. For the GPU check (scripts/gpu_check.sh),
// where there is no MLIR and no gptc Python module; bench/generate.py times generation on
// the CPU with gptc's Python module.
//
//   c++ -std=c++17 -O2 bench/generate_time.cpp runtime/src/*.cpp -Iruntime/include -ldl -pthread
//   ./generate_time GENERATOR TOKENS TEXTS
//
// Each text is TOKENS tokens after a one-token prompt (token 0) a row, the generator's batch
// of rows at once, at temperature 1 with top-k 40 (bench/generate.py's settings), seeds 1,
// 2, ...; the first text is a warm-up, then TEXTS are timed. Prints one JSON object: tokens
// a second (all rows' tokens over the wall time of a text) at the median, fastest and
// slowest of the TEXTS texts, and the batch.
#include <gptc/generate.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: generate_time GENERATOR TOKENS TEXTS\n");
    return 2;
  }
  const long tokens = std::strtol(argv[2], nullptr, 10), texts = std::strtol(argv[3], nullptr, 10);
  if (tokens < 1 || texts < 1) {
    std::fprintf(stderr, "generate_time: error: TOKENS and TEXTS must be >= 1\n");
    return 2;
  }
  try {
    auto g = gptc::rt::Generator::load(argv[1]);
    g->set_num_threads(0);
    const std::vector<std::vector<int64_t>> prompts((size_t)g->batch(), {0});
    std::vector<double> per_s;
    for (long k = 0; k <= texts; ++k) {
      const gptc::rt::SampleSettings s{1.0f, 40, 1.0f, (uint64_t)(k + 1)};
      const auto t0 = std::chrono::steady_clock::now();
      g->generate_batch(prompts, tokens, s);
      const auto t1 = std::chrono::steady_clock::now();
      if (k > 0)
        per_s.push_back((double)(tokens * g->batch()) /
                        std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(per_s.begin(), per_s.end());
    std::printf("{\"generator\": \"%s\", \"batch\": %lld, \"tokens\": %ld, \"texts\": %ld, "
                "\"tokens_per_s_median\": %.1f, \"tokens_per_s_max\": %.1f, "
                "\"tokens_per_s_min\": %.1f}\n",
                argv[1], (long long)g->batch(), tokens, texts, per_s[per_s.size() / 2],
                per_s.back(), per_s.front());
  } catch (const gptc::rt::Error& e) {
    std::fprintf(stderr, "generate_time: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
