//===- GptVjp.cpp - vector-Jacobian products of the gpt ops ---------------===//
//
// One buildVjp per op: the gradients of its operands from those of its
// results, built with gpt ops right after the op. Reductions that a gradient
// introduces (over broadcast dimensions, over tokens for a shared weight) use
// the same canonical orders as the forward ops.
//
//===----------------------------------------------------------------------===//
#include "ir/GptDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpt;

namespace {

RankedTensorType tt(Value v) { return cast<RankedTensorType>(v.getType()); }

ReductionOrderAttr canonical(OpBuilder &b) {
  return ReductionOrderAttr::get(b.getContext(), ReductionOrder::Canonical);
}

/// A rank-0 constant of `elem`.
Value scalar(OpBuilder &b, Location loc, double v, Type elem) {
  auto type = RankedTensorType::get({}, elem);
  return ConstantOp::create(b, loc, type,
                            DenseElementsAttr::get(type, b.getFloatAttr(elem, v).getValue()));
}

/// lhs `Op` rhs with the result shaped by numpy broadcasting.
template <typename Op> Value binary(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  auto shape = broadcastShapes(tt(lhs).getShape(), tt(rhs).getShape());
  return Op::create(b, loc, tt(lhs).clone(*shape), lhs, rhs);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y) { return binary<MulOp>(b, loc, x, y); }
Value sub(OpBuilder &b, Location loc, Value x, Value y) { return binary<SubOp>(b, loc, x, y); }
Value div(OpBuilder &b, Location loc, Value x, Value y) { return binary<DivOp>(b, loc, x, y); }
Value mulScalar(OpBuilder &b, Location loc, Value x, double s) {
  return mul(b, loc, x, scalar(b, loc, s, tt(x).getElementType()));
}

/// cond ? x : y, shaped like `like`.
Value select(OpBuilder &b, Location loc, Value cond, Value x, Value y, Value like) {
  return WhereOp::create(b, loc, tt(like), cond, x, y);
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  if (tt(v).getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, tt(v).clone(shape), v);
}

/// Sums `g` over the dimensions that broadcasting added to reach it from
/// `target`'s shape; the inverse of numpy broadcasting.
Value reduceTo(OpBuilder &b, Location loc, Value g, RankedTensorType target) {
  ArrayRef<int64_t> gs = tt(g).getShape(), ts = target.getShape();
  int64_t lead = (int64_t)gs.size() - (int64_t)ts.size();
  SmallVector<int64_t> dims, kept;
  for (int64_t i = 0; i < (int64_t)gs.size(); ++i) {
    if (i < lead || (ts[i - lead] == 1 && gs[i] != 1))
      dims.push_back(i);
    else
      kept.push_back(gs[i]);
  }
  if (dims.empty())
    return reshape(b, loc, g, ts);
  Value s = ReduceSumOp::create(b, loc, tt(g).clone(kept), g, b.getDenseI64ArrayAttr(dims),
                                b.getBoolAttr(false), canonical(b));
  return reshape(b, loc, s, ts);
}

Value broadcastTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  if (tt(v).getShape() == shape)
    return v;
  return BroadcastOp::create(b, loc, tt(v).clone(shape), v);
}

Value zerosLike(OpBuilder &b, Location loc, RankedTensorType type) {
  return broadcastTo(b, loc, scalar(b, loc, 0.0, type.getElementType()), type.getShape());
}

LogicalResult noGradient(Operation *op) {
  return op->emitError("no gradient is defined for '") << op->getName() << "'";
}

/// For ops whose only differentiable operand is operand 0.
LogicalResult unaryGrad(Operation *op, Value dx, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
  grads[0] = dx;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.assign({reduceTo(b, loc, g[0], getLhs().getType()), reduceTo(b, loc, g[0], getRhs().getType())});
  return success();
}

LogicalResult SubOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value neg = NegOp::create(b, loc, g[0].getType(), g[0]);
  grads.assign({reduceTo(b, loc, g[0], getLhs().getType()), reduceTo(b, loc, neg, getRhs().getType())});
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.assign({reduceTo(b, loc, mul(b, loc, g[0], getRhs()), getLhs().getType()),
           reduceTo(b, loc, mul(b, loc, g[0], getLhs()), getRhs().getType())});
  return success();
}

// d(a/b) = g/b, -g*(a/b)/b
LogicalResult DivOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value da = div(b, loc, g[0], getRhs());
  Value db = NegOp::create(b, loc, getType(), div(b, loc, mul(b, loc, g[0], getResult()), getRhs()));
  grads.assign({reduceTo(b, loc, da, getLhs().getType()), reduceTo(b, loc, db, getRhs().getType())});
  return success();
}

