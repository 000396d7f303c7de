// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-recompute-gelu))" | FileCheck %s

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
