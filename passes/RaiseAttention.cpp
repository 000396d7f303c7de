//===- RaiseAttention.cpp - the gpt-raise-attention pass ------------------===//
//
// nanoGPT's attention without flash (and minGPT's) spells causal attention out:
//
//   att = (q @ k.transpose(-2, -1)) * scale
//   att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
//   y = attn_dropout(softmax(att, dim=-1)) @ v
//
// where `bias` is a buffer holding tril(ones(N, N)). In the gpt dialect:
//
//   %s = gpt.matmul %q, %kt            (%kt = transpose of k's last two dims, or
//                                        transpose_rhs on k itself)
//   %a = gpt.mul %s, %c                (a scalar constant; optional; or gpt.div
//                                        %s, %d, the scale then 1 / d)
//   %m = gpt.compare %bias, %zero {predicate = #gpt.predicate<eq>}   (bias sliced to [.., T, T])
//   %f = gpt.masked_fill %a, %m {value = -inf}
//   %p = gpt.softmax %f {dim = last}
//   %d = gpt.dropout %p, %rng {id, p}   (optional)
//   %y = gpt.matmul %d, %v
//
// Karpathy's lecture GPT spells it per head, with q, k, v of [B, T, D] and a
// [N, N] buffer (`wei = q @ k.transpose(-2, -1) * C**-0.5`, `tril[:T, :T] == 0`):
// the same ops at rank 3, raised to attention on [B, 1, T, D] between reshapes.
//
// This pass makes it the one op it means, gpt.attention {is_causal, scale = c,
// dropout_p = p, id}, which the code generator runs as one tiled online-softmax
// kernel (and its gradient as one more) instead of the [B, H, T, T] scores,
// mask, softmax and dropout as tensors of their own: nanoGPT's two attention
// paths then compile to the same kernels, and give the same bits.
//
// The mask is causal only if `bias` holds tril(ones): the Python capture marks
// such a buffer's argument `gpt.tril_ones` after checking its value, and refuses
// a later state_dict that changes it. Nothing else is raised: another mask, a
// fill other than -inf (-1e9 and finfo.min included: the softmax would give those
// keys exactly 0 only while every row's scores stay far above the fill), or an
// intermediate that anything else reads (attention weights returned, say) leave
// the ops as they are.
//
// The raised op sums in its own documented order (online softmax over key blocks
// of 32) rather than the softmax's, so the bits differ from the ops spelled out;
// the pass is part of the conversion and runs at every -O level, so -O0 and -O3
// still agree bit for bit.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/Signature.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

