//===- LinearPatterns.cpp - aten linear algebra ops -> gpt ----------------===//
//
// linear (matmul against the transposed weight, then the bias), addmm (a matmul, then
// the bias: Hugging Face GPT-2's Conv1D), matmul, mm, bmm, embedding and
// scaled_dot_product_attention.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::gpt;

namespace {

Value buildMatmul(OpBuilder &b, Location loc, RankedTensorType type, Value lhs, Value rhs,
                  bool transposeRhs) {
  return MatmulOp::create(b, loc, type, lhs, rhs, /*transposeLhs=*/false, transposeRhs);
}

/// linear(input [..., K], weight [N, K], bias [N]?) = input @ weight^T + bias.
LogicalResult convertLinear(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"input", "weight"})))
    return failure();
  Value x = op.operand("input"), w = op.operand("weight"), bias = op.operand("bias");
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (xt.getRank() < 2 || wt.getRank() != 2)
    return op.unsupported("needs input of rank >= 2 and a 2-D weight");
  RankedTensorType type = op.resultType();
  Value y = buildMatmul(b, op.loc(), type, x, w, /*transposeRhs=*/true);
  if (bias)
    y = AddOp::create(b, op.loc(), type, y, bias);
  out.push_back(y);
  return success();
}

/// addmm(self, mat1, mat2) and baddbmm(self, batch1, batch2): beta * self + alpha * (mat1 @
/// mat2), as gpt.matmul, gpt.mul by alpha where it is not 1, and gpt.add of self (times beta
/// where that is not 1; self left out where beta is 0, as PyTorch ignores it then).
template <bool Batched>
LogicalResult convertAddmm(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  StringRef lhsName = Batched ? "batch1" : "mat1", rhsName = Batched ? "batch2" : "mat2";
  if (failed(op.require({"self", lhsName, rhsName})))
    return failure();
  Value lhs = op.operand(lhsName), rhs = op.operand(rhsName);
  auto lt = cast<RankedTensorType>(lhs.getType()), rt = cast<RankedTensorType>(rhs.getType());
  int64_t rank = Batched ? 3 : 2;
  if (lt.getRank() != rank || rt.getRank() != rank ||
      lt.getShape().drop_back(2) != rt.getShape().drop_back(2))
    return op.unsupported(Batched ? "needs 3-D batch1 and batch2 of one batch size"
                                  : "needs 2-D mat1 and mat2");
  RankedTensorType type = op.resultType();
  Location loc = op.loc();
  auto scaled = [&](Value v, double factor) -> Value {
    if (factor == 1.0)
      return v;
    return MulOp::create(b, loc, cast<RankedTensorType>(v.getType()), v,
                         scalarOf(b, loc, type.getElementType(), factor));
  };
  double beta = op.getFloat("beta").value_or(1.0), alpha = op.getFloat("alpha").value_or(1.0);
  Value y = scaled(buildMatmul(b, loc, type, lhs, rhs, false), alpha);
  if (beta != 0.0)
    y = AddOp::create(b, loc, type, y, scaled(op.operand("self"), beta));
  out.push_back(y);
  return success();
}

/// matmul/mm/bmm: lhs [..., M, K] @ rhs [K, N] or [..., K, N] with equal batch.
LogicalResult convertMatmul(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  Value lhs = op.operand("self"), rhs = op.operand("other");
  if (!rhs)
    rhs = op.operand("mat2");
  if (!lhs || !rhs)
    return op.unsupported("needs operands 'self' and 'other' (or 'mat2')");
  auto lt = cast<RankedTensorType>(lhs.getType());
  auto rt = cast<RankedTensorType>(rhs.getType());
  if (lt.getRank() < 2 || (rt.getRank() != 2 && rt.getRank() != lt.getRank()) ||
      (rt.getRank() != 2 && lt.getShape().drop_back(2) != rt.getShape().drop_back(2)))
    return op.unsupported("only [..., M, K] @ [K, N] or equal batch dimensions");
  // An operand that is a transpose of its last two dimensions (Falcon's `x @ self.weight.T`)
  // is read transposed instead: the same sums in the same order, and no copy. A chain of
  // such transposes is followed to its start, every two cancelling (the decode step's key
  // cache, transposed by the cache and back by the attention, is read in place).
  auto untransposed = [](Value &v) {
    bool flipped = false;
    while (auto t = v.getDefiningOp<TransposeOp>()) {
      ArrayRef<int64_t> perm = t.getPerm();
      int64_t r = perm.size();
      for (int64_t i = 0; i < r; ++i)
        if (perm[i] != (i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2)))
          return flipped;
      v = t.getX();
      flipped = !flipped;
    }
    return flipped;
  };
  bool transposeLhs = untransposed(lhs), transposeRhs = untransposed(rhs);
  out.push_back(MatmulOp::create(b, op.loc(), op.resultType(), lhs, rhs, transposeLhs,
                                 transposeRhs));
  return success();
}

