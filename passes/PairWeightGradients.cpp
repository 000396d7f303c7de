//===- PairWeightGradients.cpp - the gpt-pair-weight-gradients pass -------===//
//
// A weight gradient (a matmul whose left operand is transposed: X^T dY) is read only by
// the optimizer at the step's end, yet autodiff places it where its operands are ready,
// next to elementwise work. This pass moves each one down to right after the next
// product that is not one (the following layer's input gradient, dY W), provided nothing
// on the way reads it:
//
//   %dw = gpt.matmul %x, %dy {transpose_lhs = true}     // a weight gradient
//   %g  = gpt.gelu_grad %dh, %h
//   %dx = gpt.matmul %g, %w
// becomes
//   %g  = gpt.gelu_grad %dh, %h
//   %dx = gpt.matmul %g, %w
//   %dw = gpt.matmul %x, %dy {transpose_lhs = true}
//
// so that gpt-fuse-horizontal puts the two products in one group, whose products the GPU
// runs as parallel branches of the step (a weight gradient's few, long blocks beside the
// input gradient's many). Every op computes what it computed before: the bits are
// unchanged. Operands stay live until the new position (the memory plan sees it). For
// the GPU targets; runs after gpt-fuse-elementwise, before gpt-fuse-horizontal; gptc
// compile -O0 skips it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_PAIRWEIGHTGRADIENTS
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

bool isWeightGradient(Operation *op) {
  auto mm = dyn_cast<MatmulOp>(op);
  return mm && mm.getTransposeLhs();
}

/// The first product after `mm` that is not a weight gradient, if nothing from `mm` up to
/// it reads `mm`'s result; else null.
Operation *nextProduct(MatmulOp mm) {
  for (Operation *op = mm->getNextNode(); op; op = op->getNextNode()) {
    if (llvm::is_contained(op->getOperands(), mm.getResult()))
      return nullptr;
    if (isa<MatmulOp>(op) && !isWeightGradient(op))
      return op;
  }
  return nullptr;
}

struct PairWeightGradients : gpt::impl::PairWeightGradientsBase<PairWeightGradients> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return; // a declaration: no body to transform
    SmallVector<MatmulOp> grads;
    for (Operation &op : fn.getBody().front())
      if (isWeightGradient(&op))
        grads.push_back(cast<MatmulOp>(op));
    for (MatmulOp mm : grads)
      if (Operation *next = nextProduct(mm))
        mm->moveAfter(next);
  }
};

} // namespace
