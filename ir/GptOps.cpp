//===- GptOps.cpp - gpt op verifiers and folders --------------------------===//
//
// Every verifier checks shapes and element types completely: a module that
// verifies is one the code generator can lower without further checks.
//
//===----------------------------------------------------------------------===//
#include "ir/GptDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::gpt;

FailureOr<SmallVector<int64_t>> mlir::gpt::broadcastShapes(ArrayRef<int64_t> a,
                                                          ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") + std::to_string(d);
  return s + "]";
}

/// `value` must broadcast to `shape` (numpy rules).
static bool broadcastsTo(ArrayRef<int64_t> value, ArrayRef<int64_t> shape) {
  auto b = broadcastShapes(value, shape);
  return succeeded(b) && ArrayRef<int64_t>(*b) == shape;
}

static LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError("dim ") << dim << " out of range for rank " << rank;
  return success();
}

static LogicalResult verifyReductionOrder(Operation *op, ReductionOrder order,
                                          ReductionOrder expected) {
  if (order != expected)
    return op->emitOpError("supports only reduction order '")
           << stringifyReductionOrder(expected) << "'";
  return success();
}

//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  // The code generator writes out dense values; a sparse or resource value (whose blob may
  // not even be present) was written as zeros or garbage.
  if (!isa<DenseElementsAttr>(getValue()))
    return emitOpError("value must be dense<...> (gptc writes out dense values only)");
  if (getValue().getType() != getType())
    return emitOpError("value type ") << getValue().getType() << " differs from result type "
                                      << getType();
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                           ValueRange, DictionaryAttr attrs, OpaqueProperties props,
                                           RegionRange, SmallVectorImpl<Type> &types) {
  auto value = Adaptor(ValueRange(), attrs, props).getValueAttr();
  if (!value)
    return failure();
  types.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ArangeOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("result must be 1-D");
  return success();
}

