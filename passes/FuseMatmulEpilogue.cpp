//===- FuseMatmulEpilogue.cpp - the gpt-fuse-matmul-epilogue pass ---------===//
//
// An add whose one operand is a matmul's only use, the other a tensor of the
// same type, becomes the matmul with that addend: the code generator adds it to
// each finished product before the store (addend + product == product +
// addend, bit for bit), so the sum stays a single kernel over the output once.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

namespace mlir::gpt {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUE
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct FuseMatmulEpiloguePass
    : public gpt::impl::FuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      for (unsigned i = 0; i < 2; ++i) {
        auto mm = add->getOperand(i).getDefiningOp<MatmulOp>();
        Value addend = add->getOperand(1 - i);
        // (add(m, m) is two uses of m, so it stays.)
        if (!mm || mm.getAddend() || !mm->hasOneUse() || mm.getType() != add.getType() ||
            addend.getType() != add.getType())
          continue;
        // At the add's place: the addend and the matmul's operands are all defined by then.
        OpBuilder b(add);
        auto fused = MatmulOp::create(b, add.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(),
                                      addend, mm.getTransposeLhsAttr(),
                                      mm.getTransposeRhsAttr(), mm.getOrderAttr());
        add.getResult().replaceAllUsesWith(fused.getResult());
        add.erase();
        mm.erase();
        break;
      }
    }
  }
};

} // namespace