/// embedding(weight, indices, padding_idx): the rows; a token equal to padding_idx takes its
/// row but gives it no gradient (PyTorch's padding_idx), through gpt.where of the row and
/// the row held by gpt.stop_gradient: the same value, its gradient zero there.
LogicalResult convertEmbedding(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"weight", "indices"})))
    return failure();
  if (op.getBool("sparse").value_or(false) || op.getBool("scale_grad_by_freq").value_or(false))
    return op.unsupported("scale_grad_by_freq and sparse are not supported");
  Location loc = op.loc();
  RankedTensorType type = op.resultType();
  Value idx = op.operand("indices");
  Value rows = EmbeddingOp::create(b, loc, type, op.operand("weight"), idx);
  int64_t pad = op.getInt("padding_idx").value_or(-1);
  if (pad >= 0) {
    auto it = cast<RankedTensorType>(idx.getType());
    SmallVector<int64_t> shape(it.getShape());
    shape.push_back(1);
    Value ids = ReshapeOp::create(b, loc, it.clone(shape), idx);
    Value isPad = CompareOp::create(b, loc, ids, scalarOf(b, loc, it.getElementType(), pad),
                                    ComparePredicate::eq);
    rows = WhereOp::create(b, loc, type, isPad, StopGradientOp::create(b, loc, type, rows), rows);
  }
  out.push_back(rows);
  return success();
}

