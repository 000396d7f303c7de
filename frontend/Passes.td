#ifndef GPTC_FRONTEND_PASSES_TD
#define GPTC_FRONTEND_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertAtenToGpt : Pass<"gpt-convert-aten", "mlir::ModuleOp"> {
  let summary = "Convert captured torch.aten.* ops to the gpt dialect";
  let description = [{
    Replaces every generic `torch.aten.*` op written by gptc's capture with gpt
    ops. An op without a conversion, or with arguments gpt cannot express, is
    an error naming the aten op, its operand shapes and its source line.

    Before:
    ```mlir
    %0 = "torch.aten.linear.default"(%x, %w) {torch.operands = ["input", "weight"]}
         : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
    ```
    After:
    ```mlir
    %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false,
         transpose_rhs = true} : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
    ```
  }];
  let dependentDialects = ["mlir::gpt::GptDialect"];
}

#endif