// d(a^b) = g*b*a^(b-1), g*a^b*log(a)
LogicalResult PowOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Type e = getType().getElementType();
  Value bm1 = sub(b, loc, getRhs(), scalar(b, loc, 1.0, e));
  Value da = mul(b, loc, mul(b, loc, g[0], getRhs()), binary<PowOp>(b, loc, getLhs(), bm1));
  Value loga = LogOp::create(b, loc, getLhs().getType(), getLhs());
  Value db = mul(b, loc, mul(b, loc, g[0], getResult()), loga);
  grads.assign({reduceTo(b, loc, da, getLhs().getType()), reduceTo(b, loc, db, getRhs().getType())});
  return success();
}

/// PyTorch's rule for maximum and minimum: the gradient goes to the operand chosen, and
/// half of it to each where they tie. `loses` is the predicate under which lhs is not chosen.
static LogicalResult extremumVjp(Operation *op, ComparePredicate loses, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &grads, OpBuilder &b) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value zero = scalar(b, loc, 0.0, tt(g[0]).getElementType());
  Value tie = CompareOp::create(b, loc, lhs, rhs, ComparePredicate::eq);
  Value shared = select(b, loc, tie, mulScalar(b, loc, g[0], 0.5), g[0], g[0]);
  Value lhsLoses = CompareOp::create(b, loc, lhs, rhs, loses);
  Value rhsLoses = CompareOp::create(b, loc, rhs, lhs, loses);
  Value da = select(b, loc, lhsLoses, zero, shared, g[0]);
  Value db = select(b, loc, rhsLoses, zero, shared, g[0]);
  grads.assign({reduceTo(b, loc, da, tt(lhs)), reduceTo(b, loc, db, tt(rhs))});
  return success();
}

LogicalResult MaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return extremumVjp(*this, ComparePredicate::lt, g, grads, b);
}

LogicalResult MinOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return extremumVjp(*this, ComparePredicate::gt, g, grads, b);
}

LogicalResult CompareOp::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &grads) {
  grads.assign({Value(), Value()});
  return success();
}

// d|x| = g * sign(x), with sign(0) = sign(NaN) = 0 (PyTorch's).
LogicalResult AbsOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Type e = getType().getElementType();
  Value zero = scalar(b, loc, 0.0, e);
  Value negative = CompareOp::create(b, loc, getX(), zero, ComparePredicate::lt);
  Value positive = CompareOp::create(b, loc, getX(), zero, ComparePredicate::gt);
  Value sign = select(b, loc, negative, scalar(b, loc, -1.0, e), zero, getX());
  sign = select(b, loc, positive, scalar(b, loc, 1.0, e), sign, getX());
  return unaryGrad(*this, mul(b, loc, g[0], sign), grads);
}

// d sin = g * cos(x); d cos = -g * sin(x)
LogicalResult SinOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, mul(b, getLoc(), g[0], CosOp::create(b, getLoc(), getType(), getX())),
                   grads);
}

LogicalResult CosOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Value s = SinOp::create(b, getLoc(), getType(), getX());
  return unaryGrad(*this, NegOp::create(b, getLoc(), getType(), mul(b, getLoc(), g[0], s)), grads);
}

// d sigmoid = g * (1 - y) * y
LogicalResult SigmoidOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value one = scalar(b, loc, 1.0, getType().getElementType());
  Value d = mul(b, loc, mul(b, loc, g[0], sub(b, loc, one, getResult())), getResult());
  return unaryGrad(*this, d, grads);
}

LogicalResult NegOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, NegOp::create(b, getLoc(), getType(), g[0]), grads);
}

LogicalResult ExpOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, mul(b, getLoc(), g[0], getResult()), grads);
}

LogicalResult LogOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, div(b, getLoc(), g[0], getX()), grads);
}

// d tanh = g * (1 - y*y)
LogicalResult TanhOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value one = scalar(b, loc, 1.0, getType().getElementType());
  Value d = sub(b, loc, one, mul(b, loc, getResult(), getResult()));
  return unaryGrad(*this, mul(b, loc, g[0], d), grads);
}

// d erf = g * 2/sqrt(pi) * exp(-x*x)
LogicalResult ErfOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value negsq = NegOp::create(b, loc, getType(), mul(b, loc, getX(), getX()));
  Value e = ExpOp::create(b, loc, getType(), negsq);
  return unaryGrad(*this, mulScalar(b, loc, mul(b, loc, g[0], e), 2.0 / std::sqrt(M_PI)), grads);
}

