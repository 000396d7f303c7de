//===- AccumulateGradients.cpp - the gpt-accumulate-gradients pass --------===//
//
// Gradient accumulation's micro-batch program: each gradient of gpt-autodiff is added
// into a state that outlives the call (`grad.<p>`), first ? g : acc + g, so that a
// training step over N micro-batches sums them in micro-batch order; gpt-adamw
// {accumulated=N} applies the sums in a second program over the same states.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/Signature.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {
struct AccumulateGradientsPass
    : gpt::impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return; // a declaration: no body to transform
    MLIRContext *ctx = &getContext();
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    OpBuilder ab(ctx);
    auto append = [&](Type type, StringRef kind, StringRef name) {
      unsigned index = fn.getNumArguments();
      (void)fn.insertArgument(index, type, argAttrs(ab, kind, name), fn.getLoc());
      return fn.getArgument(index);
    };
    auto flag = RankedTensorType::get({}, IntegerType::get(ctx, 1));
    Value first;
    OpBuilder b(ret);
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> attrs;
    bool any = false;
    for (unsigned j = 0; j < ret.getNumOperands(); ++j) {
      Value v = ret.getOperand(j);
      StringAttr of = resultGradOf(fn, j);
      if (!of) {
        results.push_back(v);
        attrs.push_back(fn.getResultAttrDict(j) ? fn.getResultAttrDict(j)
                                                : DictionaryAttr::get(ctx, {}));
        continue;
      }
      any = true;
      if (fn.getResultAttr(j, kNoGradientAttr))
        continue; // zeros: nothing to add, and gpt-adamw leaves the parameter as it is
      if (!first)
        first = append(flag, "input", "first");
      std::string name = ("grad." + of.getValue()).str();
      Value acc = append(v.getType(), "state", name);
      Value sum = AddOp::create(b, fn.getLoc(), v.getType(), acc, v);
      results.push_back(WhereOp::create(b, fn.getLoc(), v.getType(), first, v, sum));
      attrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kNameAttr, b.getStringAttr(name)),
                                           b.getNamedAttr(kUpdatesAttr, b.getStringAttr(name))}));
    }
    if (!any) {
      fn.emitError("gpt-accumulate-gradients: no gradients to accumulate (gpt-autodiff did "
                   "not run)");
      return signalPassFailure();
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value r : results)
      types.push_back(r.getType());
    fn.setType(FunctionType::get(ctx, fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(attrs);
  }
};
} // namespace
