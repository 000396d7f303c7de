//===- GptScalar.h - the C spelling of element types and values -----------===//
//
// An elementwise op's meaning is a C expression over its operands' elements
// (ElementwiseOpInterface::getScalarExpr, ir/GptScalar.cpp). These are the
// pieces such an expression is written with: an element type's C name and an
// exact literal of a value in it. Every target compiles the same C: the
// portable prelude (runtime/include/gptc/prelude.h) is host and device code.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_IR_GPTSCALAR_H
#define GPTC_IR_GPTSCALAR_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::gpt {

/// The C type of an element type (float, double, int64_t, bool), or failure.
FailureOr<std::string> cType(Type t);
/// An exact C literal for `v` as element type `t` (hex floats keep every bit).
std::string literal(double v, Type t);
/// An exact C literal for an element attribute (an i64 keeps all 64 bits).
std::string elementLiteral(Attribute a, Type t);

/// A dropout's literals: p as gptc::dropout_keep compares it (a float) and the scale of a
/// kept element, 1/(1-p) in the element type `elem`.
struct DropoutLiterals {
  std::string p, scale;
};
DropoutLiterals dropoutLiterals(double p, Type elem);

} // namespace mlir::gpt

#endif // GPTC_IR_GPTSCALAR_H
