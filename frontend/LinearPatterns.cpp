//===- LinearPatterns.cpp - aten linear algebra ops -> gpt ----------------===//
//
// linear (matmul against the transposed weight, then the bias), matmul, mm,
// bmm, embedding and scaled_dot_product_attention.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include <cmath>

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
  out.push_back(buildMatmul(b, op.loc(), op.resultType(), lhs, rhs, false));
  return success();
}

LogicalResult convertEmbedding(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"weight", "indices"})))
    return failure();
  if (op.getInt("padding_idx").value_or(-1) != -1 || op.getBool("sparse").value_or(false) ||
      op.getBool("scale_grad_by_freq").value_or(false))
    return op.unsupported("padding_idx, scale_grad_by_freq and sparse are not supported");
  out.push_back(EmbeddingOp::create(b, op.loc(), op.resultType(), op.operand("weight"),
                                    op.operand("indices")));
  return success();
}

LogicalResult convertAttention(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"query", "key", "value"})))
    return failure();
  Value q = op.operand("query"), k = op.operand("key"), v = op.operand("value");
  if (op.operand("attn_mask"))
    return op.unsupported("attn_mask is not supported; use is_causal=True");
  auto qt = cast<RankedTensorType>(q.getType());
  if (qt.getRank() != 4)
    return op.unsupported("q, k, v must be [B, H, T, D]");
  // Grouped-query attention: each key/value head serves H / Hkv query heads (gpt.attention
  // reads k and v as they are; without enable_gqa their heads must be q's).
  for (Value kv : {k, v}) {
    auto t = cast<RankedTensorType>(kv.getType());
    int64_t heads = qt.getDimSize(1), kvHeads = t.getRank() == 4 ? t.getDimSize(1) : 0;
    if (kvHeads != heads && !op.getBool("enable_gqa").value_or(false))
      return op.unsupported("q has " + std::to_string(heads) + " heads and k, v " +
                            std::to_string(kvHeads) + ": pass enable_gqa=True");
    if (kvHeads < 1 || heads % kvHeads != 0)
      return op.unsupported("enable_gqa needs the query heads a multiple of the key/value heads");
  }
  double scale = op.getFloat("scale").value_or(1.0 / std::sqrt((double)qt.getShape().back()));
  double dropout = op.getFloat("dropout_p").value_or(0.0);
  Value rng = dropout > 0.0 ? op.rngArgument() : Value();
  out.push_back(AttentionOp::create(
      b, op.loc(), op.resultType(), AttentionOp::statsType(qt), q, k, v,
      rng, b.getBoolAttr(op.getBool("is_causal").value_or(false)), b.getF64FloatAttr(dropout),
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
  t["aten.bmm.default"] = convertMatmul;
  t["aten.embedding.default"] = convertEmbedding;
  t["aten.scaled_dot_product_attention.default"] = convertAttention;
  t["aten.outer.default"] = convertOuter;
}
