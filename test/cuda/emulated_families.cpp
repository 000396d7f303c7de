// The CUDA kernel families run on the CPU (gptc/cuda/emulate.hpp: the same kernel source,
// each block's threads as fibers, shuffles, barriers and shared memory emulated) against
// the CPU kernels' arithmetic (references.h), bit for bit. This is the check that runs
// everywhere; kernel_families.cu runs the same families on a GPU (scripts/gpu_check.sh).
// Shapes are small: every emulated thread runs in turn on one core.
#define GPTC_CUDA_EMULATE 1

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gptc/cuda/attention.cuh"
#include "gptc/cuda/cross_entropy.cuh"
#include "gptc/cuda/layer_norm.cuh"
#include "gptc/cuda/matmul.cuh"
#include "gptc/cuda/reduce.cuh"
#include "references.h"

namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Every element's bits equal (any NaN equals any NaN); a NaN poison marks unwritten ones.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same = (got[i] != got[i] && want[i] != want[i]) || bits(got[i]) == bits(want[i]);
    if (!same && bad++ < 3)
      ADD_FAILURE() << what << " element " << i << ": emulated " << got[i] << ", CPU " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

std::vector<float> normal(size_t n, std::mt19937_64& rng, float mean = 0, float sd = 1) {
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

std::vector<float> poisoned(size_t n) {
  std::vector<float> x(n);
  std::memset(x.data(), 0xff, n * sizeof(float));
  return x;
}

TEST(EmulatedFamilies, RowSumAndMax) {
  std::mt19937_64 rng(1);
  for (const int64_t n : {1, 31, 32, 33, 100, 384}) {
    const int64_t rows = 9;
    const std::vector<float> x = normal(rows * n, rng, 0, 3);
    std::vector<float> sum = poisoned(rows), mx = poisoned(rows), want_sum(rows), want_max(rows);
    GPTC_LAUNCH((gptc::cuda::row_reduce_kernel<float, gptc::cuda::RowSum>), 2, 64, nullptr)(
        rows, n, x.data(), sum.data(), gptc::cuda::RowSum{});
    GPTC_LAUNCH((gptc::cuda::row_reduce_kernel<float, gptc::cuda::RowMax>), 2, 64, nullptr)(
        rows, n, x.data(), mx.data(), gptc::cuda::RowMax{});
    for (int64_t r = 0; r < rows; ++r) {
      want_sum[r] = gptc::reduce_sum<float>(n, [&](int64_t k) { return x[r * n + k]; });
      want_max[r] = gptc::reduce_max<float>(n, [&](int64_t k) { return x[r * n + k]; });
    }
    expect_same_bits(sum, want_sum, "row sum");
    expect_same_bits(mx, want_max, "row max");
  }
}

struct ColumnElem {
  const float* x;
  int64_t cols;
  float operator()(int64_t i, int64_t c) const { return x[i * cols + c]; }
};

TEST(EmulatedFamilies, ColumnSum) {
  std::mt19937_64 rng(2);
  const int64_t n = 777, cols = 43;  // two blocks for 6 groups of 8, the last of 3
  const std::vector<float> x = normal(n * cols, rng, 0, 2);
  std::vector<float> out = poisoned(cols), want(cols);
  GPTC_LAUNCH((gptc::cuda::column_reduce_sum_kernel<float, ColumnElem>), 2, 256, nullptr)(
      n, cols, ColumnElem{x.data(), cols}, out.data());
  for (int64_t c = 0; c < cols; ++c)
    want[c] = gptc::reduce_sum<float>(n, [&](int64_t i) { return x[i * cols + c]; });
  expect_same_bits(out, want, "column sum");
}

TEST(EmulatedFamilies, LayerNormAndGradient) {
  std::mt19937_64 rng(3);
  const int64_t rows = 12, n = 70;
  const float eps = 1e-5f;
  const std::vector<float> x = normal(rows * n, rng, 0.3f, 1.5f), g = normal(rows * n, rng),
                           w = normal(n, rng), b = normal(n, rng);
  std::vector<float> y = poisoned(rows * n), dx = poisoned(rows * n), want_y(rows * n),
                     want_dx(rows * n);
  GPTC_LAUNCH(gptc::cuda::layer_norm_kernel, 2, 128, nullptr)(rows, n, eps, x.data(), w.data(),
                                                              b.data(), y.data());
  GPTC_LAUNCH(gptc::cuda::layer_norm_grad_kernel, 2, 128, nullptr)(rows, n, eps, g.data(),
                                                                   x.data(), w.data(), dx.data());
  for (int64_t r = 0; r < rows; ++r) {
    ref::layer_norm_row(n, eps, x.data() + r * n, w.data(), b.data(), want_y.data() + r * n);
    ref::layer_norm_grad_row(n, eps, g.data() + r * n, x.data() + r * n, w.data(),
                             want_dx.data() + r * n);
  }
  expect_same_bits(y, want_y, "layer_norm");
  expect_same_bits(dx, want_dx, "layer_norm_grad");
}

TEST(EmulatedFamilies, CrossEntropyAndGradient) {
  std::mt19937_64 rng(4);
  const int64_t rows = 20, v = 65, ignore = -1;
  const std::vector<float> x = normal(rows * v, rng, 0, 3);
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = r % 7 == 3 ? ignore : (int64_t)(rng() % v);
  const float g = 0.75f;
  int64_t kept = -1;
  unsigned error = 0;
  std::vector<float> row_loss(rows), loss = poisoned(1), d = poisoned(rows * v),
                     want_d(rows * v);
  GPTC_LAUNCH(gptc::cuda::cross_entropy_kept_kernel, 1, 64, nullptr)(rows, ignore, t.data(),
                                                                     &kept);
  GPTC_LAUNCH(gptc::cuda::cross_entropy_rows_kernel, 2, 64, nullptr)(
      rows, v, ignore, x.data(), t.data(), row_loss.data(), &error);
  GPTC_LAUNCH(gptc::cuda::cross_entropy_total_kernel, 1, 32, nullptr)(
      rows, ignore, t.data(), row_loss.data(), loss.data());
  GPTC_LAUNCH(gptc::cuda::cross_entropy_grad_kernel, 2, 64, nullptr)(
      rows, v, ignore, x.data(), t.data(), &g, &kept, d.data(), &error);
  const float want = ref::cross_entropy(rows, v, ignore, x.data(), t.data(), g, want_d.data());
  expect_same_bits(loss, {want}, "cross_entropy");
  expect_same_bits(d, want_d, "cross_entropy_grad");
  EXPECT_EQ(error, 0u);
}

TEST(EmulatedFamilies, AttentionAndGradient) {
  struct Case {
    int64_t B, H, T, S, D, Dv;
    bool causal, bthd, dropout;
    int64_t kv_group = 1;  // query heads a key/value head serves
  };
  std::mt19937_64 rng(5);
  for (const Case c : {Case{1, 2, 40, 40, 16, 16, true, false, false},
                       Case{1, 2, 9, 37, 8, 40, false, true, false},
                       Case{1, 1, 36, 36, 8, 8, true, true, true},
                       Case{3, 1, 20, 20, 8, 8, true, false, true},  // 3 heads: groups 2 + 1
                       Case{2, 4, 33, 33, 8, 8, true, false, true, 2},
                       Case{1, 6, 9, 35, 8, 12, false, true, false, 3}}) {
    const int64_t kvHeads = c.H / c.kv_group;
    const std::vector<float> q = normal(c.B * c.H * c.T * c.D, rng),
                             k = normal(c.B * kvHeads * c.S * c.D, rng),
                             v = normal(c.B * kvHeads * c.S * c.Dv, rng);
    const int64_t rows = c.B * c.H * c.T;
    const std::vector<int64_t> words = {987654321, 17};
    std::vector<float> y = poisoned(rows * c.Dv), stats = poisoned(rows * 2);
    gptc::cuda::AttentionArgs a =
        ref::attention_args(c.B, c.H, c.T, c.S, c.D, c.Dv, c.causal, c.bthd, c.dropout,
                            c.kv_group);
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.y = y.data(), a.stats = stats.data();
    if (c.dropout) a.rng = words.data();
    gptc::cuda::attention(nullptr, a);
    const gptc::cuda::AttentionArgs& host = a;  // host memory already
    std::vector<float> want_y(rows * c.Dv), want_stats(rows * 2);
    ref::attention(host, want_y.data(), want_stats.data());
    expect_same_bits(y, want_y, "attention");
    expect_same_bits(stats, want_stats, "attention stats");

    // The gradient, from the forward's stats and a random output gradient g (laid out as y).
    const std::vector<float> g = normal(rows * c.Dv, rng);
    // dk and dv laid out as k and v (with grouped heads, a kv head's group's parts summed).
    std::vector<float> dq = poisoned(q.size()), dk = poisoned(k.size()), dv = poisoned(v.size()),
                       scratch(gptc::cuda::attention_grad_scratch_floats(a));
    gptc::cuda::AttentionGradArgs ga{a, g.data(), dq.data(), dk.data(), dv.data(),
                                     scratch.data()};
    gptc::cuda::attention_grad(nullptr, ga);
    std::vector<float> want_dq(q.size()), want_dk(k.size()), want_dv(v.size());
    ref::attention_grad(host, g.data(), want_stats.data(), want_dq.data(), want_dk.data(),
                        want_dv.data(), &ga);
    expect_same_bits(dq, want_dq, "attention dq");
    expect_same_bits(dk, want_dk, "attention dk");
    expect_same_bits(dv, want_dv, "attention dv");
    // The heads in runs that fit a smaller scratch (one kv head's group, and two of three),
    // as a generated step runs them: the same bits.
    for (int64_t group : {int64_t(1), int64_t(2)}) {
      gptc::cuda::AttentionGradArgs gg = ga;
      gg.scratch_floats = group * 2 * c.T * c.S * c.kv_group;
      std::fill(dq.begin(), dq.end(), -7.0f);
      std::fill(dk.begin(), dk.end(), -7.0f);
      std::fill(dv.begin(), dv.end(), -7.0f);
      gptc::cuda::attention_grad(nullptr, gg);
      expect_same_bits(dq, want_dq, "attention dq, heads in groups");
      expect_same_bits(dk, want_dk, "attention dk, heads in groups");
      expect_same_bits(dv, want_dv, "attention dv, heads in groups");
    }
  }
}

TEST(EmulatedFamilies, Matmul) {
  std::mt19937_64 rng(6);
  struct Case {
    int64_t batch, M, N, K;
    bool ak, bn, epilogue, underflow;
  };
  for (const Case c : {Case{2, 70, 33, 21, true, true, false, false},
                       Case{1, 33, 70, 19, false, false, false, false},
                       Case{1, 40, 36, 24, true, false, true, false},   // vector loads
                       Case{1, 20, 20, 17, true, true, false, true},  // K tail, -0
                       Case{1, 150, 140, 20, true, true, true, false},  // several tiles
                       // Rows contiguous (a weight gradient's layout): asynchronous copies,
                       // more k steps than stages, a K tail, several tiles and a batch.
                       Case{1, 40, 36, 100, false, true, true, false},
                       Case{1, 20, 20, 17, false, true, false, true},
                       Case{2, 152, 140, 70, false, true, true, false}}) {
    const gptc::cuda::MatmulShape s{c.batch, c.M, c.N, c.K, c.M * c.K, c.ak ? c.K : 1,
                                    c.ak ? 1 : c.M, c.K * c.N, c.bn ? c.N : 1, c.bn ? 1 : c.K};
    std::vector<float> A = normal(c.batch * c.M * c.K, rng), B = normal(c.batch * c.K * c.N, rng);
    if (c.underflow) {
      std::fill(A.begin(), A.end(), 1e-30f);
      std::fill(B.begin(), B.end(), -1e-30f);
    }
    const std::vector<float> addend = normal(c.batch * c.M * c.N, rng), bias = normal(c.N, rng);
    const std::vector<int64_t> words = {20261204, 3};
    gptc::MatmulEpilogue<float> ep;
    if (c.epilogue) {
      ep.addend = addend.data(), ep.bias = bias.data(), ep.rng = words.data();
      ep.dropout_id = 5, ep.dropout_p = 0.1f, ep.dropout_scale = 1.0f / 0.9f;
    }
    std::vector<float> want(c.batch * c.M * c.N);
    for (int64_t i = 0; i < (int64_t)want.size(); ++i)
      want[i] = ref::matmul_element(i, c.M, c.N, c.K, A.data(), s.sab, s.sam, s.sak, B.data(),
                                    s.sbb, s.sbk, s.sbn, ep);
    // The shape's own tile, then each tile on its own (128 x 128, 128 x 64, 64 x 64), with
    // the loads the layout takes and with the register-staged ones.
    using gptc::cuda::detail::launch_matmul;
    using gptc::cuda::detail::Loads;
    EXPECT_EQ(gptc::cuda::detail::takes_async_copies(s, A.data(), B.data()), !c.ak && c.bn)
        << c.M << " x " << c.N << " x " << c.K;
    const std::pair<const char*, void (*)(cudaStream_t, const gptc::cuda::MatmulShape&,
                                          const float*, const float*, float*,
                                          const gptc::MatmulEpilogue<float>&)>
        tiles[] = {{"matmul", gptc::cuda::matmul},
                   {"matmul, tile 128", launch_matmul<8, 8>},
                   {"matmul, tile 128x64", launch_matmul<8, 4>},
                   {"matmul, tile 64", launch_matmul<4, 4>},
                   {"matmul, tile 128, staged loads", launch_matmul<8, 8, Loads::Staged>},
                   {"matmul, tile 128x64, staged loads", launch_matmul<8, 4, Loads::Staged>},
                   {"matmul, tile 64, staged loads", launch_matmul<4, 4, Loads::Staged>}};
    for (const auto& [name, launch] : tiles) {
      std::vector<float> C = poisoned(want.size());
      launch(nullptr, s, A.data(), B.data(), C.data(), ep);
      expect_same_bits(C, want, name);
      if (c.underflow) EXPECT_EQ(bits(C[0]), 0x80000000u);  // -0 kept through the K tail
    }
  }
}

// The emulation runs a thread's asynchronous copies when their group is waited for, the
// latest a GPU may land them, so that a kernel which reads a stage too early reads stale
// data here: before the wait the old bytes, after it the copied ones (or zeros), and the
// newest group still pending under copies_wait<1>.
__global__ void async_copies_kernel(const float* src, float* seen) {
  __shared__ __align__(16) float stage[3][32][4];
  const int t = threadIdx.x;
  for (int g = 0; g < 3; ++g)
    for (int c = 0; c < 4; ++c) stage[g][t][c] = -1.0f;
  gptc::cuda::copy16_async(stage[0][t], src + 4 * t, true);
  gptc::cuda::copies_commit();
  gptc::cuda::copy16_async(stage[1][t], src + 4 * t, false);  // 16 zero bytes
  gptc::cuda::copies_commit();
  gptc::cuda::copy16_async(stage[2][t], src + 4 * t, true);
  gptc::cuda::copies_commit();
  seen[t * 4 + 0] = stage[0][t][0];  // nothing waited for yet
  gptc::cuda::copies_wait<1>();
  seen[t * 4 + 1] = stage[1][t][1];  // the first two groups landed
  seen[t * 4 + 2] = stage[2][t][2];  // the newest not yet
  gptc::cuda::copies_wait<0>();
  seen[t * 4 + 3] = stage[2][t][3];
}

TEST(EmulatedFamilies, AsyncCopiesLandWhenWaited) {
  std::vector<float> src(128), seen(128, 0.0f);
  for (int i = 0; i < 128; ++i) src[i] = (float)(i + 1);
  GPTC_LAUNCH(async_copies_kernel, 1, 32, nullptr)(src.data(), seen.data());
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(seen[t * 4 + 0], -1.0f) << t;
    EXPECT_EQ(seen[t * 4 + 1], 0.0f) << t;
    EXPECT_EQ(seen[t * 4 + 2], -1.0f) << t;
    EXPECT_EQ(seen[t * 4 + 3], src[t * 4 + 3]) << t;
  }
}

}  // namespace
