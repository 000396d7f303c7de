// gptc/prelude/matmul.h — the matmul in the canonical order: its epilogue (portable), the
// CPU's register tiles and the reference path. Part of gptc/prelude.h.
#ifndef GPTC_PRELUDE_MATMUL_H
#define GPTC_PRELUDE_MATMUL_H

#include "gptc/prelude/cpu/attention.h"
#include "gptc/prelude/cpu/machine.h"
#include "gptc/prelude/cpu/scratch.h"
#include "gptc/prelude/cpu/vector.h"
#include "gptc/prelude/reduce.h"
#include "gptc/prelude/rng.h"

namespace gptc {

// ---------------------------------------------------------------------------------------
// Matmul: C[b, m, n] = sum_{k<K} A(b, m, k) * B(b, k, n), k = 0..K-1 in increasing order
// with one fma accumulator per element: the canonical matmul order, the same bits as
// dot_seq whatever the tiling, vector width or thread count.
//   A(b, m, k) = A[b*sab + m*sam + k*sak]    B(b, k, n) = B[b*sbb + k*sbk + n*sbn]
//   C is dense [batch, M, N]. An epilogue (MatmulEpilogue: a fused bias, dropout and
//   residual add) is applied to each element once its product is complete.
// On AVX-512 a 6x32 register tile runs over a packed 32-column panel of B, on AVX2 with FMA
// a 6x16 tile over a 16-column panel (each lane is one output element, so vectorising never
// reorders a sum, and both give dot_seq's bits); elsewhere, dot_seq per element.
// ---------------------------------------------------------------------------------------
// What a matmul applies to each finished product before storing it (gpt.matmul's
// epilogue, gpt-fuse-matmul-epilogue), in this order: + bias[n]; gpt.dropout's inverted
// dropout of result element i (its index in C, batch members one after another: the same
// draw and the same scaling); then addend[i] + that value; then gpt.gelu_grad of that
// value at gelu_x[i] (given gelu_erf[i] where it was kept). A null pointer skips its step.
// Each step is the unfused op's expression, so the bits are the unfused program's.
template <class T>
struct MatmulEpilogue {
  const T* addend = nullptr;     // like C
  const T* bias = nullptr;       // [N]
  const int64_t* rng = nullptr;  // [seed, step]: dropout with dropout_id, _p and _scale
  int64_t dropout_id = 0;
  float dropout_p = 0;
  T dropout_scale = 1;
  const T* gelu_x = nullptr;     // like C: the GELU's input
  const T* gelu_erf = nullptr;   // like C: erf(gelu_x / sqrt 2), kept (the exact form only)
  bool gelu_tanh = false;        // the tanh-approximated GELU's gradient, else the exact one

  GPTC_HD bool any() const { return addend || bias || rng || gelu_x; }
  // The same steps for one product v of C's element i, in column col: the form a GPU
  // thread applies to each element it owns (gptc/cuda/matmul.cuh).
  GPTC_HD T apply_one(int64_t i, int64_t col, T v) const {
    if (bias) v = v + bias[col];
    if (rng)
      v = dropout_keep((uint64_t)rng[0], (uint64_t)rng[1], (uint64_t)dropout_id, (uint64_t)i,
                       dropout_p)
              ? v * dropout_scale
              : T(0);
    if (addend) v = addend[i] + v;
    if (gelu_x) v = apply_gelu(i, v);
    return v;
  }
  // The GELU's gradient step for C's element i, v its incoming gradient: a call on the GPU,
  // as store_outputs unrolls a thread's outputs and erf and exp inlined into each of them
  // swell every matmul kernel (bench/NOTES.md, "GPU: the generated step").
  GPTC_HD GPTC_OUTLINE T apply_gelu(int64_t i, T v) const {
    return gelu_tanh  ? gelu_tanh_grad(v, gelu_x[i])
           : gelu_erf ? gelu_erf_grad_given(v, gelu_x[i], gelu_erf[i])
                      : gelu_erf_grad(v, gelu_x[i]);
  }
  // v[r * ldv + j] holds the product of C's element i0 + r * ldc + j, in column col0 + j,
  // for r < rows and j < n (a run of a row each). The masks of several rows are drawn
  // before any is applied, so that their Philox chains overlap.
  void apply(int64_t rows, int64_t i0, int64_t ldc, int64_t col0, int64_t n, T* v,
             int64_t ldv) const {
    if (rows <= 0 || n <= 0) return;
#if defined(__CUDACC__)
    // Element by element (dropout_keep_block, below, is the CPU's vector form of the draws).
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        v[r * ldv + j] = apply_one(i0 + r * ldc + j, col0 + j, v[r * ldv + j]);
#else
    if (bias)
      for (int64_t r = 0; r < rows; ++r)
        GPTC_SIMD for (int64_t j = 0; j < n; ++j)
          v[r * ldv + j] = v[r * ldv + j] + bias[col0 + j];
    if (rng) {
      constexpr int64_t kMax = 256;                  // masks drawn per pass
      const int64_t width = n < kMax ? n : kMax;     // of a row's run
      const int64_t per = kMax / width;              // rows
      alignas(64) uint32_t keep[kMax];
      for (int64_t j0 = 0; j0 < n; j0 += width) {
        const int64_t len = n - j0 < width ? n - j0 : width;
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
          const int64_t nr = rows - r0 < per ? rows - r0 : per;
          for (int64_t r = 0; r < nr; ++r)
            dropout_keep_block((uint64_t)rng[0], (uint64_t)rng[1], (uint64_t)dropout_id,
                               (uint64_t)(i0 + (r0 + r) * ldc + j0), len, dropout_p,
                               keep + r * width);
          for (int64_t r = 0; r < nr; ++r) {
            T* x = v + (r0 + r) * ldv + j0;
            const uint32_t* k = keep + r * width;
            GPTC_SIMD for (int64_t j = 0; j < len; ++j)
              x[j] = detail::sel(k[j] != 0, x[j] * dropout_scale, T(0));
          }
        }
      }
    }
    if (addend)
      for (int64_t r = 0; r < rows; ++r)
        GPTC_SIMD for (int64_t j = 0; j < n; ++j)
          v[r * ldv + j] = addend[i0 + r * ldc + j] + v[r * ldv + j];
    if (gelu_x)  // the GPU targets' (the CPU's pipeline keeps the GELU's gradient apart)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j)
          v[r * ldv + j] = apply_gelu(i0 + r * ldc + j, v[r * ldv + j]);
#endif
  }
};

#if defined(GPTC_VECTOR_FORMS)
#define GPTC_TILED_MATMUL 1
#endif

