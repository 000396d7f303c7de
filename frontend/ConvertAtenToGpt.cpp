//===- ConvertAtenToGpt.cpp - the gpt-convert-aten pass -------------------===//
//
// Walks the captured function in order and replaces each torch.aten.* op by
// the gpt ops its converter builds. The converters live in *Patterns.cpp.
//
//===----------------------------------------------------------------------===//
#include "frontend/AtenToGpt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_CONVERTATENTOGPT
#include "frontend/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {
struct ConvertAtenToGptPass : gpt::impl::ConvertAtenToGptBase<ConvertAtenToGptPass> {
  void runOnOperation() override {
    const AtenConverterTable &table = atenConverters();
    SmallVector<Operation *> atenOps;
    getOperation()->walk([&](Operation *op) {
      if (op->getName().getStringRef().starts_with("torch."))
        atenOps.push_back(op);
    });
    bool failed = false;
    for (Operation *raw : atenOps) {
      AtenOp op(raw);
      // What every conversion takes for granted: tensors in and out, each operand named
      // by the capture's torch.operands.
      auto names = raw->getAttrOfType<ArrayAttr>("torch.operands");
      auto tensor = [](Type t) { return isa<RankedTensorType>(t); };
      if (!llvm::all_of(raw->getOperandTypes(), tensor) ||
          !llvm::all_of(raw->getResultTypes(), tensor) ||
          (raw->getNumOperands() &&
           (!names || names.size() != raw->getNumOperands() ||
            !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); })))) {
        (void)op.unsupported("operands and results must be ranked tensors, each operand named "
                             "in torch.operands");
        failed = true;
        continue;
      }
      auto it = table.find(op.name());
      if (it == table.end()) {
        (void)op.unsupported("no conversion to the gpt dialect");
        failed = true;
        continue;
      }
      OpBuilder b(raw);
      SmallVector<Value> results;
      if (mlir::failed(it->second(op, b, results))) {
        failed = true;
        continue;
      }
      if (results.size() != raw->getNumResults()) {
        raw->emitError() << "internal: conversion of '" << op.name() << "' produced "
                         << results.size() << " values for " << raw->getNumResults()
                         << " results";
        failed = true;
        continue;
      }
      for (auto [from, to] : llvm::zip(raw->getResults(), results)) {
        if (from.getType() != to.getType()) {
          raw->emitError() << "internal: conversion of '" << op.name() << "' produced "
                           << to.getType() << " for traced type " << from.getType();
          failed = true;
        }
        from.replaceAllUsesWith(to);
      }
      raw->erase();
    }
    if (failed)
      return signalPassFailure();
    // Number the random ops in program order: (seed, step, id, i) picks a mask bit.
    getOperation()->walk([](func::FuncOp fn) {
      int64_t id = 0;
      fn.walk([&](Operation *op) {
        if (isa<DropoutOp, AttentionOp>(op))
          op->setAttr("id", IntegerAttr::get(IntegerType::get(op->getContext(), 64), id++));
      });
    });
  }
};
} // namespace
