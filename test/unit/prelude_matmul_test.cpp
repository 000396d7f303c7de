// prelude_matmul_test — the tiled (AVX-512 or AVX2) matmul against the reference
// dot_seq loop, bit for bit, on awkward shapes, transposes, batch strides and shared Bs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gptc/prelude.h"

// The tile's width is the target's: 16 lanes on AVX-512 (or its emulation), 8 on AVX2.
#if defined(__AVX512F__) || defined(GPTC_EMULATE_AVX512)
static_assert(gptc::detail::TileVec::kLanes == 16, "the AVX-512 build runs the 16-lane tile");
#elif defined(__AVX2__) && defined(__FMA__)
static_assert(gptc::detail::TileVec::kLanes == 8, "the AVX2 build runs the 8-lane tile");
#endif

namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

struct Case {
  int64_t batch, M, N, K;
  bool ta, tb, sharedB;
};

#if defined(GPTC_TILED_MATMUL)
// The blockings every product is checked under, whatever machine runs the test: the model's
// for a Zen 4's caches (32 KB 8-way L1d, 1 MB L2, 32 MB L3 for two CPUs: a transposed A of
// more than 256K floats copied, 128K floats of A a thread split by rows) in the order of
// this width; the same in the other order (AVX2's panel tasks, AVX-512's blocked for all);
// a small blocked one that cuts the cases' products into several k, row and column blocks
// (by rows, and by columns where N > M); every product in panel tasks; and panel tasks with
// a transposed A blocked (AVX-512's order with 2 MB of L2). None may change a bit.
std::vector<gptc::detail::MatmulBlocking> blockings() {
  gptc::Caches zen4;
  zen4.l1d = {32 << 10, 8, 64, 1};
  zen4.l2 = {1 << 20, 8, 64, 1};
  zen4.l3 = {32 << 20, 16, 64, 2};
  using gptc::detail::blocking_for;
  using gptc::detail::kBlockedOrder;
  gptc::detail::MatmulBlocking small = blocking_for(zen4, true), panels = small, mixed = small;
  small.kc = 64, small.mc = 12, small.nc = 2 * gptc::detail::kPanel;
  panels.blocked = panels.blockedTransposed = false;  // every product in panel tasks
  mixed.blocked = false;                              // only a transposed A blocked
  return {blocking_for(zen4, kBlockedOrder), blocking_for(zen4, !kBlockedOrder), small, panels,
          mixed};
}
#endif

TEST(Matmul, TiledEqualsReferenceBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const Case cases[] = {{1, 1, 1, 1, false, false, true},   {1, 7, 33, 5, false, false, true},
                        {3, 13, 31, 17, false, true, false}, {2, 6, 64, 40, true, false, false},
                        {1, 64, 192, 64, false, true, true},  {2, 5, 70, 129, true, true, false},
                        {1, 9, 40, 300, false, false, true}, {1, 3, 5, 0, false, false, true},
                        // A shared B: folded into one taller product, and (A transposed) not.
                        {4, 7, 33, 20, false, false, true},  {3, 6, 40, 9, true, false, true},
                        // A transposed and over 256K floats: copied to rows first (the
                        // last with K a multiple of 256: the copy's rows padded). One member
                        // with B's rows contiguous and N < M copies B^T instead and stores
                        // C's transpose (without an epilogue; with one, A is copied).
                        {1, 601, 37, 450, true, false, true}, {2, 530, 20, 500, true, true, false},
                        {1, 520, 36, 512, true, false, true}, {1, 310, 48, 900, true, false, false},
                        // B wide and A tall: the blocked order (B's panels packed per k
                        // block, A's rows in blocks of 6-row micro-panels), with one k block
                        // (K <= 512) and with 3 (the sums carried in C from block to block);
                        // rows and columns with tails, A and B transposed, two members
                        // sharing B folded into one.
                        {1, 203, 150, 333, false, false, true}, {1, 400, 130, 512, true, true, false},
                        {2, 100, 128, 400, false, false, true}, {1, 250, 140, 1100, true, false, false},
                        {1, 200, 300, 777, false, true, true},
                        // The same with N past 8 panels of 32 columns (AVX-512's, whose
                        // builds take the panel-task order for these instead).
                        // A transposed: a weight gradient, which AVX-512 builds block too
                        // (the second with N > M, split by columns).
                        {1, 230, 290, 1000, true, false, false},
                        {1, 196, 330, 340, true, false, true},
                        {2, 100, 270, 400, false, true, true},
                        // Panels that do not divide over the threads: their rows split in
                        // chunks (lm_head's 65 columns, A transposed over a k too short to
                        // pipeline; three members of one panel each).
                        {1, 200, 65, 3, true, false, true}, {3, 120, 20, 33, false, true, false},
                        // Small products split by rows (A's rows contiguous: 65 columns, an
                        // epilogue's rows, tails of 6-row tiles), and weight gradients (A
                        // transposed) pipelined over k: stages of K/threads, some of 1 to 4.
                        {1, 200, 65, 48, false, false, true}, {1, 97, 40, 130, false, true, true},
                        {1, 130, 70, 512, true, false, true}, {1, 64, 33, 9, true, true, true},
                        {1, 250, 64, 200, true, false, true},
                        // One row over B transposed (a decode step's linear layers): no
                        // panel, B's rows transposed through registers; K and N with tails,
                        // K under one block, members of one row each.
                        {1, 1, 384, 128, false, true, true}, {1, 1, 97, 130, false, true, true},
                        {3, 1, 40, 7, false, true, false}, {1, 1, 33, 17, true, true, true},
                        // One row over B's contiguous rows (transformers' Conv1D, a decode
                        // step's cached keys and values): the sums in registers (up to 4
                        // vectors, a tail) or in C's runs (split among the threads), members
                        // of one row each, K = 0.
                        {1, 1, 1536, 200, false, false, true}, {1, 1, 1000, 33, false, false, true},
                        {1, 1, 40, 1030, false, false, true}, {3, 1, 64, 300, false, false, false},
                        {2, 1, 1100, 9, false, false, false}, {1, 1, 17, 3, true, false, true},
                        {1, 1, 20, 0, false, false, true},
                        // A few rows over B transposed (a batch's decode step): each row
                        // group's tile with tails in K and N, more rows than a pass takes
                        // (several passes over the unit), A transposed, members, members
                        // folded into one product (4 x 2 rows), K = 0.
                        {1, 2, 50, 37, false, true, true}, {1, 5, 97, 300, false, true, true},
                        {1, 8, 40, 17, false, true, true}, {1, 7, 33, 130, false, true, true},
                        {1, 3, 16, 1, true, true, true}, {3, 4, 20, 40, false, true, false},
                        {4, 2, 33, 24, false, true, true}, {1, 6, 15, 0, false, true, true},
                        // A few rows over B's contiguous rows (a batch's decode step over
                        // Conv1D weights): k blocks with a tail, runs split among the
                        // threads, a column tail, A transposed, members, members folded
                        // (2 x 2 rows), K = 0.
                        {1, 2, 1100, 70, false, false, true}, {1, 5, 40, 130, false, false, true},
                        {1, 8, 17, 200, true, false, true}, {3, 3, 64, 64, false, false, false},
                        {2, 2, 33, 65, false, false, true}, {1, 4, 600, 0, false, false, true},
                        {1, 7, 97, 9, false, false, true}};
  [[maybe_unused]] int split = 0;  // cases whose panel tasks split rows, over the thread counts
  [[maybe_unused]] int byRows = 0, pipelined = 0;  // cases taking those orders, likewise
#if defined(GPTC_TILED_MATMUL)
  for (const gptc::detail::MatmulBlocking& blocking : blockings()) {
    gptc::detail::matmul_blocking() = blocking;
#else
  {
#endif
#if defined(_OPENMP)
  // Built with OpenMP (the _avx2, _avx512emu and _asan builds): the parallel paths too,
  // A's copy among them.
  for (int threads : {1, 2, 3, 4}) {
    gptc::thread_count() = threads;
#else
  {
#endif
  [[maybe_unused]] int blocked = 0, blockedTransposed = 0;  // cases taking the blocked order
  for (const Case& c : cases) {
    std::vector<float> A(c.batch * c.M * c.K), B(c.batch * c.K * c.N);
    for (float& v : A) v = normal(rng);
    for (float& v : B) v = normal(rng);
    // A is [M, K] or, transposed, [K, M]; B is [K, N] or [N, K].
    int64_t sam = c.ta ? 1 : c.K, sak = c.ta ? c.M : 1;
    int64_t sbk = c.tb ? 1 : c.N, sbn = c.tb ? c.K : 1;
    int64_t sab = c.M * c.K, sbb = c.sharedB ? 0 : c.K * c.N;
#if defined(GPTC_TILED_MATMUL)
    {
      int64_t fbatch = c.batch, fM = c.M, fsab = sab;
      gptc::detail::fold_batch(fbatch, fM, fsab, sam, sbb);
      const bool blocks = gptc::detail::blocks_k(fbatch, fM, c.N, c.K, sam, sak);
      blocked += blocks;
      blockedTransposed += blocks && c.ta;
#if defined(_OPENMP)
      const bool few = fM <= gptc::detail::kFewRows && (sbk == 1 || sbn == 1);
      if (!blocks && !few && !gptc::detail::copies_a(c.M, c.K, sam, sak)) {
        const bool rows = gptc::detail::splits_rows(fbatch, fM, c.K, sak, threads);
        const bool pipe = !rows && gptc::detail::pipelines_k(c.batch, c.M, c.N, c.K, sam, sak,
                                                             nullptr, threads);
        byRows += rows;
        pipelined += pipe;
        if (!rows && !pipe) split += gptc::detail::panel_tasks(fbatch, fM, c.N, threads).chunks > 1;
      }
#endif
    }
#endif
    std::vector<float> tiled(c.batch * c.M * c.N), ref(tiled.size());
    gptc::matmul(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(), sbb, sbk, sbn,
                 tiled.data());
    gptc::matmul_reference<float>(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(), sbb,
                                  sbk, sbn, ref.data());
    EXPECT_EQ(0, std::memcmp(tiled.data(), ref.data(), tiled.size() * sizeof(float)))
        << "batch " << c.batch << " M " << c.M << " N " << c.N << " K " << c.K;
    // With epilogues (gpt-fuse-matmul-epilogue): each element is the unfused ops'
    // expressions applied to the same product: + bias[n], dropout of element i, addend +,
    // the GELU's gradient at X[i] (exact, given its kept erf, or tanh).
    std::vector<float> E(tiled.size()), bias(c.N), X(tiled.size()), erfX(tiled.size());
    for (float& v : E) v = normal(rng);
    for (float& v : bias) v = normal(rng);
    for (float& v : X) v = 3 * normal(rng);
    for (size_t i = 0; i < X.size(); ++i) erfX[i] = gptc::gelu_erf_of(X[i]);
    const int64_t seedStep[2] = {1234567, 89};
    const float p = 0.25f, scale = float(1.0 / (1.0 - 0.25));
    const gptc::MatmulEpilogue<float> epilogues[] = {
        {E.data()}, {nullptr, bias.data()}, {nullptr, nullptr, seedStep, 5, p, scale},
        {E.data(), bias.data(), seedStep, 6, p, scale},
        {nullptr, nullptr, nullptr, 0, 0, 1, X.data()},
        {nullptr, nullptr, nullptr, 0, 0, 1, X.data(), erfX.data()},
        {E.data(), bias.data(), nullptr, 0, 0, 1, X.data(), nullptr, true}};
    for (const auto& ep : epilogues) {
      std::vector<float> withEp(tiled.size()), refEp(tiled.size());
      gptc::matmul(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(), sbb, sbk, sbn,
                   withEp.data(), ep);
      gptc::matmul_reference<float>(c.batch, c.M, c.N, c.K, A.data(), sab, sam, sak, B.data(),
                                    sbb, sbk, sbn, refEp.data(), ep);
      int64_t dropped = 0;
      for (size_t i = 0; i < tiled.size(); ++i) {
        float v = ref[i];
        if (ep.bias) v = v + bias[i % c.N];
        if (ep.rng) {
          const bool keep = gptc::dropout_keep(seedStep[0], seedStep[1], ep.dropout_id, i, p);
          dropped += !keep;
          v = keep ? v * scale : 0.0f;
        }
        if (ep.addend) v = E[i] + v;
        if (ep.gelu_x)
          v = ep.gelu_tanh ? gptc::gelu_tanh_grad(v, X[i])
              : ep.gelu_erf ? gptc::gelu_erf_grad_given(v, X[i], erfX[i])
                            : gptc::gelu_erf_grad(v, X[i]);
        ASSERT_EQ(bits(withEp[i]), bits(v)) << "tiled, epilogue, at " << i;
        ASSERT_EQ(bits(refEp[i]), bits(v)) << "reference, epilogue, at " << i;
      }
      if (ep.rng && tiled.size() >= 64) EXPECT_GT(dropped, 0);  // the dropout draws at all
    }
    // And the reference is the canonical order: element (0, 0) by hand.
    float acc = 0;
    for (int64_t k = 0; k < c.K; ++k) acc = std::fma(A[k * sak], B[k * sbk], acc);
    EXPECT_EQ(acc, ref[0]);
  }
#if defined(GPTC_TILED_MATMUL)
  if (blocking.blocked) {
    EXPECT_GE(blocked, 3) << "too few cases reach the blocked order";
  } else if (blocking.blockedTransposed) {  // only a transposed A (weight gradients) blocked
    EXPECT_GE(blocked, 2) << "too few transposed cases reach the blocked order";
    EXPECT_EQ(blocked, blockedTransposed) << "a product with A's rows took the blocked order";
  } else {
    EXPECT_EQ(blocked, 0) << "the panel-task order took a blocked product";
  }
#endif
  }
  }
#if defined(GPTC_TILED_MATMUL)
  gptc::detail::matmul_blocking() = blockings()[0];
#endif
#if defined(_OPENMP) && defined(GPTC_TILED_MATMUL)
  EXPECT_GE(split, 2) << "too few cases split their panels' rows";
  EXPECT_GE(byRows, 6) << "too few cases split by rows";
  EXPECT_GE(pipelined, 6) << "too few cases pipelined over k";
#endif
}

#if defined(_OPENMP) && defined(GPTC_TILED_MATMUL)
// A horizontal kernel's members in one parallel region (matmul_ws): the blocked order and
// the split by rows go on to the next member without a barrier, each thread with B packed
// in its own scratch, while A's copy is read by every thread from the scratch of one, and
// a k pipeline's flags are zeroed by one thread for all. Each member still gets the
// reference's bits, on any thread count.
TEST(Matmul, HorizontalMembersGetTheReferenceBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  // Blocked (one k block, then 3), A copied to rows, blocked again, copied again, by rows,
  // pipelined over k twice in a row, by rows.
  const Case members[] = {{1, 203, 150, 333, false, false, true},
                          {1, 601, 37, 450, true, false, true},
                          {1, 250, 140, 1100, false, false, true},
                          {1, 520, 36, 512, true, false, true},
                          {1, 200, 65, 48, false, false, true},
                          {1, 130, 70, 512, true, false, true},
                          {1, 250, 64, 200, true, false, true},
                          {1, 97, 40, 130, false, false, true}};
  struct Data {
    std::vector<float> A, B, C, ref;
  };
  std::vector<Data> data;
  for (const Case& c : members) {
    Data d{std::vector<float>(c.M * c.K), std::vector<float>(c.K * c.N),
           std::vector<float>(c.M * c.N), std::vector<float>(c.M * c.N)};
    for (float& v : d.A) v = normal(rng);
    for (float& v : d.B) v = normal(rng);
    gptc::matmul_reference<float>(1, c.M, c.N, c.K, d.A.data(), 0, c.ta ? 1 : c.K,
                                  c.ta ? c.M : 1, d.B.data(), 0, c.N, 1, d.ref.data());
    data.push_back(std::move(d));
  }
  for (int run = 0; run < 6; ++run) {
    const int threads = 1 + run % 3;
    gptc::detail::matmul_blocking() = blockings()[run < 3 ? 0 : 2];
    gptc::thread_count() = threads;
    for (Data& d : data) std::fill(d.C.begin(), d.C.end(), -1.0f);
    GPTC_PARALLEL {
      for (size_t i = 0; i < data.size(); ++i) {
        const Case& c = members[i];
        gptc::matmul_ws(1, c.M, c.N, c.K, data[i].A.data(), 0, c.ta ? 1 : c.K, c.ta ? c.M : 1,
                        data[i].B.data(), 0, c.N, 1, data[i].C.data());
      }
    }
    for (size_t i = 0; i < data.size(); ++i)
      EXPECT_EQ(0, std::memcmp(data[i].C.data(), data[i].ref.data(), data[i].C.size() * 4))
          << "member " << i << ", " << threads << " threads, "
          << (run < 3 ? "the Zen 4's blocking" : "the small blocking");
  }
  gptc::detail::matmul_blocking() = blockings()[0];
  gptc::thread_count() = 1;
}
#endif

#if defined(GPTC_TILED_MATMUL)
// The blocking rule (docs/architecture.md, "Blocking from the machine") on the caches of the
// machines measured and of the Intel Xeon, each figure worked out by hand from the
// rule: kc fills all but two of L1d's ways with a kc x panel block, mc half of L2 with an
// mc x kc block (whole 6-row micro-panels), nc half of a core's share of L3 with a kc x nc
// block (whole panels).
TEST(MatmulBlocking, TheRuleOnKnownCaches) {
  using gptc::detail::blocking_for;
  gptc::Caches zen2, intel;
  zen2.l1d = {32 << 10, 8, 64, 1};
  zen2.l2 = {512 << 10, 8, 64, 1};
  zen2.l3 = {16 << 20, 16, 64, 8};
  intel.l1d = {48 << 10, 12, 64, 1};
  intel.l2 = {2 << 20, 16, 64, 1};
  intel.l3 = {105 << 20, 15, 64, 56};
  const auto z = blocking_for(zen2, true), x = blocking_for(intel, false);
  EXPECT_TRUE(z.blocked);
  EXPECT_TRUE(z.blockedTransposed);
  EXPECT_FALSE(x.blocked);
  EXPECT_TRUE(x.blockedTransposed);  // panel tasks, but a transposed A blocked: 2 MB of L2
  gptc::Caches zen4 = zen2;          // 1 MB of L2: every product in panel tasks
  zen4.l2 = {1 << 20, 8, 64, 1};
  EXPECT_FALSE(blocking_for(zen4, false).blockedTransposed);
  if (gptc::detail::kPanel == 16) {  // AVX2: 64-byte rows of a panel
    // 6 ways of 4 KB / 64 B = 384; 256 KB / (384 * 4 B) = 170.7 -> 168; 1 MB / 1536 B =
    // 682.7 -> 672.
    EXPECT_EQ(z.kc, 384);
    EXPECT_EQ(z.mc, 168);
    EXPECT_EQ(z.nc, 672);
    // 10 ways of 4 KB / 64 B = 640; 1 MB / 2560 B = 409.6 -> 408; 0.94 MB / 2560 B = 384.
    EXPECT_EQ(x.kc, 640);
    EXPECT_EQ(x.mc, 408);
    EXPECT_EQ(x.nc, 384);
  } else {  // AVX-512: 128-byte rows
    // 24 KB / 128 B = 192; 256 KB / 768 B = 341.3 -> 336; 1 MB / 768 B = 1365.3 -> 1344.
    EXPECT_EQ(z.kc, 192);
    EXPECT_EQ(z.mc, 336);
    EXPECT_EQ(z.nc, 1344);
    // 40 KB / 128 B = 320; 1 MB / 1280 B = 819.2 -> 816; 0.94 MB / 1280 B = 768.
    EXPECT_EQ(x.kc, 320);
    EXPECT_EQ(x.mc, 816);
    EXPECT_EQ(x.nc, 768);
  }
  // A transposed A is copied past a core's L2; rows split while half of L2 holds them.
  EXPECT_EQ(z.copyFloats, 128 << 10);
  EXPECT_EQ(z.rowFloats, 64 << 10);
  EXPECT_EQ(x.copyFloats, 512 << 10);
  EXPECT_EQ(x.rowFloats, 256 << 10);
  // An L1 too small for the rule still gets blocks of 64.
  gptc::Caches tiny = zen2;
  tiny.l1d = {4 << 10, 2, 64, 1};
  EXPECT_EQ(blocking_for(tiny, true).kc, 64);
}

TEST(MatmulBlocking, OverridesAndCacheStrings) {
  using gptc::detail::blocking_overridden;
  using gptc::detail::kPanel;
  gptc::Caches c;
  ASSERT_TRUE(gptc::detail::parse_caches("48K,2M,105M,12,16", c));
  EXPECT_EQ(c.l1d.bytes, 48 << 10);
  EXPECT_EQ(c.l1d.ways, 12);
  EXPECT_EQ(c.l2.bytes, 2 << 20);
  EXPECT_EQ(c.l2.ways, 16);
  EXPECT_EQ(c.l3.bytes, 105 << 20);
  ASSERT_TRUE(gptc::detail::parse_caches("32768,1M,32M", c));
  EXPECT_EQ(c.l1d.ways, 8);
  for (const char* bad : {"48K,2M", "48K,,2M", "x", "48K,2M,105M,12", "-1,2M,3M"})
    EXPECT_FALSE(gptc::detail::parse_caches(bad, c)) << bad;
  const gptc::detail::MatmulBlocking b = gptc::detail::blocking_for(c, false);
  const auto o = blocking_overridden(b, "order=blocked,kc=100,mc=7,nc=33");
  EXPECT_TRUE(o.blocked);
  EXPECT_EQ(o.kc, 100);
  EXPECT_EQ(o.mc, 12);                          // whole micro-panels
  EXPECT_EQ(o.nc, (33 + kPanel - 1) / kPanel * kPanel);  // whole panels
  const auto p = blocking_overridden(o, "order=panels"), m = blocking_overridden(o, "order=mixed");
  EXPECT_FALSE(p.blocked);
  EXPECT_FALSE(p.blockedTransposed);
  EXPECT_FALSE(m.blocked);
  EXPECT_TRUE(m.blockedTransposed);
  EXPECT_TRUE(blocking_overridden(p, "order=blocked").blockedTransposed);
  // Anything else keeps the machine's blocking whole (and says so on stderr).
  for (const char* bad : {"kc=5x", "kc=0", "mc=-3", "order=rows", "nc", "kc=100,huh=1"}) {
    const auto k = blocking_overridden(b, bad);
    EXPECT_EQ(k.kc, b.kc) << bad;
    EXPECT_EQ(k.blocked, b.blocked) << bad;
  }
}
#endif

}  // namespace

// Attention's helpers: block_dots_rows (4 query rows at once) gives each score the bits of
// block_dots; axpy_rows (accumulators in registers, masked tails) and axpy_rows4 (four
// outputs per pass over the rows) the bits of the plain j-outer, c-inner loop of fmas. Widths around the 16-lane and 64-column edges.
TEST(AttentionHelpers, SameBitsAsThePlainLoops) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t D : {1, 15, 16, 32, 33, 64, 65, 130}) {
    const int64_t S = 70, ld = 96, qs = D + 3;
    std::vector<float> q(4 * qs), kt(D * ld), out(4 * ld, -1.0f), ref(32);
    for (float& v : q) v = u(rng);
    for (float& v : kt) v = u(rng);
    for (int64_t R : {4, 3}) {
      gptc::block_dots_rows<float>(R, D, q.data(), qs, kt.data(), ld, S, out.data(), ld);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j0 = 0; j0 < S; j0 += 32) {
          gptc::block_dots<float>(D, q.data() + r * qs, kt.data() + j0, ld, ref.data());
          for (int64_t j = 0; j < 32; ++j)
            ASSERT_EQ(bits(out[r * ld + j0 + j]), bits(ref[j])) << "D " << D << " R " << R;
        }
    }
    const int64_t n = 37, ws = 5, rs = D + 7;
    std::vector<float> w(n * ws), rows(n * rs), acc(D + 16), want(D + 16);
    for (float& v : w) v = u(rng);
    for (float& v : rows) v = u(rng);
    for (int64_t c = 0; c < D + 16; ++c) acc[c] = want[c] = u(rng);
    gptc::axpy_rows<float>(n, w.data(), ws, rows.data(), rs, D, acc.data());
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < D; ++c) want[c] = std::fma(w[j * ws], rows[j * rs + c], want[c]);
    for (int64_t c = 0; c < D + 16; ++c)  // past D: untouched
      ASSERT_EQ(bits(acc[c]), bits(want[c])) << "D " << D << " c " << c;
    // axpy_rows4: four outputs (acc rows `as` apart), weight i of row j at w[j*wj + i*wi].
    for (auto [wj, wi] : {std::pair<int64_t, int64_t>{5, 1}, {1, 40}}) {
      const int64_t as = D + 16;
      std::vector<float> acc4(4 * as), want4(4 * as);
      for (int64_t c = 0; c < 4 * as; ++c) acc4[c] = want4[c] = u(rng);
      gptc::axpy_rows4<float>(n - 1, w.data(), wj, wi, rows.data(), rs, D, acc4.data(), as);
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < n - 1; ++j)
          for (int64_t c = 0; c < D; ++c)
            want4[i * as + c] = std::fma(w[j * wj + i * wi], rows[j * rs + c], want4[i * as + c]);
      for (int64_t c = 0; c < 4 * as; ++c)
        ASSERT_EQ(bits(acc4[c]), bits(want4[c])) << "axpy_rows4 D " << D << " at " << c;
    }
  }
}