#if defined(GPTC_TILED_MATMUL)
namespace detail {
constexpr int64_t kPanel = 2 * TileVec::kLanes;  // columns per packed panel (two vectors)
constexpr int64_t kRows = 6;                      // rows per register tile (12 accumulators)

// The sizes come from this machine's caches (BLIS's analytical model; docs/architecture.md,
// "Blocking from the machine", has the rule; bench/NOTES.md what it gives and measured):
//   kc   B's micro-panel (kc x kPanel) fills all but two of L1d's ways (one for the stream
//        of A's micro-panels, one for C's rows);
//   mc   A's block (mc x kc) fills half of L2 (the rest for B's panels streaming through);
//   nc   B's packed block (kc x nc) fills half of this core's share of L3;
// and two thresholds of the orders below: a transposed A larger than a core's L2 is copied
// to rows, and a product whose rows of A take at most half of L2 a thread splits by rows.
struct MatmulBlocking {
  bool blocked;            // tall-A, wide-B products in the blocked order (else panel tasks)
  bool blockedTransposed;  // those of them whose A is transposed (weight gradients) too
  int64_t kc, mc, nc;      // the blocked order's k, row and column blocks
  int64_t copyFloats;      // copies_a: a transposed A of more floats than this is copied
  int64_t rowFloats;       // splits_rows: the floats of A's rows a thread may take
};
// The orders measured faster: AVX2's 16-column panels take the blocked order for every
// product it fits; AVX-512's take panel tasks, but with an L2 of 2 MB a core or more (an
// Intel Xeon's) a transposed A (a weight gradient's dY^T) the blocked order, which packs
// its micro-panels straight from dY's rows. With 1 MB (the Zen 4's) every product,
// weight gradients too, ran faster in panel tasks (bench/NOTES.md, "matmul: loop order and
// blocking" and "blocking from the machine").
constexpr bool kBlockedOrder = kPanel == 16;
constexpr int64_t kBlockTransposedFromL2 = int64_t(2) << 20;
// A transposed: its k runs across memory and its m along it (a weight gradient's dY^T).
inline bool a_transposed(int64_t sam, int64_t sak) { return sam == 1 && sak > 1; }
inline int64_t round_down(int64_t v, int64_t m, int64_t least) {
  v = v / m * m;
  return v < least ? least : v;
}
inline MatmulBlocking blocking_for(const Caches& c, bool blocked) {
  MatmulBlocking b{};
  b.blocked = blocked;
  b.blockedTransposed = blocked || c.l2.bytes >= kBlockTransposedFromL2;
  const int64_t way = c.l1d.bytes / c.l1d.ways;
  b.kc = round_down((c.l1d.ways - 2) * way / (kPanel * 4), 16, 64);
  b.mc = round_down(c.l2.bytes / 2 / (b.kc * 4), kRows, kRows);
  b.nc = round_down(c.l3.bytes / c.l3.sharing / 2 / (b.kc * 4), kPanel, 8 * kPanel);
  b.copyFloats = c.l2.bytes / 4;
  b.rowFloats = c.l2.bytes / 2 / 4;
  return b;
}
// GPTC_MATMUL_BLOCKING="order=blocked|panels|mixed,kc=N,mc=N,nc=N" (mixed: only a
// transposed A blocked, AVX-512's default with 2 MB of L2): the model's choice overridden
// (to time another blocking on a new machine without rebuilding). mc and nc are rounded up
// to whole micro-panels and panels; anything else is refused in one line on stderr and the
// machine's blocking kept.
inline MatmulBlocking blocking_overridden(MatmulBlocking b, const char* s) {
  MatmulBlocking o = b;
  for (const char* p = s; *p;) {
    const char* e = std::strchr(p, ',');
    const size_t n = e ? size_t(e - p) : std::strlen(p);
    char item[64] = {0}, key[64] = {0};
    std::memcpy(item, p, n < sizeof item - 1 ? n : sizeof item - 1);
    std::memcpy(key, item, sizeof key);
    char* eq = std::strchr(key, '=');
    char* end = nullptr;
    const long long v = eq ? std::strtoll(eq + 1, &end, 10) : 0;
    const bool count = eq && end != eq + 1 && *end == 0 && v > 0 && v < (1LL << 30);
    if (eq) *eq = 0;
    const bool order = eq && std::strcmp(key, "order") == 0;
    if (order && std::strcmp(eq + 1, "blocked") == 0)
      o.blocked = o.blockedTransposed = true;
    else if (order && std::strcmp(eq + 1, "panels") == 0)
      o.blocked = o.blockedTransposed = false;
    else if (order && std::strcmp(eq + 1, "mixed") == 0)
      o.blocked = false, o.blockedTransposed = true;
    else if (count && std::strcmp(key, "kc") == 0)
      o.kc = v;
    else if (count && std::strcmp(key, "mc") == 0)
      o.mc = (v + kRows - 1) / kRows * kRows;
    else if (count && std::strcmp(key, "nc") == 0)
      o.nc = (v + kPanel - 1) / kPanel * kPanel;
    else {
      std::fprintf(stderr, "gptc: GPTC_MATMUL_BLOCKING: '%s' is not order=blocked|panels|mixed "
                   "or kc=, mc=, nc= with a positive count; the machine's blocking is used\n",
                   item);
      return b;
    }
    p = e ? e + 1 : p + n;
  }
  return o;
}
// The blocking the products use: this machine's (the caches read on first use, then
// GPTC_MATMUL_BLOCKING). Tests assign other blockings to check that none changes a bit.
inline MatmulBlocking& matmul_blocking() {
  static MatmulBlocking b = [] {
    const MatmulBlocking model = blocking_for(caches(), kBlockedOrder);
    const char* env = std::getenv("GPTC_MATMUL_BLOCKING");
    return env && *env ? blocking_overridden(model, env) : model;
  }();
  return b;
}

// Rows [0, R) of a tile: acc[r] += a(r, k) * panel[k] for k in order. Stored as C's rows
// (ldc apart), or with CT as C's columns: the tile's row r, column j to C[j * ldc + r].
// The accumulators start from zero, or with Carry from C's rows (the same tile's sums over
// the k before this call, which it continues: the one fma chain, cut where k is blocked).
template <int R, bool CT = false, bool Carry = false>
inline void matmul_tile(int64_t K, const float* A, int64_t sam, int64_t sak,
                        const float* panel, float* C, int64_t ldc, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  W::V acc[R][2];
  if constexpr (Carry) {
    static_assert(!CT, "a carried tile is stored as C's rows");
    const W::Mask m0 = W::first(cols), m1 = W::first(cols - L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = cols == kPanel ? W::loadu(C + r * ldc) : W::load_first(C + r * ldc, m0);
      acc[r][1] = cols == kPanel ? W::loadu(C + r * ldc + L) : W::load_first(C + r * ldc + L, m1);
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = W::zero();
  }
  for (int64_t k = 0; k < K; ++k) {
    const W::V b0 = W::load(panel + k * kPanel);
    const W::V b1 = W::load(panel + k * kPanel + L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const W::V a = W::broadcast(A + r * sam + k * sak);
      acc[r][0] = W::fma(a, b0, acc[r][0]);
      acc[r][1] = W::fma(a, b1, acc[r][1]);
    }
  }
  if constexpr (CT) {
    float t[R][kPanel];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      W::store(t[r], acc[r][0]);
      W::store(t[r] + L, acc[r][1]);
    }
    for (int64_t j = 0; j < cols; ++j)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) C[j * ldc + r] = t[r][j];
    return;
  }
  // The panel's first `cols` columns.
  const W::Mask m0 = W::first(cols), m1 = W::first(cols - L);
  if (cols == kPanel) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      W::store(C + r * ldc, acc[r][0]);
      W::store(C + r * ldc + L, acc[r][1]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {  // masked stores past the columns
    W::store_first(C + r * ldc, m0, acc[r][0]);
    W::store_first(C + r * ldc + L, m1, acc[r][1]);
  }
}

// A batch whose members share B (sbb == 0) and whose A rows run on from one member into
// the next (sab == M * sam) is one product with batch * M rows: the same dots, bit for
// bit, with B's panels packed once instead of once per member.
inline void fold_batch(int64_t& batch, int64_t& M, int64_t& sab, int64_t sam, int64_t sbb) {
  if (batch > 1 && sbb == 0 && sab == M * sam) {
    M *= batch;
    batch = 1;
    sab = 0;
  }
}

// B's columns [0, cols) (element (k, j) at Bb[k * sbk + j * sbn]), k = 0..K-1, as a panel:
// panel[k * kPanel + j], zero past `cols`.
inline void pack_panel(int64_t K, const float* Bb, int64_t sbk, int64_t sbn, int64_t cols,
                       float* panel) {
  if (sbn == 1 && cols == kPanel) {  // rows of B are contiguous: copy them
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(panel + k * kPanel, Bb + k * sbk, sizeof(float) * kPanel);
  } else if (sbk == 1) {  // B transposed (a linear layer's weight): 16x16 register blocks
    transpose_keys<float>(cols, K, Bb, sbn, kPanel, panel);
  } else {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < kPanel; ++j)
        panel[k * kPanel + j] = j < cols ? Bb[k * sbk + j * sbn] : 0.0f;
  }
}

