//===- AdamW.cpp - the gpt-adamw pass -------------------------------------===//
//
// The optimizer as IR: gradient clipping and AdamW with PyTorch's semantics
// (torch.nn.utils.clip_grad_norm_, torch.optim.AdamW's foreach update), built
// from elementwise gpt ops. Scalars that PyTorch computes in Python doubles
// (bias corrections, step size, decay factor) are computed here in f64 and
// converted once, as PyTorch converts them when it applies them.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/Signature.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_ADAMW
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct Builder {
  OpBuilder &b;
  Location loc;

  RankedTensorType tt(Value v) { return cast<RankedTensorType>(v.getType()); }
  Value scalar(double v, Type elem) {
    auto type = RankedTensorType::get({}, elem);
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, b.getFloatAttr(elem, v).getValue()));
  }
  template <typename Op> Value bin(Value x, Value y) {
    auto shape = broadcastShapes(tt(x).getShape(), tt(y).getShape());
    return Op::create(b, loc, tt(x).clone(*shape), x, y);
  }
  Value add(Value x, Value y) { return bin<AddOp>(x, y); }
  Value sub(Value x, Value y) { return bin<SubOp>(x, y); }
  Value mul(Value x, Value y) { return bin<MulOp>(x, y); }
  Value div(Value x, Value y) { return bin<DivOp>(x, y); }
  Value pow(Value x, Value y) { return bin<PowOp>(x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x.getType(), x); }
  Value neg(Value x) { return NegOp::create(b, loc, x.getType(), x); }
  Value min(Value x, Value y) { return bin<MinOp>(x, y); }
  Value convert(Value x, Type elem) {
    if (tt(x).getElementType() == elem)
      return x;
    return ConvertOp::create(b, loc, tt(x).clone(elem), x);
  }
  /// Sum over every element (canonical order, row-major).
  Value sum(Value x) {
    auto t = tt(x);
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < t.getRank(); ++d)
      dims.push_back(d);
    return ReduceSumOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), x,
                               b.getDenseI64ArrayAttr(dims), b.getBoolAttr(false),
                               ReductionOrderAttr::get(b.getContext(), ReductionOrder::Canonical));
  }
  Value sumOfSquares(Value x) { return sum(mul(x, x)); }
};