// transpose_keys (16x16 register blocks on AVX-512) against the plain loop, zero padding
// past S included; sizes around the 16-lane edges.
TEST(AttentionHelpers, TransposeKeys) {
  for (int64_t S : {1, 15, 16, 17, 70}) {
    for (int64_t D : {1, 16, 33, 64}) {
      const int64_t stride = D + 5, ld = (S + 31) / 32 * 32;
      std::vector<float> src(S * stride), got(D * ld, -7.0f);
      for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.5f - 3.0f;
      gptc::transpose_keys<float>(S, D, src.data(), stride, ld, got.data());
      for (int64_t c = 0; c < D; ++c)
        for (int64_t j = 0; j < ld; ++j)
          ASSERT_EQ(bits(got[c * ld + j]), bits(j < S ? src[j * stride + c] : 0.0f))
              << "S " << S << " D " << D << " c " << c << " j " << j;
    }
  }
}

// block_max4 and block_sum4: the sequential loops' bits, with NaNs, zeros of both signs,
// -inf fillers and rows of nothing but -inf.
TEST(AttentionHelpers, BlockMaxAndSumAreSequential) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  std::uniform_int_distribution<int> pick(0, 40);
  for (int trial = 0; trial < 2000; ++trial) {
    float p[4][32];
    for (auto& row : p)
      for (float& v : row) {
        const int k = pick(rng);
        v = k == 0 ? NAN : k == 1 ? -NAN : k == 2 ? 0.0f : k == 3 ? -0.0f : k < 8 ? -INFINITY : u(rng);
      }
    if (trial % 3 == 0)  // no specials at all: the fast paths
      for (auto& row : p)
        for (float& v : row) v = u(rng);
    if (trial % 7 == 0)
      for (float& v : p[trial % 4]) v = -INFINITY;
    if (trial % 11 == 0)  // zeros only with -inf: the max is a zero
      for (auto& row : p)
        for (int j = 0; j < 32; ++j) row[j] = j % 3 == 0 ? -INFINITY : (j % 2 ? 0.0f : -0.0f);
    float mb[4], want[4];
    gptc::block_max4<float>(p, mb);
    for (float& w : want) w = -INFINITY;
    for (int j = 0; j < 32; ++j)
      for (int rr = 0; rr < 4; ++rr) want[rr] = gptc::maximum(want[rr], p[rr][j]);
    for (int rr = 0; rr < 4; ++rr) ASSERT_EQ(bits(mb[rr]), bits(want[rr])) << "trial " << trial;
    float s[4], sw[4] = {0, 0, 0, 0};
    gptc::block_sum4<float>(p, s);
    for (int j = 0; j < 32; ++j)
      for (int rr = 0; rr < 4; ++rr) sw[rr] = sw[rr] + p[rr][j];
    // A NaN sum may carry either operand's NaN (compilers order a commutative add freely,
    // the loop above included); every other result has the loop's bits.
    for (int rr = 0; rr < 4; ++rr) {
      if (std::isnan(sw[rr]))
        ASSERT_TRUE(std::isnan(s[rr])) << "trial " << trial;
      else
        ASSERT_EQ(bits(s[rr]), bits(sw[rr])) << "trial " << trial;
    }
  }
}

