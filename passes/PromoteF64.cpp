//===- PromoteF64.cpp - the gpt-promote-f64 pass ---------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_PROMOTEF64
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {
struct PromoteF64Pass : gpt::impl::PromoteF64Base<PromoteF64Pass> {
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    func::FuncOp fn = getOperation();
    Type f64 = Float64Type::get(&getContext());
    auto promote = [&](Type t) -> Type {
      auto rt = dyn_cast<RankedTensorType>(t);
      return rt && rt.getElementType().isF32() ? rt.clone(f64) : t;
    };
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments())
      arg.setType(promote(arg.getType()));
    fn.walk([&](Operation *op) {
      for (OpResult r : op->getResults())
        r.setType(promote(r.getType()));
      if (auto c = dyn_cast<ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (dense && dense.getElementType().isF32())
          c.setValueAttr(dense.mapValues(f64, [](const APFloat &v) {
            APFloat wide = v;
            bool lost = false;
            wide.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
            return wide.bitcastToAPInt();
          }));
      }
    });
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    fn.setType(FunctionType::get(&getContext(), body.getArgumentTypes(), ret.getOperandTypes()));
  }
};
} // namespace
