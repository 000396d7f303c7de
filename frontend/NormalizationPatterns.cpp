//===- NormalizationPatterns.cpp - aten norms, softmax, loss, reductions --===//
//
// layer_norm, rms_norm (composed), softmax/log_softmax, cross_entropy_loss, dropout, the
// sum/mean/amax reductions, cumsum, logsumexp, var and std (composed). Each gets its canonical reduction order here.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include <limits>

using namespace mlir;
using namespace mlir::gpt;

namespace {

ReductionOrderAttr canonical(OpBuilder &b) { return orderAttr(b, ReductionOrder::Canonical); }

/// A reduction's `dim` argument as sorted indices into `rank` dimensions; all of them where
/// it is absent or empty, as in PyTorch.
FailureOr<SmallVector<int64_t>> reducedDims(AtenOp &op, int64_t rank) {
  SmallVector<int64_t> dims;
  for (int64_t d : op.getInts("dim").value_or(SmallVector<int64_t>{})) {
    if (rank == 0 && (d == 0 || d == -1))
      continue; // PyTorch takes dim 0 (or -1) of a scalar as the scalar itself
    auto i = op.dimIndex(d, rank);
    if (failed(i))
      return failure();
    dims.push_back(*i);
  }
  if (dims.empty())
    dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  llvm::sort(dims);
  return dims;
}

/// `type` with the reduced `dims` kept as 1 (keepdim's shape).
RankedTensorType keptType(RankedTensorType type, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(type.getShape());
  for (int64_t d : dims)
    kept[d] = 1;
  return type.clone(kept);
}


LogicalResult convertLayerNorm(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"input"})))
    return failure();
  Value x = op.operand("input");
  auto xt = cast<RankedTensorType>(x.getType());
  auto shape = op.getInts("normalized_shape");
  if (!shape || shape->size() != 1 || xt.getRank() == 0 || (*shape)[0] != xt.getShape().back())
    return op.unsupported("only normalization over the last dimension");
  out.push_back(LayerNormOp::create(b, op.loc(), op.resultType(), x, op.operand("weight"),
                                    op.operand("bias"),
                                    b.getF64FloatAttr(op.getFloat("eps").value_or(1e-5)),
                                    canonical(b)));
  return success();
}

/// rms_norm(x, normalized_shape, weight, eps) = x * rsqrt(mean(x * x) + eps) [* weight], the
/// mean over the normalized (last) dimensions, as PyTorch composes it; eps defaults to the
/// element type's machine epsilon.
LogicalResult convertRmsNorm(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"input"})))
    return failure();
  RankedTensorType type = op.resultType();
  auto elem = dyn_cast<FloatType>(type.getElementType());
  if (!elem)
    return op.unsupported("needs a floating-point tensor");
  Value x = convertElementType(b, op.loc(), op.operand("input"), elem);
  auto xt = cast<RankedTensorType>(x.getType());
  auto shape = op.getInts("normalized_shape");
  int64_t n = shape ? (int64_t)shape->size() : 0, rank = xt.getRank();
  if (n == 0 || n > rank || ArrayRef<int64_t>(*shape) != xt.getShape().take_back(n))
    return op.unsupported("normalized_shape must be the input's last dimensions");
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(rank - n, rank));
  Location loc = op.loc();
  auto scalar = RankedTensorType::get({}, elem);
  double eps = op.getFloat("eps").value_or(
      elem.isF64() ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon());
  // The mean as gpt.reduce_mean computes it (the sum, then one division), written out so
  // that the squares fuse into the sum and the division into the rsqrt's kernel.
  int64_t count = 1;
  for (int64_t d : dims)
    count *= xt.getDimSize(d);
  auto kt = keptType(xt, dims);
  Value sq = MulOp::create(b, loc, xt, x, x);
  Value sum = ReduceSumOp::create(b, loc, kt, sq, b.getDenseI64ArrayAttr(dims), b.getBoolAttr(true),
                                  canonical(b));
  Value ms = DivOp::create(b, loc, kt, sum, splat(b, loc, scalar, (double)count));
  Value r = RsqrtOp::create(b, loc, kt, AddOp::create(b, loc, kt, ms, splat(b, loc, scalar, eps)));
  Value y = MulOp::create(b, loc, xt, x, r);
  if (Value w = op.operand("weight"))
    y = MulOp::create(b, loc, xt, y, convertElementType(b, loc, w, elem));
  out.push_back(y);
  return success();
}