// dot_rows4: each row's fma chain over its own length, in increasing j, from its start.
TEST(AttentionHelpers, DotRows4IsSequential) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const int64_t as = 64, bs = 96;
  std::vector<float> a(4 * as), b(4 * bs);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  const int64_t lens[][4] = {{0, 0, 0, 0}, {1, 2, 3, 4}, {17, 18, 19, 20}, {64, 0, 33, 5}, {15, 16, 31, 32}};
  for (const auto& n : lens) {
    float out[4] = {0.0f, 1.5f, -2.0f, 0.25f}, want[4];
    std::memcpy(want, out, sizeof out);
    gptc::dot_rows4<float>(n, a.data(), as, b.data(), bs, out);
    for (int rr = 0; rr < 4; ++rr) {
      for (int64_t j = 0; j < n[rr]; ++j) want[rr] = std::fma(a[rr * as + j], b[rr * bs + j], want[rr]);
      ASSERT_EQ(bits(out[rr]), bits(want[rr])) << "row " << rr << " n " << n[rr];
    }
  }
}

// The lane-block attention forward (16 rows on AVX-512, 8 on AVX2) against a plain per-row
// transcription of the order the emitter's 4-row code keeps (key blocks of 32; the scores
// fma chains over c; the block's max and sum sequential; p.v fma chains over the row's keys;
// acc * corr + sum), bit for bit, on the shapes of kAttentionCases.
#if defined(GPTC_VECTOR_FORMS)
namespace {
struct AttentionCase {
  int64_t T, S, D, Dv;
  bool causal, keep;
  bool masked = false;  // keys hidden by a key mask (keyMask below)
};

// Rows past a multiple of 16 (and of 8), keys past a multiple of 16 and fewer than 16, widths
// off the 16-lane edge, causal and not, with and without keep factors; on AVX2, sequences
// below gptc::kWideRowsFrom keys (rows in halves of 8) and from it on (16 as two ymm, whose
// tiles of 6 and 5 keys or columns the widths 64, 40, 33, 17 and 3 split differently).
const AttentionCase kAttentionCases[] = {
    {37, 37, 64, 64, true, false},  {20, 45, 24, 3, false, true},  {5, 3, 2, 2, false, false},
    {64, 64, 16, 40, true, true},   {33, 80, 17, 33, true, false}, {133, 133, 64, 40, true, true},
    {21, 150, 17, 3, false, false}, {130, 130, 33, 64, true, false},
    // A key mask: the first half of the keys hidden (a causal row before it sees none, a row
    // just past it only hidden keys in its first blocks) and every 7th from 3 on.
    {70, 70, 16, 16, true, false, true},  {45, 45, 24, 3, false, true, true},
    {133, 133, 64, 40, true, true, true}};

// The key mask of a masked case: false hides key j (gpt.attention's key_mask).
std::vector<char> keyMask(const AttentionCase& a) {
  std::vector<char> km(a.S, 1);
  for (int64_t j = 0; j < a.S; ++j) km[j] = !(j < a.S / 2 || j % 7 == 3);
  return km;
}

// `rows` rows `pitch` apart of normal values (the pitch's padding too).
std::vector<float> randomRows(int64_t rows, int64_t pitch, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> x(rows * pitch);
  for (float& e : x) e = nd(rng);
  return x;
}

// The keys each row of the lane block from t0 sees (0 past the block's nr rows).
void blockSeen(const AttentionCase& a, int64_t t0, int64_t nr, int64_t* vis) {
  for (int64_t rr = 0; rr < gptc::kAttentionRows; ++rr)
    vis[rr] = rr < nr ? (a.causal ? std::min(t0 + rr + 1, a.S) : a.S) : 0;
}

void keepFactors(int64_t r, int64_t j0, int64_t n, float* kf) {
  for (int64_t j = 0; j < n; ++j) kf[j] = (r * 131 + (j0 + j) * 7) % 5 == 0 ? 0.0f : 1.25f;
}

void attentionRow(const AttentionCase& a, int64_t t, const float* q, int64_t qs, const float* k,
                  int64_t ks, const float* v, int64_t vs, float scale, float* y, float* st) {
  const int64_t vis = a.causal ? std::min(t + 1, a.S) : a.S;
  const std::vector<char> km = keyMask(a);
  float m = -INFINITY, l = 0;
  std::vector<float> acc(a.Dv, 0.0f);
  for (int64_t j0 = 0; j0 < vis; j0 += 32) {
    const int64_t nb = std::min<int64_t>(32, vis - j0);
    float p[32], kf[32];
    for (int64_t j = 0; j < 32; ++j) {
      float s = 0;
      for (int64_t c = 0; c < a.D && j < nb; ++c) s = gptc::fma(q[t * qs + c], k[(j0 + j) * ks + c], s);
      p[j] = j < nb && (!a.masked || km[j0 + j]) ? s * scale : -INFINITY;
    }
    float mb = -INFINITY;
    for (int64_t j = 0; j < 32; ++j) mb = gptc::maximum(mb, p[j]);
    // While every key seen is hidden the max is -inf: the exps against 0 (no NaN).
    const float mn = gptc::maximum(m, mb), me = mn == -INFINITY ? 0.0f : mn;
    const float corr = gptc::exp(m - me);
    float bsum = 0;
    for (int64_t j = 0; j < 32; ++j) p[j] = gptc::exp(p[j] - me);
    for (int64_t j = 0; j < 32; ++j) bsum = bsum + p[j];
    l = l * corr + bsum;
    if (a.keep) {
      keepFactors(t, j0, nb, kf);
      for (int64_t j = 0; j < nb; ++j) p[j] = p[j] * kf[j];
    }
    for (int64_t c = 0; c < a.Dv; ++c) {
      float s = 0;
      for (int64_t j = 0; j < nb; ++j) s = gptc::fma(p[j], v[(j0 + j) * vs + c], s);
      acc[c] = acc[c] * corr + s;
    }
    m = mn;
  }
  for (int64_t c = 0; c < a.Dv; ++c) y[c] = acc[c] / (l == 0.0f ? 1.0f : l);  // 0: no key seen
  st[0] = m;
  st[1] = l;
}
}  // namespace

