//===- GptDialect.h - the gpt dialect -------------------------------------===//
#ifndef GPTC_IR_GPTDIALECT_H
#define GPTC_IR_GPTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/GptDialect.h.inc"
#include "ir/GptInterfaces.h.inc"
#include "ir/GptEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/GptAttrs.h.inc"

#define GET_OP_CLASSES
#include "ir/GptOps.h.inc"

namespace mlir::gpt {
/// A reduction's `order` attribute.
inline ReductionOrderAttr orderAttr(OpBuilder &b, ReductionOrder order) {
  return ReductionOrderAttr::get(b.getContext(), order);
}

/// Numpy broadcast of two shapes; failure if they are incompatible.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b);
} // namespace mlir::gpt

#endif // GPTC_IR_GPTDIALECT_H