template <typename Op> LogicalResult convertSoftmax(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  RankedTensorType type = op.resultType();
  if (op.getBool("half_to_float").value_or(false))
    return op.unsupported("half_to_float is not supported");
  x = convertElementType(b, op.loc(), x, type.getElementType());
  auto dim = op.dimIndex(op.getInt("dim").value_or(-1), type.getRank());
  if (failed(dim))
    return failure();
  out.push_back(Op::create(b, op.loc(), type, x, b.getI64IntegerAttr(*dim), canonical(b)));
  return success();
}

LogicalResult convertCrossEntropy(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value logits = op.operand("self"), targets = op.operand("target");
  if (op.operand("weight"))
    return op.unsupported("class weights are not supported");
  if (op.getInt("reduction").value_or(1) != 1)
    return op.unsupported("only reduction='mean' is supported");
  if (op.getFloat("label_smoothing").value_or(0.0) != 0.0)
    return op.unsupported("label_smoothing is not supported");
  auto lt = cast<RankedTensorType>(logits.getType());
  if (lt.getRank() != 2 || !targets || cast<RankedTensorType>(targets.getType()).getRank() != 1)
    return op.unsupported("needs logits [N, V] and class-index targets [N]");
  out.push_back(CrossEntropyOp::create(b, op.loc(), op.resultType(), logits, targets,
                                       b.getI64IntegerAttr(op.getInt("ignore_index").value_or(-100)),
                                       canonical(b)));
  return success();
}

LogicalResult convertDropout(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"input"})))
    return failure();
  double p = op.getFloat("p").value_or(0.5);
  bool train = op.getBool("train").value_or(true);
  Value rng = train && p > 0.0 ? op.rngArgument() : Value();
  out.push_back(DropoutOp::create(b, op.loc(), op.resultType(), op.operand("input"), rng,
                                  b.getF64FloatAttr(p), b.getBoolAttr(train),
                                  b.getI64IntegerAttr(0)));
  return success();
}

template <typename Op> LogicalResult convertReduce(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  Value x = op.operand("self");
  RankedTensorType type = op.resultType();
  if (!isa<FloatType>(type.getElementType()))
    return op.unsupported("integer and bool reductions are not supported");
  x = convertElementType(b, op.loc(), x, type.getElementType());
  auto dims = reducedDims(op, cast<RankedTensorType>(x.getType()).getRank());
  if (failed(dims))
    return failure();
  out.push_back(Op::create(b, op.loc(), type, x, b.getDenseI64ArrayAttr(*dims),
                           b.getBoolAttr(op.getBool("keepdim").value_or(false)), canonical(b)));
  return success();
}

/// logsumexp(x, dims) = log(sum(exp(x - m))) + m, m the maximum over dims (0 where it is
/// infinite), as PyTorch computes it. m goes through gpt.stop_gradient: its terms cancel,
/// and the gradient is softmax(x) * g.
LogicalResult convertLogSumExp(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  RankedTensorType type = op.resultType(), xt = cast<RankedTensorType>(x->getType());
  auto dims = reducedDims(op, xt.getRank());
  if (failed(dims))
    return failure();
  Type elem = type.getElementType();
  Location loc = op.loc();
  auto kt = keptType(xt, *dims), scalar = RankedTensorType::get({}, elem);
  auto dimsAttr = b.getDenseI64ArrayAttr(*dims);
  Value m = ReduceMaxOp::create(b, loc, kt, *x, dimsAttr, b.getBoolAttr(true), canonical(b));
  Value inf = splat(b, loc, scalar, std::numeric_limits<double>::infinity());
  Value infinite = CompareOp::create(b, loc, AbsOp::create(b, loc, kt, m), inf, ComparePredicate::eq);
  m = WhereOp::create(b, loc, kt, infinite, splat(b, loc, scalar, 0.0), m);
  m = StopGradientOp::create(b, loc, kt, m);
  Value e = ExpOp::create(b, loc, xt, SubOp::create(b, loc, xt, *x, m));
  Value sum = ReduceSumOp::create(b, loc, kt, e, dimsAttr, b.getBoolAttr(true), canonical(b));
  Value r = AddOp::create(b, loc, kt, LogOp::create(b, loc, kt, sum), m);
  if (kt != type)
    r = ReshapeOp::create(b, loc, type, r);
  out.push_back(r);
  return success();
}

