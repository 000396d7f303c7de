// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-pair-weight-gradients))" | FileCheck %s

// Tests that a weight gradient (transpose_lhs) moves to right after the next input
// gradient, past the elementwise op between them, and that the products keep their operands.
// CHECK-LABEL: func.func @pair
// CHECK-NEXT: %[[G:.*]] = gpt.gelu_grad %arg2, %arg3
// CHECK-NEXT: %[[DX:.*]] = gpt.matmul %[[G]], %arg4 {order = #gpt.order<sequential>, transpose_lhs = false
// CHECK-NEXT: %[[DW:.*]] = gpt.matmul %arg0, %arg1 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: return %[[DW]], %[[DX]]
func.func @pair(%x: tensor<8x16xf32>, %dy: tensor<8x4xf32>, %dh: tensor<8x16xf32>, %h: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<16x4xf32>, tensor<8x4xf32>) {
  %dw = gpt.matmul %x, %dy {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %g = gpt.gelu_grad %dh, %h {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dx = gpt.matmul %g, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %dw, %dx : tensor<16x4xf32>, tensor<8x4xf32>
}

// -----

// Tests that a weight gradient read before the next product stays where it is.
// CHECK-LABEL: func.func @read_first
// CHECK-NEXT: %[[DW:.*]] = gpt.matmul %arg0, %arg1 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: %[[S:.*]] = gpt.reshape %[[DW]]
// CHECK-NEXT: %[[DX:.*]] = gpt.matmul %arg2, %arg3
// CHECK-NEXT: return %[[S]], %[[DX]]
func.func @read_first(%x: tensor<8x16xf32>, %dy: tensor<8x4xf32>, %a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<64xf32>, tensor<8x4xf32>) {
  %dw = gpt.matmul %x, %dy {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %s = gpt.reshape %dw : (tensor<16x4xf32>) -> tensor<64xf32>
  %dx = gpt.matmul %a, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %s, %dx : tensor<64xf32>, tensor<8x4xf32>
}

// -----

// Tests that two weight gradients in a row both move past the next input gradient (a
// weight gradient is not the product one pairs with), and that one with no product after
// it stays.
// CHECK-LABEL: func.func @two_then_none
// CHECK-NEXT: %[[DX:.*]] = gpt.matmul %arg2, %arg3 {order = #gpt.order<sequential>, transpose_lhs = false
// CHECK-NEXT: %[[DW2:.*]] = gpt.matmul %arg1, %arg1 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: %[[DW1:.*]] = gpt.matmul %arg0, %arg0 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: %[[DW3:.*]] = gpt.matmul %arg2, %arg2 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: return %[[DW1]], %[[DW2]], %[[DX]], %[[DW3]]
func.func @two_then_none(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<8x4xf32>, tensor<16x16xf32>) {
  %dw1 = gpt.matmul %a, %a {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %dw2 = gpt.matmul %b, %b {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %dx = gpt.matmul %c, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dw3 = gpt.matmul %c, %c {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %dw1, %dw2, %dx, %dw3 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<8x4xf32>, tensor<16x16xf32>
}
