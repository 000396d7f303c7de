//===- Passes.h - gptc passes and the compile pipeline --------------------===//
#ifndef GPTC_PASSES_PASSES_H
#define GPTC_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::gpt {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The function's loss as gpt-autodiff takes it unless told: the index of its last scalar
/// floating-point result, or -1 where there is none (Autodiff.cpp).
int64_t defaultLossIndex(func::ReturnOp ret);

/// Where the pipeline stops (`gptc compile --emit=...`).
enum class Stage { Gpt, Kernels };

/// What to compile: the forward only, its gradients, or a whole training step.
struct PipelineOptions {
  Stage stopAfter = Stage::Kernels;
  // Accumulate: gradient accumulation's micro-batch program (the gradients added into
  // grad.<p> states, gpt-accumulate-gradients); its step is Train with adamw.accumulated.
  enum class Mode { Forward, Gradients, Accumulate, Train } mode = Mode::Forward;
  bool promoteF64 = false; // compute in f64 (gptc check --gradcheck)
  bool fuse = true;        // gpt-fuse-elementwise (off: gptc compile -O0)
  // What the backward takes from the forward. Keep: the GELU's and LayerNorms' outputs,
  // and an exact GELU's erf too (gpt-keep-gelu-erf), memory for time, the CPU's choice.
  // Recompute: none of them (the GELU's gradient evaluates erf again,
  // gpt-recompute-activations computes the outputs again), time for memory, the GPU
  // targets' choice (bench/NOTES.md, "Memory").
  enum class Activations { Keep, Recompute } activations = Activations::Keep;
  // gpt-pair-weight-gradients: each weight gradient grouped with the next input gradient,
  // for targets that run a group's products side by side (the GPU's).
  bool pairWeightGradients = false;
  // gpt-fuse-matmul-epilogue's gelu-grad: a GELU's input gradient in the epilogue of the
  // product that computes its incoming gradient (the GPU's; slower on the CPU).
  bool geluGradEpilogue = false;
  int64_t redzone = 0;     // bytes between arena buffers, none reused (gptc compile --sanitize)
  AdamWOptions adamw;
};

/// The whole compile pipeline, one stage per line.
void buildPipeline(OpPassManager &pm, const PipelineOptions &options);

} // namespace mlir::gpt

#endif