/// lhs and rhs broadcast to the result, sharing an element type (the result's too, unless
/// `resultElem` is false: gpt.compare's is i1).
template <typename Op> static LogicalResult verifyBinary(Op op, bool resultElem = true) {
  auto lhs = tensorType(op.getLhs()), rhs = tensorType(op.getRhs());
  auto res = cast<RankedTensorType>(op.getType());
  if (lhs.getElementType() != rhs.getElementType() ||
      (resultElem && lhs.getElementType() != res.getElementType()))
    return op.emitOpError(resultElem ? "operands and result must share an element type"
                                     : "operands must share an element type");
  auto shape = broadcastShapes(lhs.getShape(), rhs.getShape());
  if (failed(shape))
    return op.emitOpError("operand shapes ")
           << shapeStr(lhs.getShape()) << " and " << shapeStr(rhs.getShape())
           << " do not broadcast";
  if (ArrayRef<int64_t>(*shape) != res.getShape())
    return op.emitOpError("result shape ") << shapeStr(res.getShape())
                                           << " is not the broadcast shape " << shapeStr(*shape);
  return success();
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
/// Integer division by zero (or INT64_MIN / -1) ends the process; the models gptc
/// compiles divide and raise floats only.
template <typename Op> static LogicalResult verifyFloatBinary(Op op) {
  if (!isa<FloatType>(tensorType(op.getLhs()).getElementType()))
    return op.emitOpError("takes floating-point operands, got ") << op.getLhs().getType();
  return verifyBinary(op);
}
LogicalResult DivOp::verify() { return verifyFloatBinary(*this); }
LogicalResult PowOp::verify() { return verifyFloatBinary(*this); }
LogicalResult MaxOp::verify() { return verifyBinary(*this); }
LogicalResult MinOp::verify() { return verifyBinary(*this); }

LogicalResult CompareOp::verify() { return verifyBinary(*this, /*resultElem=*/false); }

LogicalResult WhereOp::verify() {
  auto res = getType();
  if (tensorType(getA()).getElementType() != res.getElementType() ||
      tensorType(getB()).getElementType() != res.getElementType())
    return emitOpError("values and result must share an element type");
  for (Value v : {getCond(), getA(), getB()})
    if (!broadcastsTo(tensorType(v).getShape(), res.getShape()))
      return emitOpError("operand shape ")
             << shapeStr(tensorType(v).getShape()) << " does not broadcast to "
             << shapeStr(res.getShape());
  return success();
}

LogicalResult MaskedFillOp::verify() {
  if (getX().getType() != getType())
    return emitOpError("result type must equal the input type");
  if (!broadcastsTo(getMask().getType().getShape(), getType().getShape()))
    return emitOpError("mask shape does not broadcast to the input shape");
  return success();
}

LogicalResult ConvertOp::verify() {
  if (getX().getType().getShape() != getType().getShape())
    return emitOpError("shape must not change");
  return success();
}

static LogicalResult verifyRng(Operation *op, Value rng, bool needed) {
  if (needed && !rng)
    return op->emitOpError("needs an rng operand ([seed, step]) when it drops anything");
  if (rng && cast<RankedTensorType>(rng.getType()).getShape() != ArrayRef<int64_t>{2})
    return op->emitOpError("rng must be tensor<2xi64> ([seed, step])");
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError("p must be in [0, 1), got ") << p;
  if (getX().getType() != getType())
    return emitOpError("result type must equal the input type");
  return verifyRng(*this, getRng(), getTrain() && p > 0.0);
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (!getTrain() || getP().isZero())
    return getX();
  return {};
}

LogicalResult EmbeddingOp::verify() {
  auto w = getWeight().getType(), idx = getIndices().getType(), res = getType();
  if (w.getRank() != 2)
    return emitOpError("weight must be 2-D [V, C]");
  SmallVector<int64_t> expect(idx.getShape());
  expect.push_back(w.getDimSize(1));
  if (res.getShape() != ArrayRef<int64_t>(expect) || res.getElementType() != w.getElementType())
    return emitOpError("result must be ") << shapeStr(expect) << " of the weight's element type";
  return success();
}

LogicalResult MatmulOp::verify() {
  auto a = getLhs().getType(), b = getRhs().getType(), r = getType();
  if (a.getElementType() != b.getElementType() || a.getElementType() != r.getElementType())
    return emitOpError("operands and result must share an element type");
  if (a.getRank() < 2 || b.getRank() < 2)
    return emitOpError("operands must be at least 2-D");
  if (b.getRank() != 2 && b.getRank() != a.getRank())
    return emitOpError("rhs must be 2-D or have the lhs's rank");
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Sequential)))
    return failure();
  int64_t ra = a.getRank(), rb = b.getRank();
  int64_t m = getTransposeLhs() ? a.getDimSize(ra - 1) : a.getDimSize(ra - 2);
  int64_t ka = getTransposeLhs() ? a.getDimSize(ra - 2) : a.getDimSize(ra - 1);
  int64_t kb = getTransposeRhs() ? b.getDimSize(rb - 1) : b.getDimSize(rb - 2);
  int64_t n = getTransposeRhs() ? b.getDimSize(rb - 2) : b.getDimSize(rb - 1);
  if (ka != kb)
    return emitOpError("contraction sizes differ: ") << ka << " vs " << kb;
  if (rb != 2 && a.getShape().drop_back(2) != b.getShape().drop_back(2))
    return emitOpError("batch dimensions differ");
  SmallVector<int64_t> expect(a.getShape().drop_back(2));
  expect.push_back(m);
  expect.push_back(n);
  if (r.getShape() != ArrayRef<int64_t>(expect))
    return emitOpError("result shape ") << shapeStr(r.getShape()) << " should be "
                                        << shapeStr(expect);
  if (getAddend() && getAddend().getType() != r)
    return emitOpError("addend must have the result's type");
  if (Value bias = getBias()) {
    auto bt = cast<RankedTensorType>(bias.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != n || bt.getElementType() != r.getElementType())
      return emitOpError("bias must be [") << n << "] of the result's element type";
  }
  if (getGeluX() && getGeluX().getType() != r)
    return emitOpError("gelu_grad's x must have the result's type");
  if (getGeluApproximate().has_value() != (bool)getGeluX())
    return emitOpError("gelu_grad needs both x and gelu_approximate");
  if (getGeluErf() && (getGeluErf().getType() != r || !getGeluX() ||
                       *getGeluApproximate() != GeluApproximation::none))
    return emitOpError("erf takes an exact gelu_grad's x, of the result's type");
  if (getDropoutP().has_value() != (bool)getRng() || getDropoutId().has_value() != (bool)getRng())
    return emitOpError("dropout needs all of rng, dropout_p and dropout_id");
  if (getRng()) {
    double p = getDropoutP()->convertToDouble();
    if (!(p > 0.0 && p < 1.0))
      return emitOpError("dropout_p must be in (0, 1), got ") << p;
    return verifyRng(*this, getRng(), true);
  }
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto x = getX().getType();
  if (getType() != x)
    return emitOpError("result type must equal the input type");
  if (x.getRank() == 0)
    return emitOpError("normalizes the last dimension: x must have one");
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Canonical)))
    return failure();
  for (Value v : {getWeight(), getBias()}) {
    if (!v)
      continue;
    auto t = tensorType(v);
    if (t.getRank() != 1 || t.getDimSize(0) != x.getShape().back() ||
        t.getElementType() != x.getElementType())
      return emitOpError("weight and bias must be [") << x.getShape().back() << "] of "
                                                      << x.getElementType();
  }
  return success();
}

template <typename Op> static LogicalResult verifySoftmaxLike(Op op) {
  if (failed(verifyReductionOrder(op, op.getOrder(), ReductionOrder::Canonical)))
    return failure();
  return verifyDim(op, op.getDim(), op.getType().getRank());
}
LogicalResult SoftmaxOp::verify() { return verifySoftmaxLike(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxLike(*this); }

LogicalResult CumsumOp::verify() {
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Sequential)))
    return failure();
  return verifyDim(*this, getDim(), getType().getRank());
}

/// A [B, T, H, D] shape as [B, H, T, D] (attention's `bthd` layout).
static SmallVector<int64_t> headsOuter(ArrayRef<int64_t> s, bool bthd) {
  if (!bthd || s.size() != 4)
    return SmallVector<int64_t>(s);
  return {s[0], s[2], s[1], s[3]};
}

RankedTensorType AttentionOp::statsType(RankedTensorType qHeadsOuter) {
  SmallVector<int64_t> shape(qHeadsOuter.getShape().take_front(3));
  shape.push_back(2);
  return RankedTensorType::get(shape, qHeadsOuter.getElementType());
}

