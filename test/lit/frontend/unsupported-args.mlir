// RUN: not gptc-opt %s -gpt-convert-aten 2>&1 | FileCheck %s

// Tests that arguments gpt cannot express are rejected with the reason.

// CHECK: model.py:7:0: error: unsupported PyTorch op 'aten.layer_norm.default' (only normalization over the last dimension)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "torch.aten.layer_norm.default"(%x) {torch.operands = ["input"], normalized_shape = array<i64: 4, 8>, eps = 1.0e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":7:0)
  return %0 : tensor<4x8xf32>
}
