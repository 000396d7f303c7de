// matmul_bench — gptc's matmul micro-kernel (runtime prelude) on one core, against the
// machine's measured fp32 FMA peak. Prints one JSON object.
//   c++ -std=c++17 -O2 -march=native -ffp-contract=off -I runtime/include bench/matmul_bench.cpp
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "gptc/prelude.h"

// Peak: 12 independent fma chains on the widest vectors the target has (zmm on AVX-512,
// ymm on AVX2; latency x ports needs 8 chains on either).
#if defined(__AVX512F__)
using Vec = __m512;
static Vec vset1(float x) { return _mm512_set1_ps(x); }
static Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
static Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
static float vsum(Vec a) { return _mm512_reduce_add_ps(a); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
static Vec vset1(float x) { return _mm256_set1_ps(x); }
static Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
static Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
static float vsum(Vec a) {
  float l[8];
  _mm256_storeu_ps(l, a);
  return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
constexpr long kPeakIters = 10000000;
constexpr double kPeakFlops = 2.0 * (sizeof(Vec) / 4) * 12 * kPeakIters;
// One timing of kPeakIters rounds of the 12 chains (1.2e8 fmas: long enough to time).
__attribute__((noinline)) static double fma_peak_seconds() {
  // Distinct starting values, or the compiler folds the chains into one.
#define GPTC_START(i) vset1(1.0f + (i) * 1e-3f)
  Vec c0 = GPTC_START(0), c1 = GPTC_START(1), c2 = GPTC_START(2), c3 = GPTC_START(3),
      c4 = GPTC_START(4), c5 = GPTC_START(5), c6 = GPTC_START(6), c7 = GPTC_START(7),
      c8 = GPTC_START(8), c9 = GPTC_START(9), c10 = GPTC_START(10), c11 = GPTC_START(11);
#undef GPTC_START
  const Vec a = vset1(0.999999f), b = vset1(1e-7f);
  auto t0 = std::chrono::steady_clock::now();
  for (long it = 0; it < kPeakIters; ++it) {
    c0 = vfma(c0, a, b); c1 = vfma(c1, a, b); c2 = vfma(c2, a, b); c3 = vfma(c3, a, b);
    c4 = vfma(c4, a, b); c5 = vfma(c5, a, b); c6 = vfma(c6, a, b); c7 = vfma(c7, a, b);
    c8 = vfma(c8, a, b); c9 = vfma(c9, a, b); c10 = vfma(c10, a, b); c11 = vfma(c11, a, b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Vec sum = vadd(vadd(vadd(c0, c1), vadd(c2, c3)), vadd(vadd(c4, c5), vadd(c6, c7)));
  sum = vadd(sum, vadd(vadd(c8, c9), vadd(c10, c11)));
  if (vsum(sum) == 12345.f) std::puts("");
  return s;
}
#else
constexpr double kPeakFlops = 0;
static double fma_peak_seconds() { return 1; }
#endif

int main(int argc, char** argv) {
  int64_t M = 384, N = 1536, K = 2048;  // rows x cols x depth of the product timed
  if (argc == 4) { M = atol(argv[1]); N = atol(argv[2]); K = atol(argv[3]); }
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  // The operands in buffers as the runtime allocates its arena and parameters (in huge pages
  // from 2 MB: gptc/prelude/cpu/pages.h), so that the product is timed as a step runs it.
  auto buffer = [](int64_t n) {
    float* p = static_cast<float*>(gptc::alloc_pages(size_t(n) * sizeof(float)));
    if (!p) std::abort();
    return std::unique_ptr<float, decltype(&std::free)>(p, &std::free);
  };
  auto Ab = buffer(M * K), Bb = buffer(K * N), Cb = buffer(M * N);
  float *A = Ab.get(), *B = Bb.get(), *C = Cb.get();
  for (int64_t i = 0; i < M * K; ++i) A[i] = normal(rng);
  for (int64_t i = 0; i < K * N; ++i) B[i] = normal(rng);
  std::memset(C, 0, sizeof(float) * M * N);
  gptc::thread_count() = 1;
  // The product and the peak in turn, the best of 9 timings of each: on a loaded machine a
  // timing can land on a slow moment (timed one after the other, the peak once came out
  // below the product: bench/NOTES.md, "The benchmark method"), and alternating exposes
  // both to the same.
  double best = 1e30, peakBest = 1e30;
  for (int rep = 0; rep < 9; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    gptc::matmul(1, M, N, K, A, M * K, K, 1, B, 0, N, 1, C);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    peakBest = std::min(peakBest, fma_peak_seconds());
  }
  double gflops = 2.0 * M * N * K / best / 1e9, peak = kPeakFlops / peakBest / 1e9;
  std::printf("{\"M\": %ld, \"N\": %ld, \"K\": %ld, \"seconds\": %.6f, \"gflops\": %.2f, "
              "\"fma_peak_gflops\": %.2f, \"fraction_of_peak\": %.3f",
              (long)M, (long)N, (long)K, best, gflops, peak, peak > 0 ? gflops / peak : 0.0);
#if defined(GPTC_TILED_MATMUL)
  // The blocking the products took on this machine (gptc/prelude/matmul.h, matmul_blocking).
  const gptc::detail::MatmulBlocking& b = gptc::detail::matmul_blocking();
  std::printf(", \"blocking\": {\"order\": \"%s\", \"kc\": %ld, \"mc\": %ld, \"nc\": %ld, "
              "\"caches_from\": \"%s\"}",
              b.blocked ? "blocked" : b.blockedTransposed ? "mixed" : "panels", (long)b.kc, (long)b.mc, (long)b.nc,
              gptc::caches().source);
#endif
  std::printf("}\n");
}
