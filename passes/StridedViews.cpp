//===- StridedViews.cpp - the gpt-strided-views pass ----------------------===//
//
// A transpose, split or slice whose results only elementwise kernels read costs no
// kernel and no buffer: those kernels read its elements in place, in its operand's
// buffer, through strides (ir/KernelLevel.h, stridedView). The rotary embeddings of a
// LLaMA-style block are the case: a head's halves, split from a transposed projection,
// are read by the kernel that rotates them, with no copy of either. Marks such ops
// `gpt.strided`; reading an element through strides is reading the same element, so no
// bit changes.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_STRIDEDVIEWS
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

bool isCandidate(Operation &op) { return isa<TransposeOp, SplitOp, SliceOp>(op); }

/// Whether every reader of `v`, through reshapes and stop_gradients, reads it through
/// strides: an elementwise kernel, or a strided view itself; and every reshape on the way
/// has strides (stridedView).
bool readInPlace(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<ReshapeOp, StopGradientOp>(user)) {
      if (!stridedView(user->getResult(0)) || !readInPlace(user->getResult(0)))
        return false;
    } else if (!user->hasAttr(kStridedAttr) &&
               !(readsThroughStrides(user) && isa<func::FuncOp>(user->getParentOp()))) {
      return false;
    }
  }
  return true;
}

struct StridedViewsPass : gpt::impl::StridedViewsBase<StridedViewsPass> {
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    Block &body = getOperation().getBody().front();
    // Mark every candidate, then unmark those with a reader that needs a dense buffer,
    // until none is left: unmarking one can only take readers away from others.
    SmallVector<Operation *> marked;
    for (Operation &op : body)
      if (isCandidate(op)) {
        op.setAttr(kStridedAttr, UnitAttr::get(op.getContext()));
        marked.push_back(&op);
      }
    for (bool changed = true; changed;) {
      changed = false;
      for (Operation *op : marked)
        if (op->hasAttr(kStridedAttr) && !llvm::all_of(op->getResults(), readInPlace)) {
          op->removeAttr(kStridedAttr);
          changed = true;
        }
    }
  }
};
} // namespace
