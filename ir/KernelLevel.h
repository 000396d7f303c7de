//===- KernelLevel.h - the kernel-level IR's attributes and buffers -------===//
//
// After fusion and gpt-plan-memory every top-level op of a function is one
// kernel (docs/architecture.md). These are the attributes the passes leave
// for the code generators, and the buffer sizes both agree on.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_IR_KERNELLEVEL_H
#define GPTC_IR_KERNELLEVEL_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::gpt {

/// Per op: the arena offset of each result.
inline constexpr StringLiteral kOffsetsAttr = "gpt.offsets";
/// On the function: the arena's size in bytes.
inline constexpr StringLiteral kArenaBytesAttr = "gpt.arena_bytes";
/// On the function when gpt-plan-memory left `redzone` bytes between buffers (gptc compile
/// --sanitize): the code generator poisons every arena byte no buffer holds.
inline constexpr StringLiteral kRedzoneAttr = "gpt.redzone";
/// Per result of a kernel: the index of the function argument it is written into in
/// place (an update of a parameter or optimizer state), or -1 for an arena slot.
inline constexpr StringLiteral kInPlaceAttr = "gpt.in_place";
/// On a gpt.concat of vectors that is a view rather than a kernel (gpt-plan-memory): its
/// operands are written into its result's buffer by the ops that compute them.
inline constexpr StringLiteral kViewAttr = "gpt.view";

/// On a gpt.transpose, gpt.split or gpt.slice that is a strided view (gpt-strided-views):
/// no kernel and no buffer of its own; the elementwise kernels (and attention, its q, k
/// and v) that read its results read them in place, in its operand's buffer, through
/// strides.
inline constexpr StringLiteral kStridedAttr = "gpt.strided";

/// On a gpt.concat or gpt.transpose whose operands are computed for it alone
/// (gpt-strided-views): no kernel; the kernels that compute its operands write them in
/// place, into its result's buffer, through strides.
inline constexpr StringLiteral kGatheredAttr = "gpt.gathered";

/// The strides of a dense row-major tensor of `shape`, in elements.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);

/// Where the elements of a value live: element (i_0, ..., i_n) at `base + sum i_d *
/// strides[d]` in the buffer of `root`, a value with a dense buffer of its own.
struct StridedView {
  Value root;
  int64_t base = 0;
  SmallVector<int64_t> strides;
};
/// `v` through reshapes, stop_gradients and strided views (kStridedAttr) to the buffer it
/// lives in; `v` itself, dense, when it has one. nullopt where a reshape of a strided view
/// has no strides (it merges dims that are not evenly spaced).
std::optional<StridedView> stridedView(Value v);
/// The value `v` reshapes (through reshapes and stop_gradients), or `v` itself.
Value beneathReshapes(Value v);
/// Whether `v` is read through a strided view: its elements are not dense in a buffer.
bool isStrided(Value v);
/// Where the kernel that computes `v` writes it: into the buffer of the value that gathered
/// ops (kGatheredAttr) and the reshapes between them make of it, through strides; or `v`
/// itself, dense, when it is not gathered. nullopt where a reshape on the way has no
/// strides.
std::optional<StridedView> writtenView(Value v);
/// Whether `v` is written into a gathered op's buffer (writtenView) rather than its own.
bool isGathered(Value v);
/// Whether every operand of `op` is read element by element through a StridedView's
/// strides: a gpt.fused without a sum, or a lone elementwise op (but for the exact GELU
/// and its gradient, which have array forms over dense operands, and a dropout).
bool readsThroughStrides(Operation *op);
/// Whether `op` reads its operand `i` through strides: readsThroughStrides, or attention's
/// (or its gradient's) q, k and v, a head's rows at any distance (each row contiguous).
bool readsOperandThroughStrides(Operation *op, unsigned i);
/// Whether `op` writes each element of its results at an offset of its own: those
/// elementwise kernels, a transpose, and attention's gradient (dq, dk and dv, a head's
/// rows at any distance: each row must be contiguous, writesRowsOnly).
bool writesThroughStrides(Operation *op);
/// Whether `op` writes its results through strides a row at a time, each row contiguous:
/// attention's gradient.
bool writesRowsOnly(Operation *op);

class ConcatOp;
/// The kernel result that a concat of vectors can hold in its place, its producer writing
/// it there, when `v` is that piece: the result of a kernel beside the concat (or its
/// reshape) read by nothing else, as a gradient norm's per-tensor sums; else null. The
/// memory plan makes a concat whose every piece has one a view; gpt-fuse-horizontal
/// leaves it out of groups.
Value vectorConcatPiece(ConcatOp concat, Value v);
/// Whether every operand of `concat` is a vectorConcatPiece.
bool concatsVectorsInPlace(ConcatOp concat);

/// The bytes of one element of tensor `v` in a buffer (an i1 takes a byte).
int64_t elementBytes(Value v);
/// The bytes of tensor `v`'s buffer (at least 1, so that an empty tensor has an address).
int64_t byteSize(Value v);

} // namespace mlir::gpt

#endif // GPTC_IR_KERNELLEVEL_H
