//===- RecomputeGelu.cpp - the gpt-recompute-gelu pass --------------------===//
//
// A GPT's MLP keeps its GELU's output from the forward to the backward only for
// one reader there: c_proj's weight gradient. That output is the MLP's widest
// activation (4 C floats a token), and with the GELU's input, which the
// gradient reads anyway, it is most of what a step holds at its peak. This pass
// has the backward compute it again from that input instead:
//
//   %y = gpt.gelu %x            // read by the forward's matmul
//   ... the loss ...
//   %r = gpt.reshape %y          // the weight gradient's operand
// becomes
//   %y = gpt.gelu %x
//   ... the loss ...
//   %y2 = gpt.gelu %x            // placed before the first reader after the loss
//   %r = gpt.reshape %y2
//
// The same op of the same operand: the same bits (the determinism contract makes
// every GELU kernel, fused or not, give one function's values). The cost is one
// more elementwise kernel a layer in the backward; the forward's %y is free once
// the forward has read it. The loss is what autodiff differentiates (the last
// scalar floating-point result); readers after its op are the backward's. For
// targets whose memory is the scarcer resource (the GPU's; the CPU keeps the
// output and, with gpt-keep-gelu-erf, its erf too). Runs after autodiff, before
// fusion; gptc compile -O0 skips it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_RECOMPUTEGELU
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The op that computes the function's loss (its last scalar floating-point result, as
/// gpt-autodiff takes it), or null where there is none or a block argument is returned.
Operation *lossOp(func::FuncOp fn) {
  auto ret = dyn_cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  if (!ret)
    return nullptr;
  for (Value v : llvm::reverse(ret.getOperands()))
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && t.getRank() == 0 && isa<FloatType>(t.getElementType()))
      return v.getDefiningOp();
  return nullptr;
}

struct RecomputeGelu : gpt::impl::RecomputeGeluBase<RecomputeGelu> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return; // a declaration: no body to transform
    Operation *loss = lossOp(fn);
    if (!loss || loss->getBlock() != &fn.getBody().front())
      return;
    SmallVector<GeluOp> gelus;
    for (auto g : fn.getBody().front().getOps<GeluOp>())
      if (g->isBeforeInBlock(loss))
        gelus.push_back(g);
    for (GeluOp gelu : gelus) {
      // The uses after the loss, the first of them first.
      SmallVector<OpOperand *> late;
      for (OpOperand &use : gelu.getResult().getUses())
        if (use.getOwner()->getBlock() == loss->getBlock() && loss->isBeforeInBlock(use.getOwner()))
          late.push_back(&use);
      if (late.empty())
        continue;
      Operation *first = late.front()->getOwner();
      for (OpOperand *use : late)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      OpBuilder b(first);
      Operation *again = b.clone(*gelu.getOperation());
      for (OpOperand *use : late)
        use->set(again->getResult(0));
    }
  }
};

} // namespace
