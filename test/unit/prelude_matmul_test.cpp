// prelude_matmul_test — the tiled (AVX-512 where available) matmul against the reference
// dot_seq loop, bit for bit, on awkward shapes, transposes and batch strides.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "gptc/prelude.h"

namespace {

struct Case {
  int64_t batch, M, N, K;
  bool ta, tb, sharedB;
};

TEST(Matmul, TiledEqualsReferenceBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const Case cases[] = {{1, 1, 1, 1, false, false, true},   {1, 7, 33, 5, false, false, true},
                        {3, 13, 31, 17, false, true, false}, {2, 6, 64, 40, true, false, false},
                        {1, 64, 192, 64, false, true, true},  {2, 5, 70, 129, true, true, false},
                        {1, 9, 40, 300, false, false, true}, {1, 3, 5, 0, false, false, true}};
  for (const Case& c : cases) {
    std::vector<float> A(c.batch * c.M * c.K), B(c.batch * c.K * c.N);
    for (float& v : A) v = normal(rng);
    for (float& v : B) v = normal(rng);
    // A is [M, K] or, transposed, [K, M]; B is [K, N] or [N, K].
    int64_t sam = c.ta ? 1 : c.K, sak = c.ta ? c.M : 1;
    int64_t sbk = c.tb ? 1 : c.N, sbn = c.tb ? c.K : 1;
    int64_t sab = c.M * c.K, sbb = c.sharedB ? 0 : c.K * c.N;
    std::vector<float> tiled(c.batch * c.M * c.N), ref(tiled.size());
    gptc::matmul(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(), sbb, sbk, sbn,
                 tiled.data());
    gptc::matmul_reference<float>(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(), sbb,
                                  sbk, sbn, ref.data());
    EXPECT_EQ(0, std::memcmp(tiled.data(), ref.data(), tiled.size() * sizeof(float)))
        << "batch " << c.batch << " M " << c.M << " N " << c.N << " K " << c.K;
    // And the reference is the canonical order: element (0, 0) by hand.
    float acc = 0;
    for (int64_t k = 0; k < c.K; ++k) acc = std::fma(A[k * sak], B[k * sbk], acc);
    EXPECT_EQ(acc, ref[0]);
  }
}

}  // namespace