TEST(AttentionHelpers, LaneRowsSameBitsAsThePerRowOrder) {
  std::mt19937 rng(5);
  for (const AttentionCase& a : kAttentionCases) {
    const int64_t qs = a.D + 7, ks = a.D + 5, vs = a.Dv + 3, ys = a.Dv + 1;
    const float scale = 1.0f / std::sqrt(float(a.D));
    const std::vector<float> q = randomRows(a.T, qs, rng), k = randomRows(a.S, ks, rng),
                             v = randomRows(a.S, vs, rng);
    std::vector<float> y(a.T * ys, -7.0f), st(a.T * 2), yr(a.Dv), str(2);
    const std::vector<char> mask = keyMask(a);
    for (int64_t t0 = 0; t0 < a.T; t0 += gptc::kAttentionRows) {
      const int64_t nr = std::min<int64_t>(gptc::kAttentionRows, a.T - t0);
      int64_t vis[gptc::kAttentionRows];
      blockSeen(a, t0, nr, vis);
      auto keep = [&](int64_t rr, int64_t j0, int64_t n, float* kf) { keepFactors(t0 + rr, j0, n, kf); };
      const bool* km = a.masked ? reinterpret_cast<const bool*>(mask.data()) : nullptr;
      if (a.keep)
        gptc::attention_rows(nr, vis, a.S, a.D, a.Dv, scale, q.data() + t0 * qs, qs, k.data(), ks,
                               v.data(), vs, y.data() + t0 * ys, ys, st.data() + t0 * 2, keep, km);
      else
        gptc::attention_rows(nr, vis, a.S, a.D, a.Dv, scale, q.data() + t0 * qs, qs, k.data(), ks,
                               v.data(), vs, y.data() + t0 * ys, ys, st.data() + t0 * 2,
                               gptc::NoKeep(), km);
    }
    for (int64_t t = 0; t < a.T; ++t) {
      attentionRow(a, t, q.data(), qs, k.data(), ks, v.data(), vs, scale, yr.data(), str.data());
      for (int64_t c = 0; c < a.Dv; ++c)
        ASSERT_EQ(bits(y[t * ys + c]), bits(yr[c])) << "T " << a.T << " S " << a.S << " row " << t << " col " << c;
      ASSERT_EQ(y[t * ys + a.Dv], -7.0f) << "wrote past row " << t;
      ASSERT_EQ(bits(st[2 * t]), bits(str[0])) << "max, row " << t;
      ASSERT_EQ(bits(st[2 * t + 1]), bits(str[1])) << "sum, row " << t;
    }
  }
}

