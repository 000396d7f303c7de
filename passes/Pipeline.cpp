//===- Pipeline.cpp - the gptc compile pipeline ---------------------------===//
#include "passes/Passes.h"

#include "frontend/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::gpt::buildPipeline(OpPassManager &pm, const PipelineOptions &options) {
  using Mode = PipelineOptions::Mode;
  // aten -> gpt: every captured torch op becomes gpt ops, or a located error.
  pm.addPass(createConvertAtenToGpt());
  // Attention spelled out with a causal mask buffer becomes gpt.attention (at every -O
  // level: the raised op sums in its own order).
  pm.addNestedPass<func::FuncOp>(createRaiseAttention());
  // The f64 twin of the model, for gradient checks.
  if (options.promoteF64)
    pm.addNestedPass<func::FuncOp>(createPromoteF64());
  // Fold identities (eval-mode dropout, same-shape reshape), drop dead ops.
  pm.addPass(createCanonicalizerPass());
  // Reverse-mode gradients of the loss for every parameter.
  if (options.mode != Mode::Forward)
    pm.addNestedPass<func::FuncOp>(createAutodiff());
  // Clipping and AdamW as IR: the step updates parameters and moments in place (with
  // gradient accumulation, from the sums the micro-batch program left in state).
  if (options.mode == Mode::Train)
    pm.addNestedPass<func::FuncOp>(createAdamW(options.adamw));
  if (options.mode == Mode::Accumulate)
    pm.addNestedPass<func::FuncOp>(createAccumulateGradients());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.stopAfter == Stage::Gpt)
    return;
  // An exact GELU keeps its erf for its gradient, or the backward computes the GELU's and
  // the LayerNorms' outputs again (as the target asks). Runs of elementwise ops become one
  // kernel each, reading the transposes, splits and slices that only they read in place;
  // every other op is a kernel. Then consecutive independent kernels share
  // one parallel region (for the GPU, each weight gradient first moved beside the next
  // input gradient, so that the two run side by side).
  if (options.fuse) {
    if (options.activations == PipelineOptions::Activations::Keep)
      pm.addNestedPass<func::FuncOp>(createKeepGeluErf());
    else
      pm.addNestedPass<func::FuncOp>(createRecomputeActivations());
    pm.addNestedPass<func::FuncOp>(
        createFuseMatmulEpilogue(FuseMatmulEpilogueOptions{options.geluGradEpilogue}));
    pm.addNestedPass<func::FuncOp>(createFuseElementwise());
    pm.addNestedPass<func::FuncOp>(createStridedViews());
    if (options.pairWeightGradients)
      pm.addNestedPass<func::FuncOp>(createPairWeightGradients());
    pm.addNestedPass<func::FuncOp>(createFuseHorizontal());
  }
  // Give each kernel result an arena slot (-O0: no views either, one kernel per op).
  // --sanitize: no slot reused, redzones between the buffers.
  pm.addNestedPass<func::FuncOp>(
      createPlanMemory(PlanMemoryOptions{options.fuse, options.redzone}));
}
