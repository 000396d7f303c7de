//===- KeepGeluErf.cpp - the gpt-keep-gelu-erf pass -------------------------===//
//
// An exact GELU and its gradient both evaluate erf(x / sqrt 2) on the same x:
// the forward for 0.5 x (1 + erf), the backward for the CDF in g (CDF + x PDF).
// erf is most of either kernel's time (bench/NOTES.md, "Elementwise math"
// has the figures), so this pass has the forward keep it where the GELU is a kernel of its own anyway (its result read
// only by matmuls, as in a GPT's MLP; a GELU that fusion puts into its users'
// kernel is left as it is):
//
//   %y = gpt.gelu %x {approximate = #gpt.approximate<none>}
//   %d = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>}
// becomes
//   %y, %e = gpt.gelu_keep_erf %x
//   %d = gpt.gelu_grad %g, %x erf %e {approximate = #gpt.approximate<none>}
//
// The kept value is the one the gradient would compute (the same function of
// the same argument), so the bits do not change; the cost is one more buffer
// of x's size, live from the forward to the backward. Runs after autodiff;
// gptc compile -O0 skips it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

#include "mlir/IR/TypeUtilities.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_KEEPGELUERF
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// Whether only matmuls read `v`, directly or through reshapes (which alias, no kernel).
bool onlyMatmulsRead(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *u) {
    if (auto r = dyn_cast<ReshapeOp>(u))
      return onlyMatmulsRead(r.getResult());
    return isa<MatmulOp>(u);
  });
}

struct KeepGeluErf : gpt::impl::KeepGeluErfBase<KeepGeluErf> {
  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    SmallVector<GeluOp> gelus;
    // Only an f32 or f64 GELU that is a kernel of its own anyway: one whose result only
    // matmuls read, directly or through reshapes (a GPT's MLP: c_proj and its weight
    // gradient). One that fusion would put into its users' kernel keeps recomputing.
    getOperation().walk([&](GeluOp g) {
      Type e = getElementTypeOrSelf(g.getX().getType());
      if (g.getApproximate() == GeluApproximation::none && isa<Float32Type, Float64Type>(e) &&
          onlyMatmulsRead(g.getResult()))
        gelus.push_back(g);
    });
    for (GeluOp gelu : gelus) {
      Value x = gelu.getX();
      // The exact gradients of the same x that do not already take an erf. (They follow
      // the GELU: autodiff builds each from the forward op's operand.)
      SmallVector<GeluGradOp> grads;
      for (Operation *user : x.getUsers())
        if (auto gg = dyn_cast<GeluGradOp>(user);
            gg && gg.getX() == x && !gg.getErf() && gg.getApproximate() == GeluApproximation::none &&
            gg->getBlock() == gelu->getBlock() && gelu->isBeforeInBlock(gg))
          grads.push_back(gg);
      if (grads.empty())
        continue;
      OpBuilder b(gelu);
      auto kept = GeluKeepErfOp::create(b, gelu.getLoc(), x);
      gelu.getResult().replaceAllUsesWith(kept.getResult());
      gelu.erase();
      for (GeluGradOp gg : grads) {
        b.setInsertionPoint(gg);
        auto with = GeluGradOp::create(b, gg.getLoc(), gg.getType(), gg.getG(), x, kept.getErf(),
                                       gg.getApproximateAttr());
        gg.getResult().replaceAllUsesWith(with.getResult());
        gg.erase();
      }
    }
  }
};

} // namespace
