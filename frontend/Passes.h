//===- Passes.h - the frontend's passes (aten -> gpt) ---------------------===//
//
// What the rest of gptc sees of frontend/: its pass and the list of aten
// overloads it converts. AtenToGpt.h is the converters' own header.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_FRONTEND_PASSES_H
#define GPTC_FRONTEND_PASSES_H

#include "mlir/Pass/Pass.h"

#include <string>
#include <vector>

namespace mlir::gpt {

#define GEN_PASS_DECL
#include "frontend/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "frontend/Passes.h.inc"

inline void registerFrontendPasses() { registerGptFrontendPasses(); }

/// The aten overloads gpt-convert-aten converts ("aten.linear.default", ...), sorted.
std::vector<std::string> supportedAtenOps();

} // namespace mlir::gpt

#endif // GPTC_FRONTEND_PASSES_H
