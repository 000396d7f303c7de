//===- GptDialect.td - the gpt dialect ------------------------------------===//
//
// The gpt dialect: value-semantics tensor ops with static shapes, one op per
// operation a nanoGPT-style model performs. Element types f32, f64, bf16, i64
// (and i1 for masks). Every reduction carries its order (ReductionOrder) as an
// attribute: the order is part of the op's meaning, not a lowering choice.
//
//===----------------------------------------------------------------------===//
#ifndef GPT_DIALECT_TD
#define GPT_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Gpt_Dialect : Dialect {
  let name = "gpt";
  let summary = "Value-semantics tensor ops for GPT models";
  let description = [{
    The gpt dialect holds a captured model after conversion from aten ops. Ops
    take and return ranked tensors with static shapes; there is no aliasing
    and no mutation. Reductions carry a `#gpt.order<...>` attribute that fixes
    the order of floating-point additions (see docs/numerics.md).
  }];
  let cppNamespace = "::mlir::gpt";
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

def Gpt_ReductionOrder : I32EnumAttr<"ReductionOrder", "order of a floating-point reduction", [
    // 32 strided partial sums (partial j takes elements j, j+32, ... in
    // increasing order), then a butterfly over the partials: 16, 8, 4, 2, 1.
    I32EnumAttrCase<"Canonical", 0, "canonical">,
    // One accumulator, elements in increasing index order, fused multiply-add
    // where the reduction is a dot product (the matmul order).
    I32EnumAttrCase<"Sequential", 1, "sequential">,
    // Attention's online softmax over fixed key blocks of 32, blocks in
    // increasing order, each block's scores summed sequentially.
    I32EnumAttrCase<"OnlineBlock32", 2, "online_block32">
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::gpt";
}

def Gpt_ReductionOrderAttr : EnumAttr<Gpt_Dialect, Gpt_ReductionOrder, "order"> {
  let assemblyFormat = "`<` $value `>`";
}

def Gpt_ComparePredicate : I32EnumAttr<"ComparePredicate", "an elementwise comparison", [
    I32EnumAttrCase<"lt", 0>, I32EnumAttrCase<"le", 1>, I32EnumAttrCase<"gt", 2>,
    I32EnumAttrCase<"ge", 3>, I32EnumAttrCase<"eq", 4>, I32EnumAttrCase<"ne", 5>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::gpt";
}

def Gpt_ComparePredicateAttr : EnumAttr<Gpt_Dialect, Gpt_ComparePredicate, "predicate"> {
  let assemblyFormat = "`<` $value `>`";
}

// GELU's form: exact, 0.5 x (1 + erf(x / sqrt 2)), or tanh-approximated,
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
def Gpt_GeluApproximation : I32EnumAttr<"GeluApproximation", "GELU's form", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::gpt";
}

def Gpt_GeluApproximationAttr : EnumAttr<Gpt_Dialect, Gpt_GeluApproximation, "approximate"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // GPT_DIALECT_TD