namespace mlir::gpt {
#define GEN_PASS_DEF_RAISEATTENTION
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The value of a scalar (or splat) constant, if `v` is one.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  Type e = attr.getElementType();
  if (isa<FloatType>(e))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (e.isInteger(1))
    return attr.getSplatValue<bool>() ? 1.0 : 0.0;
  if (isa<IntegerType>(e))
    return (double)attr.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

/// The operand of `op` that is not `v` (op has two operands).
Value other(Operation *op, Value v) {
  return op->getOperand(0) == v ? op->getOperand(1) : op->getOperand(0);
}

/// Whether `mask` is true exactly above the diagonal of its last two dims (T x T, any
/// leading dims of size 1): `bias == 0` with `bias` a leading [T, T] block of a
/// tril(ones) buffer, the capture's `gpt.tril_ones` argument.
bool isCausalMask(Value mask, int64_t t) {
  auto type = cast<RankedTensorType>(mask.getType());
  if (type.getRank() < 2 || type.getDimSize(type.getRank() - 1) != t ||
      type.getDimSize(type.getRank() - 2) != t ||
      llvm::any_of(type.getShape().drop_back(2), [](int64_t d) { return d != 1; }))
    return false;
  auto eq = mask.getDefiningOp<CompareOp>();
  if (!eq || eq.getPredicate() != ComparePredicate::eq)
    return false;
  Value bias = eq.getLhs();
  if (splatValue(bias) == 0.0)
    bias = eq.getRhs();
  else if (splatValue(eq.getRhs()) != 0.0)
    return false;
  // A leading block of the buffer: slices from 0 by 1.
  while (auto s = bias.getDefiningOp<SliceOp>()) {
    if (s.getStart() != 0 || s.getStep() != 1)
      return false;
    bias = s.getX();
  }
  auto arg = dyn_cast<BlockArgument>(bias);
  auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
  if (!fn || !fn.getArgAttr(arg.getArgNumber(), kTrilOnesAttr))
    return false;
  auto full = cast<RankedTensorType>(bias.getType());
  return full.getRank() == type.getRank() &&
         full.getDimSize(full.getRank() - 1) == full.getDimSize(full.getRank() - 2);
}

/// The gpt.attention that `pv` (softmax's probabilities, perhaps dropped out, times v)
/// computes, built in its place, or failure if it is not the pattern above.
LogicalResult raise(MatmulOp pv) {
  if (pv.getTransposeLhs() || pv.getTransposeRhs() || pv.getBias() || pv.getRng() ||
      pv.getAddend())
    return failure();
  Value probs = pv.getLhs(), rng;
  double dropoutP = 0.0;
  int64_t id = 0;
  SmallVector<Operation *> dead{pv};
  if (auto drop = probs.getDefiningOp<DropoutOp>()) {
    if (!drop->hasOneUse())
      return failure();
    if (drop.getTrain() && drop.getP().convertToDouble() > 0.0) {
      dropoutP = drop.getP().convertToDouble();
      rng = drop.getRng();
      id = drop.getId();
    }
    dead.push_back(drop);
    probs = drop.getX();
  }
  auto softmax = probs.getDefiningOp<SoftmaxOp>();
  auto fill = softmax ? softmax.getX().getDefiningOp<MaskedFillOp>() : MaskedFillOp();
  if (!fill || !softmax->hasOneUse() || !fill->hasOneUse() ||
      (int64_t)softmax.getDim() != cast<RankedTensorType>(probs.getType()).getRank() - 1 ||
      fill.getValue().convertToDouble() != -INFINITY)
    return failure();
  dead.append({softmax, fill});
  Value scores = fill.getX();
  double scale = 1.0;
  if (auto mul = scores.getDefiningOp<MulOp>()) {
    Value s = mul.getLhs().getDefiningOp<MatmulOp>() ? mul.getLhs() : mul.getRhs();
    std::optional<double> c = splatValue(other(mul, s));
    if (!c || !mul->hasOneUse() || mul.getType() != s.getType())
      return failure();
    scale = *c;
    dead.push_back(mul);
    scores = s;
  } else if (auto div = scores.getDefiningOp<DivOp>()) {
    // `att / math.sqrt(d)`: the scale is 1 / d, rounded once (the same as the division
    // where d is a power of 2, within an ulp of each score otherwise).
    std::optional<double> c = splatValue(div.getRhs());
    if (!c || *c == 0.0 || !std::isfinite(*c) || !div->hasOneUse() ||
        !div.getLhs().getDefiningOp<MatmulOp>() || div.getType() != div.getLhs().getType())
      return failure();
    scale = 1.0 / *c;
    dead.push_back(div);
    scores = div.getLhs();
  }
  auto qk = scores.getDefiningOp<MatmulOp>();
  if (!qk || !qk->hasOneUse() || qk.getTransposeLhs() || qk.getBias() || qk.getRng() ||
      qk.getAddend())
    return failure();
  dead.push_back(qk);
  Value q = qk.getLhs(), k = qk.getRhs(), v = pv.getRhs();
  auto qt = cast<RankedTensorType>(q.getType());
  const int64_t rank = qt.getRank();
  if (rank != 3 && rank != 4)
    return failure();
  if (!qk.getTransposeRhs()) {
    auto t = k.getDefiningOp<TransposeOp>();
    if (!t || t.getPerm() != (rank == 4 ? ArrayRef<int64_t>{0, 1, 3, 2}
                                        : ArrayRef<int64_t>{0, 2, 1}))
      return failure();
    if (t->hasOneUse())
      dead.push_back(t);
    k = t.getX();
  }
  auto kt = cast<RankedTensorType>(k.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  if (kt.getShape() != qt.getShape() || vt.getRank() != rank ||
      vt.getShape().drop_back() != qt.getShape().drop_back() ||
      !isCausalMask(fill.getMask(), qt.getDimSize(rank - 2)))
    return failure();
  Operation *maskOp = fill.getMask().getDefiningOp();

  // One head's q, k, v [B, T, D] (a model whose heads are modules of their own, as in
  // Karpathy's lecture GPT) are attention's [B, 1, T, D]: reshapes, which move nothing.
  OpBuilder b(pv);
  auto headType = [&](Type type) {
    auto t = cast<RankedTensorType>(type);
    return rank == 4 ? t
                     : RankedTensorType::get({t.getDimSize(0), 1, t.getDimSize(1),
                                              t.getDimSize(2)}, t.getElementType());
  };
  auto oneHead = [&](Value x) -> Value {
    return rank == 4 ? x : ReshapeOp::create(b, pv.getLoc(), headType(x.getType()), x);
  };
  q = oneHead(q);
  k = oneHead(k);
  v = oneHead(v);
  auto yType = headType(pv.getType());
  auto attention = AttentionOp::create(
      b, pv.getLoc(), yType, AttentionOp::statsType(cast<RankedTensorType>(q.getType())), q, k,
      v, rng, /*key_mask=*/Value(), b.getBoolAttr(true), b.getF64FloatAttr(dropoutP),
      b.getF64FloatAttr(scale),
      b.getI64IntegerAttr(id), orderAttr(b, ReductionOrder::OnlineBlock32), /*bthd=*/nullptr);
  Value y = attention.getResult();
  if (rank == 3)
    y = ReshapeOp::create(b, pv.getLoc(), pv.getType(), y);
  pv.getResult().replaceAllUsesWith(y);
  for (Operation *op : dead) // users first
    op->erase();
  if (maskOp->use_empty()) // the mask is shared by every layer: the last one takes it
    maskOp->erase();
  return success();
}

struct RaiseAttention : gpt::impl::RaiseAttentionBase<RaiseAttention> {
  void runOnOperation() override {
    SmallVector<MatmulOp> products;
    getOperation().walk([&](MatmulOp mm) { products.push_back(mm); });
    for (MatmulOp mm : products)
      (void)raise(mm);
  }
};

} // namespace