// tile(std::integral_constant<int, R>(), m) for rows [m, m + R) of [0, M): kRows at a time,
// then the rest (R a compile-time constant, so that each height has its register code).
template <class F>
inline void for_row_tiles(int64_t M, F&& tile) {
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows) tile(std::integral_constant<int, kRows>(), m);
  switch (M - m) {
    case 5: tile(std::integral_constant<int, 5>(), m); break;
    case 4: tile(std::integral_constant<int, 4>(), m); break;
    case 3: tile(std::integral_constant<int, 3>(), m); break;
    case 2: tile(std::integral_constant<int, 2>(), m); break;
    case 1: tile(std::integral_constant<int, 1>(), m); break;
    default: break;
  }
}

// A product's panel tasks: each member's output columns in panels of kPanel, and each panel's
// rows in `chunks` chunks of `rows` rows (the last may hold fewer). Rows are split only where
// that gives the busiest thread fewer rows to compute: the lm_head product's 65 columns are 3
// panels (the last one column, but a full tile's fmas), so on two threads one would take 2
// and the other 1; split in two, each takes 3 halves. On 16 threads a 384-column product's
// 12 panels would leave 4 idle; 4 chunks give each 3 tasks. A panel is packed once per task,
// so each chunk costs its packing again (counted as kPackRows rows). Which thread computes
// which element never changes its bits: each is the same k = 0..K-1 fma chain from zero.
struct PanelTasks {
  int64_t panels, members, chunks, rows;
  int64_t count() const { return chunks * members * panels; }
};
inline PanelTasks panel_tasks(int64_t batch, int64_t M, int64_t N, int64_t team) {
  constexpr int64_t kPackRows = 2 * kRows;
  const int64_t panels = (N + kPanel - 1) / kPanel, tasks = batch * panels;
  PanelTasks best{panels, batch, 1, M};
  int64_t bestLoad = (tasks + team - 1) / team * (M + kPackRows);
  for (int64_t c = 2; c <= team && c * kRows <= M; ++c) {
    const int64_t rows = ((M + c - 1) / c + kRows - 1) / kRows * kRows;
    const int64_t chunks = (M + rows - 1) / rows;
    const int64_t load = (chunks * tasks + team - 1) / team * (rows + kPackRows);
    if (load < bestLoad) best = {panels, batch, chunks, rows}, bestLoad = load;
  }
  return best;
}

// R rows (a tile of R x kLanes, R <= kBtRows) of up to kLanes columns over a transposed B
// (sbk == 1: a linear layer's weight, its columns B's rows Bb + j * sbn), with no panel:
// blocks of those rows go through registers, are transposed, and each k's column is folded
// into the R accumulators in k order — the tile's fmas in the tile's order, from zero,
// without writing the panel and reading it back. A decode step's products are a row a text,
// and packing took most of their time (bench/NOTES.md, "Generation: the decode step");
// kLanes rows of B streamed at a time ran about twice as fast as a panel's 2 kLanes
// (bench/NOTES.md, "Generation: one row's products"). Each row is asked for kRowBtAhead
// floats (1 KB) ahead, into L2.
constexpr int64_t kRowBtAhead = 256;
#if defined(GPTC_AVX512)
constexpr int kBtRows = 8;  // the 16 transposed vectors, 8 accumulators and a broadcast
#else
constexpr int kBtRows = 6;  // of 16 ymm: 8 transposed vectors, 6 accumulators, a broadcast
#endif
// Products of at most kFewRows rows a member over a transposed B or B's contiguous rows
// pack no panel (matmul_few_rows_ws): past 8 rows they run at about half the FMA peak, no
// longer at the memory's pace (bench/NOTES.md, "One row's products").
constexpr int64_t kFewRows = 8;
template <int R>
inline void matmul_rows_bt(int64_t K, const float* A, int64_t sam, int64_t sak,
                           const float* Bb, int64_t sbn, float* C, int64_t ldc, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  W::V acc[R];
#pragma GCC unroll 8
  for (int m = 0; m < R; ++m) acc[m] = W::zero();
  for (int64_t k0 = 0; k0 < K; k0 += L) {
    const int64_t nk = K - k0 < L ? K - k0 : L;
    W::V r[L];
    if (k0 + kRowBtAhead < K)
      for (int i = 0; i < cols; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(Bb + i * sbn + k0 + kRowBtAhead), _MM_HINT_T1);
#if defined(GPTC_AVX512)
    const __mmask16 km = lanes_mask(nk);
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i)
      r[i] = i < cols ? _mm512_maskz_loadu_ps(km, Bb + i * sbn + k0) : _mm512_setzero_ps();
    transpose16(r);
#else
    const __m256i km = lanes_mask8(nk);
#pragma GCC unroll 8
    for (int i = 0; i < L; ++i)
      r[i] = i < cols ? _mm256_maskload_ps(Bb + i * sbn + k0, km) : _mm256_setzero_ps();
    transpose8(r);
#endif
    for (int64_t c = 0; c < nk; ++c)  // never an fma past K: it could change a -0
#pragma GCC unroll 8
      for (int m = 0; m < R; ++m)
        acc[m] = W::fma(W::broadcast(A + m * sam + (k0 + c) * sak), r[c], acc[m]);
  }
#pragma GCC unroll 8
  for (int m = 0; m < R; ++m) {
    if (cols == L)
      W::store(C + m * ldc, acc[m]);
    else
      W::store_first(C + m * ldc, W::first(cols), acc[m]);
  }
}
// Rows [0, M) of A by matmul_rows_bt, kBtRows at a time: the unit's rows of B, read from
// memory by the first pass, come from L2 for the others.
inline void matmul_few_rows_bt(int64_t M, int64_t K, const float* A, int64_t sam, int64_t sak,
                               const float* Bb, int64_t sbn, float* C, int64_t ldc,
                               int64_t cols) {
  for (int64_t m0 = 0; m0 < M; m0 += kBtRows) {
    const float* a = A + m0 * sam;
    float* c = C + m0 * ldc;
    switch (M - m0 < kBtRows ? M - m0 : kBtRows) {
      case 1: matmul_rows_bt<1>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 2: matmul_rows_bt<2>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 3: matmul_rows_bt<3>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 4: matmul_rows_bt<4>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 5: matmul_rows_bt<5>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 6: matmul_rows_bt<6>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
#if defined(GPTC_AVX512)
      case 7: matmul_rows_bt<7>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
      case 8: matmul_rows_bt<8>(K, a, sam, sak, Bb, sbn, c, ldc, cols); break;
#endif
    }
  }
}

