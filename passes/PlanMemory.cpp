//===- PlanMemory.cpp - the gpt-plan-memory pass --------------------------===//
//
// Linear-scan arena allocation over the op order of the function: allocate an
// op's results, then release the slots whose last reader was this op. A freed
// slot is taken again first-fit; adjacent free slots merge.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GptDialect.h"

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

int64_t byteSize(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  Type e = t.getElementType();
  int64_t elem = e.isInteger(1) ? 1 : (int64_t)(e.getIntOrFloatBitWidth() / 8);
  return std::max<int64_t>(t.getNumElements() * elem, 1);
}

/// Free byte ranges of the arena, keyed by offset.
class FreeList {
public:
  int64_t take(int64_t size) {
    size = (size + kAlign - 1) / kAlign * kAlign;
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
    size = (size + kAlign - 1) / kAlign * kAlign;
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
  int64_t peak() const { return top; }

private:
  std::map<int64_t, int64_t> free;
  int64_t top = 0;
};

struct PlanMemoryPass : gpt::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    Block &body = fn.getBody().front();

    // The value that owns the storage of each value (reshape aliases its input).
    DenseMap<Value, Value> owner;
    auto ownerOf = [&](Value v) {
      auto it = owner.find(v);
      return it == owner.end() ? v : it->second;
    };
    DenseMap<Operation *, unsigned> position;
    DenseMap<Value, unsigned> lastUse;
    unsigned index = 0;
    for (Operation &op : body) {
      position[&op] = index;
      if (isa<ReshapeOp, StopGradientOp>(op))
        owner[op.getResult(0)] = ownerOf(op.getOperand(0));
      for (Value operand : op.getOperands())
        lastUse[ownerOf(operand)] = index;
      ++index;
    }

    FreeList arena;
    DenseMap<Value, int64_t> slot;
    for (Operation &op : body) {
      if (isa<ReshapeOp, StopGradientOp, ConstantOp>(op) || op.getNumResults() == 0) {
        // no storage of their own
      } else {
        SmallVector<int64_t> offsets;
        for (Value r : op.getResults()) {
          int64_t off = arena.take(byteSize(r));
          slot[r] = off;
          offsets.push_back(off);
        }
        op.setAttr(kOffsetsAttr, DenseI64ArrayAttr::get(&getContext(), offsets));
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
    fn->setAttr(kArenaBytesAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                                  arena.peak()));
  }
};
} // namespace