/// Attention with an attn_mask, spelled out as PyTorch's math: scores q k^T * scale, plus
/// the mask where it is float (a bias, -inf hiding a key) or -inf where a boolean mask is
/// false, softmax over the keys (dropout_p: then dropout), times v. A query that sees no
/// key gets zeros, as PyTorch's SDPA gives since 2.5 (its "safe softmax"): its row of
/// scores is set to 0 before the softmax (so that nothing there is NaN, forward or
/// backward) and its output to 0 after. Matmuls and the softmax keep their own reduction
/// orders; capture turns the masks that are causal or hide nothing into is_causal or no
/// mask first (python/gptc/fold.py), and a mask that hides keys alone is gpt.attention's
/// key_mask (asKeyMask).
LogicalResult convertMaskedAttention(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out,
                                     Value q, Value k, Value v, Value mask, double scale) {
  Location loc = op.loc();
  auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(k.getType());
  auto mt = cast<RankedTensorType>(mask.getType());
  bool boolean = mt.getElementType().isInteger(1);
  if (!boolean && mt.getElementType() != qt.getElementType())
    return op.unsupported("attn_mask must be boolean or of q's type");
  if (op.getBool("is_causal").value_or(false))
    return op.unsupported("attn_mask with is_causal=True");
  if (mt.getRank() > 4)
    return op.unsupported("attn_mask of rank above 4");
  // Grouped heads (convertAttention checked them): each key/value head repeated for its
  // query heads, as enable_gqa's repeat_interleave (or PyTorch's broadcast of one head).
  if (int64_t group = qt.getDimSize(1) / kt.getDimSize(1); group != 1) {
    k = repeatInterleave(b, loc, k, 1, group);
    v = repeatInterleave(b, loc, v, 1, group);
  }
  Type f32 = qt.getElementType();
  SmallVector<int64_t> sshape(qt.getShape().take_front(3));
  sshape.push_back(kt.getDimSize(2));
  auto st = RankedTensorType::get(sshape, f32);
  SmallVector<int64_t> mshape(4 - mt.getRank(), 1);
  mshape.append(mt.getShape().begin(), mt.getShape().end());
  if (mt.getRank() < 4)
    mask = ReshapeOp::create(b, loc, mt.clone(mshape), mask);
  for (int d = 0; d < 4; ++d)
    if (mshape[d] != 1 && mshape[d] != sshape[d])
      return op.unsupported("attn_mask does not broadcast to the scores");
  auto scalar = RankedTensorType::get({}, f32);
  Value s = buildMatmul(b, loc, st, q, k, /*transposeRhs=*/true);
  s = MulOp::create(b, loc, st, s, splat(b, loc, scalar, scale));
  Value zero = splat(b, loc, scalar, 0.0);
  Value negInf = splat(b, loc, scalar, -std::numeric_limits<double>::infinity());
  auto mf = RankedTensorType::get(mshape, f32);
  Value visible = mask;
  if (boolean) {
    s = WhereOp::create(b, loc, st, mask, s, negInf);
  } else {
    s = AddOp::create(b, loc, st, s, mask);
    visible = CompareOp::create(b, loc, mask, negInf, ComparePredicate::ne);
  }
  SmallVector<int64_t> rshape(mshape);
  rshape[3] = 1;
  auto rt = RankedTensorType::get(rshape, f32);
  Value seen = ReduceMaxOp::create(b, loc, rt, ConvertOp::create(b, loc, mf, visible),
                                   b.getDenseI64ArrayAttr({3}), b.getBoolAttr(true),
                                   orderAttr(b, ReductionOrder::Canonical));
  Value any = CompareOp::create(b, loc, seen, zero, ComparePredicate::gt);
  s = WhereOp::create(b, loc, st, any, s, zero);
  Value p = SoftmaxOp::create(b, loc, st, s, b.getI64IntegerAttr(3),
                              orderAttr(b, ReductionOrder::Canonical));
  if (double dropout = op.getFloat("dropout_p").value_or(0.0); dropout > 0.0)
    p = DropoutOp::create(b, loc, st, p, op.rngArgument(), b.getF64FloatAttr(dropout),
                          b.getBoolAttr(true), b.getI64IntegerAttr(0));
  RankedTensorType yt = op.resultType();
  Value y = buildMatmul(b, loc, yt, p, v, /*transposeRhs=*/false);
  out.push_back(WhereOp::create(b, loc, yt, any, y, zero));
  return success();
}

/// A boolean attn_mask that hides keys alone, the same for every head and query
/// ([B or 1, 1, 1, S], or fewer leading dimensions: a padding mask), as gpt.attention's
/// key_mask [B, S]; null for any other mask. Capture prints transformers' causal-and-padding
/// mask as this mask with is_causal (python/gptc/fold.py), which gpt.attention takes both of.
Value asKeyMask(OpBuilder &b, Location loc, Value mask, RankedTensorType qt,
                RankedTensorType kt) {
  auto mt = cast<RankedTensorType>(mask.getType());
  if (!mt.getElementType().isInteger(1) || mt.getRank() > 4)
    return Value();
  SmallVector<int64_t> shape(4 - mt.getRank(), 1);
  shape.append(mt.getShape().begin(), mt.getShape().end());
  int64_t batch = qt.getDimSize(0), keys = kt.getDimSize(2);
  if ((shape[0] != 1 && shape[0] != batch) || shape[1] != 1 || shape[2] != 1 ||
      shape[3] != keys)
    return Value();
  mask = ReshapeOp::create(b, loc, mt.clone({shape[0], keys}), mask);
  if (shape[0] != batch)
    mask = BroadcastOp::create(b, loc, mt.clone({batch, keys}), mask);
  return mask;
}