/// Attention's per-row statistics: AttentionOp::statsType (heads outer whatever the
/// layout); `q` is already heads outer.
static LogicalResult verifyStats(Operation *op, RankedTensorType stats, RankedTensorType q) {
  RankedTensorType expect = AttentionOp::statsType(q);
  if (stats != expect)
    return op->emitOpError("stats must be ") << shapeStr(expect.getShape())
                                             << " of q's element type";
  return success();
}

/// q, k and v of an attention (or its gradient) heads outer, whatever each one's layout
/// (`bthd`: 4 entries, q, k, v and the result, when present); failure, reported, when
/// their ranks or shapes do not agree.
static FailureOr<std::array<SmallVector<int64_t>, 3>>
attentionHeadsOuter(Operation *op, std::optional<ArrayRef<bool>> bthd, Value q, Value k,
                    Value v) {
  if (bthd && bthd->size() != 4)
    return op->emitOpError("bthd must have 4 entries: q, k, v and the result");
  std::array<Value, 3> in = {q, k, v};
  std::array<SmallVector<int64_t>, 3> s;
  for (int i = 0; i < 3; ++i) {
    auto t = cast<RankedTensorType>(in[i].getType());
    if (t.getRank() != 4)
      return op->emitOpError("q, k and v must be 4-D [B, H, T, D]");
    s[i] = headsOuter(t.getShape(), bthd && (*bthd)[i]);
  }
  // k and v share their heads, Hkv of them, which divide q's H (grouped-query attention).
  if (s[0][0] != s[1][0] || s[1][1] < 1 || s[0][1] % s[1][1] != 0 ||
      ArrayRef(s[1]).take_front(3) != ArrayRef(s[2]).take_front(3) || s[0][3] != s[1][3])
    return op->emitOpError("q, k, v shapes (heads outer) ")
           << shapeStr(s[0]) << ", " << shapeStr(s[1]) << ", " << shapeStr(s[2])
           << " do not agree";
  return s;
}

/// key_mask, when present, is [B, S]: q's batch and k's keys (heads outer `q`, `k`).
static LogicalResult verifyKeyMask(Operation *op, Value mask, ArrayRef<int64_t> q,
                                   ArrayRef<int64_t> k) {
  if (!mask)
    return success();
  SmallVector<int64_t> expect = {q[0], k[2]};
  if (cast<RankedTensorType>(mask.getType()).getShape() != ArrayRef<int64_t>(expect))
    return op->emitOpError("key_mask must be ") << shapeStr(expect) << " (batch, keys)";
  return success();
}

LogicalResult AttentionOp::verify() {
  auto s = attentionHeadsOuter(*this, getBthd(), getQ(), getK(), getV());
  if (failed(s))
    return failure();
  auto &[q, k, v] = *s;
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::OnlineBlock32)))
    return failure();
  SmallVector<int64_t> expect(ArrayRef<int64_t>(q).take_front(3));
  expect.push_back(v[3]);
  if (headsOuter(getResult().getType().getShape(), bthdAt(3)) != expect)
    return emitOpError("result must be ") << shapeStr(headsOuter(expect, bthdAt(3)));
  if (failed(verifyStats(*this, getStats().getType(), getQ().getType().clone(q))))
    return failure();
  double p = getDropoutP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError("dropout_p must be in [0, 1)");
  if (failed(verifyKeyMask(*this, getKeyMask(), q, k)))
    return failure();
  return verifyRng(*this, getRng(), p > 0.0);
}

namespace {
/// A transpose swapping dims 1 and 2 into attention (of q, k or v) or out of it (its
/// result's one reader) is that operand or the result in the `bthd` layout: the
/// transpose's copy goes. Each operand on its own: nanoGPT transposes all four, a LLaMA
/// block computes q and k by its rotary embeddings and transposes only v and the result.
struct FoldAttentionTransposes : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool swaps12(TransposeOp t) {
    return t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3};
  }

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    SmallVector<bool> layout;
    for (unsigned i = 0; i < 4; ++i)
      layout.push_back(op.bthdAt(i));
    SmallVector<Value> in = {op.getQ(), op.getK(), op.getV()};
    bool folded = false;
    for (unsigned i = 0; i < 3; ++i)
      if (auto t = in[i].getDefiningOp<TransposeOp>(); !layout[i] && swaps12(t)) {
        in[i] = t.getX();
        layout[i] = folded = true;
      }
    TransposeOp out;
    if (!layout[3] && op.getResult().hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*op.getResult().getUsers().begin()); swaps12(t)) {
        out = t;
        layout[3] = folded = true;
      }
    if (!folded)
      return failure();
    auto attention = AttentionOp::create(
        rewriter, op.getLoc(), out ? out.getType() : op.getResult().getType(),
        op.getStats().getType(), in[0], in[1], in[2], op.getRng(), op.getKeyMask(),
        op.getIsCausalAttr(),
        op.getDropoutPAttr(), op.getScaleAttr(), op.getIdAttr(), op.getOrderAttr(),
        rewriter.getDenseBoolArrayAttr(layout));
    if (out)
      rewriter.replaceOp(out, attention.getResult());
    else
      rewriter.replaceAllUsesWith(op.getResult(), attention.getResult());
    rewriter.replaceAllUsesWith(op.getStats(), attention.getStats());
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<FoldAttentionTransposes>(ctx);
}

