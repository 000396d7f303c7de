//===- FuseElementwise.cpp - the gpt-fuse-elementwise pass ----------------===//
//
// Greedy over program order: a run of consecutive fusible ops with one result
// shape becomes one gpt.fused op. Consecutive runs only, so moving the ops into
// a region never reorders anything against the rest of the function. A
// reduce_sum joins the run that computes its operand (unless something after
// the kernel reads the run's values), and the ops right after it of the sum's
// shape join it too (its epilogue: RMSNorm's rsqrt of the mean square, say);
// after a row's sum, so do the ops of the summed shape that follow and read
// what the run computes (RMSNorm's scaling of x by it).
//
// Before the runs are formed, an elementwise op whose first user is an elementwise op
// of its shape that starts a run (after a matmul, say) moves down to just before that
// user, so that the two join one run: SwiGLU's silu(x W1) and (x W3) are computed in
// that order, and the product's matmul would otherwise split silu from the
// multiplication by x W3. Pure ops, so moving one changes no bits; the op leaves a run
// that none of its ops read it in, and that run stays whole.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// Ops whose every element comes from the same element of their (broadcast) operands
/// alone, by their scalar expression (ir/GptScalar.cpp), and that a fused body can hold.
bool isFusible(Operation *op) {
  auto elementwise = dyn_cast<ElementwiseOpInterface>(op);
  return elementwise && elementwise.isFusible();
}

ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

/// Replaces the consecutive ops of `run` by one gpt.fused op.
void fuse(ArrayRef<Operation *> run) {
  llvm::SmallPtrSet<Operation *, 16> inRun(run.begin(), run.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : run) {
    for (Value v : op->getOperands())
      if (!v.getDefiningOp() || !inRun.contains(v.getDefiningOp()))
        inputs.insert(v);
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !inRun.contains(u); }))
        outputs.push_back(r);
  }
  OpBuilder b(run.front());
  SmallVector<Type> types;
  for (Value o : outputs)
    types.push_back(o.getType());
  auto fused = FusedOp::create(b, run.front()->getLoc(), types, inputs.getArrayRef());
  Block *body = b.createBlock(&fused.getBody());
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  for (Operation *op : run)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value o : outputs)
    yielded.push_back(map.lookup(o));
  YieldOp::create(b, run.back()->getLoc(), yielded);
  for (auto [o, r] : llvm::zip(outputs, fused.getResults()))
    o.replaceAllUsesWith(r);
  for (Operation *op : llvm::reverse(run))
    op->erase();
}

/// Whether every value of `ops` is used only by ops of `run`.
bool usedOnlyIn(ArrayRef<Operation *> ops, ArrayRef<Operation *> run) {
  llvm::SmallPtrSet<Operation *, 16> inside(run.begin(), run.end());
  for (Operation *op : ops)
    for (Operation *user : op->getUsers())
      if (!inside.contains(user))
        return false;
  return true;
}

/// Whether `op` reads a value that an op of `run` before `red` computes (an element of
/// the sum).
bool readsElementOf(Operation *op, ArrayRef<Operation *> run, ReduceSumOp red) {
  for (Operation *before : run) {
    if (before == red)
      return false;
    for (Value v : op->getOperands())
      if (v.getDefiningOp() == before)
        return true;
  }
  return false;
}

/// Whether `op` reads a value an op of `run` computes. An op of a row's shape after the
/// row's sum joins the run only then: one that reads nothing of it (the square of another
/// gradient after the sum of one's squares) is a kernel of its own, else it waits for the
/// sum for nothing, and a sum of it then waits for this whole kernel: the gradient norm's
/// sums had become a chain of kernels, each waiting for the one before.
bool readsRun(Operation *op, ArrayRef<Operation *> run) {
  for (Value v : op->getOperands())
    if (v.getDefiningOp() && llvm::is_contained(run, v.getDefiningOp()))
      return true;
  return false;
}

/// The op of `block` that uses `op`'s values first, or null where a user is elsewhere.
Operation *firstUserIn(Block *block, Operation *op) {
  Operation *first = nullptr;
  for (Operation *user : op->getUsers()) {
    if (user->getBlock() != block)
      return nullptr;
    if (!first || user->isBeforeInBlock(first))
      first = user;
  }
  return first;
}