// One row of A over a B whose rows are contiguous (sbn == 1: transformers' Conv1D weight
// [K, N], a decode step's cached keys and values), C's `cols` columns with no panel: the
// sums are kept in C itself, C[j] = fma(a[k], B[k, j], C[j]) for k = 0..K-1 from +0 — each
// element the tile's one fma chain, its accumulator in L1 instead of a register, so that B
// streams a contiguous run of each row per k instead of a panel's 32 columns a row apart
// (bench/NOTES.md, "Generation: one row's products"). A run of at most kRowVectors vectors
// keeps its sums in registers instead: through L1, each k's fma would wait on the previous
// one's store. The run kRowAhead rows on is asked for ahead: the prefetchers do not follow
// a run from one row to the next, a few KB on.
constexpr int64_t kRowAhead = 4;
constexpr int kRowVectors = 4;
inline void prefetch_row_run(const float* row, int64_t cols) {
  for (int64_t j = 0; j < cols; j += 16)  // a 64-byte line at a time, into L2
    _mm_prefetch(reinterpret_cast<const char*>(row + j), _MM_HINT_T1);
}
template <int NV>
inline void matmul_row_b_regs(int64_t K, const float* a, int64_t sak, const float* Bb,
                              int64_t sbk, float* C, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  const W::Mask last = W::first(cols - (NV - 1) * L);
  W::V acc[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) acc[v] = W::zero();
  for (int64_t k = 0; k < K; ++k) {
    const W::V x = W::broadcast(a + k * sak);
    const float* row = Bb + k * sbk;
    if (k + kRowAhead < K) prefetch_row_run(row + kRowAhead * sbk, cols);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[v] = W::fma(x, v < NV - 1 ? W::loadu(row + v * L) : W::load_first(row + v * L, last),
                      acc[v]);
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV - 1; ++v) W::store(C + v * L, acc[v]);
  W::store_first(C + (NV - 1) * L, last, acc[NV - 1]);
}
inline void matmul_row_b(int64_t K, const float* a, int64_t sak, const float* Bb, int64_t sbk,
                         float* C, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  switch ((cols + L - 1) / L) {
    case 1: return matmul_row_b_regs<1>(K, a, sak, Bb, sbk, C, cols);
    case 2: return matmul_row_b_regs<2>(K, a, sak, Bb, sbk, C, cols);
    case 3: return matmul_row_b_regs<3>(K, a, sak, Bb, sbk, C, cols);
    case 4: return matmul_row_b_regs<4>(K, a, sak, Bb, sbk, C, cols);
    default: break;
  }
  const int64_t full = cols / L * L;
  const W::Mask tail = W::first(cols - full);
  for (int64_t j = 0; j < full; j += L) W::store(C + j, W::zero());
  if (full < cols) W::store_first(C + full, tail, W::zero());
  for (int64_t k = 0; k < K; ++k) {
    const W::V x = W::broadcast(a + k * sak);
    const float* row = Bb + k * sbk;
    if (k + kRowAhead < K) prefetch_row_run(row + kRowAhead * sbk, cols);
    for (int64_t j = 0; j < full; j += L)
      W::store(C + j, W::fma(x, W::loadu(row + j), W::loadu(C + j)));
    if (full < cols)
      W::store_first(C + full, tail, W::fma(x, W::load_first(row + full, tail),
                                            W::load_first(C + full, tail)));
  }
}

// R rows (R <= kFewRows) of A over a B whose rows are contiguous, C's `cols` columns with
// no panel: k in blocks of kRowsKb rows; each vector of columns keeps its R sums in
// registers through a block and in C between blocks (C[m, j] = fma(a[m, k], B[k, j],
// C[m, j]) for k = 0..K-1 from +0: the tile's one fma chain). A block's runs are read from
// L2: they are asked for, a contiguous run of each row, while the block before is folded.
// A batch's decode step over transformers' Conv1D weights: a panel's 32 columns a row
// apart streamed at about half the memory's pace (bench/NOTES.md, "One row's products").
constexpr int64_t kRowsKb = 64;
template <int R>
inline void matmul_rows_b(int64_t K, const float* A, int64_t sam, int64_t sak,
                          const float* Bb, int64_t sbk, float* C, int64_t ldc, int64_t cols) {
  using W = TileVec;
  constexpr int64_t L = W::kLanes;
  const int64_t nv = (cols + L - 1) / L;
  const W::Mask full = W::first(L), last = W::first(cols - (nv - 1) * L);
  for (int m = 0; m < R; ++m)
    for (int64_t v = 0; v < nv; ++v)
      W::store_first(C + m * ldc + v * L, v < nv - 1 ? full : last, W::zero());
  for (int64_t k = 0; k < K && k < kRowsKb; ++k) prefetch_row_run(Bb + k * sbk, cols);
  for (int64_t k0 = 0; k0 < K; k0 += kRowsKb) {
    const int64_t nk = K - k0 < kRowsKb ? K - k0 : kRowsKb;
    const int64_t next = k0 + kRowsKb, nn = K - next < kRowsKb ? K - next : kRowsKb;
    for (int64_t v = 0; v < nv; ++v) {
      for (int64_t i = v * nn / nv; i < (v + 1) * nn / nv; ++i)  // the next block, spread
        prefetch_row_run(Bb + (next + i) * sbk, cols);
      const W::Mask mask = v < nv - 1 ? full : last;
      W::V acc[R];
#pragma GCC unroll 8
      for (int m = 0; m < R; ++m) acc[m] = W::load_first(C + m * ldc + v * L, mask);
      for (int64_t k = k0; k < k0 + nk; ++k) {
        const W::V b = W::load_first(Bb + k * sbk + v * L, mask);
#pragma GCC unroll 8
        for (int m = 0; m < R; ++m)
          acc[m] = W::fma(W::broadcast(A + m * sam + k * sak), b, acc[m]);
      }
#pragma GCC unroll 8
      for (int m = 0; m < R; ++m) W::store_first(C + m * ldc + v * L, mask, acc[m]);
    }
  }
}
// Rows [0, M) of A: one row as matmul_row_b (its runs' sums in C or registers each k:
// faster on attention's small per-head products), more by matmul_rows_b.
inline void matmul_few_rows_b(int64_t M, int64_t K, const float* A, int64_t sam, int64_t sak,
                              const float* Bb, int64_t sbk, float* C, int64_t ldc,
                              int64_t cols) {
  switch (M) {
    case 1: return matmul_row_b(K, A, sak, Bb, sbk, C, cols);
    case 2: return matmul_rows_b<2>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 3: return matmul_rows_b<3>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 4: return matmul_rows_b<4>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 5: return matmul_rows_b<5>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 6: return matmul_rows_b<6>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 7: return matmul_rows_b<7>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
    case 8: return matmul_rows_b<8>(K, A, sam, sak, Bb, sbk, C, ldc, cols);
  }
}