LogicalResult GeluGradOp::verify() {
  if (getG().getType() != getX().getType() || getType() != getX().getType())
    return emitOpError("g, x and result must have one type");
  if (getErf() &&
      (getApproximate() != GeluApproximation::none || getErf().getType() != getX().getType()))
    return emitOpError("an erf operand needs approximate = #gpt.approximate<none> and x's type");
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto x = getX().getType();
  if (getG().getType() != x || getType() != x)
    return emitOpError("g, x and result must have one type");
  if (x.getRank() == 0)
    return emitOpError("normalizes the last dimension: x must have one");
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Canonical)))
    return failure();
  if (Value w = getWeight()) {
    auto t = tensorType(w);
    if (t.getRank() != 1 || t.getDimSize(0) != x.getShape().back())
      return emitOpError("weight must be [") << x.getShape().back() << "]";
  }
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::OnlineBlock32)))
    return failure();
  auto s = attentionHeadsOuter(*this, getBthd(), getQ(), getK(), getV());
  if (failed(s))
    return failure();
  auto &[q, k, v] = *s;
  if (getDq().getType() != getQ().getType() || getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("gradients must have the types of q, k and v");
  SmallVector<int64_t> out(ArrayRef<int64_t>(q).take_front(3));
  out.push_back(v[3]);
  if (headsOuter(getG().getType().getShape(), bthdAt(3)) != out)
    return emitOpError("g must have the attention output's shape");
  if (failed(verifyStats(*this, getStats().getType(), getQ().getType().clone(q))))
    return failure();
  if (failed(verifyKeyMask(*this, getKeyMask(), q, k)))
    return failure();
  return verifyRng(*this, getRng(), getDropoutP().convertToDouble() > 0.0);
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Canonical)))
    return failure();
  if (getType() != getLogits().getType())
    return emitOpError("result must have the logits' type");
  if (getG().getType().getRank() != 0)
    return emitOpError("g must be a scalar");
  auto l = getLogits().getType(), t = getTargets().getType();
  if (l.getRank() != 2 || t.getRank() != 1 || t.getDimSize(0) != l.getDimSize(0))
    return emitOpError("logits must be [N, V] and targets [N]");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto g = getG().getType(), idx = getIndices().getType(), r = getType();
  SmallVector<int64_t> expect(idx.getShape());
  if (r.getRank() != 2)
    return emitOpError("result must be [V, C]");
  expect.push_back(r.getDimSize(1));
  if (g.getShape() != ArrayRef<int64_t>(expect))
    return emitOpError("g must be ") << shapeStr(expect);
  if (g.getElementType() != r.getElementType())
    return emitOpError("g and result must share an element type");
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto l = getLogits().getType(), t = getTargets().getType(), r = getType();
  if (failed(verifyReductionOrder(*this, getOrder(), ReductionOrder::Canonical)))
    return failure();
  if (l.getRank() != 2 || t.getRank() != 1 || t.getDimSize(0) != l.getDimSize(0))
    return emitOpError("expects logits [N, V] and targets [N], got ")
           << shapeStr(l.getShape()) << " and " << shapeStr(t.getShape());
  if (r.getRank() != 0 || r.getElementType() != l.getElementType())
    return emitOpError("result must be a scalar of the logits' element type");
  return success();
}

template <typename Op> static LogicalResult verifyReduce(Op op) {
  auto x = op.getX().getType();
  if (failed(verifyReductionOrder(op, op.getOrder(), ReductionOrder::Canonical)))
    return failure();
  SmallVector<bool> reduced(x.getRank(), false);
  for (int64_t d : op.getDims()) {
    if (failed(verifyDim(op, d, x.getRank())))
      return failure();
    if (reduced[d])
      return op.emitOpError("dim ") << d << " listed twice";
    reduced[d] = true;
  }
  SmallVector<int64_t> expect;
  for (int64_t i = 0; i < x.getRank(); ++i)
    if (!reduced[i])
      expect.push_back(x.getDimSize(i));
    else if (op.getKeepdim())
      expect.push_back(1);
  if (op.getType().getShape() != ArrayRef<int64_t>(expect) ||
      op.getType().getElementType() != x.getElementType())
    return op.emitOpError("result shape should be ") << shapeStr(expect);
  return success();
}
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

