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

#endif
