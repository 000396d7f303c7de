//===- TorchDialect.cpp ----------------------------------------------------===//
#include "frontend/TorchDialect.h"

#include "mlir/IR/MLIRContext.h"

using namespace mlir;

gpt::TorchDialect::TorchDialect(MLIRContext *ctx)
    : Dialect(getDialectNamespace(), ctx, TypeID::get<TorchDialect>()) {
  allowUnknownOperations();
}

MLIR_DEFINE_EXPLICIT_TYPE_ID(mlir::gpt::TorchDialect)
