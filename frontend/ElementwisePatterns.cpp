//===- ElementwisePatterns.cpp - aten elementwise ops -> gpt --------------===//
//
// add/sub/mul/div/pow/maximum/minimum (Tensor and Scalar overloads), the
// unary math ops, gelu, where and masked_fill, the comparisons and bool logic,
// and the activations built from them (relu, leaky_relu, silu, clamp, sign).
// A scalar argument becomes a rank-0 constant that broadcasts; mixed element
// types convert to the result's.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include <cmath>

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

/// x ** y. A scalar exponent of 0.5 or -0.5 is sqrt or rsqrt, as PyTorch computes it
/// (-inf ** 0.5 is NaN there, where C's pow gives +inf; -0.0 ** 0.5 is -0.0).
LogicalResult convertPow(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  RankedTensorType type = op.resultType();
  double y = op.operand("exponent") ? 0.0 : op.getFloat("exponent").value_or(0.0);
  if (op.operand("self") && isa<FloatType>(type.getElementType()) && (y == 0.5 || y == -0.5)) {
    Value x = convertElementType(b, op.loc(), op.operand("self"), type.getElementType());
    out.push_back(y > 0 ? Value(SqrtOp::create(b, op.loc(), type, x))
                        : Value(RsqrtOp::create(b, op.loc(), type, x)));
    return success();
  }
  // x ** 2 and x ** 3 as PyTorch's CPU kernel computes them, x * x and (x * x) * x: the same
  // bits, and a product the elementwise loops vectorise (GPT-2's tanh GELU cubes x).
  if (op.operand("self") && isa<FloatType>(type.getElementType()) && (y == 2.0 || y == 3.0)) {
    Value x = convertElementType(b, op.loc(), op.operand("self"), type.getElementType());
    Value r = MulOp::create(b, op.loc(), type, x, x);
    out.push_back(y == 3.0 ? Value(MulOp::create(b, op.loc(), type, r, x)) : r);
    return success();
  }
  // PyTorch keeps a Python float exponent in double: x ** 0.3 of an f32 x is
  // pow(double(x), 0.3) rounded once, not pow with 0.3 rounded to f32 (7 ulp apart at
  // x = 1e-30). Where the exponent is not exact in f32, so does gptc. (A scalar base,
  // 0.1 ** x, PyTorch rounds to the tensor's type, as convertBinary does.)
  auto f = op.raw()->getAttrOfType<FloatAttr>("exponent");
  if (f && type.getElementType().isF32() &&
      (double)(float)f.getValueAsDouble() != f.getValueAsDouble()) {
    Type f64 = b.getF64Type();
    auto base = op.tensorOrScalar(b, "self", f64), exponent = op.tensorOrScalar(b, "exponent", f64);
    if (failed(base) || failed(exponent))
      return failure();
    Value r = PowOp::create(b, op.loc(), type.clone(f64), *base, *exponent);
    out.push_back(ConvertOp::create(b, op.loc(), type, r));
    return success();
  }
  return convertBinary<PowOp>(op, b, out, "self", "exponent");
}

/// rsub(self, other, alpha) = other - alpha * self.
LogicalResult convertRsub(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (auto alpha = op.getFloat("alpha"); alpha && *alpha != 1.0)
    return op.unsupported("alpha != 1");
  return convertBinary<SubOp>(op, b, out, "other", "self");
}

/// reciprocal(self) = 1 / self (what `2 / x` and `1 / x` capture as).
LogicalResult convertReciprocal(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  RankedTensorType type = op.resultType();
  Value one = scalarOf(b, op.loc(), type.getElementType(), 1.0);
  out.push_back(DivOp::create(b, op.loc(), type, one, *x));
  return success();
}

template <typename Op> LogicalResult unary(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  out.push_back(Op::create(b, op.loc(), op.resultType(), *x));
  return success();
}

