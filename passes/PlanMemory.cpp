//===- PlanMemory.cpp - the gpt-plan-memory pass --------------------------===//
//
// Linear-scan arena allocation over the op order of the function: allocate an
// op's results, then release the slots whose last reader was this op. A freed
// slot is taken again first-fit; adjacent free slots merge. Updates of
// parameters and optimizer state are written in place where legal. A concat of
// vectors that their kernels compute for it alone (the gradient norm's per-tensor
// sums) is a view: no copy, no kernel. A strided view (gpt-strided-views) lives in its operand's buffer,
// which lives until the view's last reader has run; a gathered op's operands live in its
// result's buffer, taken by the first kernel that writes into it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"
#include "ir/KernelLevel.h"
#include "ir/Signature.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

namespace mlir::gpt {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

constexpr int64_t kAlign = 64;

/// `n` rounded up to a multiple of kAlign.
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// Free byte ranges of the arena, keyed by offset. With a redzone (gptc compile
/// --sanitize) nothing is reused: every buffer gets bytes of its own, `redzone` bytes
/// after the one before it, and the arena ends `redzone` bytes after the last.
class FreeList {
public:
  explicit FreeList(int64_t redzone) : redzone(redzone) {}
  int64_t take(int64_t size) {
    size = aligned(size);
    if (redzone) {
      int64_t off = top + redzone;
      top = off + size;
      return off;
    }
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < size)
        continue;
      int64_t off = it->first, rest = it->second - size;
      free.erase(it);
      if (rest)
        free[off + size] = rest;
      return off;
    }
    int64_t off = top;
    // Extend a free block that ends at the top instead of leaving it stranded.
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        off = last->first;
        free.erase(last);
      }
    }
    top = off + size;
    return off;
  }
  void give(int64_t off, int64_t size) {
    if (redzone)
      return;
    size = aligned(size);
    auto it = free.emplace(off, size).first;
    if (auto next = std::next(it); next != free.end() && off + size == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == off) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t peak() const { return top + redzone; }

private:
  std::map<int64_t, int64_t> free;
  int64_t top = 0, redzone;
};

/// The elementwise kernel (a gpt.fused without a reduction, alone or as a member of a
/// gpt.horizontal) that computes `r`, with the body operand through which it reads
/// `arg` at the index it writes; null unless exactly that one operand reads `arg`, and
/// no other member of a horizontal reads it.
FusedOp elementwiseReader(Value r, BlockArgument arg) {
  Operation *def = r.getDefiningOp();
  auto fused = dyn_cast_or_null<FusedOp>(def);
  Value operand = arg;
  if (auto h = dyn_cast_or_null<HorizontalOp>(def)) {
    Block &body = h.getBody().front();
    Value inner = body.getTerminator()->getOperand(cast<OpResult>(r).getResultNumber());
    fused = inner.getDefiningOp<FusedOp>();
    auto it = llvm::find(h.getInputs(), arg);
    if (!fused || it == h.getInputs().end())
      return nullptr;
    operand = body.getArgument(it - h.getInputs().begin());
    for (Operation *user : operand.getUsers())
      if (user != fused)
        return nullptr;
  }
  if (!fused || fused.getReduction())
    return nullptr;
  if (llvm::count(fused.getInputs(), operand) != 1 ||
      cast<RankedTensorType>(operand.getType()) != cast<RankedTensorType>(r.getType()))
    return nullptr;
  return fused;
}

