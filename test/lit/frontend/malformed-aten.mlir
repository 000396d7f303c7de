// RUN: not gptc-opt %s -split-input-file -gpt-convert-aten 2>&1 | FileCheck %s

// Tests that hand-written aten ops the capture never makes are one error each, naming
// the op, where each was a crash in its conversion: dims out of range, a scalar
// operand, operands not named in torch.operands, a rank-0 layer_norm.

// CHECK: model.py:1:0: error: unsupported PyTorch op 'aten.transpose.int' (dim 100000000 out of range for rank 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = "torch.aten.transpose.int"(%x) {torch.operands = ["self"], dim0 = 0 : i64, dim1 = 100000000 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("model.py":1:0)
  return %0 : tensor<8x4xf32>
}

// -----

// CHECK: model.py:2:0: error: unsupported PyTorch op 'aten.transpose.int' (dim -7 out of range for rank 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = "torch.aten.transpose.int"(%x) {torch.operands = ["self"], dim0 = -7 : i64, dim1 = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("model.py":2:0)
  return %0 : tensor<8x4xf32>
}

// -----

// CHECK: model.py:3:0: error: unsupported PyTorch op 'aten.select.int' (dim 5 out of range for rank 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %0 = "torch.aten.select.int"(%x) {torch.operands = ["self"], dim = 5 : i64, index = 0 : i64} : (tensor<4x8xf32>) -> tensor<8xf32> loc("model.py":3:0)
  return %0 : tensor<8xf32>
}

// -----

// CHECK: model.py:4:0: error: unsupported PyTorch op 'aten.select.int' (index 4 out of range for a dim of 4)
func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %0 = "torch.aten.select.int"(%x) {torch.operands = ["self"], dim = 0 : i64, index = 4 : i64} : (tensor<4x8xf32>) -> tensor<8xf32> loc("model.py":4:0)
  return %0 : tensor<8xf32>
}

// -----

// CHECK: model.py:5:0: error: unsupported PyTorch op 'aten.slice.Tensor' (dim -3 out of range for rank 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "torch.aten.slice.Tensor"(%x) {torch.operands = ["self"], dim = -3 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":5:0)
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK: model.py:6:0: error: unsupported PyTorch op 'aten.softmax.int' (dim 2 out of range for rank 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "torch.aten.softmax.int"(%x) {torch.operands = ["self"], dim = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":6:0)
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK: model.py:7:0: error: unsupported PyTorch op 'aten.gelu.default' (operands and results must be ranked tensors, each operand named in torch.operands)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "torch.aten.gelu.default"(%x) {approximate = "none"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":7:0)
  return %0 : tensor<4xf32>
}

// -----

// CHECK: model.py:8:0: error: unsupported PyTorch op 'aten.add.Tensor' (operands and results must be ranked tensors, each operand named in torch.operands)
func.func @f(%x: tensor<4xf32>, %s: f32) -> tensor<4xf32> {
  %0 = "torch.aten.add.Tensor"(%x, %s) {torch.operands = ["self", "other"]} : (tensor<4xf32>, f32) -> tensor<4xf32> loc("model.py":8:0)
  return %0 : tensor<4xf32>
}

// -----

// CHECK: model.py:9:0: error: unsupported PyTorch op 'aten.gelu.default' (needs an operand 'self')
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "torch.aten.gelu.default"(%x) {torch.operands = ["input"], approximate = "none"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":9:0)
  return %0 : tensor<4xf32>
}

// -----

// CHECK: model.py:10:0: error: unsupported PyTorch op 'aten.linear.default' (needs an operand 'weight')
func.func @f(%x: tensor<4x8xf32>, %w: tensor<2x8xf32>) -> tensor<4x2xf32> {
  %0 = "torch.aten.linear.default"(%x, %w) {torch.operands = ["input", "w"]} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32> loc("model.py":10:0)
  return %0 : tensor<4x2xf32>
}

// -----

// CHECK: model.py:11:0: error: unsupported PyTorch op 'aten.layer_norm.default' (only normalization over the last dimension)
func.func @f(%x: tensor<f32>) -> tensor<f32> {
  %0 = "torch.aten.layer_norm.default"(%x) {torch.operands = ["input"], normalized_shape = array<i64: 1>, eps = 1.0e-05 : f64} : (tensor<f32>) -> tensor<f32> loc("model.py":11:0)
  return %0 : tensor<f32>
}