LogicalResult ReshapeOp::verify() {
  auto x = getX().getType(), r = getType();
  if (x.getElementType() != r.getElementType())
    return emitOpError("element type must not change");
  if (x.getNumElements() != r.getNumElements())
    return emitOpError("cannot reshape ") << shapeStr(x.getShape()) << " ("
                                          << x.getNumElements() << " elements) to "
                                          << shapeStr(r.getShape()) << " ("
                                          << r.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

namespace {
/// reshape(reduce_sum(x) {keepdim = false}) to the kept shape is reduce_sum(x) {keepdim =
/// true}: the same sums (the same order, the same row-major layout), with the reduced
/// dims kept as 1 so that the ops after the sum can join its kernel (gpt-fuse-elementwise's
/// epilogue; a reshape would end the run).
struct KeepReducedDims : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter &rewriter) const override {
    auto sum = op.getX().getDefiningOp<ReduceSumOp>();
    if (!sum || sum.getKeepdim() || !sum->hasOneUse())
      return failure();
    SmallVector<int64_t> kept(sum.getX().getType().getShape());
    for (int64_t d : sum.getDims())
      kept[d] = 1;
    if (op.getType().getShape() != ArrayRef<int64_t>(kept))
      return failure();
    rewriter.replaceOpWithNewOp<ReduceSumOp>(op, op.getType(), sum.getX(), sum.getDimsAttr(),
                                             rewriter.getBoolAttr(true), sum.getOrderAttr());
    rewriter.eraseOp(sum);
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<KeepReducedDims>(ctx);
}

namespace {
/// reduce_mean(x) is div(reduce_sum(x), n), n the count of elements reduced into each
/// result (the kernel's sum, then one division by n as the element type: the same bits;
/// the gradients are the same too, g / n broadcast). Written as a sum, a mean fuses as
/// the sums do (RMSNorm's mean of squares with its prologue and epilogue, as
/// aten.rms_norm's decomposition already was).
struct MeanAsSum : OpRewritePattern<ReduceMeanOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceMeanOp op, PatternRewriter &rewriter) const override {
    RankedTensorType x = op.getX().getType(), r = op.getType();
    int64_t n = x.getNumElements() / std::max<int64_t>(r.getNumElements(), 1);
    Value sum = ReduceSumOp::create(rewriter, op.getLoc(), r, op.getX(), op.getDimsAttr(),
                                    op.getKeepdimAttr(), op.getOrderAttr());
    auto scalarType = RankedTensorType::get({}, r.getElementType());
    Value count = ConstantOp::create(
        rewriter, op.getLoc(), scalarType,
        DenseElementsAttr::get(scalarType, rewriter.getFloatAttr(r.getElementType(), (double)n)
                                               .getValue()));
    rewriter.replaceOpWithNewOp<DivOp>(op, r, sum, count);
    return success();
  }
};
} // namespace

void ReduceMeanOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<MeanAsSum>(ctx);
}

namespace {
/// embedding(w, arange(start, step 1)) whose rows are all within w is slice(w): the same
/// rows copied, and a slice's gradient pads instead of scattering one row at a time.
struct EmbeddingOfArange : OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EmbeddingOp op, PatternRewriter &rewriter) const override {
    // The arange itself, or reshaped with leading dims of 1 (transformers' position ids,
    // [1, T]): the rows are the slice, reshaped the same way.
    Value indices = op.getIndices();
    if (auto reshape = indices.getDefiningOp<ReshapeOp>()) {
      ArrayRef<int64_t> shape = reshape.getType().getShape();
      if (llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; }))
        indices = reshape.getX();
    }
    auto arange = indices.getDefiningOp<ArangeOp>();
    if (!arange || arange.getStep() != 1 || arange.getType().getRank() != 1)
      return failure();
    int64_t start = arange.getStart(), n = arange.getType().getDimSize(0);
    auto wt = op.getWeight().getType();
    if (start < 0 || start + n > wt.getDimSize(0))
      return failure(); // the kernel reports the index out of range
    auto rows = RankedTensorType::get({n, wt.getDimSize(1)}, wt.getElementType());
    Value slice = SliceOp::create(rewriter, op.getLoc(), rows, op.getWeight(),
                                  rewriter.getI64IntegerAttr(0), rewriter.getI64IntegerAttr(start),
                                  rewriter.getI64IntegerAttr(start + n),
                                  rewriter.getI64IntegerAttr(1));
    if (rows == op.getType())
      rewriter.replaceOp(op, slice);
    else
      rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), slice);
    return success();
  }
};
} // namespace

void EmbeddingOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<EmbeddingOfArange>(ctx);
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getStart() == 0 && getStep() == 1 && getEnd() == getX().getType().getDimSize(getDim()) &&
      getType() == getX().getType())
    return getX();
  return {};
}

static bool isIdentityPerm(ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != (int64_t)i) return false;
  return true;
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (isIdentityPerm(getPerm()) && getType() == getX().getType()) return getX();
  auto inner = getX().getDefiningOp<TransposeOp>();
  if (!inner) return {};
  // Result dim i is the inner result's dim perm[i], which is the inner operand's dim
  // innerPerm[perm[i]].
  SmallVector<int64_t> composed;
  for (int64_t p : getPerm()) composed.push_back(inner.getPerm()[p]);
  if (isIdentityPerm(composed) && inner.getX().getType() == getType()) return inner.getX();
  setPerm(composed);
  getXMutable().assign(inner.getX());
  return getResult();
}

LogicalResult TransposeOp::verify() {
  auto x = getX().getType(), r = getType();
  ArrayRef<int64_t> perm = getPerm();
  if ((int64_t)perm.size() != x.getRank())
    return emitOpError("perm must have one entry per dimension");
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> expect;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOpError("perm is not a permutation");
    seen[p] = true;
    expect.push_back(x.getDimSize(p));
  }
  if (r.getShape() != ArrayRef<int64_t>(expect) || r.getElementType() != x.getElementType())
    return emitOpError("result shape should be ") << shapeStr(expect);
  return success();
}

LogicalResult SliceOp::verify() {
  auto x = getX().getType(), r = getType();
  int64_t dim = getDim();
  if (failed(verifyDim(*this, dim, x.getRank())))
    return failure();
  int64_t start = getStart(), end = getEnd(), step = getStep();
  if (step <= 0 || start < 0 || end > x.getDimSize(dim) || start > end)
    return emitOpError("bad slice [") << start << ":" << end << ":" << step << "] of a dim of "
                                      << x.getDimSize(dim);
  SmallVector<int64_t> expect(x.getShape());
  expect[dim] = end == start ? 0 : (end - start - 1) / step + 1;  // (no overflow)
  if (r.getShape() != ArrayRef<int64_t>(expect) || r.getElementType() != x.getElementType())
    return emitOpError("result shape should be ") << shapeStr(expect);
  return success();
}

