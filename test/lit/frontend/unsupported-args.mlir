// RUN: not gptc-opt %s -split-input-file -gpt-convert-aten 2>&1 | FileCheck %s

// Tests that arguments gpt cannot express are rejected with the reason.

// CHECK: model.py:7:0: error: unsupported PyTorch op 'aten.layer_norm.default' (only normalization over the last dimension)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "torch.aten.layer_norm.default"(%x) {torch.operands = ["input"], normalized_shape = array<i64: 4, 8>, eps = 1.0e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":7:0)
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK: model.py:8:0: error: unsupported PyTorch op 'aten.baddbmm.default' (needs 3-D batch1 and batch2 of one batch size)
func.func @baddbmm_batches(%b: tensor<16xf32>, %x: tensor<2x4x8xf32>, %w: tensor<3x8x16xf32>) -> tensor<2x4x16xf32> {
  %0 = "torch.aten.baddbmm.default"(%b, %x, %w) {torch.operands = ["self", "batch1", "batch2"], beta = 2.0 : f64} : (tensor<16xf32>, tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32> loc("model.py":8:0)
  return %0 : tensor<2x4x16xf32>
}

// -----

// CHECK: model.py:9:0: error: unsupported PyTorch op 'aten.pad.default' (only mode='constant')
func.func @pad_reflect(%x: tensor<3x4xf32>) -> tensor<3x6xf32> {
  %0 = "torch.aten.pad.default"(%x) {torch.operands = ["self"], pad = array<i64: 1, 1>, mode = "reflect"} : (tensor<3x4xf32>) -> tensor<3x6xf32> loc("model.py":9:0)
  return %0 : tensor<3x6xf32>
}

// -----

// CHECK: model.py:10:0: error: unsupported PyTorch op 'aten.pad.default' (negative padding (cropping) is not supported)
func.func @pad_crop(%x: tensor<3x4xf32>) -> tensor<3x3xf32> {
  %0 = "torch.aten.pad.default"(%x) {torch.operands = ["self"], pad = array<i64: -1, 0>} : (tensor<3x4xf32>) -> tensor<3x3xf32> loc("model.py":10:0)
  return %0 : tensor<3x3xf32>
}

// -----

// CHECK: model.py:11:0: error: unsupported PyTorch op 'aten.scaled_dot_product_attention.default' (attn_mask must be boolean or of q's type)
func.func @integer_mask(%q: tensor<1x2x3x4xf32>, %m: tensor<1x1x3x3xi64>) -> tensor<1x2x3x4xf32> {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q, %m) {torch.operands = ["query", "key", "value", "attn_mask"]} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x1x3x3xi64>) -> tensor<1x2x3x4xf32> loc("model.py":11:0)
  return %0 : tensor<1x2x3x4xf32>
}