/// Results that update an argument (`gpt.updates`) are written into it in place when
/// legal: an elementwise kernel computes them, it reads the argument at the index it
/// writes, and nothing after it reads the argument. Returns result -> argument index.
DenseMap<Value, int64_t> planInPlace(func::FuncOp fn, const DenseMap<Operation *, unsigned> &position) {
  DenseMap<Value, int64_t> inPlace;
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  DenseMap<StringRef, unsigned> argByName;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto n = argName(fn, i))
      argByName[n.getValue()] = i;
  for (auto [j, r] : llvm::enumerate(ret.getOperands())) {
    auto target = resultUpdates(fn, j);
    if (!target || !argByName.count(target.getValue()) || !r.getDefiningOp() ||
        !r.hasOneUse() || inPlace.count(r))
      continue;
    BlockArgument arg = fn.getArgument(argByName.lookup(target.getValue()));
    Operation *def = r.getDefiningOp();
    if (!elementwiseReader(r, arg))
      continue;
    // The old value must be dead once the kernel has run (read by nothing after it,
    // directly or through a view), and the kernel must read it only at the index it
    // writes (not through a strided view, which reads other elements).
    SmallVector<std::pair<Value, bool>> aliases{{arg, false}}; // and whether through strides
    bool readLater = false;
    while (!aliases.empty() && !readLater) {
      auto [v, strided] = aliases.pop_back_val();
      for (Operation *u : v.getUsers()) {
        if (isa<ReshapeOp, StopGradientOp>(u) || u->hasAttr(kStridedAttr)) {
          for (Value r : u->getResults())
            aliases.push_back({r, strided || u->hasAttr(kStridedAttr)});
        } else if (u == def ? strided
                            : !isa<func::ReturnOp>(u) &&
                                  position.lookup(u) >= position.lookup(def)) {
          readLater = true;
        }
      }
    }
    if (!readLater)
      inPlace[r] = arg.getArgNumber();
  }
  return inPlace;
}

/// Concats of vectors that can be views: their pieces (vectorConcatPiece) are computed for
/// them alone. Marks them (`gpt.view`). (A split that attention reads is a strided view,
/// and a concat of attention's dq, dk and dv a gathered one: gpt-strided-views.)
void markViews(Block &body) {
  for (Operation &op : body)
    if (auto concat = dyn_cast<ConcatOp>(op); concat && !op.hasAttr(kGatheredAttr))
      if (concatsVectorsInPlace(concat))
        op.setAttr(kViewAttr, UnitAttr::get(op.getContext()));
}

/// Where each piece of a concat of vectors starts within the whole, in bytes: the widths
/// of the pieces before it.
SmallVector<int64_t> columnOffsets(ValueRange pieces) {
  SmallVector<int64_t> offsets;
  int64_t at = 0;
  for (Value v : pieces) {
    offsets.push_back(at * elementBytes(v));
    at += cast<RankedTensorType>(v.getType()).getShape().back();
  }
  return offsets;
}