namespace {
// Elementwise ops move through concats and splits: each element is computed by the same
// scalar expression from the same operand elements whichever piece holds it, so these
// rewrites change no value; they let a rotation spelled with a concat (transformers'
// rotate_half: cat(-x2, x1) * sin) compute each half in place of a copy, as a rotation
// written with the halves does. A dropout is left alone: its mask depends on the
// element's index in its result.

bool movesThroughPieces(Operation *op) {
  return isa<ElementwiseOpInterface>(op) && !isa<DropoutOp>(op) && op->getNumResults() == 1;
}

/// `t` with dimension d of size n.
RankedTensorType withDimSize(RankedTensorType t, int64_t d, int64_t n) {
  SmallVector<int64_t> shape(t.getShape());
  shape[d] = n;
  return t.clone(shape);
}

/// The results of a new gpt.split of x along d into pieces of `sizes`.
SplitOp createSplit(PatternRewriter &rw, Location loc, Value x, int64_t d,
                    ArrayRef<int64_t> sizes) {
  SmallVector<Type> types;
  for (int64_t n : sizes)
    types.push_back(withDimSize(cast<RankedTensorType>(x.getType()), d, n));
  return SplitOp::create(rw, loc, types, x, rw.getI64IntegerAttr(d));
}

/// `v` cut along dimension `d` of `user`'s result, of rank `rank` (numpy broadcasting),
/// into pieces of `sizes`: v itself for every piece where it is broadcast along d (the
/// dimension absent or of size 1), else the results of a gpt.split of v, one already
/// there before `user` or a new one right after v.
SmallVector<Value> piecesAlong(PatternRewriter &rw, Operation *user, Value v, int64_t rank,
                               int64_t d, ArrayRef<int64_t> sizes) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t dv = d - (rank - t.getRank());
  if (dv < 0 || t.getDimSize(dv) == 1)
    return SmallVector<Value>(sizes.size(), v);
  auto sameCut = [&](SplitOp s) {
    return s.getDim() == dv && s.getNumResults() == sizes.size() &&
           llvm::all_of_zip(s.getResults(), sizes, [&](Value r, int64_t n) {
             return cast<RankedTensorType>(r.getType()).getDimSize(dv) == n;
           });
  };
  SplitOp split;
  for (Operation *u : v.getUsers())
    if (auto s = dyn_cast<SplitOp>(u); s && sameCut(s) && s->getBlock() == user->getBlock() &&
                                       s->isBeforeInBlock(user))
      split = s;
  if (!split) {
    OpBuilder::InsertionGuard guard(rw);
    rw.setInsertionPointAfterValue(v);
    split = createSplit(rw, user->getLoc(), v, dv, sizes);
  }
  return SmallVector<Value>(split.getResults().begin(), split.getResults().end());
}

/// `op` (elementwise) once per piece along its result's dimension `d`: piece i computed
/// from piece i of every operand (operand `known`, if any, given as `knownPieces`).
/// Returns the pieces.
SmallVector<Value> elementwisePieces(PatternRewriter &rw, Operation *op, int64_t d,
                                     ArrayRef<int64_t> sizes, int64_t known = -1,
                                     ValueRange knownPieces = {}) {
  auto rt = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<SmallVector<Value>> cut;
  for (auto [j, v] : llvm::enumerate(op->getOperands()))
    cut.push_back((int64_t)j == known ? SmallVector<Value>(knownPieces)
                                      : piecesAlong(rw, op, v, rt.getRank(), d, sizes));
  SmallVector<Value> pieces;
  for (auto [i, n] : llvm::enumerate(sizes)) {
    SmallVector<Value> operands;
    for (SmallVector<Value> &c : cut)
      operands.push_back(c[i]);
    OperationState state(op->getLoc(), op->getName(), operands, {withDimSize(rt, d, n)},
                         op->getAttrs());
    pieces.push_back(rw.create(state)->getResult(0));
  }
  return pieces;
}

/// e(..., concat(p_1, ..., p_n), ...) -> concat(e(..., p_1, ...), ..., e(..., p_n, ...)),
/// the other operands split alike, where the concat has no other use and its dimension
/// is not broadcast in e's result.
struct ElementwiseOfConcat : OpInterfaceRewritePattern<ElementwiseOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(ElementwiseOpInterface e,
                                PatternRewriter &rw) const override {
    Operation *op = e.getOperation();
    if (!movesThroughPieces(op))
      return failure();
    auto rt = cast<RankedTensorType>(op->getResult(0).getType());
    for (auto [j, v] : llvm::enumerate(op->getOperands())) {
      auto cat = v.getDefiningOp<ConcatOp>();
      if (!cat || !cat->hasOneUse())
        continue;
      int64_t d = cat.getDim() + rt.getRank() - cat.getType().getRank();
      if (cat.getType().getDimSize(cat.getDim()) != rt.getDimSize(d))
        continue;
      SmallVector<int64_t> sizes;
      for (Value p : cat.getInputs())
        sizes.push_back(cast<RankedTensorType>(p.getType()).getDimSize(cat.getDim()));
      SmallVector<Value> pieces = elementwisePieces(rw, op, d, sizes, j, cat.getInputs());
      rw.replaceOpWithNewOp<ConcatOp>(op, rt, pieces, rw.getI64IntegerAttr(d));
      rw.eraseOp(cat);
      return success();
    }
    return failure();
  }
};