struct AdamWPass : gpt::impl::AdamWBase<AdamWPass> {
  using AdamWBase::AdamWBase;

  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    func::FuncOp fn = getOperation();
    MLIRContext *ctx = &getContext();
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Which results are gradients, of which parameter argument.
    DenseMap<StringRef, unsigned> argByName;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto n = argName(fn, i))
        argByName[n.getValue()] = i;
    struct Param {
      unsigned arg;
      Value grad;
      std::string name;
      bool reached; // else a zero gradient: the parameter is not updated (kNoGradientAttr)
    };
    SmallVector<Param> params;
    SmallVector<Value> kept;
    SmallVector<DictionaryAttr> keptAttrs;
    for (unsigned j = 0; j < ret.getNumOperands(); ++j) {
      auto of = resultGradOf(fn, j);
      if (!of) {
        kept.push_back(ret.getOperand(j));
        keptAttrs.push_back(fn.getResultAttrDict(j) ? fn.getResultAttrDict(j)
                                                    : DictionaryAttr::get(ctx, {}));
        continue;
      }
      if (!argByName.count(of.getValue())) {
        fn.emitError("gpt-adamw: gradient of unknown parameter '") << of.getValue() << "'";
        return signalPassFailure();
      }
      params.push_back({argByName[of.getValue()], ret.getOperand(j), of.getValue().str(),
                        !fn.getResultAttr(j, kNoGradientAttr)});
    }
    if (params.empty()) {
      fn.emitError("gpt-adamw: no gradients to apply (the model has no trainable parameter, "
                   "or gpt-autodiff did not run)");
      return signalPassFailure();
    }
    // One element type for all: the gradient norm sums over every parameter's.
    Type elem = cast<RankedTensorType>(params.front().grad.getType()).getElementType();
    for (const Param &p : params)
      if (cast<RankedTensorType>(p.grad.getType()).getElementType() != elem) {
        fn.emitError("gpt-adamw: parameters '")
            << params.front().name << "' (" << elem << ") and '" << p.name << "' ("
            << cast<RankedTensorType>(p.grad.getType()).getElementType()
            << ") differ in element type; training takes parameters of one type";
        return signalPassFailure();
      }
    Type f64 = Float64Type::get(ctx);
    auto scalarF64 = RankedTensorType::get({}, f64);
    OpBuilder ab(ctx);
    auto append = [&](Type type, StringRef kind, StringRef name) {
      unsigned index = fn.getNumArguments();
      (void)fn.insertArgument(index, type, argAttrs(ab, kind, name), fn.getLoc());
      return fn.getArgument(index);
    };
    if (accumulated < 0) {
      fn.emitError("gpt-adamw: accumulated must be >= 0, got ") << accumulated;
      return signalPassFailure();
    }
    if (accumulated > 0) {
      // The gradients are the sums gpt-accumulate-gradients left in the grad.<p> states,
      // over `accumulated` micro-batches, scaled by 1/N; nothing else is computed.
      OpBuilder b(ret);
      Builder B{b, fn.getLoc()};
      for (Param &p : params)
        if (p.reached) {
          p.grad = append(fn.getArgument(p.arg).getType(), "state", "grad." + p.name);
          if (accumulated > 1)
            p.grad = B.mul(p.grad, B.scalar(1.0 / static_cast<double>(accumulated), elem));
        }
      kept.clear();
      keptAttrs.clear();
    }

    // New arguments: lr and step (inputs), then the moments (state).
    Value lr = append(scalarF64, "input", "lr");
    Value step = append(scalarF64, "input", "step");
    SmallVector<Value> m, v;
    for (Param &p : params) {
      Type type = fn.getArgument(p.arg).getType();
      m.push_back(p.reached ? append(type, "state", "exp_avg." + p.name) : Value());
      v.push_back(p.reached ? append(type, "state", "exp_avg_sq." + p.name) : Value());
    }

    OpBuilder b(ret);
    Builder B{b, fn.getLoc()};
    // Gradient norms, before clipping: reported and used for the total. Each tensor's norm
    // and its square are taken right after its sum (so they join the sum's kernel), then
    // gathered: the total's sum reads the squares in parameter order, as
    // sumOfSquares(norms) would.
    auto vec = RankedTensorType::get({(int64_t)params.size()}, elem);
    auto piece = RankedTensorType::get({1}, elem);
    SmallVector<Value> norms, squares;
    for (Param &p : params) {
      Value norm = B.sqrt(B.sumOfSquares(p.grad)), square = B.mul(norm, norm);
      norms.push_back(ReshapeOp::create(b, B.loc, piece, norm));
      squares.push_back(ReshapeOp::create(b, B.loc, piece, square));
    }
    Value normVec = ConcatOp::create(b, B.loc, vec, norms, b.getI64IntegerAttr(0));
    Value clamped;
    if (gradClip > 0.0) {
      // total = ||(norm_1, ..., norm_P)||, tensors in parameter order.
      Value total = B.sqrt(B.sum(ConcatOp::create(b, B.loc, vec, squares, b.getI64IntegerAttr(0))));
      Value coef = B.div(B.scalar(gradClip, elem), B.add(total, B.scalar(1e-6, elem)));
      clamped = B.min(coef, B.scalar(1.0, elem));
    }

    // Scalars in f64 (Python floats in PyTorch), converted where applied.
    Value one = B.scalar(1.0, f64);
    Value bc1 = B.sub(one, B.pow(B.scalar(beta1, f64), step));
    Value bc2 = B.sub(one, B.pow(B.scalar(beta2, f64), step));
    Value stepSize = B.convert(B.neg(B.div(lr, bc1)), elem);
    Value bc2Sqrt = B.convert(B.sqrt(bc2), elem);
    Value decay = B.convert(B.sub(one, B.mul(lr, B.scalar(weightDecay, f64))), elem);
    Value oneMinusB1 = B.scalar(1.0 - beta1, elem), b2 = B.scalar(beta2, elem);
    Value oneMinusB2 = B.scalar(1.0 - beta2, elem), epsV = B.scalar(eps, elem);

    SmallVector<Value> results(kept);
    SmallVector<Type> types;
    for (Value k : kept)
      types.push_back(k.getType());
    SmallVector<DictionaryAttr> resultAttrs(keptAttrs);
    auto update = [&](Value value, StringRef target) {
      results.push_back(value);
      types.push_back(value.getType());
      resultAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr(kNameAttr, b.getStringAttr(target)),
           b.getNamedAttr(kUpdatesAttr, b.getStringAttr(target))}));
    };
    for (auto [i, p] : llvm::enumerate(params)) {
      if (!p.reached)
        continue; // no update, no weight decay, no moments (its norm counts as 0)
      // Clipping right before the update, so that both land in one fused kernel.
      if (clamped)
        p.grad = B.mul(p.grad, clamped);
      Value param = fn.getArgument(p.arg);
      bool decays = cast<RankedTensorType>(param.getType()).getRank() >= 2 && weightDecay != 0.0;
      Value p1 = decays ? B.mul(param, decay) : param;
      Value m1 = B.add(m[i], B.mul(B.sub(p.grad, m[i]), oneMinusB1));    // lerp(m, g, 1 - b1)
      Value v1 = B.add(B.mul(v[i], b2), B.mul(B.mul(oneMinusB2, p.grad), p.grad));
      Value denom = B.add(B.div(B.sqrt(v1), bc2Sqrt), epsV);
      Value p2 = B.add(p1, B.mul(stepSize, B.div(m1, denom)));
      update(p2, p.name);
      update(m1, "exp_avg." + p.name);
      update(v1, "exp_avg_sq." + p.name);
    }
    results.push_back(normVec);
    types.push_back(normVec.getType());
    resultAttrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kNameAttr,
                                                              b.getStringAttr("grad_norms"))}));
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    if (accumulated > 0) {
      // The forward and the backward are dead: erased, then the inputs only they read
      // (the batch, the dropout seed), so that the program takes lr and step alone.
      IRRewriter rewriter(ctx);
      (void)runRegionDCE(rewriter, fn.getBody());
      for (unsigned i = fn.getNumArguments(); i-- > 0;)
        if (fn.getArgument(i).use_empty() && argKind(fn, i) &&
            argKind(fn, i).getValue() == "input")
          (void)fn.eraseArgument(i);
    }
    fn.setType(FunctionType::get(ctx, fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(resultAttrs);
  }
};
} // namespace
