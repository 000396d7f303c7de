//===- ElementwisePatterns.cpp - aten elementwise ops -> gpt --------------===//
//
// add/sub/mul/div/pow/maximum (Tensor and Scalar overloads), the unary math
// ops, gelu, where and masked_fill. A scalar argument becomes a rank-0
// constant that broadcasts; mixed element types convert to the result's.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// lhs `Op` rhs, with the aten "alpha" multiplier on rhs (add/sub only).
template <typename Op>
LogicalResult convertBinary(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out,
                            StringRef lhsArg, StringRef rhsArg) {
  RankedTensorType type = op.resultType();
  Type elem = type.getElementType();
  auto lhs = op.tensorOrScalar(b, lhsArg, elem);
  auto rhs = op.tensorOrScalar(b, rhsArg, elem);
  if (failed(lhs) || failed(rhs))
    return failure();
  Value r = *rhs;
  if (auto alpha = op.getFloat("alpha"); alpha && *alpha != 1.0) {
    auto scaled = op.tensorOrScalar(b, "alpha", elem);
    if (failed(scaled))
      return failure();
    auto rt = cast<RankedTensorType>(r.getType());
    r = MulOp::create(b, op.loc(), rt, r, *scaled);
  }
  out.push_back(Op::create(b, op.loc(), type, *lhs, r));
  return success();
}

template <typename Op> LogicalResult binarySelfOther(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  return convertBinary<Op>(op, b, out, "self", "other");
}

template <typename Op> LogicalResult powSelfExponent(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  return convertBinary<Op>(op, b, out, "self", "exponent");
}

/// rsub(self, other, alpha) = other - alpha * self.
LogicalResult convertRsub(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (auto alpha = op.getFloat("alpha"); alpha && *alpha != 1.0)
    return op.unsupported("alpha != 1");
  return convertBinary<SubOp>(op, b, out, "other", "self");
}

/// reciprocal(self) = 1 / self (what `2 / x` and `1 / x` capture as).
LogicalResult convertReciprocal(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  RankedTensorType type = op.resultType();
  if (!isa<FloatType>(type.getElementType()))
    return op.unsupported("needs a floating-point result");
  auto scalar = RankedTensorType::get({}, type.getElementType());
  Value one = ConstantOp::create(
      b, op.loc(), scalar,
      DenseElementsAttr::get(scalar, b.getFloatAttr(type.getElementType(), 1.0).getValue()));
  Value x = convertElementType(b, op.loc(), op.operand("self"), type.getElementType());
  out.push_back(DivOp::create(b, op.loc(), type, one, x));
  return success();
}

template <typename Op> LogicalResult unary(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  Value x = op.operand("self");
  if (!x)
    return op.unsupported("missing input");
  RankedTensorType type = op.resultType();
  if (!isa<FloatType>(type.getElementType()))
    return op.unsupported("needs a floating-point tensor");
  x = convertElementType(b, op.loc(), x, type.getElementType());
  out.push_back(Op::create(b, op.loc(), type, x));
  return success();
}

LogicalResult convertGelu(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  StringRef approx = op.getString("approximate").value_or("none");
  if (approx != "none" && approx != "tanh")
    return op.unsupported("approximate='" + approx + "'");
  out.push_back(GeluOp::create(b, op.loc(), op.resultType(), op.operand("self"),
                               b.getStringAttr(approx)));
  return success();
}

LogicalResult convertWhere(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  Type elem = op.resultType().getElementType();
  Value cond = op.operand("condition");
  auto a = op.tensorOrScalar(b, "self", elem);
  auto c = op.tensorOrScalar(b, "other", elem);
  if (!cond || failed(a) || failed(c))
    return op.unsupported("needs a condition tensor and two values");
  out.push_back(WhereOp::create(b, op.loc(), op.resultType(), cond, *a, *c));
  return success();
}

LogicalResult convertMaskedFill(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self", "mask"})))
    return failure();
  auto value = op.getFloat("value");
  if (!value)
    return op.unsupported("only a scalar fill value is supported");
  out.push_back(MaskedFillOp::create(b, op.loc(), op.resultType(), op.operand("self"),
                                     op.operand("mask"), b.getF64FloatAttr(*value)));
  return success();
}

} // namespace

void mlir::gpt::populateElementwisePatterns(AtenConverterTable &t) {
  for (StringRef n : {"aten.add.Tensor", "aten.add.Scalar"})
    t[n] = binarySelfOther<AddOp>;
  for (StringRef n : {"aten.sub.Tensor", "aten.sub.Scalar"})
    t[n] = binarySelfOther<SubOp>;
  for (StringRef n : {"aten.mul.Tensor", "aten.mul.Scalar"})
    t[n] = binarySelfOther<MulOp>;
  for (StringRef n : {"aten.div.Tensor", "aten.div.Scalar"})
    t[n] = binarySelfOther<DivOp>;
  t["aten.maximum.default"] = binarySelfOther<MaxOp>;
  t["aten.rsub.Scalar"] = convertRsub;
  t["aten.rsub.Tensor"] = convertRsub;
  for (StringRef n : {"aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar"})
    t[n] = powSelfExponent<PowOp>;
  t["aten.reciprocal.default"] = convertReciprocal;
  t["aten.neg.default"] = unary<NegOp>;
  t["aten.exp.default"] = unary<ExpOp>;
  t["aten.log.default"] = unary<LogOp>;
  t["aten.tanh.default"] = unary<TanhOp>;
  t["aten.erf.default"] = unary<ErfOp>;
  t["aten.sqrt.default"] = unary<SqrtOp>;
  t["aten.rsqrt.default"] = unary<RsqrtOp>;
  t["aten.gelu.default"] = convertGelu;
  for (StringRef n : {"aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
                      "aten.where.Scalar"})
    t[n] = convertWhere;
  t["aten.masked_fill.Scalar"] = convertMaskedFill;
}