/// split(e(...)) -> e over each operand's pieces, where the split is e's only use and
/// only elementwise ops use the pieces (e then fuses into each; a piece that something
/// else reads, attention's q of a biased projection, say, keeps e whole, in the
/// product's epilogue).
struct SplitOfElementwise : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SplitOp op, PatternRewriter &rw) const override {
    Operation *e = op.getX().getDefiningOp();
    if (!e || !movesThroughPieces(e) || !e->hasOneUse() ||
        !llvm::all_of(op->getUsers(), [](Operation *u) { return movesThroughPieces(u); }))
      return failure();
    SmallVector<int64_t> sizes;
    for (Value r : op.getResults())
      sizes.push_back(cast<RankedTensorType>(r.getType()).getDimSize(op.getDim()));
    rw.setInsertionPoint(e);
    SmallVector<Value> pieces = elementwisePieces(rw, e, op.getDim(), sizes);
    rw.replaceOp(op, pieces);
    rw.eraseOp(e);
    return success();
  }
};

/// split(concat(p_1, ..., p_n)) along the same dimension into the same sizes -> the p_i.
struct SplitOfConcat : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SplitOp op, PatternRewriter &rw) const override {
    auto cat = op.getX().getDefiningOp<ConcatOp>();
    if (!cat || cat.getDim() != op.getDim() || cat.getInputs().size() != op.getNumResults() ||
        !llvm::all_of_zip(cat.getInputs(), op.getResults(),
                          [](Value p, Value r) { return p.getType() == r.getType(); }))
      return failure();
    rw.replaceOp(op, cat.getInputs());
    return success();
  }
};

/// Unit-step slices of one tensor along one dimension whose ranges cover it, each
/// element once (distinct slices; the same range any number of times), become one
/// gpt.split: x[..., :h] and x[..., h:] are its two pieces.
struct SlicesAsSplit : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op, PatternRewriter &rw) const override {
    if (op.getStep() != 1)
      return failure();
    Value x = op.getX();
    int64_t dim = op.getDim(), size = cast<RankedTensorType>(x.getType()).getDimSize(dim);
    std::map<int64_t, int64_t> ranges; // start -> end
    SmallVector<SliceOp> slices;
    for (Operation *user : x.getUsers()) {
      auto s = dyn_cast<SliceOp>(user);
      if (!s || s.getX() != x || s.getDim() != dim || s.getStep() != 1)
        continue;
      auto [it, fresh] = ranges.try_emplace(s.getStart(), s.getEnd());
      if (!fresh && it->second != s.getEnd())
        return failure(); // two ranges from one start: they overlap
      slices.push_back(s);
    }
    SmallVector<int64_t> sizes;
    int64_t at = 0;
    for (auto [start, end] : ranges) {
      if (start != at || end <= start)
        return failure();
      sizes.push_back(end - start);
      at = end;
    }
    if (at != size || sizes.size() < 2)
      return failure();
    rw.setInsertionPointAfterValue(x);
    SplitOp split = createSplit(rw, op.getLoc(), x, dim, sizes);
    for (SliceOp s : slices) {
      unsigned piece = std::distance(ranges.begin(), ranges.find(s.getStart()));
      rw.replaceOp(s, split.getResult(piece));
    }
    return success();
  }
};
} // namespace

void ConcatOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<ElementwiseOfConcat>(ctx);
}

void SplitOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<SplitOfElementwise, SplitOfConcat, SlicesAsSplit>(ctx);
}

LogicalResult SplitOp::verify() {
  auto x = getX().getType();
  int64_t dim = getDim();
  if (failed(verifyDim(*this, dim, x.getRank())))
    return failure();
  int64_t total = 0;
  for (Value r : getResults()) {
    auto t = tensorType(r);
    SmallVector<int64_t> expect(x.getShape());
    expect[dim] = t.getRank() == x.getRank() ? t.getDimSize(dim) : -1;
    if (t.getShape() != ArrayRef<int64_t>(expect) || t.getElementType() != x.getElementType())
      return emitOpError("results must match the input except along dim ") << dim;
    total += t.getDimSize(dim);
  }
  if (total != x.getDimSize(dim))
    return emitOpError("pieces sum to ") << total << ", not " << x.getDimSize(dim);
  return success();
}

LogicalResult ConcatOp::verify() {
  auto r = getType();
  int64_t dim = getDim();
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (failed(verifyDim(*this, dim, r.getRank())))
    return failure();
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = tensorType(v);
    SmallVector<int64_t> expect(r.getShape());
    expect[dim] = t.getRank() == r.getRank() ? t.getDimSize(dim) : -1;
    if (t.getShape() != ArrayRef<int64_t>(expect) || t.getElementType() != r.getElementType())
      return emitOpError("inputs must match the result except along dim ") << dim;
    total += t.getDimSize(dim);
  }
  if (total != r.getDimSize(dim))
    return emitOpError("inputs sum to ") << total << " along dim " << dim << ", not "
                                         << r.getDimSize(dim);
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto x = getX().getType(), r = getType();
  if (x.getElementType() != r.getElementType() || !broadcastsTo(x.getShape(), r.getShape()))
    return emitOpError("cannot broadcast ") << shapeStr(x.getShape()) << " to "
                                            << shapeStr(r.getShape());
  return success();
}

