//===- StridedViews.cpp - the gpt-strided-views pass ----------------------===//
//
// A transpose, split or slice whose results only elementwise kernels read costs no
// kernel and no buffer: those kernels read its elements in place, in its operand's
// buffer, through strides (ir/KernelLevel.h, stridedView). Marks such ops `gpt.strided`.
// Then the other way: a concat or transpose whose operands elementwise kernels (or
// transposes) compute for it alone costs no kernel either: those kernels write each
// element into its place in its result's buffer (writtenView). Marks such ops
// `gpt.gathered`. The rotary embeddings of a LLaMA-style block are the case, both ways:
// a head's halves, split from a transposed projection, are read by the kernel that
// rotates them, which writes the rotated halves into their concat. Reading or writing
// an element in place changes no bit. Attention reads its q, k and v through strides
// too (each row contiguous): a LLaMA block's v, a piece of the k/v projection's split.
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

/// Whether `user` reads `v` as attention's (or its gradient's) q, k or v, which it takes
/// through strides (a head's rows at any distance, each row's elements contiguous).
bool attentionReadsInPlace(Operation *user, Value v) {
  if (!isa<AttentionOp, AttentionGradOp>(user) || !isa<func::FuncOp>(user->getParentOp()))
    return false;
  for (OpOperand &use : user->getOpOperands())
    if (use.get() == v && !readsOperandThroughStrides(user, use.getOperandNumber()))
      return false;
  std::optional<StridedView> view = stridedView(v);
  return view && view->strides.back() == 1;
}

/// Whether every reader of `v`, through reshapes and stop_gradients, reads it through
/// strides: an elementwise kernel, attention's operands, or a strided view itself; and
/// every reshape on the way has strides (stridedView).
bool readInPlace(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<ReshapeOp, StopGradientOp>(user)) {
      if (!stridedView(user->getResult(0)) || !readInPlace(user->getResult(0)))
        return false;
    } else if (!user->hasAttr(kStridedAttr) && !attentionReadsInPlace(user, v) &&
               !(readsThroughStrides(user) && isa<func::FuncOp>(user->getParentOp()))) {
      return false;
    }
  }
  return true;
}

/// Whether `v`, an operand of a gathered op, can be written in its place: computed (through
/// reshapes that have strides) for that op alone, by a kernel that writes through strides
/// (attention's gradient: each row contiguous) or by another gathered op.
bool writtenInPlace(Value v) {
  while (true) {
    Operation *def = v.getDefiningOp();
    if (!def || !v.hasOneUse() || !isa<func::FuncOp>(def->getParentOp()))
      return false;
    if (!isa<ReshapeOp, StopGradientOp>(def)) {
      std::optional<StridedView> view = writtenView(v);
      if (!view || (writesRowsOnly(def) && view->strides.back() != 1))
        return false;
      return def->hasAttr(kGatheredAttr) ||
             (!def->hasAttr(kStridedAttr) && writesThroughStrides(def));
    }
    v = def->getOperand(0);
  }
}

/// Marks each op of `ops` with `attr`, then unmarks those for which `keep` fails, until
/// none is left: unmarking one only takes a reader or writer away from others.
template <typename Keep>
void markUntilStable(ArrayRef<Operation *> ops, StringRef attr, Keep keep) {
  for (Operation *op : ops)
    op->setAttr(attr, UnitAttr::get(op->getContext()));
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : ops)
      if (op->hasAttr(attr) && !keep(op)) {
        op->removeAttr(attr);
        changed = true;
      }
  }
}

struct StridedViewsPass : gpt::impl::StridedViewsBase<StridedViewsPass> {
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    Block &body = getOperation().getBody().front();
    // Read views: no reader that needs a dense buffer.
    SmallVector<Operation *> reads, gathers;
    for (Operation &op : body)
      if (isa<TransposeOp, SplitOp, SliceOp>(op))
        reads.push_back(&op);
    markUntilStable(reads, kStridedAttr,
                    [](Operation *op) { return llvm::all_of(op->getResults(), readInPlace); });
    // Gathers: every operand written in its place.
    for (Operation &op : body)
      if (isa<ConcatOp, TransposeOp>(op) && !op.hasAttr(kStridedAttr))
        gathers.push_back(&op);
    markUntilStable(gathers, kGatheredAttr, [](Operation *op) {
      return llvm::all_of(op->getOperands(), writtenInPlace);
    });
  }
};
} // namespace
