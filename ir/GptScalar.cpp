//===- GptScalar.cpp - each elementwise op's scalar meaning ---------------===//
//
// ElementwiseOpInterface for every elementwise op, in one place: the C
// expression of one element of its result (`$j`: operand j's element; `i`: the
// element's linear index). The fusion pass, the code generators and the stats
// read these; the prelude functions they call are docs/numerics.md's.
//
//===----------------------------------------------------------------------===//
#include "ir/GptScalar.h"

#include "ir/GptDialect.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::gpt;

//===----------------------------------------------------------------------===//
// Types and literals
//===----------------------------------------------------------------------===//

FailureOr<std::string> mlir::gpt::cType(Type t) {
  if (t.isF32())
    return std::string("float");
  if (t.isF64())
    return std::string("double");
  if (t.isInteger(64))
    return std::string("int64_t");
  if (t.isInteger(1))
    return std::string("bool");
  return failure();
}

std::string mlir::gpt::literal(double v, Type t) {
  bool f32 = t.isF32();
  if (std::isnan(v))
    return f32 ? "NAN" : "(double)NAN";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (f32 ? "INFINITY" : "(double)INFINITY");
  if (t.isInteger(64))
    return std::to_string((int64_t)v) + "LL";
  if (t.isInteger(1))
    return v != 0 ? "true" : "false";
  char buf[64];
  if (f32)
    std::snprintf(buf, sizeof buf, "%af", (double)(float)v);
  else
    std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string mlir::gpt::elementLiteral(Attribute a, Type t) {
  if (auto f = dyn_cast<FloatAttr>(a))
    return literal(f.getValueAsDouble(), t);
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    int64_t v = i.getValue().getSExtValue();  // exact: an i64 past 2^53 is no double
    if (t.isInteger(64))
      return v == INT64_MIN ? "(-9223372036854775807LL - 1)" : std::to_string(v) + "LL";
    return literal((double)v, t);
  }
  return "0";
}

DropoutLiterals mlir::gpt::dropoutLiterals(double p, Type elem) {
  return {literal(p, Float32Type::get(elem.getContext())), literal(1.0 / (1.0 - p), elem)};
}

//===----------------------------------------------------------------------===//
// The scalar expressions
//===----------------------------------------------------------------------===//

static Type elementTypeOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

std::string AddOp::getScalarExpr() { return "($0 + $1)"; }
std::string SubOp::getScalarExpr() { return "($0 - $1)"; }
std::string MulOp::getScalarExpr() { return "($0 * $1)"; }
std::string DivOp::getScalarExpr() { return "($0 / $1)"; }
std::string PowOp::getScalarExpr() { return "gptc::pow($0, $1)"; }
std::string MaxOp::getScalarExpr() { return "gptc::maximum($0, $1)"; }
std::string MinOp::getScalarExpr() { return "gptc::minimum($0, $1)"; }

std::string CompareOp::getScalarExpr() {
  const char *symbol = "";
  switch (getPredicate()) {
  case ComparePredicate::lt: symbol = "<"; break;
  case ComparePredicate::le: symbol = "<="; break;
  case ComparePredicate::gt: symbol = ">"; break;
  case ComparePredicate::ge: symbol = ">="; break;
  case ComparePredicate::eq: symbol = "=="; break;
  case ComparePredicate::ne: symbol = "!="; break;
  }
  return std::string("($0 ") + symbol + " $1)";
}

std::string NegOp::getScalarExpr() { return "(-$0)"; }
std::string ExpOp::getScalarExpr() { return "gptc::exp($0)"; }
std::string LogOp::getScalarExpr() { return "gptc::log($0)"; }
std::string TanhOp::getScalarExpr() { return "gptc::tanh($0)"; }
std::string ErfOp::getScalarExpr() { return "gptc::erf($0)"; }
std::string SqrtOp::getScalarExpr() { return "gptc::sqrt($0)"; }
std::string RsqrtOp::getScalarExpr() { return "gptc::rsqrt($0)"; }
std::string AbsOp::getScalarExpr() { return "gptc::abs($0)"; }
std::string SigmoidOp::getScalarExpr() { return "gptc::sigmoid($0)"; }
std::string SinOp::getScalarExpr() { return "gptc::sin($0)"; }
std::string CosOp::getScalarExpr() { return "gptc::cos($0)"; }

std::string GeluOp::getScalarExpr() {
  return getApproximate() == GeluApproximation::tanh ? "gptc::gelu_tanh($0)"
                                                     : "gptc::gelu_erf($0)";
}

/// $0 the incoming gradient, $1 x, and $2 erf(x / sqrt 2) where gpt-keep-gelu-erf kept it.
std::string GeluGradOp::getScalarExpr() {
  if (getErf())
    return "gptc::gelu_erf_grad_given($0, $1, $2)";
  return getApproximate() == GeluApproximation::tanh ? "gptc::gelu_tanh_grad($0, $1)"
                                                     : "gptc::gelu_erf_grad($0, $1)";
}

std::string WhereOp::getScalarExpr() { return "($0 ? $1 : $2)"; }

std::string MaskedFillOp::getScalarExpr() {
  return "($1 ? " + literal(getValue().convertToDouble(), elementTypeOf(getResult())) + " : $0)";
}

std::string ConvertOp::getScalarExpr() {
  std::string t = *cType(elementTypeOf(getResult()));
  return t == "bool" ? "($0 != 0)" : "static_cast<" + t + ">($0)";
}
int64_t ConvertOp::getFlopsPerElement() { return 0; }

std::string BroadcastOp::getScalarExpr() { return "$0"; }
int64_t BroadcastOp::getFlopsPerElement() { return 0; }

/// A training dropout of element i, $1 the [seed, step] pointer: the scaled element where
/// Philox keeps it, else +0. In eval mode (no rng) it is the identity.
std::string DropoutOp::getScalarExpr() {
  if (!getRng())
    return "$0";
  Type elem = elementTypeOf(getResult());
  DropoutLiterals lit = dropoutLiterals(getP().convertToDouble(), elem);
  return "(gptc::dropout_keep((uint64_t)$1[0], (uint64_t)$1[1], " + std::to_string(getId()) +
         ", (uint64_t)i, " + lit.p + ") ? $0 * " + lit.scale + " : " + *cType(elem) + "(0))";
}
/// The mask bit is a function of the element's index, which a fused body has.
bool DropoutOp::isFusible() { return getRng() != nullptr; }
