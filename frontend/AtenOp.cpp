//===- AtenOp.cpp - argument access for captured aten ops -----------------===//
#include "frontend/AtenToGpt.h"

#include "ir/Signature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::gpt;

static constexpr StringLiteral kOperandNames = "torch.operands";

StringRef AtenOp::name() const {
  StringRef n = op->getName().getStringRef();
  n.consume_front("torch.");
  return n;
}

SmallVector<Value> AtenOp::operands(StringRef arg) const {
  SmallVector<Value> found;
  auto names = op->getAttrOfType<ArrayAttr>(kOperandNames);
  if (!names)
    return found;
  for (auto [i, n] : llvm::enumerate(names))
    if (auto s = dyn_cast<StringAttr>(n); s && s.getValue() == arg && i < op->getNumOperands())
      found.push_back(op->getOperand(i));
  return found;
}

Value AtenOp::operand(StringRef arg) const {
  SmallVector<Value> all = operands(arg);
  return all.empty() ? Value() : all.front();
}

LogicalResult AtenOp::require(std::initializer_list<StringRef> args) const {
  for (StringRef arg : args)
    if (!operand(arg))
      return unsupported("needs an operand '" + arg + "'");
  return success();
}

FailureOr<int64_t> AtenOp::dimIndex(int64_t dim, int64_t rank) const {
  if (dim < -rank || dim >= rank)
    return unsupported("dim " + Twine(dim) + " out of range for rank " + Twine(rank));
  return dim < 0 ? dim + rank : dim;
}

std::optional<int64_t> AtenOp::getInt(StringRef arg) const {
  if (auto b = op->getAttrOfType<BoolAttr>(arg)) // an i1: its sign extension is -1
    return b.getValue() ? 1 : 0;
  if (auto a = op->getAttrOfType<IntegerAttr>(arg))
    return a.getValue().getSExtValue();
  return std::nullopt;
}

std::optional<double> AtenOp::getFloat(StringRef arg) const {
  if (auto a = op->getAttrOfType<FloatAttr>(arg))
    return a.getValueAsDouble();
  if (auto i = getInt(arg)) // bools too
    return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> AtenOp::getBool(StringRef arg) const {
  if (auto a = op->getAttrOfType<BoolAttr>(arg))
    return a.getValue();
  return std::nullopt;
}

std::optional<StringRef> AtenOp::getString(StringRef arg) const {
  if (auto a = op->getAttrOfType<StringAttr>(arg))
    return a.getValue();
  return std::nullopt;
}

std::optional<SmallVector<int64_t>> AtenOp::getInts(StringRef arg) const {
  if (auto a = op->getAttrOfType<DenseI64ArrayAttr>(arg))
    return SmallVector<int64_t>(a.asArrayRef());
  if (auto i = getInt(arg))
    return SmallVector<int64_t>{*i};
  return std::nullopt;
}

RankedTensorType AtenOp::resultType(unsigned i) const {
  return dyn_cast<RankedTensorType>(op->getResult(i).getType());
}

static std::string describeType(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return "?";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(rt.getShape(), os, "x");
  os << "]" << rt.getElementType();
  return s;
}

LogicalResult AtenOp::unsupported(const Twine &why) const {
  std::string shapes;
  for (Value v : op->getOperands())
    shapes += (shapes.empty() ? "" : ", ") + describeType(v.getType());
  op->emitError() << "unsupported PyTorch op '" << name() << "' (" << why << "); operands ("
                  << shapes << ")";
  return failure();
}

FailureOr<Value> AtenOp::tensorOrScalar(OpBuilder &b, StringRef arg, Type elemType) const {
  if (Value v = operand(arg))
    return convertElementType(b, loc(), v, elemType);
  auto type = RankedTensorType::get({}, elemType);
  Attribute value;
  if (isa<FloatType>(elemType)) {
    if (auto f = getFloat(arg))
      value = DenseElementsAttr::get(type, b.getFloatAttr(elemType, *f).getValue());
  } else if (auto i = getInt(arg)) {
    value = DenseElementsAttr::get(type, b.getIntegerAttr(elemType, *i).getValue());
  }
  if (!value) {
    (void)unsupported("argument '" + arg + "' is missing or not a number");
    return failure();
  }
  return ConstantOp::create(b, loc(), type, cast<ElementsAttr>(value)).getResult();
}

Value AtenOp::rngArgument() const {
  auto fn = op->getParentOfType<func::FuncOp>();
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = argName(fn, i); name && name == "rng")
      return fn.getArgument(i);
  MLIRContext *ctx = op->getContext();
  Builder b(ctx);
  unsigned index = fn.getNumArguments();
  auto attrs = argAttrs(b, "input", "rng");
  (void)fn.insertArgument(index, RankedTensorType::get({2}, b.getI64Type()), attrs, fn.getLoc());
  return fn.getArgument(index);
}

Value mlir::gpt::convertElementType(OpBuilder &b, Location loc, Value v, Type elemType) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType() == elemType)
    return v;
  return ConvertOp::create(b, loc, t.clone(elemType), v).getResult();
}

Value mlir::gpt::splat(OpBuilder &b, Location loc, RankedTensorType type, double v) {
  Type e = type.getElementType();
  Attribute a = isa<FloatType>(e) ? Attribute(b.getFloatAttr(e, v))
                : e.isInteger(1)  ? Attribute(b.getIntegerAttr(e, v != 0.0))
                                  : Attribute(b.getIntegerAttr(e, static_cast<int64_t>(v)));
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, a)).getResult();
}

Value mlir::gpt::scalarOf(OpBuilder &b, Location loc, Type elem, double v) {
  return splat(b, loc, RankedTensorType::get({}, elem), v);
}

FailureOr<Value> mlir::gpt::selfAsResult(AtenOp &op, OpBuilder &b) {
  if (failed(op.require({"self"})))
    return failure();
  return convertElementType(b, op.loc(), op.operand("self"), op.resultType().getElementType());
}

FailureOr<Value> mlir::gpt::floatSelf(AtenOp &op, OpBuilder &b) {
  if (!isa<FloatType>(op.resultType().getElementType()))
    return op.unsupported("needs a floating-point tensor");
  return selfAsResult(op, b);
}

std::vector<std::string> mlir::gpt::supportedAtenOps() {
  std::vector<std::string> names;
  for (const auto &entry : atenConverters())
    names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}

const AtenConverterTable &mlir::gpt::atenConverters() {
  static const AtenConverterTable table = [] {
    AtenConverterTable t;
    populateElementwisePatterns(t);
    populateLinearPatterns(t);
    populateNormalizationPatterns(t);
    populateDataMovementPatterns(t);
    return t;
  }();
  return table;
}
