//===- Pipeline.cpp - the gptc compile pipeline ---------------------------===//
#include "passes/Passes.h"

#include "frontend/AtenToGpt.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::gpt::buildPipeline(OpPassManager &pm, Stage stopAfter) {
  // aten -> gpt: every captured torch op becomes gpt ops, or a located error.
  pm.addPass(createConvertAtenToGpt());
  // Fold identities (eval-mode dropout, same-shape reshape), drop dead ops.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (stopAfter == Stage::Gpt)
    return;
  // One kernel per op (fusion comes later); give each result an arena slot.
  pm.addNestedPass<func::FuncOp>(createPlanMemory());
}