// The product of a few rows a member where B is transposed (matmul_few_rows_bt, kLanes
// columns a unit) or its rows are contiguous (matmul_few_rows_b, each member's columns in
// runs of about kRowRun, as many runs as threads when there is one member); the units
// split among the threads.
constexpr int64_t kRowRun = 512;
inline void matmul_few_rows_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                               int64_t sab, int64_t sam, int64_t sak, const float* B,
                               int64_t sbb, int64_t sbk, int64_t sbn, float* C,
                               const MatmulEpilogue<float>* ep) {
  constexpr int64_t L = TileVec::kLanes;
  const bool transposed = sbk == 1;
  int64_t width = L;
  if (!transposed) {
    const int64_t team = gptc::team_size();
    int64_t runs = (N + kRowRun - 1) / kRowRun;
    if (batch == 1) runs = (runs + team - 1) / team * team;
    width = ((N + runs - 1) / runs + L - 1) / L * L;
    if (width < kRowVectors * L) width = kRowVectors * L;  // no narrower than a register run
  }
  const int64_t runs = (N + width - 1) / width;
  GPTC_FOR_WS(u, batch * runs) {
    const int64_t b = u / runs, j0 = u % runs * width, cols = N - j0 < width ? N - j0 : width;
    float* Ct = C + b * M * N + j0;
    if (transposed)
      matmul_few_rows_bt(M, K, A + b * sab, sam, sak, B + b * sbb + j0 * sbn, sbn, Ct, N, cols);
    else
      matmul_few_rows_b(M, K, A + b * sab, sam, sak, B + b * sbb + j0, sbk, Ct, N, cols);
    if (ep) ep->apply(M, b * M * N + j0, N, j0, cols, Ct, N);
  }
}

// Task t of a product's PanelTasks g: output columns [n0, n0 + kPanel) of member b, rows
// [m0, m0 + g.rows) (chunks outermost, so that a thread's tasks share its rows of A). With CT
// (one member, no epilogue), the product is C's transpose: its element (m, n) is C[n * M + m].
template <bool CT = false>
inline void matmul_task(int64_t t, const PanelTasks& g, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t sab, int64_t sam, int64_t sak, const float* B,
                        int64_t sbb, int64_t sbk, int64_t sbn, float* C,
                        const MatmulEpilogue<float>* ep) {
  const int64_t perChunk = g.members * g.panels;
  const int64_t m0 = t / perChunk * g.rows, mc = M - m0 < g.rows ? M - m0 : g.rows;
  const int64_t b = t % perChunk / g.panels, n0 = t % g.panels * kPanel;
  const int64_t cols = N - n0 < kPanel ? N - n0 : kPanel;
  const float* Ab = A + b * sab;
  const int64_t c0 = b * M * N + n0;  // C's index of the member's first element in the panel
  float* panel = gptc::scratch<float>(0, K * kPanel);
  pack_panel(K, B + b * sbb + n0 * sbn, sbk, sbn, cols, panel);
  // A tile, then its epilogue on the rows just stored (still in L1), so that the tile's
  // register code is the same with an epilogue or without.
  auto tile = [&](auto rows, int64_t i) {
    constexpr int R = decltype(rows)::value;
    const int64_t m = m0 + i;
    if constexpr (CT) {
      matmul_tile<R, true>(K, Ab + m * sam, sam, sak, panel, C + n0 * M + m, M, cols);
      return;
    }
    float* Ct = C + c0 + m * N;
    matmul_tile<R>(K, Ab + m * sam, sam, sak, panel, Ct, N, cols);
    if (ep) ep->apply(R, c0 + m * N, N, n0, cols, Ct, N);
  };
  for_row_tiles(mc, tile);
}
}  // namespace detail

namespace detail {
// A transposed (sam == 1, sak > 1: a weight gradient's dY^T) spreads a tile's row over K rows
// of memory, a new cache line and page for each k, and the tile waits on memory
// (bench/NOTES.md, "matmul: transposed operands"). Such an A is first
// copied with its rows contiguous, once per product, by register-block transposes: a pass
// over A, and then the same dots of the same values, bit for bit. Not when a member of A fits
// in a core's L2 (copyFloats; 1 MB on the Zen 4): its rows then come from cache anyway, and
// the copy and its barriers cost more than they save (as the tiny model's weight gradients
// showed).
inline bool copies_a(int64_t M, int64_t K, int64_t sam, int64_t sak) {
  return a_transposed(sam, sak) && M * K > matmul_blocking().copyFloats;
}

// The copy's rows are `copy_pitch(K)` floats apart: a pitch that is a multiple of 1 KB
// would put the 64 rows a copy block writes in at most 4 of L1's 64 sets, evicting one
// another's lines half-written; 64 bytes more spreads them (bench/NOTES.md, "matmul:
// transposed operands").
inline int64_t copy_pitch(int64_t K) { return K % 256 == 0 ? K + 16 : K; }

// Rows [0, n) of a transposed operand X (element (r, k) of member b at X[b * sxb + r + k * sxk])
// copied to rows copy_pitch(K) floats apart, by every thread of a parallel region; returns the
// copy. It goes into the scratch (slot 4) of whichever thread takes the `single`; the others
// get its address. Every thread grows its own slot first, so that all of them are grown in the
// first step, whichever thread the `single` falls to later: a step never allocates after that.
// The copy is complete when this returns (the loop's barrier); the caller's loop over the
// tasks ends in a barrier too, so every task is done before the scratch can be reused.
// (Splitting rows by thread instead, each copying its own rows, needs no barrier, but every
// thread then packs all of B, which was slower on the step's weight gradients.)
inline const float* copied_rows_ws(int64_t batch, int64_t n, int64_t K, const float* X,
                                   int64_t sxb, int64_t sxk) {
  const int64_t ld = copy_pitch(K);
  float* const mine = gptc::scratch<float>(4, batch * n * ld);
  float* rows = nullptr;
  GPTC_OMP("omp single copyprivate(rows)")
  rows = mine;
  const int64_t chunks = (n + 63) / 64;  // 64 rows of the copy per iteration
  GPTC_OMP("omp for schedule(static)")
  for (int64_t i = 0; i < batch * chunks; ++i) {
    const int64_t b = i / chunks, r0 = (i % chunks) * 64, rc = n - r0 < 64 ? n - r0 : 64;
    transpose_keys<float>(K, rc, X + b * sxb + r0, sxk, ld, rows + (b * n + r0) * ld);
  }
  return rows;
}

// The product with A copied to rows, called by every thread of a parallel region.
inline void matmul_copied_a_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                               int64_t sab, int64_t sak, const float* B, int64_t sbb,
                               int64_t sbk, int64_t sbn, float* C,
                               const MatmulEpilogue<float>* ep) {
  const int64_t ld = copy_pitch(K);
  const float* rows = copied_rows_ws(batch, M, K, A, sab, sak);
  int64_t sabRows = M * ld;
  fold_batch(batch, M, sabRows, ld, sbb);
  const PanelTasks g = panel_tasks(batch, M, N, gptc::team_size());
  GPTC_OMP("omp for schedule(static)")
  for (int64_t t = 0; t < g.count(); ++t)
    matmul_task(t, g, M, N, K, rows, sabRows, ld, 1, B, sbb, sbk, sbn, C, ep);
}