/// Whether `user`, an elementwise op right after `prev`, starts a run whatever precedes
/// `prev`: `prev` ends runs (neither fusible nor a sum), or is a sum that `user` cannot
/// join (its shape is neither the sum's nor, after a row's sum, the row's).
bool startsRun(Operation *prev, Operation *user) {
  auto sum = dyn_cast<ReduceSumOp>(prev);
  if (!sum)
    return !isFusible(prev);
  return shapeOf(user) != shapeOf(sum) &&
         !(FusedOp::sumsRows(sum) && shapeOf(user) == sum.getX().getType().getShape());
}

/// Moves each elementwise op down to just before its first user where that user is an
/// elementwise op of its shape that starts a run (see startsRun): the op then joins that
/// run, and leaves its own without splitting it (nothing between uses it). Last op first,
/// so that a chain of such ops moves down together. RMSNorm's gradient is the case past a
/// sum: dy * w, computed before the sum of dy * x_hat over the rows (the weight's
/// gradient), moves after it into the row kernel that reads it, and the column sum is left
/// with only its own element to compute.
void sinkToUsers(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (!isFusible(op))
      continue;
    Operation *first = firstUserIn(&block, op);
    if (first && first != op->getNextNode() && isFusible(first) &&
        shapeOf(first) == shapeOf(op) && startsRun(first->getPrevNode(), first))
      op->moveBefore(first);
  }
}

struct FuseElementwisePass : gpt::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    // stop_gradient means something only to gpt-autodiff, which has run: dropped (but where
    // the function returns it) so that a detach does not cut a chain of elementwise ops.
    getOperation().walk([](StopGradientOp op) {
      if (llvm::none_of(op->getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); })) {
        op.replaceAllUsesWith(op.getX());
        op.erase();
      }
    });
    sinkToUsers(getOperation().getBody().front());
    SmallVector<SmallVector<Operation *>> runs;
    SmallVector<Operation *> run;
    // Set while `run` holds a reduce_sum: the ops after it that compute from its sum (its
    // epilogue) join the run while they have the sum's shape; after a row's sum (trailing
    // dims, kept), then the ops of the row's shape (`post`), which may also read the
    // values the sum adds (the code generator computes them again for each element).
    ReduceSumOp sum;
    bool post = false;
    auto flush = [&] {
      // The ops before the sum are the element it adds, computed in the sum's loop and
      // never stored: if one of their values is read after the kernel, they are a kernel
      // of their own, and the sum starts another.
      auto at = sum ? llvm::find(run, sum.getOperation()) : run.end();
      SmallVector<SmallVector<Operation *>> parts;
      if (at != run.begin() && at != run.end() && !usedOnlyIn(ArrayRef(run.begin(), at), run))
        parts = {SmallVector<Operation *>(run.begin(), at), SmallVector<Operation *>(at, run.end())};
      else
        parts = {run};
      for (auto &part : parts)
        if (part.size() >= 2)
          runs.push_back(part);
      run.clear();
      sum = {};
      post = false;
    };
    for (Operation &op : getOperation().getBody().front()) {
      // A sum over the run's last value takes the run in as the element it adds (no
      // intermediate in memory); otherwise it starts a run of its own.
      if (auto red = dyn_cast<ReduceSumOp>(op)) {
        if (run.empty() || sum || red.getX().getDefiningOp() != run.back())
          flush();
        run.push_back(&op);
        sum = red;
        continue;
      }
      if (!isFusible(&op)) {
        flush();
        continue;
      }
      if (sum) {
        bool ofSum = shapeOf(&op) == shapeOf(sum);
        bool ofRow = !ofSum && shapeOf(&op) == sum.getX().getType().getShape() &&
                     FusedOp::sumsRows(sum);
        if ((ofSum && !post && !readsElementOf(&op, run, sum)) ||
            (ofRow && readsRun(&op, run))) {
          post |= ofRow;
          run.push_back(&op);
          continue;
        }
        flush();
      }
      if (!run.empty() && shapeOf(&op) != shapeOf(run.front()))
        flush();
      run.push_back(&op);
    }
    flush();
    for (auto &r : runs)
      fuse(r);
  }
};
} // namespace