/// var and std: sum((x - mean)^2) / max(n - correction, 0) over dims (two passes, each a
/// canonical sum), then sqrt for std. correction defaults to 1 (unbiased=True).
template <bool Std> LogicalResult convertVariance(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  auto x = floatSelf(op, b);
  if (failed(x))
    return failure();
  RankedTensorType type = op.resultType(), xt = cast<RankedTensorType>(x->getType());
  auto dims = reducedDims(op, xt.getRank());
  if (failed(dims))
    return failure();
  double correction = op.getFloat("correction").value_or(op.getBool("unbiased").value_or(true));
  int64_t n = 1;
  for (int64_t d : *dims)
    n *= xt.getDimSize(d);
  Location loc = op.loc();
  auto kt = keptType(xt, *dims), scalar = RankedTensorType::get({}, type.getElementType());
  auto sum = [&](Value v) {
    return ReduceSumOp::create(b, loc, kt, v, b.getDenseI64ArrayAttr(*dims), b.getBoolAttr(true),
                               canonical(b));
  };
  Value mean = DivOp::create(b, loc, kt, sum(*x), splat(b, loc, scalar, (double)n));
  Value d = SubOp::create(b, loc, xt, *x, mean);
  Value r = DivOp::create(b, loc, kt, sum(MulOp::create(b, loc, xt, d, d)),
                          splat(b, loc, scalar, std::max(0.0, n - correction)));
  if (Std) {
    // sqrt with PyTorch's gradient where the deviation is 0 (0, not g / 0): the root of 1
    // there, replaced by 0, so that no gradient reaches the zero.
    Value zero = CompareOp::create(b, loc, r, splat(b, loc, scalar, 0.0), ComparePredicate::eq);
    Value safe = WhereOp::create(b, loc, kt, zero, splat(b, loc, scalar, 1.0), r);
    r = WhereOp::create(b, loc, kt, zero, splat(b, loc, scalar, 0.0),
                        SqrtOp::create(b, loc, kt, safe));
  }
  if (kt != type)
    r = ReshapeOp::create(b, loc, type, r);
  out.push_back(r);
  return success();
}

/// cumsum(self, dim, dtype): self in the result's type (a bool or integer tensor's sums are
/// i64, as PyTorch promotes them), then gpt.cumsum; a scalar is its own sum.
LogicalResult convertCumsum(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  if (failed(op.require({"self"})))
    return failure();
  RankedTensorType type = op.resultType();
  Type elem = type.getElementType();
  if (!elem.isF32() && !elem.isF64() && !elem.isInteger(64))
    return op.unsupported("sums of f32, f64 or i64 only");
  Value x = convertElementType(b, op.loc(), op.operand("self"), elem);
  if (type.getRank() == 0) {
    out.push_back(x);
    return success();
  }
  auto dim = op.dimIndex(op.getInt("dim").value_or(0), type.getRank());
  if (failed(dim))
    return failure();
  out.push_back(CumsumOp::create(b, op.loc(), type, x, b.getI64IntegerAttr(*dim),
                                 b.getBoolAttr(false), orderAttr(b, ReductionOrder::Sequential)));
  return success();
}

} // namespace

void mlir::gpt::populateNormalizationPatterns(AtenConverterTable &t) {
  t["aten.layer_norm.default"] = convertLayerNorm;
  t["aten.rms_norm.default"] = convertRmsNorm;
  t["aten.softmax.int"] = convertSoftmax<SoftmaxOp>;
  t["aten._softmax.default"] = convertSoftmax<SoftmaxOp>;
  t["aten.log_softmax.int"] = convertSoftmax<LogSoftmaxOp>;
  t["aten._log_softmax.default"] = convertSoftmax<LogSoftmaxOp>;
  t["aten.cross_entropy_loss.default"] = convertCrossEntropy;
  t["aten.dropout.default"] = convertDropout;
  t["aten.sum.dim_IntList"] = convertReduce<ReduceSumOp>;
  t["aten.sum.default"] = convertReduce<ReduceSumOp>;
  t["aten.mean.dim"] = convertReduce<ReduceMeanOp>;
  t["aten.mean.default"] = convertReduce<ReduceMeanOp>;
  t["aten.amax.default"] = convertReduce<ReduceMaxOp>;
  t["aten.logsumexp.default"] = convertLogSumExp;
  t["aten.cumsum.default"] = convertCumsum;
  for (StringRef n : {"aten.var.default", "aten.var.dim", "aten.var.correction"})
    t[n] = convertVariance<false>;
  for (StringRef n : {"aten.std.default", "aten.std.dim", "aten.std.correction"})
    t[n] = convertVariance<true>;
}
