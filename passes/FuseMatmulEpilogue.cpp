//===- FuseMatmulEpilogue.cpp - the gpt-fuse-matmul-epilogue pass ---------===//
//
// Folds the elementwise ops that follow a matmul into its epilogue, applied by
// the code generator to each finished product before the store, so that the
// product and what follows it are one kernel over the output, written once:
//
//   add(matmul, b) with b [N] (a linear layer's bias)  -> matmul bias %b
//   dropout(that) in training (a residual branch)       -> ... dropout %rng
//   add(that, r) with r of the result's type (residual) -> ... plus %r
//   gelu_grad(that, x) with x of the result's type       -> ... gelu_grad %x
//     (a GELU's input gradient: the product is its incoming gradient; with gelu-grad,
//     which the GPU targets set: on the CPU the fused product was slower than the two
//     kernels, bench/NOTES.md "Fusion and kernel count")
//
// in that order only, each op folded when the matmul (or the matmul it was
// folded into) is its only use. The epilogue computes each op's own expression
// (product + bias, the same dropout draw for element i, addend + value; an add
// is commutative bit for bit), so the bits are those of the unfused ops.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUE
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The steps of the epilogue, in the order it applies them.
enum class Step { Bias, Dropout, Addend, GeluGrad };

/// The matmul defining `v` if `step` can be appended to its epilogue: `v` has no other
/// use, and the epilogue has no step at or after `step` yet.
MatmulOp foldable(Value v, Step step) {
  auto mm = v.getDefiningOp<MatmulOp>();
  if (!mm || !mm->hasOneUse() || mm.getGeluX() || (step <= Step::Addend && mm.getAddend()) ||
      (step <= Step::Dropout && mm.getRng()) || (step == Step::Bias && mm.getBias()))
    return {};
  return mm;
}

/// `mm` with the epilogue step that `op` is (the arguments not null), in op's place.
void fold(Operation *op, MatmulOp mm, Value bias, DropoutOp drop, Value addend,
          GeluGradOp gelu = {}) {
  // In op's place, where every operand of op and of mm is defined; a GELU's gradient in
  // the product's place where its x and erf are defined by then (a forward's values), so
  // that the products keep their order (gpt-pair-weight-gradients pairs by it).
  auto before = [&](Value v) {
    Operation *def = v ? v.getDefiningOp() : nullptr;
    return !def || def->getBlock() != mm->getBlock() || def->isBeforeInBlock(mm);
  };
  OpBuilder b(gelu && before(gelu.getX()) && before(gelu.getErf()) ? mm.getOperation() : op);
  Value rng = drop ? drop.getRng() : mm.getRng();
  FloatAttr p = drop ? drop.getPAttr() : mm.getDropoutPAttr();
  IntegerAttr id = drop ? drop.getIdAttr() : mm.getDropoutIdAttr();
  auto fused = MatmulOp::create(
      b, op->getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(), bias ? bias : mm.getBias(), rng,
      addend ? addend : mm.getAddend(), gelu ? gelu.getX() : Value(),
      gelu ? gelu.getErf() : Value(), mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr(),
      mm.getOrderAttr(), p, id, gelu ? gelu.getApproximateAttr() : GeluApproximationAttr());
  op->getResult(0).replaceAllUsesWith(fused.getResult());
  op->erase();
  mm.erase();
}

/// Whether `b` is a linear layer's bias for `mm`: a [N] vector of its element type.
bool isBiasOf(MatmulOp mm, Value b) {
  auto bt = cast<RankedTensorType>(b.getType());
  return bt.getRank() == 1 && bt.getDimSize(0) == mm.getType().getShape().back() &&
         bt.getElementType() == mm.getType().getElementType();
}

/// add(matmul, other), the matmul on either side, folded as `step` (Bias or Addend) when
/// `other` is what that step takes: a bias, or a tensor of the result's type (add(m, m)
/// is two uses of m, so it stays).
bool foldAdd(AddOp add, Step step) {
  for (unsigned i = 0; i < 2; ++i) {
    MatmulOp mm = foldable(add->getOperand(i), step);
    Value other = add->getOperand(1 - i);
    if (!mm || mm.getType() != add.getType())
      continue;
    if (step == Step::Bias ? !isBiasOf(mm, other) : other.getType() != add.getType())
      continue;
    fold(add, mm, step == Step::Bias ? other : Value(), {},
         step == Step::Addend ? other : Value());
    return true;
  }
  return false;
}

struct FuseMatmulEpiloguePass
    : public gpt::impl::FuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  using FuseMatmulEpilogueBase::FuseMatmulEpilogueBase;
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    // In program order, so that a chain folds step by step into one matmul.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AddOp, DropoutOp, GeluGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (auto gelu = dyn_cast<GeluGradOp>(op)) {
        if (!geluGrad)
          continue;
        // The product is the incoming gradient; x (and a kept erf) have its type, as
        // GeluGradOp::verify holds them to g's.
        if (MatmulOp mm = foldable(gelu.getG(), Step::GeluGrad))
          fold(gelu, mm, {}, {}, {}, gelu);
        continue;
      }
      if (auto add = dyn_cast<AddOp>(op)) {
        if (!foldAdd(add, Step::Bias))
          foldAdd(add, Step::Addend);
        continue;
      }
      auto drop = cast<DropoutOp>(op);
      // Only a dropout that draws (training, p > 0; otherwise it folded away).
      if (!drop.getRng() || !drop.getTrain() || drop.getP().isZero())
        continue;
      if (MatmulOp mm = foldable(drop.getX(), Step::Dropout))
        fold(drop, mm, {}, drop, {});
    }
  }
};

} // namespace