// d sqrt = g / (2 y)
LogicalResult SqrtOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  return unaryGrad(*this, div(b, loc, g[0], mulScalar(b, loc, getResult(), 2.0)), grads);
}

// d rsqrt = -0.5 g y^3
LogicalResult RsqrtOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value y3 = mul(b, loc, mul(b, loc, getResult(), getResult()), getResult());
  return unaryGrad(*this, mul(b, loc, mulScalar(b, loc, g[0], -0.5), y3), grads);
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this,
                   GeluGradOp::create(b, getLoc(), getType(), g[0], getX(), /*erf=*/Value(),
                                      getApproximateAttr()),
                   grads);
}

LogicalResult WhereOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value zero = scalar(b, loc, 0.0, getType().getElementType());
  Value da = WhereOp::create(b, loc, getType(), getCond(), g[0], zero);
  Value db = WhereOp::create(b, loc, getType(), getCond(), zero, g[0]);
  grads.assign({Value(), reduceTo(b, loc, da, tt(getA())), reduceTo(b, loc, db, tt(getB()))});
  return success();
}

LogicalResult MaskedFillOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                     SmallVectorImpl<Value> &grads) {
  Value dx = MaskedFillOp::create(b, getLoc(), getType(), g[0], getMask(), b.getF64FloatAttr(0.0));
  return unaryGrad(*this, dx, grads);
}

LogicalResult ConvertOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  if (!isa<FloatType>(getX().getType().getElementType()))
    return unaryGrad(*this, Value(), grads);
  return unaryGrad(*this, ConvertOp::create(b, getLoc(), getX().getType(), g[0]), grads);
}

// The same mask (same rng and id) applied to the gradient.
LogicalResult DropoutOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Value dx = DropoutOp::create(b, getLoc(), getType(), g[0], getRng(), getPAttr(), getTrainAttr(),
                               getIdAttr());
  return unaryGrad(*this, dx, grads);
}

LogicalResult StopGradientOp::buildVjp(OpBuilder &, ArrayRef<Value>,
                                       SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, Value(), grads);
}

LogicalResult ConstantOp::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &grads) {
  grads.clear();
  return success();
}

LogicalResult ArangeOp::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &grads) {
  grads.clear();
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and the model ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  Value dw = EmbeddingGradOp::create(b, getLoc(), getWeight().getType(), g[0], getIndices());
  grads.assign({dw, Value()});
  return success();
}

// out = op(a) @ op(b) where op() transposes when the flag is set.
LogicalResult MatmulOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  if (hasEpilogue())
    return emitError("no gradient for a matmul with a fused epilogue (fusion runs after autodiff)");
  Location loc = getLoc();
  Value A = getLhs(), B = getRhs(), G = g[0];
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  auto mm = [&](Value x, Value y, bool tx, bool ty, RankedTensorType type) -> Value {
    return MatmulOp::create(b, loc, type, x, y, tx, ty);
  };
  bool sharedRhs = tt(B).getRank() == 2 && tt(A).getRank() > 2;
  if (ta && sharedRhs)
    return emitError("no gradient for a transposed batched lhs against a shared rhs");
  // dA: [.., M, K] = G @ op(B)^T, transposed back when ta.
  Value dA = ta ? mm(B, G, tb, true, tt(A)) : mm(G, B, false, !tb, tt(A));
  Value dB;
  if (!sharedRhs) {
    // [.., K, N] = op(A)^T @ G, or [.., N, K] = G^T @ op(A).
    dB = tb ? mm(G, A, true, ta, tt(B)) : mm(A, G, !ta, false, tt(B));
  } else {
    // A shared weight: fold the batch into the rows, one contraction over all tokens.
    int64_t k = tt(A).getShape().back(), n = tt(G).getShape().back();
    int64_t rows = tt(A).getNumElements() / k;
    Value A2 = reshape(b, loc, A, {rows, k}), G2 = reshape(b, loc, G, {rows, n});
    dB = tb ? mm(G2, A2, true, false, tt(B)) : mm(A2, G2, true, false, tt(B));
  }
  grads.assign({dA, dB});
  return success();
}

// dx from layer_norm_grad; dweight = sum over rows of g * xhat; dbias = sum of g.
LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  auto x = getX().getType();
  Value dx = LayerNormGradOp::create(b, loc, x, g[0], getX(), getWeight(), getEpsAttr(),
                                     getOrderAttr());
  grads.assign({dx, Value(), Value()});
  SmallVector<int64_t> rows;
  for (int64_t d = 0; d + 1 < x.getRank(); ++d)
    rows.push_back(d);
  auto vec = x.clone({x.getShape().back()});
  auto sumRows = [&](Value v) -> Value {
    return ReduceSumOp::create(b, loc, vec, v, b.getDenseI64ArrayAttr(rows), b.getBoolAttr(false),
                               canonical(b));
  };
  if (getWeight()) {
    Value xhat = LayerNormOp::create(b, loc, x, getX(), Value(), Value(), getEpsAttr(),
                                     getOrderAttr());
    grads[1] = sumRows(mul(b, loc, g[0], xhat));
  }
  if (getBias())
    grads[getWeight() ? 2 : 1] = sumRows(g[0]);
  return success();
}

