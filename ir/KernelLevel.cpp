//===- KernelLevel.cpp - buffer sizes and views of the kernel-level IR ----===//
#include "ir/KernelLevel.h"

#include "ir/GptDialect.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::gpt;

int64_t mlir::gpt::byteSize(Value v) {
  return std::max<int64_t>(
      cast<RankedTensorType>(v.getType()).getNumElements() * elementBytes(v), 1);
}

int64_t mlir::gpt::elementBytes(Value v) {
  Type e = cast<RankedTensorType>(v.getType()).getElementType();
  return e.isInteger(1) ? 1 : (int64_t)(e.getIntOrFloatBitWidth() / 8);
}

int64_t mlir::gpt::viewRowPitch(Value v) {
  // A reshaped piece of a view split, read by attention.
  if (auto r = v.getDefiningOp<ReshapeOp>())
    if (auto split = r.getX().getDefiningOp<SplitOp>(); split && split->hasAttr(kViewAttr))
      return cast<RankedTensorType>(split.getX().getType()).getShape().back();
  // A result of attention_grad written into a view concat (through its one reshape).
  if (v.hasOneUse())
    if (auto r = dyn_cast<ReshapeOp>(*v.getUsers().begin()); r && r->hasOneUse())
      if (auto concat = dyn_cast<ConcatOp>(*r->getUsers().begin()); concat && concat->hasAttr(kViewAttr))
        return concat.getType().getShape().back();
  return 0;
}
