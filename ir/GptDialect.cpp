//===- GptDialect.cpp - gpt dialect registration --------------------------===//
#include "ir/GptDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gpt;

#include "ir/GptDialect.cpp.inc"
#include "ir/GptEnums.cpp.inc"
#include "ir/GptInterfaces.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/GptAttrs.cpp.inc"

void GptDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/GptOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/GptAttrs.cpp.inc"
      >();
}

Operation *GptDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                           Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
