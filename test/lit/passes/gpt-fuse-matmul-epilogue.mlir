// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-fuse-matmul-epilogue))" | gptc-opt -split-input-file | FileCheck %s

// Tests that a residual add of a matmul's only use becomes the matmul's addend,
// whichever side of the add the matmul is on, and that the printed form
// (`plus`) parses back.
// CHECK-LABEL: func.func @residual
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %arg1, %arg2 plus %arg0 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[N:.*]] = gpt.matmul %arg1, %arg2 plus %[[M]] {{.*}} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: return %[[N]]
func.func @residual(%r: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %w: tensor<4x16xf32>) -> tensor<2x8x4xf32> {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %1 = gpt.add %r, %0 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %2 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %3 = gpt.add %2, %1 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %3 : tensor<2x8x4xf32>
}

// -----

// Tests what stays unfused: a matmul with another user (its product is needed
// alone), a broadcast addend (a bias), and an add of a matmul to itself.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: plus
// CHECK: return
func.func @kept(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %1 = gpt.add %0, %0 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %3 = gpt.add %2, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %4 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %5 = gpt.add %4, %1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %3, %4, %5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
