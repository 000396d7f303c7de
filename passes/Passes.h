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

/// Ops that compute each element of their result from the same element of their
/// (broadcast) operands alone: what gpt-fuse-elementwise puts into one kernel.
bool isFusibleElementwise(Operation *op);

/// Attribute names the passes leave for the code generator.
inline constexpr StringLiteral kOffsetsAttr = "gpt.offsets";
inline constexpr StringLiteral kArenaBytesAttr = "gpt.arena_bytes";
/// Per result of a kernel: the index of the function argument it is written into in
/// place (an update of a parameter or optimizer state), or -1 for an arena slot.
inline constexpr StringLiteral kInPlaceAttr = "gpt.in_place";

/// Where the pipeline stops (`gptc compile --emit=...`).
enum class Stage { Gpt, Kernels };

/// What to compile: the forward only, its gradients, or a whole training step.
struct PipelineOptions {
  Stage stopAfter = Stage::Kernels;
  enum class Mode { Forward, Gradients, Train } mode = Mode::Forward;
  bool promoteF64 = false; // compute in f64 (gptc check --gradcheck)
  bool fuse = true;        // gpt-fuse-elementwise (off: gptc compile -O0)
  AdamWOptions adamw;
};

/// The whole compile pipeline, one stage per line.
void buildPipeline(OpPassManager &pm, const PipelineOptions &options);

} // namespace mlir::gpt

#endif