/// gpt.fused and gpt.horizontal: one block argument per input, of its type, and a yield
/// of the result types.
static LogicalResult verifyKernelRegion(Operation *op, Block &body, ValueRange inputs) {
  if (body.getNumArguments() != inputs.size())
    return op->emitOpError("needs one block argument per input");
  for (auto [arg, in] : llvm::zip(body.getArguments(), inputs))
    if (arg.getType() != in.getType())
      return op->emitOpError("block argument types must match the inputs");
  if (body.getTerminator()->getOperandTypes() != op->getResultTypes())
    return op->emitOpError("yielded types must match the results");
  return success();
}

ReduceSumOp FusedOp::getReduction() {
  for (Operation &op : getBody().front().without_terminator())
    if (auto red = dyn_cast<ReduceSumOp>(op))
      return red;
  return {};
}

FusedOp::Phase FusedOp::phaseOf(Operation *op) {
  ReduceSumOp red = getReduction();
  if (!red || op == red || op->isBeforeInBlock(red))
    return Phase::Prologue;
  ArrayRef<int64_t> x = tensorType(red.getX()).getShape();
  return x != tensorType(red.getResult()).getShape() &&
                 tensorType(op->getResult(0)).getShape() == x
             ? Phase::Post
             : Phase::Epilogue;
}

bool FusedOp::sumsRows(ReduceSumOp red) {
  int64_t rank = tensorType(red.getX()).getRank();
  ArrayRef<int64_t> dims = red.getDims();
  for (auto [k, d] : llvm::enumerate(dims))
    if (d != rank - (int64_t)dims.size() + (int64_t)k)
      return false;
  return red.getKeepdim();
}

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (failed(verifyKernelRegion(*this, body, getInputs())))
    return failure();
  if (llvm::count_if(body.without_terminator(), [](Operation &op) { return isa<ReduceSumOp>(op); }) > 1)
    return emitOpError("a body holds one reduce_sum at most");
  ReduceSumOp red = getReduction();
  if (!red) {
    // Elementwise over one shape, the results'.
    ArrayRef<int64_t> space = cast<RankedTensorType>(getResultTypes()[0]).getShape();
    for (Type t : getResultTypes())
      if (cast<RankedTensorType>(t).getShape() != space)
        return emitOpError("results must share one shape");
  }
  // With a reduce_sum: the ops before it over the summed operand's shape (the element
  // the sum adds), the ops after it over the sum's shape, then (a row's sum only) ops
  // over the operand's shape again. Results have the sum's shape, or the operand's for
  // values of that last phase.
  auto spaceOf = [&](Operation *op) {
    if (!red)
      return cast<RankedTensorType>(getResultTypes()[0]).getShape();
    return phaseOf(op) == Phase::Epilogue ? tensorType(red.getResult()).getShape()
                                          : tensorType(red.getX()).getShape();
  };
  bool post = false;
  // The code generator computes each body op one element of its space at a time, and
  // draws a dropout's mask from the kernel's rng input.
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() || isa<MatmulOp, AttentionOp, ConstantOp>(op))
      return emitOpError("'") << op.getName() << "' cannot be computed one element at a time";
    if (isa<ReduceSumOp>(op))
      continue;
    Phase phase = red ? phaseOf(&op) : Phase::Prologue;
    if (phase == Phase::Post && !sumsRows(red))
      return emitOpError("body op '") << op.getName() << "' after the reduce_sum has the summed "
                                         "shape, but the sum is not over kept trailing dims";
    if (phase == Phase::Epilogue && post)
      return emitOpError("body op '") << op.getName() << "' of the sum's shape follows ops of "
                                         "the summed shape";
    post |= phase == Phase::Post;
    // (The ops of the row's shape may read them: the code generator computes them again.)
    if (phase == Phase::Epilogue)
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp(); def && def != red && phaseOf(def) == Phase::Prologue)
          return emitOpError("body op '") << op.getName() << "' after the reduce_sum reads an "
                                             "element of the sum";
    for (Type t : op.getResultTypes())
      if (cast<RankedTensorType>(t).getShape() != spaceOf(&op))
        return emitOpError("body op '") << op.getName() << "' has shape "
                                        << shapeStr(cast<RankedTensorType>(t).getShape())
                                        << ", not the kernel's " << shapeStr(spaceOf(&op));
    if (auto d = dyn_cast<DropoutOp>(op); d && d.getRng() && !isa<BlockArgument>(d.getRng()))
      return emitOpError("a dropout's rng must be one of the kernel's inputs");
  }
  if (red)
    for (Value v : body.getTerminator()->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || (def != red && phaseOf(def) == Phase::Prologue))
        return emitOpError("yields an element of the sum");
    }
  return success();
}

LogicalResult HorizontalOp::verify() {
  Block &body = getBody().front();
  if (failed(verifyKernelRegion(*this, body, getInputs())))
    return failure();
  // Members read only block arguments (never one another), and the yield lists every
  // member result in order.
  SmallVector<Value> produced;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() && !isa<FusedOp>(op))
      return emitOpError("members must be single kernels (gpt.fused at most)");
    for (Value v : op.getOperands())
      if (!isa<BlockArgument>(v))
        return emitOpError("members must not read one another's results");
    llvm::append_range(produced, op.getResults());
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (SmallVector<Value>(yield.getValues()) != produced)
    return emitOpError("must yield every member result, in order");
  return success();
}

#define GET_OP_CLASSES
#include "ir/GptOps.cpp.inc"