// The same product when B is the smaller operand and its rows are contiguous (one member, no
// epilogue: a weight gradient dY^T X whose layer widens, q/k/v's or the MLP's first): C^T =
// B^T A^T, with B^T copied to rows instead of A, and A's columns (contiguous) packed as the
// panels; each tile is stored as C's columns. Every element is the same fmas of the same
// products in the same k order (an fma's two factors swap, which changes no bit).
inline bool copies_b(int64_t batch, int64_t M, int64_t N, int64_t sbn,
                     const MatmulEpilogue<float>* ep) {
  return batch == 1 && !ep && sbn == 1 && N < M;
}
inline void matmul_copied_b_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sak,
                               const float* B, int64_t sbk, float* C) {
  const float* rows = copied_rows_ws(1, N, K, B, 0, sbk);
  const PanelTasks g = panel_tasks(1, N, M, gptc::team_size());
  GPTC_OMP("omp for schedule(static)")
  for (int64_t t = 0; t < g.count(); ++t)
    matmul_task<true>(t, g, N, M, K, rows, 0, copy_pitch(K), 1, A, 0, sak, 1, C, nullptr);
}

// The blocked order (BLIS's): k in blocks of kc (one block while K <= 4/3 kc); each thread
// takes a contiguous share of A's rows (or, where B is the wider operand, of B's panels)
// and, per block of nc columns and per k block, packs its B's panels itself (kc x nc
// floats, in its share of L3; where B's rows are contiguous, a row at a time into every
// panel), then goes through its rows in blocks of mc: it copies the block into 6-row
// micro-panels (kRows x kc, k-major, in L2) and runs every panel (kc x kPanel, in L1) over
// them. A tile past the first k block continues from the sums C holds (matmul_tile's
// Carry): every output is still one k = 0..K-1 fma chain from zero, the same bits as the
// panel-task order above, whatever kc, mc, nc and the split are; the epilogue runs in the
// last k block. The panel-task order reads all of A once per panel (for q/k/v at
// Shakespeare size, 72 times 1.5 MB) from the L3 that the machine's other tenants share;
// this order reads A once per k block and column block, and B once per row block, and was
// the faster one for AVX2's 16-column panels. With AVX-512's 32-column panels the
// panel-task order reads A half as often, and on an AVX-512 machine with 1 MB of L2 a core
// it was the faster one for every product timed then; on an Intel Xeon with 2 MB a core
// the blocked order was the faster for the weight gradients, so AVX-512 builds on such a
// machine take it for a transposed A only, unless GPTC_MATMUL_BLOCKING says otherwise. A
// thread packs its operands for itself, not a share for the team: the packing is a small
// part of the thread's fmas, and no thread then reads panels another core wrote, nor waits
// for the others at a barrier per block, which matters where the host places the two
// virtual CPUs far apart. (bench/NOTES.md, "matmul: loop order and blocking" and "matmul:
// splits and threading", has the measurements.)

inline bool blocks_k(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t sam, int64_t sak) {
  const MatmulBlocking& b = matmul_blocking();
  return (b.blocked || (b.blockedTransposed && a_transposed(sam, sak))) && batch == 1 &&
         N >= 8 * kPanel && M >= 192 && M * K >= (int64_t(1) << 16);
}
// Rows [m0, m0 + mc) of A, k in [k0, k0 + kc), as micro-panels: block[i * kc + k * kRows + r]
// = A(m0 + i + r, k0 + k), zero past the rows. (Writes up to 2 floats past the block: the
// scratch holds kPanel more.) Only the blocked order calls it.
inline void pack_rows(int64_t m0, int64_t mc, int64_t k0, int64_t kc, const float* A,
                      int64_t sam, int64_t sak, float* block) {
  for (int64_t i = 0; i < mc; i += kRows) {
    const int64_t R = mc - i < kRows ? mc - i : kRows;
    const float* a = A + (m0 + i) * sam + k0 * sak;
    float* mp = block + i * kc;
    int64_t k = 0;
#if defined(GPTC_AVX2)
    if (sak == 1) {  // rows contiguous: 6 rows x 8 k through registers, 8 x 6 stored
      for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          r[j] = j < R ? _mm256_loadu_ps(a + j * sam + k) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(mp + (k + c) * kRows, r[c]);  // 6 + 2 spare
      }
    }
#endif
#if defined(GPTC_AVX2) || (defined(GPTC_AVX512) && defined(__AVX2__))  // AVX-512 blocks these too
    if (sam == 1) {  // A transposed (a weight gradient's dY^T): each k's R values contiguous
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)R),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      for (; k < kc; ++k)  // 8 lanes stored, the last 2 overwritten by the next k's
        _mm256_storeu_ps(mp + k * kRows, _mm256_maskload_ps(a + k * sak, live));
      continue;
    }
