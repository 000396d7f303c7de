//===- Stats.cpp - gptc compile --stats ------------------------------------===//
//
// Per kernel of the kernel-level IR (after gpt-plan-memory): floating-point
// operations and bytes moved (operands read once, results written once), and
// the totals: kernels per call, arena peak, persistent bytes.
//
//===----------------------------------------------------------------------===//
#include "codegen/Codegen.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"
#include "ir/Signature.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::gpt;

namespace {

int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

int64_t bytesOf(Value v) { return elements(v) * elementBytes(v); }

/// FLOPs of one kernel: 2 per multiply-add, 1 per other arithmetic operation.
int64_t flopsOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case([](MatmulOp m) {
        auto a = m.getLhs().getType();
        int64_t k = m.getTransposeLhs() ? a.getDimSize(a.getRank() - 2) : a.getShape().back();
        int64_t epilogue = (m.getBias() ? 1 : 0) + (m.getRng() ? 1 : 0) + (m.getAddend() ? 1 : 0) +
                           (m.getGeluX() ? 1 : 0);
        return (2 * k + epilogue) * elements(m.getResult());
      })
      .Case([](AttentionOp a) {
        auto q = a.getQ().getType();
        int64_t keys = a.getK().getType().getDimSize(a.bthdAt(1) ? 1 : 2);
        int64_t pairs = q.getNumElements() / q.getDimSize(3) * (a.getIsCausal() ? (keys + 1) / 2 : keys);
        return pairs * (2 * q.getDimSize(3) + 2 * a.getV().getType().getDimSize(3) + 4);
      })
      .Case([](AttentionGradOp a) {
        auto q = a.getQ().getType();
        int64_t keys = a.getK().getType().getDimSize(a.bthdAt(1) ? 1 : 2);
        int64_t pairs = q.getNumElements() / q.getDimSize(3) * (a.getIsCausal() ? (keys + 1) / 2 : keys);
        return pairs * (8 * q.getDimSize(3) + 4 * a.getV().getType().getDimSize(3) + 8);
      })
      .Case([](FusedOp f) {
        // Once per element of the result or, with a sum in the body, per element summed
        // (the sum and the ops before it, and after it those of the summed shape) or per
        // sum (its epilogue).
        ReduceSumOp sum = f.getReduction();
        int64_t total = 0;
        for (Operation &inner : f.getBody().front().without_terminator()) {
          auto elementwise = dyn_cast<ElementwiseOpInterface>(inner);
          int64_t perElement = elementwise ? elementwise.getFlopsPerElement() : 1;
          total += perElement *
                   (!sum ? elements(f.getResult(0))
                    : f.phaseOf(&inner) == FusedOp::Phase::Epilogue ? elements(sum.getResult())
                                                                     : elements(sum.getX()));
        }
        return total;
      })
      .Case([](HorizontalOp h) {
        int64_t total = 0;
        for (Operation &member : h.getBody().front().without_terminator())
          total += flopsOf(&member);
        return total;
      })
      .Case<LayerNormOp, LayerNormGradOp, SoftmaxOp, LogSoftmaxOp>(
          [](Operation *o) { return 8 * elements(o->getResult(0)); })
      .Case<CrossEntropyOp, CrossEntropyGradOp>(
          [](Operation *o) { return 5 * elements(o->getOperand(0)); })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, EmbeddingGradOp>(
          [](Operation *o) { return elements(o->getOperand(0)); })
      .Case([](ElementwiseOpInterface e) {
        return e.getFlopsPerElement() * elements(e->getResult(0));
      })
      .Default([](Operation *o) {
        return o->getNumResults() && !isa<TransposeOp, SliceOp, SplitOp, ConcatOp, EmbeddingOp,
                                          ArangeOp>(o)
                   ? elements(o->getResult(0))
                   : 0;
      });
}

} // namespace

void mlir::gpt::printStats(func::FuncOp fn, raw_ostream &os) {
  int64_t kernels = 0, flops = 0, bytes = 0, persistent = 0;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto kind = argKind(fn, i); kind && kind != "input")
      persistent += bytesOf(fn.getArgument(i));
  os << llvm::format("%-6s %-22s %14s %14s  %s\n", "kernel", "op", "FLOPs", "bytes", "source");
  for (Operation &op : fn.getBody().front()) {
    if (isa<ReshapeOp, StopGradientOp, ConstantOp, func::ReturnOp>(op) || op.hasAttr(kViewAttr) ||
        op.hasAttr(kStridedAttr) || op.hasAttr(kGatheredAttr))
      continue;
    int64_t f = flopsOf(&op), moved = 0;
    for (Value v : op.getOperands())
      moved += bytesOf(v);
    for (Value v : op.getResults())
      moved += bytesOf(v);
    std::string where;
    if (auto loc = dyn_cast<FileLineColLoc>(op.getLoc()))
      where = loc.getFilename().str() + ":" + std::to_string(loc.getLine());
    os << llvm::format("k%-5ld %-22s %14ld %14ld  %s\n", (long)kernels,
                       op.getName().stripDialect().str().c_str(), (long)f, (long)moved,
                       where.c_str());
    // A horizontal kernel lists its members (their own FLOPs, in the region's order).
    if (auto h = dyn_cast<HorizontalOp>(op))
      for (Operation &member : h.getBody().front().without_terminator())
        os << llvm::format("  +    %-22s %14ld\n", member.getName().stripDialect().str().c_str(),
                           (long)flopsOf(&member));
    ++kernels;
    flops += f;
    bytes += moved;
  }
  auto arena = fn->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  os << llvm::format("total: %ld kernels, %.3f GFLOP, %.1f MiB moved; arena peak %.2f MiB; "
                     "parameters and state %.2f MiB\n",
                     (long)kernels, flops / 1e9, bytes / 1048576.0,
                     arena ? arena.getInt() / 1048576.0 : 0.0, persistent / 1048576.0);
}