// The lane-block gradient likewise, against a per-row transcription of the 4-row code's order
// (P from the forward's max and sum; dP = g.v; D = sum_j P dP; dS = P (dP - D); dq = scale *
// sum_j dS k, each an fma chain in increasing j), with its dS and P * keep (transposed) too.
TEST(AttentionHelpers, GradLaneRowsSameBitsAsThePerRowOrder) {
  std::mt19937 rng(7);
  for (const AttentionCase& a : kAttentionCases) {
    const int64_t qs = a.D + 7, ks = a.D + 5, vs = a.Dv + 3, gs = a.Dv + 2, dqs = a.D + 1;
    const int64_t Sp = (a.S + 31) / 32 * 32, ldt = 32;
    const float scale = 1.0f / std::sqrt(float(a.D));
    const std::vector<float> q = randomRows(a.T, qs, rng), k = randomRows(a.S, ks, rng),
                             v = randomRows(a.S, vs, rng), g = randomRows(a.T, gs, rng);
    std::vector<float> st(a.T * 2), yr(a.Dv), dq(a.T * dqs, -7.0f);
    const std::vector<char> mask = keyMask(a);
    for (int64_t t = 0; t < a.T; ++t)
      attentionRow(a, t, q.data(), qs, k.data(), ks, v.data(), vs, scale, yr.data(), &st[2 * t]);
    alignas(64) static float dST[160 * 32], PKT[160 * 32];
    ASSERT_LE(Sp, 160);
    for (int64_t t0 = 0; t0 < a.T; t0 += gptc::kAttentionRows) {
      const int64_t nr = std::min<int64_t>(gptc::kAttentionRows, a.T - t0);
      int64_t vis[gptc::kAttentionRows];
      blockSeen(a, t0, nr, vis);
      auto keep = [&](int64_t rr, int64_t j0, int64_t n, float* kf) { keepFactors(t0 + rr, j0, n, kf); };
      const int64_t col = t0 % 32;  // the block's rows in a 32-row group
      const bool* km = a.masked ? reinterpret_cast<const bool*>(mask.data()) : nullptr;
      if (a.keep)
        gptc::attention_grad_rows(nr, vis, a.S, a.D, a.Dv, scale, q.data() + t0 * qs, qs, k.data(), ks,
                                    v.data(), vs, g.data() + t0 * gs, gs, &st[2 * t0], dq.data() + t0 * dqs,
                                    dqs, dST + col, PKT + col, ldt, keep, km);
      else
        gptc::attention_grad_rows(nr, vis, a.S, a.D, a.Dv, scale, q.data() + t0 * qs, qs, k.data(), ks,
                                    v.data(), vs, g.data() + t0 * gs, gs, &st[2 * t0], dq.data() + t0 * dqs,
                                    dqs, dST + col, PKT + col, ldt, gptc::NoKeep(), km);
      for (int64_t rr = 0; rr < nr; ++rr) {
        const int64_t t = t0 + rr;
        std::vector<float> P(vis[rr]), dP(vis[rr]), kf(32, 1.0f);
        float Dsum = 0;
        // A row that saw no key (sum 0): max 0 and sum 1, so that its P is 0.
        const bool none = st[2 * t + 1] == 0.0f;
        const float m = none ? 0.0f : st[2 * t], l = none ? 1.0f : st[2 * t + 1];
        for (int64_t j = 0; j < vis[rr]; ++j) {
          float s = 0, d = 0;
          for (int64_t c = 0; c < a.D; ++c) s = gptc::fma(q[t * qs + c], k[j * ks + c], s);
          for (int64_t c = 0; c < a.Dv; ++c) d = gptc::fma(g[t * gs + c], v[j * vs + c], d);
          if (a.masked && !mask[j]) s = -INFINITY;
          P[j] = gptc::exp(s * scale - m) / l;
          dP[j] = d;
        }
        for (int64_t j0 = 0; j0 < vis[rr] && a.keep; j0 += 32) {
          keepFactors(t, j0, std::min<int64_t>(32, vis[rr] - j0), kf.data());
          for (int64_t j = j0; j < std::min<int64_t>(j0 + 32, vis[rr]); ++j) {
            dP[j] = dP[j] * kf[j - j0];
            ASSERT_EQ(bits(PKT[j * ldt + col + rr]), bits(P[j] * kf[j - j0])) << "PK row " << t << " key " << j;
          }
        }
        for (int64_t j = 0; j < vis[rr]; ++j) {
          if (!a.keep) ASSERT_EQ(bits(PKT[j * ldt + col + rr]), bits(P[j])) << "P row " << t << " key " << j;
          Dsum = gptc::fma(P[j], dP[j], Dsum);
        }
        for (int64_t c = 0; c < a.D; ++c) {
          float acc = 0;
          for (int64_t j = 0; j < vis[rr]; ++j) {
            const float ds = P[j] * (dP[j] - Dsum);
            if (c == 0) ASSERT_EQ(bits(dST[j * ldt + col + rr]), bits(ds)) << "dS row " << t << " key " << j;
            acc = gptc::fma(ds, k[j * ks + c], acc);
          }
          ASSERT_EQ(bits(dq[t * dqs + c]), bits(acc * scale)) << "T " << a.T << " dq row " << t << " col " << c;
        }
        ASSERT_EQ(dq[t * dqs + a.D], -7.0f) << "wrote past dq row " << t;
      }
    }
  }
}
#else
TEST(AttentionHelpers, GradLaneRowsSameBitsAsThePerRowOrder) {
  GTEST_SKIP() << "attention_grad_rows needs AVX-512 or AVX2; this build runs the 4-row code";
}
TEST(AttentionHelpers, LaneRowsSameBitsAsThePerRowOrder) {
  GTEST_SKIP() << "attention_rows needs AVX-512 or AVX2; this build runs the 4-row code";
}
#endif

// The products' buffers (the runtime's arena and parameters, the kernels' scratch): one of a
// huge page or more starts on a huge page, where Linux can back it with them (the TLB a
// product's rows a page apart would otherwise miss); a small one on 64 bytes; both whole.
TEST(HostPages, LargeBuffersStartOnAHugePage) {
  const size_t bigBytes = gptc::kHugePage + 100, smallBytes = 100;
  char* big = static_cast<char*>(gptc::alloc_pages(bigBytes));
  char* small = static_cast<char*>(gptc::alloc_pages(smallBytes));
  ASSERT_NE(big, nullptr);
  ASSERT_NE(small, nullptr);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (gptc::huge_pages_on()) EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % gptc::kHugePage, 0u);
#endif
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  std::memset(big, 7, bigBytes);  // every byte ours (ASan's build checks it)
  std::memset(small, 7, smallBytes);
  EXPECT_EQ(big[bigBytes - 1] + small[smallBytes - 1], 14);
  std::free(big);
  std::free(small);
}