#endif
    for (; k < kc; ++k)
      for (int64_t r = 0; r < kRows; ++r) mp[k * kRows + r] = r < R ? a[r * sam + k * sak] : 0.0f;
  }
}
// A k block of B whose rows are contiguous (element (k, j) at Bk[k * sbk + j], k < kc)
// into every one of the block's panels (kc rows each, zero past N): each
// row read whole, once. (Packed a panel at a time, each row gave 64 bytes to a panel
// before the next row, 6 KB on, a miss per row that the prefetchers do not follow
// across pages; row by row is faster: bench/NOTES.md, "matmul: packing and prefetch".
// The forwards, whose B is transposed, keep the panel-at-a-time packing.) The same values
// in the same places.
inline void pack_panel_rows(int64_t kc, int64_t N, const float* Bk, int64_t sbk, float* packed) {
  const int64_t full = N / kPanel, left = N - full * kPanel;
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = Bk + k * sbk;
    for (int64_t p = 0; p < full; ++p)
      std::memcpy(packed + (p * kc + k) * kPanel, row + p * kPanel, sizeof(float) * kPanel);
    if (left) {
      float* last = packed + (full * kc + k) * kPanel;
      for (int64_t j = 0; j < kPanel; ++j) last[j] = j < left ? row[full * kPanel + j] : 0.0f;
    }
  }
}
// Past the first k block a tile starts from the sums C holds, which a k block's pass over
// the panels has evicted from L2 by then (C is M x N; a weight gradient's is 0.6-2.4 MB at
// Shakespeare size). The tile that starts at row m asks for the tile two below it, so
// that its loads find those sums in L1 rather than wait on L3. AVX-512 builds only: measured
// faster on an Intel Xeon; on the Zen 2 and 3 (AVX2) one tile ahead was no faster
// (bench/NOTES.md, "matmul: packing and prefetch"). A prefetch changes no value.
inline void prefetch_carried(int64_t m, int64_t hi, const float* Ct, int64_t N) {
#if defined(GPTC_AVX512)
  constexpr int64_t kAhead = 2 * kRows;
  if (m + kAhead + kRows > hi) return;
  for (int64_t r = 0; r < kRows; ++r) {  // a row's 32 columns: two 64-byte lines
    __builtin_prefetch(Ct + (kAhead + r) * N);
    __builtin_prefetch(Ct + (kAhead + r) * N + kPanel / 2);
  }
#else
  (void)m, (void)hi, (void)Ct, (void)N;
#endif
}
inline void matmul_blocked_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sam,
                              int64_t sak, const float* B, int64_t sbk, int64_t sbn, float* C,
                              const MatmulEpilogue<float>* ep) {
  const MatmulBlocking& bl = matmul_blocking();
  const int64_t depths = K <= bl.kc + bl.kc / 3 ? 1 : (K + bl.kc - 1) / bl.kc;
  const int64_t maxDepth = (K + depths - 1) / depths;
  const int64_t nc = N < bl.nc ? N : bl.nc, ncPanels = (nc + kPanel - 1) / kPanel;
  // One iteration per thread: its contiguous share of the row micro-panels, or where B is
  // the wider operand (N > M: a weight gradient whose layer narrows) of the column panels
  // (a static split; which thread computes an element never changes its bits). Each thread
  // packs the whole of the other operand, so the split goes along the wider one: B packed
  // once per thread costs K N, A K M. A thread reads only its own scratch, so it goes on to
  // the region's next loop without waiting.
  const int team = gptc::team_size();
  const bool byCols = N > M;
  GPTC_OMP("omp for schedule(static) nowait")
  for (int t = 0; t < team; ++t) {
    float* const packed = gptc::scratch<float>(4, ncPanels * maxDepth * kPanel);
    float* const block = gptc::scratch<float>(0, bl.mc * maxDepth + kPanel);
    const int64_t unit = byCols ? kPanel : kRows, extent = byCols ? N : M;
    const int64_t units = (extent + unit - 1) / unit;
    const int64_t u0 = units * t / team * unit, uEnd = units * (t + 1) / team * unit;
    const int64_t u1 = uEnd < extent ? uEnd : extent;
    const int64_t lo = byCols ? 0 : u0, hi = byCols ? M : u1;  // the thread's rows
    const int64_t c0 = byCols ? u0 : 0, c1 = byCols ? u1 : N;  // and its columns
    for (int64_t j0 = c0; j0 < c1; j0 += nc) {
      const int64_t nj = c1 - j0 < nc ? c1 - j0 : nc, panels = (nj + kPanel - 1) / kPanel;
      for (int64_t d = 0; d < depths; ++d) {
        const int64_t k0 = K * d / depths, kc = K * (d + 1) / depths - k0;
        const bool first = d == 0, last = d == depths - 1;
        if (sbn == 1) {  // B's rows contiguous
          pack_panel_rows(kc, nj, B + k0 * sbk + j0, sbk, packed);
        } else {
          for (int64_t p = 0; p < panels; ++p) {
            const int64_t n0 = j0 + p * kPanel;
            pack_panel(kc, B + k0 * sbk + n0 * sbn, sbk, sbn, N - n0 < kPanel ? N - n0 : kPanel,
                       packed + p * kc * kPanel);
          }
        }
        for (int64_t m0 = lo; m0 < hi; m0 += bl.mc) {
          const int64_t mc = hi - m0 < bl.mc ? hi - m0 : bl.mc;
          pack_rows(m0, mc, k0, kc, A, sam, sak, block);
          for (int64_t p = 0; p < panels; ++p) {
            const int64_t n0 = j0 + p * kPanel, cols = N - n0 < kPanel ? N - n0 : kPanel;
            const float* panel = packed + p * kc * kPanel;
            auto tile = [&](auto rows, int64_t i) {
              constexpr int R = decltype(rows)::value;
              const int64_t m = m0 + i;
              float* Ct = C + m * N + n0;
              if (first) {
                matmul_tile<R>(kc, block + i * kc, 1, kRows, panel, Ct, N, cols);
              } else {
                prefetch_carried(m, hi, Ct, N);
                matmul_tile<R, false, true>(kc, block + i * kc, 1, kRows, panel, Ct, N, cols);
              }
              if (ep && last) ep->apply(R, m * N + n0, N, n0, cols, Ct, N);
            };
            for_row_tiles(mc, tile);
          }
        }
      }
    }
  }
}

// Where the data is. On two cores that share no cache (virtual CPUs the host placed apart,
// where a cache line's round trip between them is slow), every line one thread writes and
// the other then reads or writes moves between them, and a step of small kernels spends
// much of its time waiting for those lines (bench/NOTES.md, "The two CPUs' round trip").
// Two orders keep a small product's data where it already is:
//
// By rows: where A's rows are contiguous (a forward, an input gradient: rows are tokens),
// the panel tasks take one chunk of rows per thread, chunks outermost, so that thread t
// computes rows [t r, (t + 1) r), r = ceil(M / T): the rows GPTC_FOR's static split gives
// it in the row and elementwise kernels before and after (the same on two threads, within
// a row on more), and it packs every panel of B for itself. Only while a thread's rows of A
// fit in half of its L2 (rowFloats; 256 KB on the Zen 2, where it was measured): the
// larger products (the blocked order's on AVX2, the panel tasks' above
// on AVX-512, the faster there) keep their order.
inline bool splits_rows(int64_t batch, int64_t M, int64_t K, int64_t sak, int team) {
  return team > 1 && batch == 1 && sak == 1 && M >= team * 4 * kRows &&
         M * K <= team * matmul_blocking().rowFloats;
}
inline PanelTasks row_tasks(int64_t M, int64_t N, int64_t team) {
  const int64_t rows = (M + team - 1) / team;
  return {(N + kPanel - 1) / kPanel, 1, (M + rows - 1) / rows, rows};
}

