// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-recompute-activations))" | FileCheck %s

// Tests that a GELU's output read after the loss (a weight gradient through a reshape, and
// an add after it) is computed again right before the first such reader, which both then
// read, and that the forward's matmul keeps the first GELU.
// CHECK-LABEL: func.func @mlp
// CHECK-NEXT: %[[Y:.*]] = gpt.gelu %arg0 {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %[[Y]], %arg1
// CHECK-NEXT: %[[L:.*]] = gpt.reduce_sum %[[M]]
// CHECK-NEXT: %[[G:.*]] = gpt.gelu_grad %arg2, %arg0
// CHECK-NEXT: %[[Y2:.*]] = gpt.gelu %arg0 {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = gpt.reshape %[[Y2]]
// CHECK-NEXT: %[[D:.*]] = gpt.matmul %[[R]], %arg1
// CHECK-NEXT: %[[E:.*]] = gpt.add %[[Y2]], %[[G]]
// CHECK-NEXT: return %[[D]], %[[E]], %[[L]]
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %g: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>, tensor<f32>) {
  %0 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %1 = gpt.matmul %0, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8x4xf32>) -> tensor<f32>
  %3 = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = gpt.reshape %0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = gpt.matmul %4, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %6 = gpt.add %0, %3 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %5, %6, %2 : tensor<8x4xf32>, tensor<8x16xf32>, tensor<f32>
}

// -----

// Tests a LayerNorm's output read after the loss (the weight gradient of the linear layer it
// feeds): computed again from the same input, weight and bias right before that reader, while
// its gradient reads the input later anyway; the forward's matmul keeps the first.
// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT: %[[Y:.*]] = gpt.layer_norm %arg0, %arg1, bias %arg2
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %[[Y]], %arg3
// CHECK-NEXT: %[[L:.*]] = gpt.reduce_sum %[[M]]
// CHECK-NEXT: %[[Y2:.*]] = gpt.layer_norm %arg0, %arg1, bias %arg2
// CHECK-NEXT: %[[D:.*]] = gpt.matmul %[[Y2]], %arg4 {order = #gpt.order<sequential>, transpose_lhs = true
// CHECK-NEXT: %[[G:.*]] = gpt.layer_norm_grad %arg5, %arg0, %arg1
// CHECK-NEXT: return %[[D]], %[[G]], %[[L]]
func.func @layer_norm(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>, %v: tensor<16x4xf32>, %dm: tensor<8x4xf32>, %g: tensor<8x16xf32>) -> (tensor<16x4xf32>, tensor<8x16xf32>, tensor<f32>) {
  %0 = gpt.layer_norm %x, %w, bias %b {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %1 = gpt.matmul %0, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8x4xf32>) -> tensor<f32>
  %3 = gpt.matmul %0, %dm {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %4 = gpt.layer_norm_grad %g, %x, %w {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %3, %4, %2 : tensor<16x4xf32>, tensor<8x16xf32>, tensor<f32>
}

// -----

// Tests an output that stays: its operand (a GELU's input that nothing after the loss reads)
// would otherwise be held into the backward.
// CHECK-LABEL: func.func @operand_dead
// CHECK: gpt.gelu %
// CHECK-NOT: gpt.gelu %
// CHECK: return
func.func @operand_dead(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<f32>) {
  %x = gpt.exp %a : tensor<8x16xf32>
  %0 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %1 = gpt.matmul %0, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8x4xf32>) -> tensor<f32>
  %3 = gpt.matmul %0, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %3, %2 : tensor<8x4xf32>, tensor<f32>
}

// -----

// Tests what is left as it is: no scalar loss (a forward only), and a GELU read after the
// loss but computed after it too.
// CHECK-LABEL: func.func @forward
// CHECK: gpt.gelu %
// CHECK-NOT: gpt.gelu %
// CHECK: return
func.func @forward(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %0 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %1 = gpt.matmul %0, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %1, %0 : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @after
// CHECK: gpt.gelu %
// CHECK-NOT: gpt.gelu %
// CHECK: return
func.func @after(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<f32>) {
  %0 = gpt.reduce_sum %x {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8x16xf32>) -> tensor<f32>
  %1 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %2 = gpt.matmul %1, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %2, %0 : tensor<8x4xf32>, tensor<f32>
}