LogicalResult convertAttention(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"query", "key", "value"})))
    return failure();
  Value q = op.operand("query"), k = op.operand("key"), v = op.operand("value");
  auto qt = cast<RankedTensorType>(q.getType());
  if (qt.getRank() != 4)
    return op.unsupported("q, k, v must be [B, H, T, D]");
  double scale = op.getFloat("scale").value_or(1.0 / std::sqrt((double)qt.getShape().back()));
  // transformers' repeat_kv (x[:, :, None].expand(B, Hkv, g, T, D).reshape(B, Hkv g, T, D):
  // each key/value head repeated for the g query heads it serves) is grouped-query
  // attention over x itself: the same values, read in place of a copy of g per head.
  bool repeated = false;
  auto unrepeated = [&](Value kv) -> Value {
    auto outer = kv.getDefiningOp<ReshapeOp>();
    auto expand = outer ? outer.getX().getDefiningOp<BroadcastOp>() : BroadcastOp();
    if (!expand)
      return kv;
    ArrayRef<int64_t> e = expand.getType().getShape(), r = outer.getType().getShape();
    auto st = cast<RankedTensorType>(expand.getX().getType());
    if (e.size() != 5 || r.size() != 4 || st.getRank() != 5 || st.getDimSize(2) != 1 ||
        st.getShape() != ArrayRef<int64_t>({e[0], e[1], 1, e[3], e[4]}) ||
        r != ArrayRef<int64_t>({e[0], e[1] * e[2], e[3], e[4]}))
      return kv;
    repeated = true;
    return ReshapeOp::create(b, op.loc(), st.clone({e[0], e[1], e[3], e[4]}), expand.getX())
        .getResult();
  };
  k = unrepeated(k);
  v = unrepeated(v);
  // Grouped-query attention: each key/value head serves H / Hkv query heads (gpt.attention
  // reads k and v as they are; without enable_gqa their heads must be q's, or one head, which
  // PyTorch broadcasts to all of q's: multi-query attention, Falcon's).
  for (Value kv : {k, v}) {
    auto t = cast<RankedTensorType>(kv.getType());
    int64_t heads = qt.getDimSize(1), kvHeads = t.getRank() == 4 ? t.getDimSize(1) : 0;
    if (kvHeads != heads && kvHeads != 1 && !repeated &&
        !op.getBool("enable_gqa").value_or(false))
      return op.unsupported("q has " + std::to_string(heads) + " heads and k, v " +
                            std::to_string(kvHeads) + ": pass enable_gqa=True");
    if (kvHeads < 1 || heads % kvHeads != 0)
      return op.unsupported("enable_gqa needs the query heads a multiple of the key/value heads");
  }
  Value mask = op.operand("attn_mask"), keyMask;
  if (mask && !(keyMask = asKeyMask(b, op.loc(), mask, qt, cast<RankedTensorType>(k.getType()))))
    return convertMaskedAttention(op, b, out, q, k, v, mask, scale);
  double dropout = op.getFloat("dropout_p").value_or(0.0);
  Value rng = dropout > 0.0 ? op.rngArgument() : Value();
  out.push_back(AttentionOp::create(
      b, op.loc(), op.resultType(), AttentionOp::statsType(qt), q, k, v, rng, keyMask,
      b.getBoolAttr(op.getBool("is_causal").value_or(false)), b.getF64FloatAttr(dropout),
      b.getF64FloatAttr(scale), b.getI64IntegerAttr(0), orderAttr(b, ReductionOrder::OnlineBlock32),
      /*bthd=*/nullptr).getResult());
  return success();
}

/// outer(a, b) = a[:, None] * b[None, :].
LogicalResult convertOuter(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self", "vec2"})))
    return failure();
  RankedTensorType type = op.resultType();
  if (type.getRank() != 2)
    return op.unsupported("needs two 1-D tensors");
  Type elem = type.getElementType();
  Value x = convertElementType(b, op.loc(), op.operand("self"), elem);
  Value y = convertElementType(b, op.loc(), op.operand("vec2"), elem);
  x = ReshapeOp::create(b, op.loc(), RankedTensorType::get({type.getDimSize(0), 1}, elem), x);
  y = ReshapeOp::create(b, op.loc(), RankedTensorType::get({1, type.getDimSize(1)}, elem), y);
  out.push_back(MulOp::create(b, op.loc(), type, x, y));
  return success();
}

} // namespace

void mlir::gpt::populateLinearPatterns(AtenConverterTable &t) {
  t["aten.linear.default"] = convertLinear;
  t["aten.matmul.default"] = convertMatmul;
  t["aten.mm.default"] = convertMatmul;
  t["aten.addmm.default"] = convertAddmm<false>;
  t["aten.baddbmm.default"] = convertAddmm<true>;
  t["aten.bmm.default"] = convertMatmul;
  t["aten.embedding.default"] = convertEmbedding;
  t["aten.scaled_dot_product_attention.default"] = convertAttention;
  t["aten.outer.default"] = convertOuter;
}
