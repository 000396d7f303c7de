//===- EmitModelKernels.cpp - layer_norm, softmax, attention, loss kernels -===//
//
// The kernels of the model ops and their gradients. Each keeps the order its
// op's `order` attribute names: row statistics through gptc::reduce_sum,
// attention's online softmax over key blocks of 32, embedding gradients in
// increasing token position.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"

#include "ir/KernelLevel.h"

using namespace mlir;
using namespace mlir::gpt;

namespace mlir::gpt::emit {

AttentionShape attentionShape(Value q, Value k, Value v, bool causal, double scale, double p,
                              int64_t id, int64_t rngOperand, std::optional<ArrayRef<bool>> bthd,
                              ValueRange grads) {
  auto qt = ttype(q), kt = ttype(k), vt = ttype(v);
  Type e = qt.getElementType();
  using O = AttentionShape::Operand;
  auto layout = [&](O o) { return bthd && (*bthd)[o]; };
  AttentionShape a;
  a.elem = *cType(e);
  a.scale = literal(scale, e);
  a.H = qt.getDimSize(layout(O::Q) ? 2 : 1);
  a.T = qt.getDimSize(layout(O::Q) ? 1 : 2);
  a.D = qt.getDimSize(3);
  a.S = kt.getDimSize(layout(O::K) ? 1 : 2);
  a.Dv = vt.getDimSize(3);
  a.G = a.H / kt.getDimSize(layout(O::K) ? 2 : 1);
  a.causal = causal;
  a.dropout = p > 0.0;
  a.id = id;
  DropoutLiterals lit = dropoutLiterals(p, e);
  a.dropP = lit.p;
  a.dropScale = lit.scale;
  a.rngOperand = rngOperand;
  // Operand x of `heads` heads of `rows` rows of `width`, in its layout: read in place
  // through a strided view, or written into a gathered op's buffer (gpt-strided-views), or
  // a dense tensor of its own.
  auto strides = [&](Value x, O o, int64_t heads, int64_t rows, int64_t width) {
    bool tokensOuter = layout(O(o >= O::DQ ? o - O::DQ : o));
    if (x) // the op may be a member of a gpt.horizontal
      x = o >= O::DQ ? outerResult(x) : outerValue(x);
    // Read in place (q, k, v) or written into a gathered op's buffer (dq, dk, dv).
    std::optional<StridedView> view;
    if (x && (o >= O::DQ ? isGathered(x) : isStrided(x)))
      view = o >= O::DQ ? writtenView(x) : stridedView(x);
    if (view) {
      ArrayRef<int64_t> s = view->strides;
      return tokensOuter ? AttentionShape::Strides{s[0], s[2], s[1], view->base}
                         : AttentionShape::Strides{s[0], s[1], s[2], view->base};
    }
    if (!tokensOuter)
      return AttentionShape::Strides{heads * rows * width, rows * width, width};
    return AttentionShape::Strides{rows * heads * width, width, heads * width};
  };
  a.at[O::Q] = strides(q, O::Q, a.H, a.T, a.D);
  a.at[O::K] = strides(k, O::K, a.H / a.G, a.S, a.D);
  a.at[O::V] = strides(v, O::V, a.H / a.G, a.S, a.Dv);
  a.at[O::Y] = strides(Value(), O::Y, a.H, a.T, a.Dv);
  for (int i = 0; i < 3; ++i)
    a.at[O::DQ + i] = grads.empty() ? a.at[O::Q + i]
                                    : strides(grads[i], O(O::DQ + i), i ? a.H / a.G : a.H,
                                              i ? a.S : a.T, i == 2 ? a.Dv : a.D);
  return a;
}

/// layer_norm's statistics of row `x` (C elements): mean, biased variance (canonical
/// sums) and rstd; layer_norm and its gradient share them, so both see the same bits.
std::string rowStats(const std::string &T, int64_t c, double eps, Type elem) {
  std::string n = T + "(" + std::to_string(c) + ")", cs = std::to_string(c);
  return "    " + T + " mean = gptc::reduce_sum<" + T + ">(" + cs +
         ", [&](int64_t k) { return x[k]; }) / " + n + ";\n" + "    " + T +
         " var = gptc::reduce_sum<" + T + ">(" + cs + ", [&](int64_t k) { " + T +
         " d = x[k] - mean; return d * d; }) / " + n + ";\n" + "    " + T + " rstd = " + T +
         "(1) / gptc::sqrt(var + " + literal(eps, elem) + ");\n";
}

/// Per row of C: mean, biased variance (canonical sums), normalize, affine.
LogicalResult Emitter::emitLayerNorm(LayerNormOp op, raw_ostream &os) {
  auto t = op.getType();
  int64_t c = t.getShape().back(), rows = t.getNumElements() / c;
  std::string T = elemType(op.getResult());
  bool hasW = (bool)op.getWeight(), hasB = (bool)op.getBias();
  std::string w = hasW ? "in1" : "", bias = hasB ? (hasW ? "in2" : "in1") : "";
  os << "  " << loop("row", rows) << " {\n"
     << "    const " << T << "* x = in0 + row * " << c << ";\n"
     << "    " << T << "* y = out0 + row * " << c << ";\n"
     << rowStats(T, c, op.getEps().convertToDouble(), t.getElementType())
     << "    GPTC_SIMD for (int64_t k = 0; k < " << c << "; ++k) {\n"
     << "      " << T << " v = (x[k] - mean) * rstd;\n";
  if (hasW)
    os << "      v = v * " << w << "[k];\n";
  if (hasB)
    os << "      v = v + " << bias << "[k];\n";
  os << "      y[k] = v;\n    }\n  }\n";
  return success();
}

/// Along `dim` (size D, inner stride I): max, sum of exp(x - max), normalize.
LogicalResult Emitter::emitSoftmax(Operation *op, int64_t dim, bool log, raw_ostream &os) {
  auto t = ttype(op->getResult(0));
  std::string T = elemType(op->getResult(0));
  int64_t d = t.getDimSize(dim), inner = rowMajorStrides(t.getShape())[dim];
  int64_t rows = t.getNumElements() / d;
  os << "  " << loop("r", rows) << " {\n"
     << "    int64_t base = (r / " << inner << ") * " << d * inner << " + r % " << inner << ";\n"
     << "    const " << T << "* x = in0 + base;\n    " << T << "* y = out0 + base;\n"
     << "    " << T << " m = gptc::reduce_max<" << T << ">(" << d << ", [&](int64_t k) { return x[k * "
     << inner << "]; });\n"
     << "    " << T << " s = gptc::reduce_sum<" << T << ">(" << d
     << ", [&](int64_t k) { return gptc::exp(x[k * " << inner << "] - m); });\n";
  if (log)
    os << "    " << T << " ls = gptc::log(s);\n"
       << "    GPTC_SIMD for (int64_t k = 0; k < " << d << "; ++k) y[k * " << inner << "] = x[k * " << inner
       << "] - m - ls;\n";
  else
    os << "    GPTC_SIMD for (int64_t k = 0; k < " << d << "; ++k) y[k * " << inner
       << "] = gptc::exp(x[k * " << inner << "] - m) / s;\n";
  os << "  }\n";
  return success();
}

/// Declares the block's per-row running max `m[rr]` and sum `l[rr]`, and `vis[rr]`, the
/// keys row rr sees (0 for rows past `nr`).
static void emitRowsSeen(raw_ostream &os, const AttentionShape &a) {
  os << "      " << a.elem << " m[4], l[4];\n"
     << "      int64_t vis[4];\n"
     << "      for (int64_t rr = 0; rr < 4; ++rr) {\n"
     << "        const int64_t t = t0 + rr;\n"
     << "        vis[rr] = rr < nr ? " << a.keys() << " : 0;\n"
     << "      }\n";
}

/// The online-softmax pass of the block's query rows (after emitQueryBlock: `S[rr]` holds
/// row rr's raw q.k dots, `nr` rows, `kmax` keys for the last). Per row, exactly the
/// per-row algorithm: key blocks of 32 in increasing order, the block's max and sum taken
/// sequentially (gptc::block_max4 and block_sum4 give the sequential loops' bits; the
/// sums run one lane per row). Leaves `vis[rr]` (the row's visible keys), `m[rr]`, `l[rr]`
/// and `acc[rr]`, the unnormalised output. The gradient reads m and l as the forward left
/// them (its `stats`), so both see the same bits.
void Emitter::emitOnlineBlock(raw_ostream &os, const AttentionShape &a) {
  const std::string &E = a.elem;
  std::string Dv = std::to_string(a.Dv), vs = std::to_string(a.pitch(a.V));
  emitRowsSeen(os, a);
  os << "      " << E << " acc[4][" << Dv << "];\n"
     << "      for (int64_t rr = 0; rr < 4; ++rr) {\n"
     << "        m[rr] = -INFINITY;\n"
     << "        l[rr] = 0;\n"
     << "        for (int64_t c = 0; c < " << Dv << "; ++c) acc[rr][c] = 0;\n"
     << "      }\n"
     << "      for (int64_t j0 = 0; j0 < kmax; j0 += 32) {\n"
     << "        " << E << " p[4][32], mb[4], mn[4], corr[4], bsum[4];\n"
     << "        int64_t nb[4];\n"
     << "        for (int64_t rr = 0; rr < 4; ++rr) {\n"
     << "          const int64_t left = vis[rr] - j0;\n"
     << "          nb[rr] = left < 0 ? 0 : left < 32 ? left : 32;\n"
     << "        }\n"
     // Branch-free: a key the row does not see scores -inf, which leaves the max as it is
     // and whose exp is an exact 0 that leaves the sum as it is (a sum from +0 of
     // non-negative terms is never -0). Each row's max and sum still run in key order.
     // As a bit select, so that the loop vectorises (GCC gives up on the ternary's control
     // flow); it reads every score of the block, so rows past the last (nr < 4), which the
     // dots never wrote, are zeroed first.
     << "        for (int64_t rr = nr; rr < 4; ++rr)\n"
     << "          for (int64_t j = 0; j < 32; ++j) S[rr][j0 + j] = 0;\n"
     << "        for (int64_t rr = 0; rr < 4; ++rr)\n"
     << "          GPTC_SIMD for (int64_t j = 0; j < 32; ++j)\n"
     << "            p[rr][j] = gptc::detail::sel(j < nb[rr], S[rr][j0 + j] * " << a.scale << ", "
     << E << "(-INFINITY));\n"
     << "        gptc::block_max4<" << E << ">(p, mb);\n"
     << "        for (int64_t rr = 0; rr < 4; ++rr) mn[rr] = gptc::maximum(m[rr], mb[rr]);\n";
  // With a key mask, mn is -inf in a row whose keys so far are all hidden: its exps are
  // taken against 0 (exp(-inf) = 0) rather than -inf (NaN).
  std::string me = a.masked() ? "me" : "mn";
  if (a.masked())
    os << "        " << E << " me[4];\n"
       << "        for (int64_t rr = 0; rr < 4; ++rr) me[rr] = mn[rr] == -INFINITY ? " << E
       << "(0) : mn[rr];\n";
  // The four rows' exps in one loop (and their corrections in one vector), so that
  // their independent dependency chains overlap: the same values, one lane each.
  os << "        GPTC_SIMD for (int64_t rr = 0; rr < 4; ++rr) corr[rr] = gptc::exp(m[rr] - " << me
     << "[rr]);\n"
     << "        GPTC_SIMD for (int64_t j = 0; j < 32; ++j) {\n";
  for (int rr = 0; rr < 4; ++rr)
    os << "          p[" << rr << "][j] = gptc::exp(p[" << rr << "][j] - " << me << "[" << rr
       << "]);\n";
  os << "        }\n"
     << "        gptc::block_sum4<" << E << ">(p, bsum);\n";
  if (a.dropout)
    os << "        for (int64_t rr = 0; rr < 4; ++rr) {\n"
       << "          const int64_t r = bh * " << a.T << " + t0 + rr;\n"
       << "          " << E << " kf[32];\n"
       << "          " << a.keepFactors("r * " + std::to_string(a.S) + " + j0", "nb[rr]", "kf")
       << "\n"
       << "          for (int64_t j = 0; j < nb[rr]; ++j) p[rr][j] = p[rr][j] * kf[j];\n"
       << "        }\n";
  // The block's p.v per row: per output column c, keys j in increasing order; the keys
  // all four rows see in one pass over v (gptc::axpy_rows4), then each row's rest.
  os << "        " << E << " sacc[4][" << Dv << "];\n"
     << "        for (int64_t rr = 0; rr < 4; ++rr)\n"
     << "          GPTC_SIMD for (int64_t c = 0; c < " << Dv << "; ++c) sacc[rr][c] = 0;\n"
     << "        const int64_t common = nr == 4 ? nb[0] : 0;\n"
     << "        gptc::axpy_rows4<" << E << ">(common, &p[0][0], 1, 32, vb + j0 * " << vs << ", "
     << vs << ", " << Dv << ", &sacc[0][0], " << Dv << ");\n"
     << "        for (int64_t rr = 0; rr < 4; ++rr) {\n"
     << "          if (nb[rr] == 0) continue;\n"
     << "          l[rr] = l[rr] * corr[rr] + bsum[rr];\n"
     << "          gptc::axpy_rows<" << E << ">(nb[rr] - common, &p[rr][common], 1, vb + (j0 + common) * "
     << vs << ", " << vs << ", " << Dv << ", sacc[rr]);\n"
     << "          GPTC_SIMD for (int64_t c = 0; c < " << Dv << "; ++c) acc[rr][c] = acc[rr][c] * corr[rr] + sacc[rr][c];\n"
     << "          m[rr] = mn[rr];\n"
     << "        }\n"
     << "      }\n";
}

/// The head's keys (operand 1), transposed into scratch for gptc::block_dots.
static void emitTransposedKeys(raw_ostream &os, const AttentionShape &a) {
  os << "    " << a.elem << "* kt = gptc::scratch<" << a.elem << ">(1, " << a.D * a.Sp() << ");\n"
     << "    const " << a.elem << "* kb = in1 + " << a.headBase(a.K) << ";\n"
     << "    gptc::transpose_keys<" << a.elem << ">(" << a.S << ", " << a.D << ", kb, "
     << a.pitch(a.K) << ", " << a.Sp() << ", kt);\n"
     << "    const " << a.elem << "* vb = in2 + " << a.headBase(a.V) << ";\n";
}

/// Opens the loop over blocks of (up to) 4 query rows, t0..t0+nr-1, from row `first` to
/// row `end` (exclusive; default: all rows), and fills `scores`[rr][j] with the raw q.k
/// dots of each row for the keys the block's last row sees (gptc::block_dots_rows; `q` is
/// the operand holding the queries).
static void emitQueryBlock(raw_ostream &os, const AttentionShape &a, const std::string &q,
                           const std::string &scores, const std::string &first = "0",
                           std::string end = "") {
  std::string Sp = std::to_string(a.Sp()), qs = std::to_string(a.pitch(a.Q));
  if (end.empty())
    end = std::to_string(a.T);
  os << "    for (int64_t t0 = " << first << "; t0 < " << end << "; t0 += 4) {\n"
     << "      const int64_t nr = " << end << " - t0 < 4 ? " << end << " - t0 : 4;\n"
     << "      int64_t kmax;\n"
     << "      { const int64_t t = t0 + nr - 1; kmax = " << a.keys() << "; }\n"
     << "      " << a.elem << " " << scores << "[4][" << Sp << "];\n"
     << "      gptc::block_dots_rows<" << a.elem << ">(nr, " << a.D << ", " << q << " + "
     << a.headBase(a.Q) << " + t0 * " << qs << ", " << qs << ", kt, " << Sp
     << ", kmax, &" << scores << "[0][0], " << Sp << ");\n";
  if (a.masked()) // a hidden key's score is -inf in every row
    os << "      for (int64_t rr = 0; rr < nr; ++rr)\n"
       << "        for (int64_t j = 0; j < kmax; ++j)\n"
       << "          if (!km[j]) " << scores << "[rr][j] = -INFINITY;\n";
}

/// The lane block's rows seen (`vis`, 0 past the last), each also noted in the group's
/// `visg` when `group` (the gradient).
static void emitLaneRowsSeen(raw_ostream &os, const AttentionShape &a, bool group) {
  os << "      int64_t vis[gptc::kAttentionRows];\n"
     << "      for (int64_t rr = 0; rr < gptc::kAttentionRows; ++rr) {\n"
     << "        const int64_t t = t0 + rr;\n"
     << "        vis[rr] = rr < nr ? " << a.keys() << " : 0;\n"
     << (group ? "        if (rr < nr) visg[t0 - t1 + rr] = vis[rr];\n" : "")
     << "      }\n";
}

/// The end of a lane-block call: with dropout, the keep factors of a row's keys as a lambda;
/// with a key mask, the head's (`km`).
static void emitLaneRowsKeep(raw_ostream &os, const AttentionShape &a) {
  if (a.dropout)
    os << ",\n          [&](int64_t rr, int64_t j0, int64_t n, float* kf) {\n"
       << "            const int64_t r = bh * " << a.T << " + t0 + rr;\n"
       << "            " << a.keepFactors("r * " + std::to_string(a.S) + " + j0", "n", "kf") << "\n"
       << "          }";
  if (a.masked())
    os << (a.dropout ? "" : ", gptc::NoKeep()") << ", km";
  os << ");\n";
}

/// The forward's head `bh` on AVX-512 and AVX2 (float) in blocks of gptc::kAttentionRows
/// query rows (16), each a lane (gptc::attention_rows), then `#else` for the other
/// builds' code.
static void emitAttentionLaneRows(raw_ostream &os, const AttentionShape &a) {
  os << "#if defined(GPTC_VECTOR_FORMS)\n"
     << "    for (int64_t t0 = 0; t0 < " << a.T << "; t0 += gptc::kAttentionRows) {\n"
     << "      const int64_t nr = " << a.T << " - t0 < gptc::kAttentionRows ? " << a.T
     << " - t0 : gptc::kAttentionRows;\n";
  emitLaneRowsSeen(os, a, false);
  os << "      gptc::attention_rows(nr, vis, " << a.S << ", " << a.D << ", " << a.Dv << ", "
     << a.scale << ", in0 + " << a.headBase(a.Q) << " + t0 * " << a.pitch(a.Q) << ", "
     << a.pitch(a.Q) << ", in1 + " << a.headBase(a.K) << ", " << a.pitch(a.K) << ", in2 + "
     << a.headBase(a.V) << ", " << a.pitch(a.V) << ", out0 + " << a.headBase(a.Y)
     << " + t0 * " << a.pitch(a.Y) << ", " << a.pitch(a.Y) << ", out1 + (bh * " << a.T
     << " + t0) * 2";
  emitLaneRowsKeep(os, a);
  os << "    }\n"
     << "#else\n";
}

/// Online softmax over key blocks of 32 (order online_block32); one (batch, head) per
/// iteration of the parallel loop, its queries in order.
LogicalResult Emitter::emitAttention(AttentionOp op, raw_ostream &os) {
  AttentionShape a = attentionShape(op.getQ(), op.getK(), op.getV(), op.getIsCausal(),
                                    op.getScale().convertToDouble(),
                                    op.getDropoutP().convertToDouble(), op.getId(), 3,
                                    op.getBthd());
  a.maskOperand = keyMaskOperand(op, op.getKeyMask());
  os << a.rngPrologue() << "  " << loop("bh", op.getResult().getType().getNumElements() / (a.T * a.Dv))
     << " {\n"
     << a.keyMaskDecl("    ");
  if (a.laneRows())
    emitAttentionLaneRows(os, a);
  emitTransposedKeys(os, a);
  emitQueryBlock(os, a, "in0", "S");
  emitOnlineBlock(os, a);
  // The output, and each row's final max and sum (out1, [B, H, T, 2]) for the gradient.
  os << "      for (int64_t rr = 0; rr < nr; ++rr) {\n"
     << "        " << a.elem << "* y = out0 + " << a.headBase(a.Y) << " + (t0 + rr) * "
     << a.pitch(a.Y) << ";\n"
     << (a.masked() ? "        const " + a.elem + " lr = l[rr] == 0 ? " + a.elem +
                          "(1) : l[rr]; // 0: the row saw no key (its sums are 0)\n"
                    : "")
     << "        GPTC_SIMD for (int64_t c = 0; c < " << a.Dv << "; ++c) y[c] = acc[rr][c] / "
     << (a.masked() ? "lr" : "l[rr]") << ";\n"
     << "        " << a.elem << "* st = out1 + (bh * " << a.T << " + t0 + rr) * 2;\n"
     << "        st[0] = m[rr];\n"
     << "        st[1] = l[rr];\n"
     << "      }\n    }\n";
  if (a.laneRows())
    os << "#endif\n";
  os << "  }\n";
  return success();
}

/// The group's dk and dv (after the group's rows have left their dS and P * keep in dSg
/// and PKg, rows [row][key] Sp apart; transposed: dSgT and PKgT, [key * 32 + row]). Key j
/// is seen by the group's rows first(j)..n1-1 (visg[] grows with the row). Four keys at a
/// time: each key's rows before the fourth key's first, then the rows all four see in one
/// pass (gptc::axpy_rows4); each key's sum stays in increasing row.
static void emitKeyLoop(raw_ostream &os, const AttentionShape &a, bool transposed) {
  const std::string &E = a.elem;
  std::string Sp = std::to_string(a.Sp()), qs = std::to_string(a.pitch(a.Q)),
              gs = std::to_string(a.pitch(a.Y)), dks = std::to_string(a.pitch(a.DK)),
              dvs = std::to_string(a.pitch(a.DV));
  os << "    const int64_t kend = visg[n1 - 1];\n"
     << "    int64_t j = 0, first = 0;\n"
     << "    for (; j + 4 <= kend; j += 4) {\n"
     << "      int64_t f[4];\n"
     << "      for (int64_t i = 0; i < 4; ++i) {\n"
     << "        while (j + i >= visg[first]) ++first;\n"
     << "        f[i] = first;\n"
     << "      }\n"
     << "      for (int64_t i = 0; i < 3; ++i) {\n";
  // dk (ds against q) and dv (p*keep against g) of keys from `key` on, over the group's
  // rows from `row` on, `count` of them; four keys at once with axpy_rows4.
  struct Side {
    const char *weights, *rows, *out;
    std::string rowStride, outStride;
    int64_t width;
  };
  const Side sides[] = {{"dSg", "qh", "dk", qs, dks, a.D}, {"PKg", "gh", "dv", gs, dvs, a.Dv}};
  auto accumulate = [&](const char *indent, const char *count, const char *row,
                        const std::string &key, bool four) {
    std::string keyRow = key.find(' ') == std::string::npos ? key : "(" + key + ")";
    for (const Side &d : sides) {
      // The weights: their address, the next row's distance and (four keys) the next key's.
      std::string w = transposed ? "&" + std::string(d.weights) + "T[" + keyRow + " * 32 + " + row +
                                       "], 1" + (four ? ", 32" : "")
                                 : "&" + std::string(d.weights) + "[" + row + "][" + key + "], " +
                                       Sp + (four ? ", 1" : "");
      os << indent << "gptc::axpy_rows" << (four ? "4" : "") << "<" << E << ">(" << count << ", "
         << w << ", " << d.rows << " + (t1 + " << row << ") * " << d.rowStride << ", "
         << d.rowStride << ", " << d.width << ", " << d.out << " + " << keyRow << " * "
         << d.outStride << (four ? ", " + d.outStride : "") << ");\n";
    }
  };
  accumulate("        ", "f[3] - f[i]", "f[i]", "j + i", false);
  os << "      }\n";
  accumulate("      ", "n1 - f[3]", "f[3]", "j", true);
  os << "    }\n"
     << "    for (; j < kend; ++j) {\n"
     << "      while (j >= visg[first]) ++first;\n";
  accumulate("      ", "n1 - first", "first", "j", false);
  os << "    }\n";
}

/// The gradient's head `bh` on AVX-512 and AVX2 (float): each group of 32 rows in blocks
/// of gptc::kAttentionRows (gptc::attention_grad_rows, which leaves dS and P * keep
/// transposed), then the key loop on them; then `#else` for the other builds' code.
static void emitAttentionGradLaneRows(raw_ostream &os, const AttentionShape &a) {
  std::string gs = std::to_string(a.pitch(a.Y));
  os << "#if defined(GPTC_VECTOR_FORMS)\n"
     << "    for (int64_t t1 = 0; t1 < " << a.T << "; t1 += 32) {\n"
     << "    const int64_t n1 = " << a.T << " - t1 < 32 ? " << a.T << " - t1 : 32;\n"
     << "    float* dSgT = groupRows;\n"
     << "    float* PKgT = groupRows + " << 32 * a.Sp() << ";\n"
     << "    int64_t visg[32];\n"
     << "    for (int64_t t0 = t1; t0 < t1 + n1; t0 += gptc::kAttentionRows) {\n"
     << "      const int64_t nr = t1 + n1 - t0 < gptc::kAttentionRows ? t1 + n1 - t0\n"
     << "                                                            : gptc::kAttentionRows;\n";
  emitLaneRowsSeen(os, a, true);
  os << "      gptc::attention_grad_rows(nr, vis, " << a.S << ", " << a.D << ", " << a.Dv << ", "
     << a.scale << ", qh + t0 * " << a.pitch(a.Q) << ", " << a.pitch(a.Q) << ", kb, " << a.pitch(a.K)
     << ", vb, " << a.pitch(a.V) << ", gh + t0 * " << gs << ", " << gs << ", in4 + (bh * " << a.T
     << " + t0) * 2, dqh + t0 * " << a.pitch(a.DQ) << ", " << a.pitch(a.DQ)
     << ", dSgT + (t0 - t1), PKgT + (t0 - t1), 32";
  emitLaneRowsKeep(os, a);
  os << "    }\n";
  emitKeyLoop(os, a, true);
  os << "    }\n"
     << "#else\n";
}

/// Per (batch, head), queries in increasing order: each row's max and sum from the forward,
/// then p, dp, D = sum p*dp, ds = p*(dp - D); dq per row; dk, dv accumulated over rows.
/// With grouped heads, per (batch, kv head): each of its G query heads' dk and dv parts
/// into the thread's scratch as above, then their canonical sums (gptc::reduce_sum16 and
/// reduce_sum).
LogicalResult Emitter::emitAttentionGrad(AttentionGradOp op, raw_ostream &os) {
  AttentionShape whole = attentionShape(
      op.getQ(), op.getK(), op.getV(), op.getIsCausal(), op.getScale().convertToDouble(),
      op.getDropoutP().convertToDouble(), op.getId(), 5, op.getBthd(), op.getResults());
  whole.maskOperand = keyMaskOperand(op, op.getKeyMask());
  const std::string &E = whole.elem;
  const int64_t G = whole.G, heads = op.getDq().getType().getNumElements() / (whole.T * whole.D);
  // The query head's dk and dv: in place, or (grouped) a dense part of the scratch.
  AttentionShape a = whole;
  if (G > 1) {
    a.at[a.DK] = {0, 0, a.D};
    a.at[a.DV] = {0, 0, a.Dv};
  }
  std::string Sp = std::to_string(a.Sp());
  // Row strides: k's (width D), v's and g's (width Dv), dq's, dk's and dv's.
  std::string ks = std::to_string(a.pitch(a.K)), vs = std::to_string(a.pitch(a.V)),
              gs = std::to_string(a.pitch(a.Y)), dqs = std::to_string(a.pitch(a.DQ)),
              dks = std::to_string(a.pitch(a.DK)), dvs = std::to_string(a.pitch(a.DV));
  const std::string partK = std::to_string(a.S * a.D), partV = std::to_string(a.S * a.Dv);
  os << a.rngPrologue();
  if (G == 1)
    os << "  " << loop("bh", heads) << " {\n"
       << "    " << E << "* dk = out1 + " << a.headBase(a.DK) << ";\n"
       << "    " << E << "* dv = out2 + " << a.headBase(a.DV) << ";\n";
  else
    os << "  " << loop("bkv", heads / G) << " {\n"
       << "    " << E << "* dkParts = gptc::scratch<" << E << ">(0, " << G * a.S * (a.D + a.Dv)
       << ");\n"
       << "    " << E << "* dvParts = dkParts + " << G << " * " << partK << ";\n"
       << "    for (int64_t g = 0; g < " << G << "; ++g) {\n"
       << "    const int64_t bh = bkv * " << G << " + g;\n"
       << "    " << E << "* dk = dkParts + g * " << partK << ";\n"
       << "    " << E << "* dv = dvParts + g * " << partV << ";\n";
  os << "    const " << E << "* kb = in1 + " << a.headBase(a.K) << ";\n"
     << "    const " << E << "* vb = in2 + " << a.headBase(a.V) << ";\n"
     << a.keyMaskDecl("    ")
     << "    for (int64_t j = 0; j < " << a.S << "; ++j) {\n"
     << "      GPTC_SIMD for (int64_t c = 0; c < " << a.D << "; ++c) dk[j * " << dks << " + c] = 0;\n"
     << "      GPTC_SIMD for (int64_t c = 0; c < " << a.Dv << "; ++c) dv[j * " << dvs << " + c] = 0;\n"
     << "    }\n"
     << "    const " << E << "* qh = in0 + " << a.headBase(a.Q) << ";\n"
     << "    const " << E << "* gh = in3 + " << a.headBase(a.Y) << ";\n"
     << "    " << E << "* dqh = out0 + " << a.headBase(a.DQ) << ";\n";
  // Queries in groups of 32 rows, each in blocks of 4 (of 16 or 8 lanes on AVX-512 or
  // AVX2, float): the block's q.k and g.v dots first, then each row's p and ds (kept for the
  // group), and the block's dq. Then every key's dk and dv take the group's rows in
  // increasing order, four keys at a time.
  os << "    " << E << "* groupRows = gptc::scratch<" << E << ">(3, " << 64 * a.Sp() << ");\n";
  if (a.laneRows())
    emitAttentionGradLaneRows(os, a);
  os << "    " << E << "* kt = gptc::scratch<" << E << ">(1, " << a.D * a.Sp() << ");\n"
     << "    gptc::transpose_keys<" << E << ">(" << a.S << ", " << a.D << ", kb, " << ks << ", "
     << Sp << ", kt);\n"
     << "    " << E << "* vt = gptc::scratch<" << E << ">(2, " << a.Dv * a.Sp() << ");\n"
     << "    gptc::transpose_keys<" << E << ">(" << a.S << ", " << a.Dv << ", vb, " << vs
     << ", " << Sp << ", vt);\n"
     << "    for (int64_t t1 = 0; t1 < " << a.T << "; t1 += 32) {\n"
     << "    const int64_t n1 = " << a.T << " - t1 < 32 ? " << a.T << " - t1 : 32;\n"
     << "    " << E << " (*dSg)[" << Sp << "] = reinterpret_cast<" << E << " (*)[" << Sp
     << "]>(groupRows);\n"
     << "    " << E << " (*PKg)[" << Sp << "] = dSg + 32;\n"
     << "    int64_t visg[32];\n";
  emitQueryBlock(os, a, "in0", "S", "t1", "t1 + n1");
  os << "      " << E << " (*PK)[" << Sp << "] = PKg + (t0 - t1);\n"
     << "      " << E << " (*dS)[" << Sp << "] = dSg + (t0 - t1);\n"
     << "      gptc::block_dots_rows<" << E << ">(nr, " << a.Dv << ", gh + t0 * " << gs << ", "
     << gs << ", vt, " << Sp << ", kmax, &dS[0][0], " << Sp << ");\n";
  // Each row's max and sum: the forward's (in4, [B, H, T, 2]).
  emitRowsSeen(os, a);
  os << "      for (int64_t rr = 0; rr < nr; ++rr) {\n"
     << "        const " << E << "* st = in4 + (bh * " << a.T << " + t0 + rr) * 2;\n"
     << "        m[rr] = st[0];\n"
     << "        l[rr] = st[1];\n";
  if (a.masked()) // a row that saw no key: P 0 (its scores are all -inf)
    os << "        if (l[rr] == 0) {\n"
       << "          m[rr] = 0;\n"
       << "          l[rr] = 1;\n"
       << "        }\n";
  os << "      }\n";
  // P = exp(s - m) / l: the four rows in one loop over the last row's keys, so that their
  // independent exps overlap (a row's P past its own keys is computed and never read; rows
  // past the last are zeros, so that nothing reads an unset value). Then per row P * keep
  // (the dropout's keep factors; without dropout P itself), and dP * keep; then the rows'
  // D = sum_j P*dP, one lane per row (each row's sum in increasing j).
  os << "      " << E << " P[4][" << Sp << "], Dsum[4] = {0, 0, 0, 0};\n"
     << "      for (int64_t rr = nr; rr < 4; ++rr) {\n"
     << "        m[rr] = 0;\n"
     << "        l[rr] = 1;\n"
     << "        for (int64_t j = 0; j < kmax; ++j) S[rr][j] = 0;\n"
     << "      }\n"
     << "      GPTC_SIMD for (int64_t j = 0; j < kmax; ++j) {\n";
  for (int rr = 0; rr < 4; ++rr)
    os << "        P[" << rr << "][j] = gptc::exp(S[" << rr << "][j] * " << a.scale << " - m[" << rr
       << "]) / l[" << rr << "];\n";
  os << "      }\n"
     << "      for (int64_t rr = 0; rr < nr; ++rr) {\n";
  if (a.dropout)
    os << "        const int64_t r = bh * " << a.T << " + t0 + rr;\n"
       << "        " << E << "* dP = dS[rr];\n"
       << "        " << E << " K[" << Sp << "];\n"
       << "        " << a.keepFactors("r * " + std::to_string(a.S), "vis[rr]", "K") << "\n"
       << "        GPTC_SIMD for (int64_t j = 0; j < vis[rr]; ++j) {\n"
       << "          dP[j] = dP[j] * K[j];\n"
       << "          PK[rr][j] = P[rr][j] * K[j];\n"
       << "        }\n";
  else
    os << "        GPTC_SIMD for (int64_t j = 0; j < vis[rr]; ++j) PK[rr][j] = P[rr][j];\n";
  os << "      }\n"
     << "      gptc::dot_rows4<" << E << ">(vis, &P[0][0], " << Sp << ", &dS[0][0], " << Sp
     << ", Dsum);\n"
     // ds = P * (dP - D) per row; dq = scale * sum_j ds[j] k[j], j increasing: the keys
     // all four rows see in one pass over k (gptc::axpy_rows4), then each row's rest.
     << "      " << E << " qacc[4][" << a.D << "];\n"
     << "      for (int64_t rr = 0; rr < nr; ++rr) {\n"
     << "        " << E << "* dP = dS[rr];\n"
     << "        GPTC_SIMD for (int64_t j = 0; j < vis[rr]; ++j) dP[j] = P[rr][j] * (dP[j] - Dsum[rr]);\n"
     << "        GPTC_SIMD for (int64_t c = 0; c < " << a.D << "; ++c) qacc[rr][c] = 0;\n"
     << "        visg[t0 - t1 + rr] = vis[rr];\n"
     << "      }\n"
     << "      const int64_t common = nr == 4 ? vis[0] : 0;\n"
     << "      if (nr == 4)\n"
     << "        gptc::axpy_rows4<" << E << ">(common, &dS[0][0], 1, " << Sp << ", kb, " << ks
     << ", " << a.D << ", &qacc[0][0], " << a.D << ");\n"
     << "      for (int64_t rr = 0; rr < nr; ++rr) {\n"
     << "        gptc::axpy_rows<" << E << ">(vis[rr] - common, &dS[rr][common], 1, kb + common * "
     << ks << ", " << ks << ", " << a.D << ", qacc[rr]);\n"
     << "        " << E << "* dq = dqh + (t0 + rr) * " << dqs << ";\n"
     << "        GPTC_SIMD for (int64_t c = 0; c < " << a.D << "; ++c) dq[c] = qacc[rr][c] * " << a.scale
     << ";\n"
     << "      }\n"
     << "    }\n";
  emitKeyLoop(os, a, false);
  os << "    }\n";
  if (a.laneRows())
    os << "#endif\n";
  os << "    for (int64_t j = 0; j < " << a.S << "; ++j)\n"
     << "      GPTC_SIMD for (int64_t c = 0; c < " << a.D << "; ++c) dk[j * " << dks << " + c] = dk[j * "
     << dks << " + c] * " << a.scale << ";\n";
  if (G > 1) {
    // The group's sums, written where k's and v's head is (headBase: of head bh / G).
    os << "    }\n"
       << "    const int64_t bh = bkv * " << G << ";\n";
    const char *outs[] = {"out1", "out2"}, *parts[] = {"dkParts", "dvParts"};
    const AttentionShape::Operand grads[] = {whole.DK, whole.DV};
    const int64_t widths[] = {a.D, a.Dv};
    // 16 columns at once (gptc::reduce_sum16, each the canonical order), then the rest.
    for (int i = 0; i < 2; ++i) {
      std::string w = std::to_string(widths[i]), part = std::string(parts[i]) + "[(g * " +
                                                        std::to_string(a.S) + " + j) * " + w;
      os << "    for (int64_t j = 0; j < " << a.S << "; ++j) {\n"
         << "      " << E << "* row = " << outs[i] << " + " << whole.headBase(grads[i])
         << " + j * " << whole.pitch(grads[i]) << ";\n"
         << "      int64_t c = 0;\n"
         << "      for (; c + 16 <= " << w << "; c += 16)\n"
         << "        gptc::reduce_sum16<" << E << ">(" << G << ", [&](int64_t g, int l) { return "
         << part << " + c + l]; }, row + c);\n"
         << "      for (; c < " << w << "; ++c)\n"
         << "        row[c] = gptc::reduce_sum<" << E << ">(" << G << ", [&](int64_t g) { return "
         << part << " + c]; });\n"
         << "    }\n";
    }
  }
  os << "  }\n";
  return success();
}

/// Cross-entropy's count of rows whose target is not ignore_index (in1 holds targets).
static std::string keptRows(int64_t n, int64_t ignore) {
  return "  int64_t kept = 0;\n  for (int64_t r = 0; r < " + std::to_string(n) +
         "; ++r) kept += in1[r] != " + std::to_string(ignore) + "LL;\n";
}

/// A logits row's max `m` and sum `s` of exp(x - m): the loss and its gradient share them,
/// so both see the same bits.
static std::string logitStats(const std::string &T, int64_t v) {
  std::string vs = std::to_string(v);
  return "    " + T + " m = gptc::reduce_max<" + T + ">(" + vs +
         ", [&](int64_t k) { return x[k]; });\n    " + T + " s = gptc::reduce_sum<" + T +
         ">(" + vs + ", [&](int64_t k) { return gptc::exp(x[k] - m); });\n";
}

/// loss = sum over kept rows of (logsumexp(row) - row[target]) / kept rows.
LogicalResult Emitter::emitCrossEntropy(CrossEntropyOp op, raw_ostream &os) {
  auto l = op.getLogits().getType();
  int64_t n = l.getDimSize(0), v = l.getDimSize(1), ignore = (int64_t)op.getIgnoreIndex();
  std::string T = elemType(op.getResult());
  // Each row's loss on its own (rows split among the threads, into the calling thread's
  // scratch), then their canonical sum.
  os << keptRows(n, ignore)
     << "  " << T << "* rowLoss = gptc::scratch<" << T << ">(0, " << n << ");\n"
     << "  " << loop("r", n) << " {\n"
     << "    const int64_t t = in1[r];\n"
     << "    rowLoss[r] = 0;\n"
     << "    if (t == " << ignore << "LL) continue;\n"
     << "    if (t < 0 || t >= " << v << ") { " << reportError("cross_entropy target out of range")
     << " continue; }\n"
     << "    const " << T << "* x = in0 + r * " << v << ";\n"
     << logitStats(T, v)
     << "    rowLoss[r] = gptc::log(s) + m - x[t];\n  }\n"
     << "  " << T << " total = gptc::reduce_sum<" << T << ">(" << n
     << ", [&](int64_t r) { return rowLoss[r]; });\n"
     << "  out0[0] = total / " << T << "(kept);\n";
  return success();
}

/// Per row: recompute mean, rstd and xhat as layer_norm does; dxhat = g * weight;
/// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
LogicalResult Emitter::emitLayerNormGrad(LayerNormGradOp op, raw_ostream &os) {
  auto t = op.getType();
  int64_t c = t.getShape().back(), rows = t.getNumElements() / c;
  std::string T = elemType(op.getResult());
  std::string dxhat = op.getWeight() ? "g[k] * in2[k]" : "g[k]";
  os << "  " << loop("row", rows) << " {\n"
     << "    const " << T << "* g = in0 + row * " << c << ";\n"
     << "    const " << T << "* x = in1 + row * " << c << ";\n"
     << "    " << T << "* dx = out0 + row * " << c << ";\n"
     << rowStats(T, c, op.getEps().convertToDouble(), t.getElementType())
     << "    " << T << " a = gptc::reduce_sum<" << T << ">(" << c << ", [&](int64_t k) { return "
     << dxhat << "; }) / " << T << "(" << c << ");\n"
     << "    " << T << " b = gptc::reduce_sum<" << T << ">(" << c << ", [&](int64_t k) { return ("
     << dxhat << ") * ((x[k] - mean) * rstd); }) / " << T << "(" << c << ");\n"
     << "    GPTC_SIMD for (int64_t k = 0; k < " << c << "; ++k)\n"
     << "      dx[k] = rstd * ((" << dxhat << ") - a - ((x[k] - mean) * rstd) * b);\n  }\n";
  return success();
}

/// Row r: (softmax(row) - onehot(target)) * g / kept; ignored rows get zeros.
LogicalResult Emitter::emitCrossEntropyGrad(CrossEntropyGradOp op, raw_ostream &os) {
  auto l = op.getLogits().getType();
  int64_t n = l.getDimSize(0), v = l.getDimSize(1), ignore = (int64_t)op.getIgnoreIndex();
  std::string T = elemType(op.getResult());
  os << keptRows(n, ignore)
     << "  const " << T << " scale = in2[0] / " << T << "(kept);\n"
     << "  " << loop("r", n) << " {\n"
     << "    const " << T << "* x = in0 + r * " << v << ";\n"
     << "    " << T << "* d = out0 + r * " << v << ";\n"
     << "    const int64_t t = in1[r];\n"
     << "    if (t == " << ignore << "LL || t < 0 || t >= " << v << ") {\n"
     << "      if (t != " << ignore << "LL) " << reportError("cross_entropy target out of range")
     << "\n"
     << "      for (int64_t k = 0; k < " << v << "; ++k) d[k] = 0;\n"
     << "      continue;\n    }\n"
     << logitStats(T, v)
     // The one-hot term as a bit select: GCC's vectoriser gives up on `k == t ? 1 : 0` here
     // (control flow), and the loop of exps then ran scalar (bench/NOTES.md, "Fusion and kernel count").
     << "    GPTC_SIMD for (int64_t k = 0; k < " << v << "; ++k)\n"
     << "      d[k] = (gptc::exp(x[k] - m) / s - gptc::detail::sel(k == t, " << T << "(1), " << T
     << "(0))) * scale;\n  }\n";
  return success();
}

/// dW[row] += g[p] for positions p in increasing order: each element of dW is 0 plus its
/// positions' rows of g in position order, whichever iteration computes it. An iteration
/// takes a column, or a column of one block of rows (the flavour's embeddingRowBlocks),
/// and reads every position's id, adding only its own rows; a block of one row keeps its
/// sum in a register.
LogicalResult Emitter::emitEmbeddingGrad(EmbeddingGradOp op, raw_ostream &os) {
  int64_t v = op.getType().getDimSize(0), c = op.getType().getDimSize(1);
  int64_t n = op.getIndices().getType().getNumElements();
  std::string T = *cType(op.getType().getElementType());
  const int64_t blocks = std::clamp<int64_t>(flavour->embeddingRowBlocks(v, c), 1, v);
  const int64_t rows = (v + blocks - 1) / blocks;
  const std::string bad = "      if (row < 0 || row >= " + std::to_string(v) + ") { " +
                          reportError("embedding index out of range") + " continue; }\n";
  if (blocks > 1 && rows == 1) {  // one output element an iteration
    os << "  " << loop("i", v * c) << " {\n"
       << "    const int64_t r = i / " << c << ", col = i % " << c << ";\n"
       << "    " << T << " acc = 0;\n"
       << "    for (int64_t p = 0; p < " << n << "; ++p) {\n"
       << "      const int64_t row = in1[p];\n" << bad
       << "      if (row == r) acc = acc + in0[p * " << c << " + col];\n    }\n"
       << "    out0[i] = acc;\n  }\n";
    return success();
  }
  std::string lo = "0", hi = std::to_string(v);
  if (blocks == 1) {
    os << "  " << loop("col", c) << " {\n";
  } else {
    os << "  " << loop("i", ((v + rows - 1) / rows) * c) << " {\n"
       << "    const int64_t col = i % " << c << ", lo = i / " << c << " * " << rows
       << ", hi = lo + " << rows << " < " << v << " ? lo + " << rows << " : " << v << ";\n";
    lo = "lo";
    hi = "hi";
  }
  os << "    for (int64_t r = " << lo << "; r < " << hi << "; ++r) out0[r * " << c
     << " + col] = 0;\n"
     << "    for (int64_t p = 0; p < " << n << "; ++p) {\n"
     << "      const int64_t row = in1[p];\n" << bad;
  if (blocks > 1)
    os << "      if (row < lo || row >= hi) continue;\n";
  os << "      out0[row * " << c << " + col] = out0[row * " << c << " + col] + in0[p * " << c
     << " + col];\n    }\n  }\n";
  return success();
}

} // namespace mlir::gpt::emit