struct PlanMemoryPass : gpt::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    if (getOperation().isExternal())
      return; // a declaration: no body to transform
    func::FuncOp fn = getOperation();
    Block &body = fn.getBody().front();
    if (redzone < 0 || redzone > (int64_t(1) << 20)) {
      fn.emitError("gpt-plan-memory: redzone must be from 0 to 1048576 bytes, got ") << (int64_t)redzone;
      return signalPassFailure();
    }
    for (Operation &op : body)
      for (Type t : op.getResultTypes())
        if (!isa<RankedTensorType>(t) || !cast<RankedTensorType>(t).hasStaticShape()) {
          op.emitError("gpt-plan-memory: a result of type ") << t << " has no size to plan";
          return signalPassFailure();
        }

    // The value that owns the storage of each value (reshape aliases its input).
    DenseMap<Value, Value> owner;
    auto ownerOf = [&](Value v) {
      auto it = owner.find(v);
      return it == owner.end() ? v : it->second;
    };
    // A view concat (of vectors) owns the storage of its pieces (written at `pieceOffset`
    // within it, from the first piece's producer on).
    if (views)
      markViews(body);
    DenseMap<Value, int64_t> pieceOffset;
    // A gathered op's operands, and the results of the kernels that compute them, live in
    // the buffer of the value the last gathered op makes (written through strides: each
    // piece at the buffer's start, codegen's writtenView). From the last op back, so that
    // a gathered op read by another takes that one's buffer.
    for (Operation &op : llvm::reverse(body)) {
      if (!op.hasAttr(kGatheredAttr))
        continue;
      Value whole = ownerOf(op.getResult(0));
      for (Value operand : op.getOperands()) {
        Value v = beneathReshapes(operand);
        owner[v] = whole;
        if (!v.getDefiningOp()->hasAttr(kGatheredAttr))
          pieceOffset[v] = 0;
      }
    }
    for (Operation &op : body)
      if (auto concat = dyn_cast<ConcatOp>(op); concat && op.hasAttr(kViewAttr)) {
        for (auto [v, at] : llvm::zip(concat.getInputs(), columnOffsets(concat.getInputs()))) {
          Value piece = vectorConcatPiece(concat, v);
          owner[piece] = concat.getResult();
          pieceOffset[piece] = at;
        }
      }
    DenseMap<Operation *, unsigned> position;
    DenseMap<Value, unsigned> lastUse;
    unsigned index = 0;
    for (Operation &op : body) {
      position[&op] = index;
      if (isa<ReshapeOp, StopGradientOp>(op) || op.hasAttr(kStridedAttr))
        for (Value r : op.getResults())
          owner[r] = ownerOf(op.getOperand(0));
      for (Value operand : op.getOperands())
        lastUse[ownerOf(operand)] = index;
      ++index;
    }

    DenseMap<Value, int64_t> inPlace = planInPlace(fn, position);
    const int64_t gap = aligned(redzone);
    FreeList arena(gap);
    DenseMap<Value, int64_t> slot;
    for (Operation &op : body) {
      if (isa<ReshapeOp, StopGradientOp, ConstantOp>(op) || op.hasAttr(kStridedAttr) ||
          op.getNumResults() == 0) {
        // no storage of their own
      } else if (op.hasAttr(kGatheredAttr)) {
        // Its buffer, which the first kernel writing into it took.
        auto it = slot.find(ownerOf(op.getResult(0)));
        if (it == slot.end()) {
          op.emitError("internal: the gathered buffer has no slot");
          return signalPassFailure();
        }
        op.setAttr(kOffsetsAttr, DenseI64ArrayAttr::get(&getContext(), {it->second}));
      } else if (op.hasAttr(kViewAttr)) {
        // A concat in the slot its first piece took.
        auto it = slot.find(op.getResult(0));
        if (it == slot.end()) {
          op.emitError("internal: the view's buffer has no slot");
          return signalPassFailure();
        }
        op.setAttr(kOffsetsAttr, DenseI64ArrayAttr::get(&getContext(), {it->second}));
      } else {
        SmallVector<int64_t> offsets, args;
        for (Value r : op.getResults()) {
          if (auto it = inPlace.find(r); it != inPlace.end()) {
            offsets.push_back(-1);
            args.push_back(it->second);
            continue;
          }
          if (auto piece = pieceOffset.find(r); piece != pieceOffset.end()) {
            Value whole = ownerOf(r);
            if (!slot.count(whole))
              slot[whole] = arena.take(byteSize(whole));
            offsets.push_back(slot[whole] + piece->second);
            args.push_back(-1);
            continue;
          }
          int64_t off = arena.take(byteSize(r));
          slot[r] = off;
          offsets.push_back(off);
          args.push_back(-1);
        }
        op.setAttr(kOffsetsAttr, DenseI64ArrayAttr::get(&getContext(), offsets));
        if (llvm::any_of(args, [](int64_t a) { return a >= 0; }))
          op.setAttr(kInPlaceAttr, DenseI64ArrayAttr::get(&getContext(), args));
      }
      // Release what this op read last (and results nobody reads).
      SmallVector<Value> done;
      for (Value operand : op.getOperands())
        done.push_back(ownerOf(operand));
      for (Value r : op.getResults())
        if (!lastUse.count(ownerOf(r)))
          done.push_back(ownerOf(r));
      for (Value v : done) {
        auto it = slot.find(v);
        bool read = lastUse.count(v);
        if (it == slot.end() || (read && lastUse.lookup(v) != position[&op]))
          continue;
        arena.give(it->second, byteSize(v));
        slot.erase(it);
      }
    }
    auto i64 = IntegerType::get(&getContext(), 64);
    fn->setAttr(kArenaBytesAttr, IntegerAttr::get(i64, arena.peak()));
    if (gap)
      fn->setAttr(kRedzoneAttr, IntegerAttr::get(i64, gap));
  }
};
} // namespace