// dx = y * (g - sum(g * y))
LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  SmallVector<int64_t> kept(getType().getShape());
  kept[getDim()] = 1;
  Value s = ReduceSumOp::create(b, loc, getType().clone(kept), mul(b, loc, g[0], getResult()),
                                b.getDenseI64ArrayAttr({(int64_t)getDim()}), b.getBoolAttr(true),
                                canonical(b));
  return unaryGrad(*this, mul(b, loc, getResult(), sub(b, loc, g[0], s)), grads);
}

// dx = the running sums of g the other way (PyTorch's reversed_cumsum); none for i64.
LogicalResult CumsumOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  if (!isa<FloatType>(getType().getElementType()))
    return unaryGrad(*this, Value(), grads);
  Value dx = CumsumOp::create(b, getLoc(), getType(), g[0], getDimAttr(),
                              b.getBoolAttr(!getReverse()), getOrderAttr());
  return unaryGrad(*this, dx, grads);
}

// dx = g - exp(y) * sum(g)
LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                     SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  SmallVector<int64_t> kept(getType().getShape());
  kept[getDim()] = 1;
  Value s = ReduceSumOp::create(b, loc, getType().clone(kept), g[0],
                                b.getDenseI64ArrayAttr({(int64_t)getDim()}), b.getBoolAttr(true),
                                canonical(b));
  Value p = ExpOp::create(b, loc, getType(), getResult());
  return unaryGrad(*this, sub(b, loc, g[0], mul(b, loc, p, s)), grads);
}

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  if (!g[0])
    return emitOpError("gpt-autodiff: no gradient reaches the attention output");
  Location loc = getLoc();
  auto grad = AttentionGradOp::create(b, loc, getQ().getType(), getK().getType(),
                                      getV().getType(), getQ(), getK(), getV(), g[0], getStats(),
                                      getRng(), getKeyMask(), getIsCausalAttr(),
                                      getDropoutPAttr(), getScaleAttr(), getIdAttr(),
                                      getOrderAttr(), getBthdAttr());
  grads.assign({grad.getDq(), grad.getDk(), grad.getDv()});
  if (getRng())
    grads.push_back(Value());
  if (getKeyMask())
    grads.push_back(Value());
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                       SmallVectorImpl<Value> &grads) {
  Value d = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), getLogits(),
                                       getTargets(), g[0], getIgnoreIndexAttr(), getOrderAttr());
  grads.assign({d, Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

/// g of a reduction, reshaped to keepdim form and broadcast back to x.
static Value expandReduced(OpBuilder &b, Location loc, Value g, RankedTensorType x,
                           ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(x.getShape());
  for (int64_t d : dims)
    kept[d] = 1;
  return broadcastTo(b, loc, reshape(b, loc, g, kept), x.getShape());
}

LogicalResult ReduceSumOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, expandReduced(b, getLoc(), g[0], getX().getType(), getDims()), grads);
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                     SmallVectorImpl<Value> &grads) {
  int64_t n = getX().getType().getNumElements() / std::max<int64_t>(getType().getNumElements(), 1);
  Value scaled = div(b, getLoc(), g[0], scalar(b, getLoc(), (double)n, getType().getElementType()));
  return unaryGrad(*this, expandReduced(b, getLoc(), scaled, getX().getType(), getDims()), grads);
}

// PyTorch's rule: g shared evenly among the elements equal to the maximum,
// (g / count) * mask with mask = (x == max) and count = sum(mask) over the reduced dims.
LogicalResult ReduceMaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  RankedTensorType x = getX().getType();
  SmallVector<int64_t> kept(x.getShape());
  for (int64_t d : getDims())
    kept[d] = 1;
  Value hit = CompareOp::create(b, loc, getX(), reshape(b, loc, getResult(), kept), ComparePredicate::eq);
  Value mask = ConvertOp::create(b, loc, x, hit);
  Value count = ReduceSumOp::create(b, loc, x.clone(kept), mask, getDimsAttr(),
                                    b.getBoolAttr(true), canonical(b));
  Value share = div(b, loc, reshape(b, loc, g[0], kept), count);
  return unaryGrad(*this, mul(b, loc, share, mask), grads);
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, reshape(b, getLoc(), g[0], getX().getType().getShape()), grads);
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  Value dx = TransposeOp::create(b, getLoc(), getX().getType(), g[0],
                                 b.getDenseI64ArrayAttr(inverse));
  return unaryGrad(*this, dx, grads);
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &grads) {
  return unaryGrad(*this, reduceTo(b, getLoc(), g[0], getX().getType()), grads);
}

