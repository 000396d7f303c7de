//===- AtenToGpt.h - converting captured aten ops to the gpt dialect ------===//
//
// The Python capture (python/gptc/capture.py) writes one generic op per aten
// op, named "torch.<overload>" (for example "torch.aten.linear.default"), with:
//   - its tensor arguments as operands, and an array attribute
//     `torch.operands` giving each operand's argument name from the schema
//     ("input", "weight", "bias", ...); a list argument repeats its name;
//   - its non-tensor arguments as attributes named after the schema argument
//     (ints as i64, floats as f64, bools, strings, int lists as array<i64>);
//     arguments that are None are absent;
//   - its result types from the traced shapes, and the model.py line as its
//     location.
//
// How a conversion is written (one function per aten overload, grouped by op
// category in *Patterns.cpp, registered in that file's populate function):
//   LogicalResult convertFoo(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out)
//   1. read arguments by schema name: op.operand("weight"), op.getInt("dim")...
//   2. reject what gpt cannot express with op.unsupported("why"), which reports
//      the aten op, its operand shapes and its source line;
//   3. build gpt ops with b at op.loc(), using op.resultType(i) for results the
//      capture traced; push one Value per aten result into `out`.
// The pass (ConvertAtenToGpt.cpp) replaces the aten op's results with `out`.
// An aten op without a converter is an error naming it, its shapes and line.
//
//===----------------------------------------------------------------------===//
#ifndef GPTC_FRONTEND_ATENTOGPT_H
#define GPTC_FRONTEND_ATENTOGPT_H

#include "frontend/Passes.h"
#include "ir/GptDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>

namespace mlir::gpt {

/// Read access to one captured aten op by schema argument names.
class AtenOp {
public:
  explicit AtenOp(Operation *op) : op(op) {}

  /// "aten.linear.default": the op name without the "torch." prefix.
  StringRef name() const;
  Location loc() const { return op->getLoc(); }
  Operation *raw() const { return op; }

  /// The tensor operand bound to schema argument `arg`, or null if absent.
  Value operand(StringRef arg) const;
  /// All operands bound to a list argument (aten.cat's "tensors").
  SmallVector<Value> operands(StringRef arg) const;

  std::optional<int64_t> getInt(StringRef arg) const;
  std::optional<double> getFloat(StringRef arg) const; // accepts ints too
  std::optional<bool> getBool(StringRef arg) const;
  std::optional<StringRef> getString(StringRef arg) const;
  std::optional<SmallVector<int64_t>> getInts(StringRef arg) const;
  bool has(StringRef arg) const { return op->hasAttr(arg) || operand(arg); }
  /// Fails with one `unsupported` error unless every one of `args` is an operand.
  LogicalResult require(std::initializer_list<StringRef> args) const;
  /// `dim` (negative counts from the end) as an index into `rank` dimensions, or an
  /// `unsupported` error naming it.
  FailureOr<int64_t> dimIndex(int64_t dim, int64_t rank) const;

  RankedTensorType resultType(unsigned i = 0) const;

  /// Emits "unsupported PyTorch op 'aten.x' (why): operands [..]; at file:line"
  /// and returns failure.
  LogicalResult unsupported(const Twine &why) const;

  /// A tensor for argument `arg`: the operand, or a scalar attribute
  /// materialised as a rank-0 gpt.constant of element type `elemType`.
  /// Converts an operand of another element type to `elemType`.
  FailureOr<Value> tensorOrScalar(OpBuilder &b, StringRef arg, Type elemType) const;

  /// The function's `rng` argument ([seed, step], tensor<2xi64>), appended as
  /// an input named "rng" the first time a random op needs it.
  Value rngArgument() const;

private:
  Operation *op;
};

using AtenConverter = LogicalResult (*)(AtenOp &op, OpBuilder &b, SmallVectorImpl<Value> &out);
using AtenConverterTable = llvm::StringMap<AtenConverter>;

void populateElementwisePatterns(AtenConverterTable &table);
void populateLinearPatterns(AtenConverterTable &table);
void populateNormalizationPatterns(AtenConverterTable &table);
void populateDataMovementPatterns(AtenConverterTable &table);

/// All conversions, keyed by aten overload name ("aten.linear.default").
const AtenConverterTable &atenConverters();

/// Shared helpers for the pattern files.
Value convertElementType(OpBuilder &b, Location loc, Value v, Type elemType);
/// A constant of `type` whose every element is `v` (an integer type truncates it; i1 is
/// v != 0). Rank 0 for a scalar that broadcasts.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, double v);
/// The rank-0 splat of `v` in `elem`.
Value scalarOf(OpBuilder &b, Location loc, Type elem, double v);
/// The operand `self` in the op's result element type, or an `unsupported` error.
FailureOr<Value> selfAsResult(AtenOp &op, OpBuilder &b);
/// The same, for ops whose result must be floating point.
FailureOr<Value> floatSelf(AtenOp &op, OpBuilder &b);
/// x with each element repeated `repeats` times in place along `dim` (reshape, broadcast,
/// reshape): repeat_interleave, and the key/value heads of grouped-query attention.
Value repeatInterleave(OpBuilder &b, Location loc, Value x, int64_t dim, int64_t repeats);

} // namespace mlir::gpt

#endif // GPTC_FRONTEND_ATENTOGPT_H
