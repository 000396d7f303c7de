//===- Signature.h - what each argument and result of a function is ------===//
//
// A compiled function's signature attributes, spelled once. The capture and
// the frontend put them on the arguments, gpt-autodiff and gpt-adamw on the
// results they add; codegen writes them into the manifest (docs/artifact.md).
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_IR_SIGNATURE_H
#define GPTC_IR_SIGNATURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::gpt {

/// On an argument or a result: its name in the manifest ("wte.weight", "rng",
/// "grad.wte.weight", "adam.m.wte.weight", "loss").
inline constexpr StringLiteral kNameAttr = "gpt.name";
/// On an argument: "param" (a weight or buffer), "state" (optimizer state) or "input".
inline constexpr StringLiteral kKindAttr = "gpt.kind";
/// On a param: false for a buffer or a parameter without requires_grad (never trained).
inline constexpr StringLiteral kTrainableAttr = "gpt.trainable";
/// On a param that the kernels assume holds tril(ones) (gpt-raise-attention compiled it
/// into a causal mask); the runtime checks that it does.
inline constexpr StringLiteral kTrilOnesAttr = "gpt.tril_ones";
/// On a result: the name of the argument it overwrites (an update, in place).
inline constexpr StringLiteral kUpdatesAttr = "gpt.updates";
/// On a gradient result of gpt-autodiff: the parameter it is the gradient of.
inline constexpr StringLiteral kGradOfAttr = "gpt.grad_of";
/// On a gradient result of gpt-autodiff that nothing reached (the parameter is unused,
/// or used only through a detach), and on that parameter's argument (the manifest's
/// "no_gradient"): gpt-adamw leaves such a parameter as it is, as PyTorch's optimizers
/// skip one whose .grad is None.
inline constexpr StringLiteral kNoGradientAttr = "gpt.no_gradient";

/// Argument i's name and kind (null when absent).
StringAttr argName(func::FuncOp fn, unsigned i);
StringAttr argKind(func::FuncOp fn, unsigned i);
/// Result j's name, the argument it updates, the parameter it is the gradient of (null
/// when absent).
StringAttr resultName(func::FuncOp fn, unsigned j);
StringAttr resultUpdates(func::FuncOp fn, unsigned j);
StringAttr resultGradOf(func::FuncOp fn, unsigned j);

/// The attributes of an argument of `kind` named `name`.
DictionaryAttr argAttrs(Builder &b, StringRef kind, StringRef name);

} // namespace mlir::gpt

#endif // GPTC_IR_SIGNATURE_H
