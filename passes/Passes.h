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

/// On a gradient result of gpt-autodiff that nothing reached (the parameter is unused,
/// or used only through a detach): gpt-adamw leaves such a parameter as it is, as
/// PyTorch's optimizers skip one whose .grad is None.
inline constexpr StringLiteral kNoGradientAttr = "gpt.no_gradient";

/// Attribute names the passes leave for the code generator.
inline constexpr StringLiteral kOffsetsAttr = "gpt.offsets";
inline constexpr StringLiteral kArenaBytesAttr = "gpt.arena_bytes";
/// On the function when gpt-plan-memory left `redzone` bytes between buffers (gptc compile
/// --sanitize): the code generator poisons every arena byte no buffer holds.
inline constexpr StringLiteral kRedzoneAttr = "gpt.redzone";
/// Per result of a kernel: the index of the function argument it is written into in
/// place (an update of a parameter or optimizer state), or -1 for an arena slot.
inline constexpr StringLiteral kInPlaceAttr = "gpt.in_place";
/// On a gpt.split or gpt.concat that is a view rather than a kernel (gpt-plan-memory): a
/// split's results are strided views of its operand's buffer; a concat's operands are
/// written into its result's buffer by the ops that compute them.
inline constexpr StringLiteral kViewAttr = "gpt.view";

/// The bytes of one element of tensor `v` in a buffer (an i1 takes a byte).
int64_t elementBytes(Value v);
/// The bytes of tensor `v`'s buffer (at least 1, so that an empty tensor has an address).
int64_t byteSize(Value v);

/// The distance in elements between consecutive rows of `v` (a [B, T, H, D] operand or
/// result of attention) when it lives inside a wider buffer: a reshaped piece of a view
/// split (the split operand's last dim), or a result written into a view concat through a
/// reshape (the concat's last dim). 0 when `v` has a buffer of its own.
int64_t viewRowPitch(Value v);

/// Where the pipeline stops (`gptc compile --emit=...`).
enum class Stage { Gpt, Kernels };

/// What to compile: the forward only, its gradients, or a whole training step.
struct PipelineOptions {
  Stage stopAfter = Stage::Kernels;
  enum class Mode { Forward, Gradients, Train } mode = Mode::Forward;
  bool promoteF64 = false; // compute in f64 (gptc check --gradcheck)
  bool fuse = true;        // gpt-fuse-elementwise (off: gptc compile -O0)
  int64_t redzone = 0;     // bytes between arena buffers, none reused (gptc compile --sanitize)
  AdamWOptions adamw;
};

/// The whole compile pipeline, one stage per line.
void buildPipeline(OpPassManager &pm, const PipelineOptions &options);

} // namespace mlir::gpt

#endif