LogicalResult convertGelu(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  StringRef approx = op.getString("approximate").value_or("none");
  std::optional<GeluApproximation> form = symbolizeGeluApproximation(approx);
  if (!form)
    return op.unsupported("approximate='" + approx + "'");
  out.push_back(GeluOp::create(b, op.loc(), op.resultType(), op.operand("self"),
                               GeluApproximationAttr::get(b.getContext(), *form)));
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

/// The element type PyTorch compares self and other in: its type promotion over the bool,
/// integer and float categories, where a tensor with dimensions outranks a rank-0 tensor,
/// which outranks a Python scalar (whose float is f32, the default dtype), unless the
/// lower-ranked one is of a higher category (`i < 2.5` compares in f32, f32 against a
/// rank-0 f64 in f32, i64 against a rank-0 f64 in f64).
Type comparisonType(AtenOp &op, OpBuilder &b) {
  auto category = [](Type t) { return isa<FloatType>(t) ? 2 : t.isInteger(1) ? 0 : 1; };
  auto promote = [&](Type x, Type y) -> Type {
    if (!x || !y)
      return x ? x : y;
    if (category(x) != category(y))
      return category(x) > category(y) ? x : y;
    if (auto fx = dyn_cast<FloatType>(x))
      return fx.getWidth() >= cast<FloatType>(y).getWidth() ? x : y;
    return x;
  };
  auto combine = [&](Type higher, Type lower) -> Type {
    if (!higher || !lower)
      return higher ? higher : lower;
    if (isa<FloatType>(higher))
      return higher;
    return higher.isInteger(1) || isa<FloatType>(lower) ? promote(higher, lower) : higher;
  };
  Type ranked, rank0, scalar;
  for (StringRef arg : {"self", "other"}) {
    if (Value v = op.operand(arg)) {
      auto t = cast<RankedTensorType>(v.getType());
      (t.getRank() > 0 ? ranked : rank0) = promote(t.getRank() > 0 ? ranked : rank0,
                                                   t.getElementType());
    } else if (Attribute a = op.raw()->getAttr(arg)) {
      scalar = promote(scalar, isa<FloatAttr>(a)  ? Type(b.getF32Type())
                               : isa<BoolAttr>(a) ? Type(b.getI1Type())
                                                  : Type(b.getI64Type()));
    }
  }
  Type t = combine(ranked, combine(rank0, scalar));
  return t ? t : b.getI64Type();
}

template <ComparePredicate P> LogicalResult convertCompare(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Type elem = comparisonType(op, b);
  auto lhs = op.tensorOrScalar(b, "self", elem);
  auto rhs = op.tensorOrScalar(b, "other", elem);
  if (failed(lhs) || failed(rhs))
    return failure();
  out.push_back(CompareOp::create(b, op.loc(), *lhs, *rhs, P));
  return success();
}

/// and, or and not of bool tensors, as gpt.where: a & b = a ? b : false, a | b = a ? true : b.
enum class Logic { And, Or, Not };
template <Logic L> LogicalResult convertLogic(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})) || (L != Logic::Not && failed(op.require({"other"}))))
    return failure();
  Value x = op.operand("self"), y = L == Logic::Not ? x : op.operand("other");
  auto isBool = [](Value v) { return cast<RankedTensorType>(v.getType()).getElementType().isInteger(1); };
  if (!isBool(x) || !isBool(y) || !op.resultType().getElementType().isInteger(1))
    return op.unsupported("only bool tensors");
  Type i1 = b.getI1Type();
  Location loc = op.loc();
  Value r = L == Logic::And  ? WhereOp::create(b, loc, op.resultType(), x, y, scalarOf(b, loc, i1, 0))
            : L == Logic::Or ? WhereOp::create(b, loc, op.resultType(), x, scalarOf(b, loc, i1, 1), y)
                             : Value(CompareOp::create(b, loc, x, scalarOf(b, loc, i1, 1), ComparePredicate::ne));
  out.push_back(r);
  return success();
}

/// relu(x) as PyTorch computes it: 0 below 0, x itself at +-0 (relu(-0.0) is -0.0) and NaN;
/// the gradient 0 at and below 0 and passed at NaN (its threshold rule). The value at and
/// below 0 goes through gpt.stop_gradient.
LogicalResult convertRelu(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = selfAsResult(op, b);
  if (failed(x))
    return failure();
  Location loc = op.loc();
  RankedTensorType type = op.resultType();
  Value zero = scalarOf(b, loc, type.getElementType(), 0.0);
  Value held = WhereOp::create(b, loc, type, CompareOp::create(b, loc, *x, zero, ComparePredicate::lt), zero, *x);
  held = StopGradientOp::create(b, loc, type, held);
  out.push_back(
      WhereOp::create(b, loc, type, CompareOp::create(b, loc, *x, zero, ComparePredicate::le), held, *x));
  return success();
}

/// leaky_relu(x) = x > 0 ? x : x * negative_slope (its gradient likewise).
LogicalResult convertLeakyRelu(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  Location loc = op.loc();
  Type elem = op.resultType().getElementType();
  Value scaled = MulOp::create(b, loc, op.resultType(), *x,
                               scalarOf(b, loc, elem, op.getFloat("negative_slope").value_or(0.01)));
  Value positive = CompareOp::create(b, loc, *x, scalarOf(b, loc, elem, 0.0), ComparePredicate::gt);
  out.push_back(WhereOp::create(b, loc, op.resultType(), positive, *x, scaled));
  return success();
}

