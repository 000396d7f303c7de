// RUN: not gptc-opt %s -gpt-convert-aten 2>&1 | FileCheck %s
// RUN: not gptc-opt %s -gpt-convert-aten 2>&1 | count 1

// Tests that an op without a conversion is one error line naming the aten op,
// its operand shapes and the model.py line.

// CHECK: gptc-opt: model.py:42:0: error: unsupported PyTorch op 'aten.flip.default' (no conversion to the gpt dialect); operands ([4x8]f32)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "torch.aten.flip.default"(%x) {torch.operands = ["self"], dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":42:0)
  return %0 : tensor<4x8xf32>
}
