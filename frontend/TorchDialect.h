//===- TorchDialect.h - a placeholder dialect for captured aten ops -------===//
//
// The capture writes aten ops in generic form ("torch.aten.linear.default").
// This dialect only gives them a namespace: it accepts any op name, so no
// other unregistered dialect has to be allowed. gpt-convert-aten removes them.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_FRONTEND_TORCHDIALECT_H
#define GPTC_FRONTEND_TORCHDIALECT_H

#include "mlir/IR/Dialect.h"

namespace mlir::gpt {
class TorchDialect : public Dialect {
public:
  explicit TorchDialect(MLIRContext *ctx);
  static StringRef getDialectNamespace() { return "torch"; }
};
} // namespace mlir::gpt

MLIR_DECLARE_EXPLICIT_TYPE_ID(mlir::gpt::TorchDialect)

#endif
