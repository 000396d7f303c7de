//===- NormalizationPatterns.cpp - aten norms, softmax, loss, reductions --===//
//
// layer_norm, softmax/log_softmax, cross_entropy_loss, dropout and the
// sum/mean/amax reductions. Each gets its canonical reduction order here.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

using namespace mlir;
using namespace mlir::gpt;

namespace {

ReductionOrderAttr canonical(OpBuilder &b) { return orderAttr(b, ReductionOrder::Canonical); }

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
  auto xt = cast<RankedTensorType>(x.getType());
  x = convertElementType(b, op.loc(), x, type.getElementType());
  SmallVector<int64_t> dims;
  if (auto given = op.getInts("dim"); given && !given->empty()) {
    for (int64_t d : *given) {
      auto i = op.dimIndex(d, xt.getRank());
      if (failed(i))
        return failure();
      dims.push_back(*i);
    }
    llvm::sort(dims);
  } else {
    for (int64_t d = 0; d < xt.getRank(); ++d)
      dims.push_back(d);
  }
  out.push_back(Op::create(b, op.loc(), type, x, b.getDenseI64ArrayAttr(dims),
                           b.getBoolAttr(op.getBool("keepdim").value_or(false)), canonical(b)));
  return success();
}

} // namespace

void mlir::gpt::populateNormalizationPatterns(AtenConverterTable &t) {
  t["aten.layer_norm.default"] = convertLayerNorm;
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
}