// By k: a weight gradient (A transposed, dY^T, small enough not to be copied) sums over the
// tokens, which the threads hold in halves. Stage t of T sums k in [K t/T, K (t+1)/T) of
// every unit (16 columns, 48 rows), reading only its own tokens of A and B, and continues
// from the sums stage t - 1 left in C (matmul_tile's Carry): each output is still the one
// k = 0..K-1 fma chain from zero, the same bits on any thread count. The stages go through
// the units in the same order, a pipeline: a unit's flag counts the stages done with it,
// and only partial sums move between the cores. (Only the two orders together speed up a
// small step: the k order needs its tokens where the row order leaves them. bench/NOTES.md,
// "matmul: splits and threading".)
constexpr int64_t kPipelineRows = 8 * kRows;
inline int64_t pipeline_units(int64_t M, int64_t N) {
  return (N + kPanel - 1) / kPanel * ((M + kPipelineRows - 1) / kPipelineRows);
}
inline bool pipelines_k(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t sam,
                        int64_t sak, const MatmulEpilogue<float>* ep, int team) {
  return team > 1 && batch == 1 && !ep && a_transposed(sam, sak) && K >= 4 * team &&
         pipeline_units(M, N) >= 2 * team;
}
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
inline void matmul_k_pipeline_ws(int64_t M, int64_t N, int64_t K, const float* A, int64_t sak,
                                 const float* B, int64_t sbk, int64_t sbn, float* C) {
  const int team = gptc::team_size();
  const int64_t chunks = (M + kPipelineRows - 1) / kPipelineRows;
  const int64_t units = pipeline_units(M, N);
  constexpr int64_t kApart = 16;  // a flag per cache line
  // The flags in the scratch (slot 3) of the thread that takes the `single`, zeroed there.
  std::atomic<int>* flags = nullptr;
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "flags in an int scratch");
  auto* const mine = reinterpret_cast<std::atomic<int>*>(gptc::scratch<int>(3, units * kApart));
  GPTC_OMP("omp single copyprivate(flags)")
  {
    flags = mine;
    for (int64_t u = 0; u < units; ++u) new (&flags[u * kApart]) std::atomic<int>(0);
  }
  // With more threads than processors the stage waited for may not be running: give it
  // the processor at once rather than spin (spinning first slowed an oversubscribed step:
  // bench/NOTES.md, "matmul: splits and threading").
  const int spinLimit = team > gptc::processors() ? 0 : 4096;
  GPTC_FOR_WS(t, team) {  // one iteration per thread: its stage
    const int64_t k0 = K * t / team, kc = K * (t + 1) / team - k0;
    float* panel = gptc::scratch<float>(0, K * kPanel);
    for (int64_t n0 = 0, u = 0; n0 < N; n0 += kPanel) {
      const int64_t cols = N - n0 < kPanel ? N - n0 : kPanel;
      pack_panel(kc, B + k0 * sbk + n0 * sbn, sbk, sbn, cols, panel);
      for (int64_t c = 0; c < chunks; ++c, ++u) {
        std::atomic<int>& done = flags[u * kApart];
        for (int spins = 0; done.load(std::memory_order_acquire) != t; ++spins) {
          spin_pause();
          if (spins > spinLimit) std::this_thread::yield();
        }
        const int64_t m0 = c * kPipelineRows, mc = M - m0 < kPipelineRows ? M - m0 : kPipelineRows;
        auto tile = [&](auto rows, int64_t i) {
          constexpr int R = decltype(rows)::value;
          const int64_t m = m0 + i;
          if (t == 0)
            matmul_tile<R>(kc, A + m + k0 * sak, 1, sak, panel, C + m * N + n0, N, cols);
          else
            matmul_tile<R, false, true>(kc, A + m + k0 * sak, 1, sak, panel, C + m * N + n0, N,
                                        cols);
        };
        for_row_tiles(mc, tile);
        done.store(t + 1, std::memory_order_release);
      }
    }
  }
  // Every stage done before a thread leaves: the next pipeline's `single` zeroes flags.
  GPTC_OMP("omp barrier")
}
}  // namespace detail

// The float matmul inside a GPTC_PARALLEL region (a gpt.horizontal member): the region's
// threads share the tasks.
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                      int64_t sab, int64_t sam, int64_t sak, const float* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, float* C,
                      const MatmulEpilogue<float>& epilogue = {}) {
  const MatmulEpilogue<float>* ep = epilogue.any() ? &epilogue : nullptr;
  // The members folded into one taller product where they can be (the copies below fold
  // after copying, with the copy's strides).
  int64_t fbatch = batch, fM = M, fsab = sab;
  detail::fold_batch(fbatch, fM, fsab, sam, sbb);
  if (fM <= detail::kFewRows && (sbk == 1 || sbn == 1)) {  // a decode step's
    detail::matmul_few_rows_ws(fbatch, fM, N, K, A, fsab, sam, sak, B, sbb, sbk, sbn, C, ep);
    return;
  }
  if (detail::blocks_k(fbatch, fM, N, K, sam, sak)) {
    detail::matmul_blocked_ws(fM, N, K, A, sam, sak, B, sbk, sbn, C, ep);
    return;
  }
  if (detail::copies_a(M, K, sam, sak)) {
    if (detail::copies_b(batch, M, N, sbn, ep))
      detail::matmul_copied_b_ws(M, N, K, A, sak, B, sbk, C);
    else
      detail::matmul_copied_a_ws(batch, M, N, K, A, sab, sak, B, sbb, sbk, sbn, C, ep);
    return;
  }
  const int team = gptc::team_size();
  if (detail::pipelines_k(batch, M, N, K, sam, sak, ep, team)) {
    detail::matmul_k_pipeline_ws(M, N, K, A, sak, B, sbk, sbn, C);
    return;
  }
  const detail::PanelTasks g = detail::splits_rows(fbatch, fM, K, sak, team)
                                   ? detail::row_tasks(fM, N, team)
                                   : detail::panel_tasks(fbatch, fM, N, team);
  GPTC_FOR_WS(t, g.count())
    detail::matmul_task(t, g, fM, N, K, A, fsab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
// The same in a parallel region of its own (the same static split of the tasks).
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, int64_t sab,
                   int64_t sam, int64_t sak, const float* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, float* C, const MatmulEpilogue<float>& epilogue = {}) {
  GPTC_PARALLEL
  matmul_ws(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, epilogue);
}
#endif

// The reference (and untiled: no AVX2 or AVX-512, or f64) path: dot_seq per output element,
// then the epilogue.
namespace detail {
template <class T>
inline void matmul_element(int64_t i, int64_t M, int64_t N, int64_t K, const T* A, int64_t sab,
                           int64_t sam, int64_t sak, const T* B, int64_t sbb, int64_t sbk,
                           int64_t sbn, T* C, const MatmulEpilogue<T>& ep) {
  const int64_t n = i % N, m = (i / N) % M, b = i / (M * N);
  const T* a = A + b * sab + m * sam;
  const T* bb = B + b * sbb + n * sbn;
  T v = dot_seq<T>(K, [&](int64_t k) { return a[k * sak]; }, [&](int64_t k) { return bb[k * sbk]; });
  if (ep.any()) ep.apply(1, i, N, n, 1, &v, 1);
  C[i] = v;
}
}  // namespace detail
template <class T>
inline void matmul_reference(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                             int64_t sab, int64_t sam, int64_t sak, const T* B, int64_t sbb,
                             int64_t sbk, int64_t sbn, T* C, const MatmulEpilogue<T>& ep = {}) {
  GPTC_FOR(i, batch * M * N)
    detail::matmul_element<T>(i, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
template <class T>
inline void matmul_reference_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                                int64_t sab, int64_t sam, int64_t sak, const T* B, int64_t sbb,
                                int64_t sbk, int64_t sbn, T* C, const MatmulEpilogue<T>& ep = {}) {
  GPTC_FOR_WS(i, batch * M * N)
    detail::matmul_element<T>(i, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}

#if !defined(GPTC_TILED_MATMUL)
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, int64_t sab,
                   int64_t sam, int64_t sak, const float* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, float* C, const MatmulEpilogue<float>& ep = {}) {
  matmul_reference<float>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                      int64_t sab, int64_t sam, int64_t sak, const float* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, float* C, const MatmulEpilogue<float>& ep = {}) {
  matmul_reference_ws<float>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
#endif
inline void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, const double* A, int64_t sab,
                   int64_t sam, int64_t sak, const double* B, int64_t sbb, int64_t sbk,
                   int64_t sbn, double* C, const MatmulEpilogue<double>& ep = {}) {
  matmul_reference<double>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}
inline void matmul_ws(int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
                      int64_t sab, int64_t sam, int64_t sak, const double* B, int64_t sbb,
                      int64_t sbk, int64_t sbn, double* C, const MatmulEpilogue<double>& ep = {}) {
  matmul_reference_ws<double>(batch, M, N, K, A, sab, sam, sak, B, sbb, sbk, sbn, C, ep);
}

}  // namespace gptc

#endif  // GPTC_PRELUDE_MATMUL_H
