//===- GptInterfaces.td - gpt op interfaces --------------------------------===//
#ifndef GPT_INTERFACES_TD
#define GPT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Gpt_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let description = [{
    The op's vector-Jacobian product: given the gradient of each result (null
    where a result gets none), build the gradient of each operand right after
    the op. The autodiff pass (passes/Autodiff.cpp) calls it in reverse
    program order; it knows nothing about individual ops.
  }];
  let cppNamespace = "::mlir::gpt";
  let methods = [
    InterfaceMethod<[{
        Fills `operandGrads` with one Value per operand, null where the operand
        gets no gradient (indices, rng). Fails, with an error, for an op that has
        no gradient (a gradient of a backward op, or gpt.max).
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$b, "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Gpt_ElementwiseOpInterface : OpInterface<"ElementwiseOpInterface"> {
  let description = [{
    An op that computes each element of its result from the same element of
    its (broadcast) operands alone, by one scalar expression: the op's meaning,
    said once (ir/GptScalar.cpp). gpt-fuse-elementwise fuses the ops that
    implement it, every code generator prints the expression for a one-op
    kernel and inside a gpt.fused body alike (so both compute the same bits),
    and `gptc compile --stats` counts its FLOPs.
  }];
  let cppNamespace = "::mlir::gpt";
  let methods = [
    InterfaceMethod<[{
        The element's value as a C expression: `$j` stands for operand j's
        element, `i` for the element's linear index in the result and `$j`'s
        pointer for an operand that is not elementwise (a dropout's [seed, step]).
        It calls only the portable prelude (runtime/include/gptc/prelude.h),
        which every target compiles, so the expression is the same on all.
      }],
      "std::string", "getScalarExpr">,
    InterfaceMethod<[{
        Floating-point operations per element, as `gptc compile --stats`
        counts them: 1, or 0 for an op that only moves or converts an element.
      }],
      "int64_t", "getFlopsPerElement", (ins), "", [{ return 1; }]>,
    InterfaceMethod<[{
        Whether gpt-fuse-elementwise may put the op into a gpt.fused body: a
        fused body knows each element's index, but not an op's whole operand.
      }],
      "bool", "isFusible", (ins), "", [{ return true; }]>
  ];
}

#endif