/// Places `piece` at [start, start + size) of `dim` in zeros shaped `full`.
static Value padAlong(OpBuilder &b, Location loc, Value piece, RankedTensorType full, int64_t dim,
                      int64_t start) {
  SmallVector<Value> parts;
  int64_t size = tt(piece).getDimSize(dim), total = full.getDimSize(dim);
  auto zeros = [&](int64_t n) {
    SmallVector<int64_t> shape(full.getShape());
    shape[dim] = n;
    return zerosLike(b, loc, full.clone(shape));
  };
  if (start > 0)
    parts.push_back(zeros(start));
  parts.push_back(piece);
  if (start + size < total)
    parts.push_back(zeros(total - start - size));
  if (parts.size() == 1)
    return piece;
  return ConcatOp::create(b, loc, full, parts, b.getI64IntegerAttr(dim));
}

// dx: g's elements at start, start + step, ... along dim, zeros elsewhere. For a step > 1,
// g with step - 1 zeros after each element (a concat along a new dim after `dim`, merged
// back into it), cut where x ends, is the piece placed at `start` (GPT-J's x[..., ::2]).
LogicalResult SliceOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  int64_t dim = getDim(), step = getStep(), start = getStart();
  Value piece = g[0];
  if (step != 1) {
    auto gt = tt(g[0]);
    int64_t n = gt.getDimSize(dim);
    SmallVector<int64_t> one(gt.getShape()), gaps, spread(gt.getShape());
    one.insert(one.begin() + dim + 1, 1);
    gaps = one;
    gaps[dim + 1] = step - 1;
    SmallVector<int64_t> both = one;
    both[dim + 1] = step;
    Value column = ReshapeOp::create(b, loc, gt.clone(one), g[0]);
    Value interleaved = ConcatOp::create(b, loc, gt.clone(both),
                                         ValueRange{column, zerosLike(b, loc, gt.clone(gaps))},
                                         b.getI64IntegerAttr(dim + 1));
    spread[dim] = n * step;
    piece = ReshapeOp::create(b, loc, gt.clone(spread), interleaved);
    if (int64_t room = getX().getType().getDimSize(dim) - start; room < n * step) {
      spread[dim] = room;
      piece = SliceOp::create(b, loc, gt.clone(spread), piece, b.getI64IntegerAttr(dim),
                              b.getI64IntegerAttr(0), b.getI64IntegerAttr(room),
                              b.getI64IntegerAttr(1));
    }
  }
  return unaryGrad(*this, padAlong(b, loc, piece, getX().getType(), dim, start), grads);
}

LogicalResult SplitOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  SmallVector<Value> parts;
  for (auto [r, gr] : llvm::zip(getResults(), g))
    parts.push_back(gr ? gr : zerosLike(b, getLoc(), tt(r)));
  Value dx = ConcatOp::create(b, getLoc(), getX().getType(), parts, getDimAttr());
  return unaryGrad(*this, dx, grads);
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, ArrayRef<Value> g, SmallVectorImpl<Value> &grads) {
  grads.clear();
  int64_t start = 0, dim = getDim();
  for (Value in : getInputs()) {
    int64_t size = tt(in).getDimSize(dim);
    grads.push_back(SliceOp::create(b, getLoc(), tt(in), g[0], getDimAttr(),
                                    b.getI64IntegerAttr(start), b.getI64IntegerAttr(start + size),
                                    b.getI64IntegerAttr(1)));
    start += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops have no gradient of their own (no second derivatives).
//===----------------------------------------------------------------------===//

#define GPT_NO_VJP(Op)                                                                             \
  LogicalResult Op::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {            \
    return noGradient(*this);                                                                      \
  }
GPT_NO_VJP(GeluGradOp)
GPT_NO_VJP(GeluKeepErfOp)
GPT_NO_VJP(LayerNormGradOp)
GPT_NO_VJP(AttentionGradOp)
GPT_NO_VJP(CrossEntropyGradOp)
GPT_NO_VJP(EmbeddingGradOp)
GPT_NO_VJP(FusedOp)
GPT_NO_VJP(HorizontalOp)
#undef GPT_NO_VJP
