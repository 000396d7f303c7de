//===- RecomputeActivations.cpp - the gpt-recompute-activations pass ------===//
//
// A GPT's backward reads some of the forward's activations only to form weight
// gradients: the GELU's output (c_proj's), and each LayerNorm's output (the
// weight gradient of the linear layer it feeds: q/k/v's, the MLP's first, and
// lm_head's). Kept from the forward, they are a large part of what a training step
// holds at its peak. This pass has the backward compute each of them again from its
// operands, right before the first reader after the loss:
//
//   %y = gpt.gelu %x             // or gpt.layer_norm %x, %w, bias %b
//   ... the loss ...
//   %r = gpt.reshape %y          // a weight gradient's operand
// becomes
//   %y = gpt.gelu %x
//   ... the loss ...
//   %y2 = gpt.gelu %x            // before the first reader after the loss
//   %r = gpt.reshape %y2
//
// The same op of the same operands: the same bits (the determinism contract makes
// every kernel of an op, fused or not, give one function's values). Only where
// every operand is live there anyway (a parameter or argument, or read again at or
// after that point: the GELU's input by its gradient, a LayerNorm's by its), so
// that nothing is held longer than before; the forward's output is then free once
// the forward has read it. The cost is one more kernel a recomputed op, bound by
// memory. The loss is what autodiff differentiates (the last scalar floating-point
// result); readers after its op are the backward's. For targets whose memory is
// the scarcer resource (the GPU's; the CPU keeps the outputs and, with
// gpt-keep-gelu-erf, the GELU's erf too). Runs after autodiff, before fusion;
// gptc compile -O0 skips it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_RECOMPUTEACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The op that computes the function's loss (as gpt-autodiff takes it), or null where
/// there is none or a block argument is returned.
Operation *lossOp(func::FuncOp fn) {
  auto ret = dyn_cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  const int64_t index = ret ? defaultLossIndex(ret) : -1;
  return index < 0 ? nullptr : ret.getOperand(index).getDefiningOp();
}

/// Whether `v` is live at `at` whatever this pass does: a block argument, or read by `at`
/// or an op after it in the same block.
bool liveAt(Value v, Operation *at) {
  if (isa<BlockArgument>(v))
    return true;
  for (Operation *user : v.getUsers())
    if (user->getBlock() == at->getBlock() && !user->isBeforeInBlock(at))
      return true;
  return false;
}

struct RecomputeActivations : gpt::impl::RecomputeActivationsBase<RecomputeActivations> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return; // a declaration: no body to transform
    Operation *loss = lossOp(fn);
    if (!loss || loss->getBlock() != &fn.getBody().front())
      return;
    SmallVector<Operation *> forward;
    for (Operation &op : fn.getBody().front()) {
      if (&op == loss)
        break;
      if (isa<GeluOp, LayerNormOp>(op))
        forward.push_back(&op);
    }
    for (Operation *op : forward) {
      // The uses after the loss, the first of them first.
      SmallVector<OpOperand *> late;
      for (OpOperand &use : op->getResult(0).getUses())
        if (use.getOwner()->getBlock() == loss->getBlock() && loss->isBeforeInBlock(use.getOwner()))
          late.push_back(&use);
      if (late.empty())
        continue;
      Operation *first = late.front()->getOwner();
      for (OpOperand *use : late)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      if (!llvm::all_of(op->getOperands(), [&](Value v) { return liveAt(v, first); }))
        continue;
      OpBuilder b(first);
      Operation *again = b.clone(*op);
      for (OpOperand *use : late)
        use->set(again->getResult(0));
    }
  }
};

} // namespace
