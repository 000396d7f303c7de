//===- Autodiff.cpp - the gpt-autodiff pass -------------------------------===//
//
// Reverse mode over one function: activity analysis forward (which values
// depend on a parameter), then a reverse walk asking each active op for its
// VJP. Gradient contributions to one value are kept with the program position
// of the use that produced them and summed in increasing position order, so
// a tied weight's gradient has one fixed order however the graph is walked.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/Signature.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

namespace mlir::gpt {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

// A parameter training differentiates: kind "param", unless marked `gpt.trainable = false`
// (a buffer or a parameter without requires_grad: loaded from the weights, never updated).
bool isParam(func::FuncOp fn, unsigned i) {
  auto kind = argKind(fn, i);
  auto trainable = fn.getArgAttrOfType<BoolAttr>(i, kTrainableAttr);
  return kind && kind.getValue() == "param" && !(trainable && !trainable.getValue());
}

} // namespace

int64_t mlir::gpt::defaultLossIndex(func::ReturnOp ret) {
  int64_t index = -1;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && t.getRank() == 0 && isa<FloatType>(t.getElementType()))
      index = i;
  return index;
}

namespace {

struct AutodiffPass : gpt::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    func::FuncOp fn = getOperation();
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // The loss: the given result, or the last scalar floating-point one.
    int64_t lossIndex = lossIndex_();
    if (lossIndex < 0)
      lossIndex = defaultLossIndex(ret);
    if (lossIndex < 0 || lossIndex >= (int64_t)ret.getNumOperands()) {
      fn.emitError("gpt-autodiff: no scalar floating-point loss result to differentiate");
      return signalPassFailure();
    }
    Value loss = ret.getOperand(lossIndex);

    // Forward activity: values that depend on a parameter.
    DenseSet<Value> active;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (isParam(fn, i))
        active.insert(fn.getArgument(i));
    DenseMap<Operation *, unsigned> position;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      position[&op] = ops.size();
      ops.push_back(&op);
      if (isa<StopGradientOp>(op))
        continue;
      if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
        for (Value r : op.getResults())
          active.insert(r);
    }

    // Gradient contributions per value, keyed by the position of the use.
    DenseMap<Value, std::map<unsigned, SmallVector<Value>>> contributions;
    OpBuilder b(ret);
    auto total = [&](Value v) -> Value {
      auto it = contributions.find(v);
      if (it == contributions.end())
        return Value();
      Value sum;
      for (auto &[pos, values] : it->second)
        for (Value c : values)
          sum = sum ? AddOp::create(b, c.getLoc(), c.getType(), sum, c).getResult() : c;
      return sum;
    };

    auto lossType = cast<RankedTensorType>(loss.getType());
    Value seed = ConstantOp::create(
        b, fn.getLoc(), lossType,
        DenseElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0).getValue()));
    contributions[loss][ops.size()].push_back(seed);

    for (Operation *op : llvm::reverse(ops)) {
      if (!llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
        continue;
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(total(r));
        any |= (bool)resultGrads.back();
      }
      if (!any)
        continue;
      auto vjp = dyn_cast<VjpOpInterface>(op);
      if (!vjp) {
        op->emitError("gpt-autodiff: '") << op->getName() << "' has no gradient";
        return signalPassFailure();
      }
      SmallVector<Value> operandGrads;
      if (failed(vjp.buildVjp(b, resultGrads, operandGrads)))
        return signalPassFailure();
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
        if (grad && active.contains(operand))
          contributions[operand][position[op]].push_back(grad);
    }

    // One gradient result per parameter, zeros where nothing reached it (marked so).
    SmallVector<Value> results(ret.getOperands());
    SmallVector<Type> types(fn.getResultTypes());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      resultAttrs.push_back(fn.getResultAttrDict(i) ? fn.getResultAttrDict(i)
                                                    : b.getDictionaryAttr({}));
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (!isParam(fn, i))
        continue;
      Value arg = fn.getArgument(i);
      auto type = cast<RankedTensorType>(arg.getType());
      Value grad = total(arg);
      const bool reached = static_cast<bool>(grad);
      if (!grad) {
        Value zero = ConstantOp::create(
            b, fn.getLoc(), RankedTensorType::get({}, type.getElementType()),
            DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                   b.getFloatAttr(type.getElementType(), 0.0).getValue()));
        grad = BroadcastOp::create(b, fn.getLoc(), type, zero);
      }
      auto name = argName(fn, i);
      std::string pname = name ? name.getValue().str() : "arg" + std::to_string(i);
      results.push_back(grad);
      types.push_back(type);
      SmallVector<NamedAttribute> attrs = {
          b.getNamedAttr(kGradOfAttr, b.getStringAttr(pname)),
          b.getNamedAttr(kNameAttr, b.getStringAttr("grad." + pname))};
      // Nothing reached the parameter (unused, or used only through a detach): PyTorch
      // leaves its .grad None, and its optimizer then skips it, weight decay included.
      if (!reached) {
        attrs.push_back(b.getNamedAttr(kNoGradientAttr, b.getUnitAttr()));
        fn.setArgAttr(i, kNoGradientAttr, b.getUnitAttr()); // the manifest says so
      }
      resultAttrs.push_back(b.getDictionaryAttr(attrs));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    fn.setType(FunctionType::get(&getContext(), fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(resultAttrs);
  }

  int64_t lossIndex_() const { return lossIndex; }
};
} // namespace
