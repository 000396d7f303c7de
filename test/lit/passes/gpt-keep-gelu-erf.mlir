// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-keep-gelu-erf))" | gptc-opt -split-input-file | FileCheck %s

// Tests that an exact GELU read only by a matmul (a GPT's MLP) keeps its erf, that
// both gradients of the same x take it, and that the printed forms (`gelu_keep_erf`,
// gelu_grad's `erf`) parse back.
// CHECK-LABEL: func.func @mlp
// CHECK-NEXT: %[[Y:.*]], %[[E:.*]] = gpt.gelu_keep_erf %arg0 : tensor<8x16xf32>
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %[[Y]], %arg1
// CHECK-NEXT: %[[D:.*]] = gpt.gelu_grad %arg2, %arg0 erf %[[E]] {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[D2:.*]] = gpt.gelu_grad %[[D]], %arg0 erf %[[E]] {approximate = #gpt.approximate<none>}
// CHECK-NEXT: return %[[M]], %[[D2]]
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %g: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %0 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %1 = gpt.matmul %0, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = gpt.gelu_grad %2, %x {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1, %3 : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

// Tests what is left as it is: a GELU with no gradient after it, a GELU that an
// elementwise op reads (fusion puts it into that op's kernel), the tanh form, and a
// gradient that comes before the GELU.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: gelu_keep_erf
// CHECK-NOT: erf %
// CHECK: return
func.func @kept(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %g: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>) {
  %0 = gpt.gelu %w {approximate = #gpt.approximate<none>} : tensor<16x4xf32>
  %1 = gpt.matmul %x, %0 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %3 = gpt.add %2, %g : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = gpt.gelu %g {approximate = #gpt.approximate<tanh>} : tensor<8x16xf32>
  %6 = gpt.gelu_grad %x, %g {approximate = #gpt.approximate<tanh>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %7 = gpt.gelu_grad %x, %3 {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %8 = gpt.gelu %3 {approximate = #gpt.approximate<none>} : tensor<8x16xf32>
  %9 = gpt.matmul %8, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %1, %4, %6, %7, %9 : tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

// Tests a GELU that a matmul reads through a reshape (a 3-d MLP's weight gradient).
// CHECK-LABEL: func.func @reshaped
// CHECK-NEXT: %[[Y:.*]], %[[E:.*]] = gpt.gelu_keep_erf %arg0 : tensor<2x4x16xf32>
// CHECK-NEXT: gpt.reshape %[[Y]]
// CHECK: gpt.gelu_grad %arg2, %arg0 erf %[[E]]
func.func @reshaped(%x: tensor<2x4x16xf32>, %w: tensor<16x4xf32>, %g: tensor<2x4x16xf32>) -> (tensor<8x4xf32>, tensor<2x4x16xf32>) {
  %0 = gpt.gelu %x {approximate = #gpt.approximate<none>} : tensor<2x4x16xf32>
  %1 = gpt.reshape %0 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %2 = gpt.matmul %1, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %3 = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %2, %3 : tensor<8x4xf32>, tensor<2x4x16xf32>
}