/// sign(x): 1, -1, or 0 for zeros and NaN (PyTorch's).
LogicalResult convertSign(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = selfAsResult(op, b);
  if (failed(x))
    return failure();
  Location loc = op.loc();
  RankedTensorType type = op.resultType();
  Value zero = scalarOf(b, loc, type.getElementType(), 0.0);
  Value negative = WhereOp::create(b, loc, type, CompareOp::create(b, loc, *x, zero, ComparePredicate::lt),
                                   scalarOf(b, loc, type.getElementType(), -1.0), zero);
  out.push_back(WhereOp::create(b, loc, type, CompareOp::create(b, loc, *x, zero, ComparePredicate::gt),
                                scalarOf(b, loc, type.getElementType(), 1.0), negative));
  return success();
}

LogicalResult convertSquare(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = selfAsResult(op, b);
  if (failed(x))
    return failure();
  out.push_back(MulOp::create(b, op.loc(), op.resultType(), *x, *x));
  return success();
}

/// silu(x) = x * sigmoid(x).
LogicalResult convertSilu(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  Value s = SigmoidOp::create(b, op.loc(), op.resultType(), *x);
  out.push_back(MulOp::create(b, op.loc(), op.resultType(), *x, s));
  return success();
}

/// clamp(x, min, max) = min(max(x, lo), hi) with scalar bounds. As in PyTorch, the gradient
/// passes only strictly inside the bounds (lo < x < hi) and NaN passes with none: per bound,
/// x where it is inside, else the bound (or x itself, at the bound or NaN) without gradient.
LogicalResult convertClamp(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = selfAsResult(op, b);
  if (failed(x))
    return failure();
  RankedTensorType type = op.resultType();
  Location loc = op.loc();
  Value r = *x;
  bool any = false;
  for (auto [arg, inside, beyond] :
       {std::tuple<StringRef, ComparePredicate, ComparePredicate>{
            "min", ComparePredicate::gt, ComparePredicate::lt},
        {"max", ComparePredicate::lt, ComparePredicate::gt}}) {
    if (!op.has(arg))
      continue;
    if (auto v = op.getFloat(arg); v && std::isnan(*v)) { // a NaN bound: NaN everywhere
      out.push_back(splat(b, loc, type, *v));
      return success();
    }
    auto bound = op.tensorOrScalar(b, arg, type.getElementType());
    if (failed(bound))
      return failure();
    Value held = WhereOp::create(b, loc, type, CompareOp::create(b, loc, r, *bound, beyond),
                                 *bound, r);
    held = StopGradientOp::create(b, loc, type, held);
    r = WhereOp::create(b, loc, type, CompareOp::create(b, loc, r, *bound, inside), r, held);
    any = true;
  }
  if (!any)
    return op.unsupported("needs a min or a max");
  out.push_back(r);
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
    t[n] = convertPow;
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
  t["aten.minimum.default"] = binarySelfOther<MinOp>;
  t["aten.abs.default"] = unary<AbsOp>;
  t["aten.sigmoid.default"] = unary<SigmoidOp>;
  t["aten.sin.default"] = unary<SinOp>;
  t["aten.cos.default"] = unary<CosOp>;
  t["aten.silu.default"] = convertSilu;
  t["aten.relu.default"] = convertRelu;
  t["aten.leaky_relu.default"] = convertLeakyRelu;
  t["aten.sign.default"] = convertSign;
  t["aten.square.default"] = convertSquare;
  for (StringRef n : {"aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default"})
    t[n] = convertClamp;
  t["aten.lt.Tensor"] = t["aten.lt.Scalar"] = convertCompare<ComparePredicate::lt>;
  t["aten.le.Tensor"] = t["aten.le.Scalar"] = convertCompare<ComparePredicate::le>;
  t["aten.gt.Tensor"] = t["aten.gt.Scalar"] = convertCompare<ComparePredicate::gt>;
  t["aten.ge.Tensor"] = t["aten.ge.Scalar"] = convertCompare<ComparePredicate::ge>;
  t["aten.eq.Tensor"] = t["aten.eq.Scalar"] = convertCompare<ComparePredicate::eq>;
  t["aten.ne.Tensor"] = t["aten.ne.Scalar"] = convertCompare<ComparePredicate::ne>;
  for (StringRef n : {"aten.logical_and.default", "aten.bitwise_and.Tensor", "aten.__and__.Tensor"})
    t[n] = convertLogic<Logic::And>;
  for (StringRef n : {"aten.logical_or.default", "aten.bitwise_or.Tensor", "aten.__or__.Tensor"})
    t[n] = convertLogic<Logic::Or>;
  for (StringRef n : {"aten.logical_not.default", "aten.bitwise_not.default"})
    t[n] = convertLogic<Logic::Not>;
}
