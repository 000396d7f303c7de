//===- FuseHorizontal.cpp - the gpt-fuse-horizontal pass ------------------===//
//
// Greedy over program order: consecutive kernels none of which reads another's
// result become one gpt.horizontal op (one parallel region). Views (reshape,
// stop_gradient, strided views) and constants between them move above the group, or
// below it when they view a member's result; anything else ends the group, except that
// where a kernel reads the group, the independent kernels right after it join the group
// before it ends, where that leaves fewer kernels in all. Nothing is reordered against a
// dependency, and each member computes what it computed alone.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_FUSEHORIZONTAL
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// Ops that cost no kernel: they alias, are read or written in place
/// (gpt-strided-views; a concat of vectors the memory plan will make a view), or are
/// static data.
bool isView(Operation *op) {
  auto concat = dyn_cast<ConcatOp>(op);
  return isa<ReshapeOp, StopGradientOp, ConstantOp>(op) || op->hasAttr(kStridedAttr) ||
         op->hasAttr(kGatheredAttr) || (concat && concatsVectorsInPlace(concat));
}

/// Kernels whose code is only parallel loops over independent outputs (so they can share
/// a parallel region). Cross-entropy's loss is one serial sum: it stays alone.
bool isMember(Operation *op) {
  return op->getDialect() && isa<GptDialect>(op->getDialect()) && !isView(op) &&
         !isa<CrossEntropyOp, HorizontalOp, YieldOp>(op) && op->getNumResults() > 0;
}

struct Group {
  SmallVector<Operation *> members, above, below; // views to move above / below the group
};

void group(const Group &g) {
  ArrayRef<Operation *> members = g.members;
  for (Operation *v : g.above)
    v->moveBefore(members.front());
  llvm::SetVector<Value> inputs;
  SmallVector<Type> types;
  for (Operation *op : members) {
    inputs.insert(op->getOperands().begin(), op->getOperands().end());
    llvm::append_range(types, op->getResultTypes());
  }
  OpBuilder b(members.front());
  auto h = HorizontalOp::create(b, members.front()->getLoc(), types, inputs.getArrayRef());
  Block *body = b.createBlock(&h.getBody());
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  SmallVector<Value> yielded;
  for (Operation *op : members)
    llvm::append_range(yielded, b.clone(*op, map)->getResults());
  YieldOp::create(b, members.back()->getLoc(), yielded);
  unsigned next = 0;
  for (Operation *op : members)
    for (Value r : op->getResults())
      r.replaceAllUsesWith(h.getResult(next++));
  for (Operation *op : llvm::reverse(members))
    op->erase();
  Operation *last = h;
  for (Operation *v : g.below) {
    v->moveAfter(last);
    last = v;
  }
}

/// Groups the kernels of `fn`'s body (see the file comment); with `hoist`, the
/// independent kernels right after one that reads the group join the group first.
/// Returns the kernels the body then runs (groups, and members left alone).
int64_t groupKernels(func::FuncOp fn, bool hoist) {
  SmallVector<Group> groups;
  Group current;
  llvm::SmallPtrSet<Value, 32> produced; // by the current group's members and views below
  auto dependsOnGroup = [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value v) { return produced.contains(v); });
  };
  // `op` reads the group, so the group ends before it. The kernels right after `op` that
  // read neither the group nor anything from `op` on join the group first (moved above
  // `op`): q's rotary embedding reads q's product, and k's product after it joins q's.
  auto hoistIndependent = [&](Operation *op) {
    llvm::SmallPtrSet<Value, 32> skipped; // computed from `op` on
    auto readsSkipped = [&](Operation *o) {
      return llvm::any_of(o->getOperands(), [&](Value v) { return skipped.contains(v); });
    };
    for (Operation *o = op; o && !o->hasTrait<OpTrait::IsTerminator>();) {
      Operation *next = o->getNextNode();
      if (o != op && isMember(o) && !dependsOnGroup(o) && !readsSkipped(o)) {
        o->moveBefore(op);
        current.members.push_back(o);
        produced.insert(o->getResults().begin(), o->getResults().end());
      } else if (o == op || isView(o)) {
        skipped.insert(o->getResults().begin(), o->getResults().end());
      } else {
        break;
      }
      o = next;
    }
  };
  auto flush = [&] {
    if (current.members.size() >= 2)
      groups.push_back(current);
    current = Group();
    produced.clear();
  };
  for (Operation &op : fn.getBody().front()) {
    if (isView(&op) && !current.members.empty()) {
      bool below = dependsOnGroup(&op);
      (below ? current.below : current.above).push_back(&op);
      if (below)
        produced.insert(op.getResults().begin(), op.getResults().end());
      continue;
    }
    if (hoist && isMember(&op) && dependsOnGroup(&op) && !current.members.empty())
      hoistIndependent(&op);
    if (!isMember(&op) || dependsOnGroup(&op))
      flush();
    if (!isMember(&op))
      continue;
    current.members.push_back(&op);
    produced.insert(op.getResults().begin(), op.getResults().end());
  }
  flush();
  for (auto &g : groups)
    group(g);
  return llvm::count_if(fn.getBody().front(), [](Operation &op) {
    return isa<HorizontalOp, CrossEntropyOp>(op) || isMember(&op);
  });
}

struct FuseHorizontalPass : gpt::impl::FuseHorizontalBase<FuseHorizontalPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return; // a declaration: no body to transform
    // Joining kernels from after a group's reader moves them earlier, and can split a
    // later group (the GPU launches its members with a kernel family one by one, so
    // more groups can mean more launches): tried on a copy of the function, whose body
    // replaces the plainly grouped one only where it leaves fewer kernels.
    func::FuncOp trial = fn.clone();
    const int64_t joined = groupKernels(trial, /*hoist=*/true);
    if (joined < groupKernels(fn, /*hoist=*/false))
      fn.getBody().takeBody(trial.getBody());
    trial.erase();
  }
};
} // namespace
