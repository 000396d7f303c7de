// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-fuse-horizontal))" | FileCheck %s

// Tests that a linear layer's two backward matmuls (independent: both read only
// the incoming gradient and the saved tensors) land in one kernel.
// CHECK-LABEL: func.func @linear_backward
// CHECK: %[[H:.*]]:2 = gpt.horizontal %arg0, %arg1, %arg2 : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<4x16xf32>, %[[X:.*]]: tensor<8x4xf32>):
// CHECK-NEXT:   %[[DX:.*]] = gpt.matmul %[[G]], %[[W]]
// CHECK-NEXT:   %[[DW:.*]] = gpt.matmul %[[X]], %[[G]]
// CHECK-NEXT:   gpt.yield %[[DX]], %[[DW]]
// CHECK: return %[[H]]#0, %[[H]]#1
func.func @linear_backward(%g: tensor<8x16xf32>, %w: tensor<4x16xf32>, %x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4x16xf32>) {
  %dx = gpt.matmul %g, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %dw = gpt.matmul %x, %g {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %dx, %dw : tensor<8x4xf32>, tensor<4x16xf32>
}

// -----

// Tests that a kernel reading a member's result ends the group (the chain
// exp -> neg stays two kernels), and that a lone kernel is left as it is.
// CHECK-LABEL: func.func @dependent
// CHECK: %[[H:.*]]:2 = gpt.horizontal %arg0
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.exp
// CHECK-NEXT:   gpt.tanh
// CHECK-NEXT:   gpt.yield
// CHECK: gpt.neg %[[H]]#0
// CHECK-NOT: gpt.horizontal
func.func @dependent(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = gpt.exp %x : tensor<4xf32>
  %1 = gpt.tanh %x : tensor<4xf32>
  %2 = gpt.neg %0 : tensor<4xf32>
  return %1, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests the optimizer's per-tensor sums of squares: a reshape of a member's
// result moves below the group, so all three sums are one kernel feeding one
// concat. The loss (cross_entropy, a serial sum) is never a member.
// CHECK-LABEL: func.func @norms
// CHECK: %[[H:.*]]:3 = gpt.horizontal
// CHECK-COUNT-3: gpt.reduce_sum
// CHECK: gpt.yield
// CHECK-NEXT: }
// CHECK-NEXT: gpt.reshape %[[H]]#0
// CHECK-NEXT: gpt.reshape %[[H]]#1
// CHECK-NEXT: gpt.reshape %[[H]]#2
// CHECK-NEXT: gpt.concat
// CHECK-NEXT: gpt.cross_entropy
// CHECK-NEXT: gpt.cross_entropy
func.func @norms(%a: tensor<8xf32>, %b: tensor<4x4xf32>, %c: tensor<3xf32>, %l: tensor<2x5xf32>, %t: tensor<2xi64>) -> (tensor<3xf32>, tensor<f32>, tensor<f32>) {
  %0 = gpt.reduce_sum %a {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<f32>
  %1 = gpt.reshape %0 : (tensor<f32>) -> tensor<1xf32>
  %2 = gpt.reduce_sum %b {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x4xf32>) -> tensor<f32>
  %3 = gpt.reshape %2 : (tensor<f32>) -> tensor<1xf32>
  %4 = gpt.reduce_sum %c {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<3xf32>) -> tensor<f32>
  %5 = gpt.reshape %4 : (tensor<f32>) -> tensor<1xf32>
  %6 = gpt.concat %1, %3, %5 {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
  %7 = gpt.cross_entropy %l, %t {ignore_index = -100 : i64, order = #gpt.order<canonical>} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  %8 = gpt.cross_entropy %l, %t {ignore_index = -100 : i64, order = #gpt.order<canonical>} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return %6, %7, %8 : tensor<3xf32>, tensor<f32>, tensor<f32>
}

// -----

// Tests that concats of vectors whose pieces are kernel results read by nothing else
// (the gradient norm's norms and their squares, which the memory plan makes views)
// stay out of groups: they move below it, after the sums' reshapes. A concat of
// arguments is a copy, a member like any other kernel.
// CHECK-LABEL: func.func @vector_concats
// CHECK: %[[H:.*]]:6 = gpt.horizontal
// CHECK-COUNT-4: gpt.reduce_sum
// CHECK-NEXT: gpt.concat %arg10, %arg11
// CHECK-NEXT: gpt.exp
// CHECK-NEXT: gpt.yield
// CHECK-NEXT: }
// CHECK-COUNT-4: gpt.reshape
// CHECK-NEXT: gpt.concat
// CHECK-NEXT: gpt.concat
// CHECK-NEXT: return
func.func @vector_concats(%a: tensor<8xf32>, %b: tensor<4x4xf32>, %c: tensor<3xf32>, %d: tensor<5xf32>, %x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<5xf32>) {
  %0 = gpt.reduce_sum %a {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<f32>
  %1 = gpt.reshape %0 : (tensor<f32>) -> tensor<1xf32>
  %2 = gpt.reduce_sum %b {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x4xf32>) -> tensor<f32>
  %3 = gpt.reshape %2 : (tensor<f32>) -> tensor<1xf32>
  %4 = gpt.reduce_sum %c {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<3xf32>) -> tensor<f32>
  %5 = gpt.reshape %4 : (tensor<f32>) -> tensor<1xf32>
  %6 = gpt.reduce_sum %d {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<5xf32>) -> tensor<f32>
  %7 = gpt.reshape %6 : (tensor<f32>) -> tensor<1xf32>
  %8 = gpt.concat %1, %3 {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  %9 = gpt.concat %5, %7 {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  %10 = gpt.concat %x, %y {dim = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  %11 = gpt.exp %d : tensor<5xf32>
  return %8, %9, %10, %11 : tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<5xf32>
}

// -----

// Tests that where a kernel reads the group (q's rotary stand-in, the neg, reads q's
// product), the independent kernels right after it join the group first (k's product),
// so that the two products are one kernel and so are the two that read them: 3 kernels,
// where the plain greedy grouping ([q], [neg, k], [exp], add) makes 4.
// CHECK-LABEL: func.func @joins_before_its_reader
// CHECK: %[[P:.*]]:2 = gpt.horizontal %arg0, %arg1, %arg2
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.matmul
// CHECK-NEXT:   gpt.matmul
// CHECK-NEXT:   gpt.yield
// CHECK: %[[E:.*]]:2 = gpt.horizontal %[[P]]#0, %[[P]]#1
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.neg
// CHECK-NEXT:   gpt.exp
// CHECK-NEXT:   gpt.yield
// CHECK: gpt.add %[[E]]#0, %[[E]]#1
func.func @joins_before_its_reader(%x: tensor<4x4xf32>, %wq: tensor<4x4xf32>, %wk: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %q = gpt.matmul %x, %wq {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %qr = gpt.neg %q : tensor<4x4xf32>
  %k = gpt.matmul %x, %wk {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %kr = gpt.exp %k : tensor<4x4xf32>
  %a = gpt.add %qr, %kr : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

// Tests that joining early is kept only where it leaves fewer kernels: here it would
// give [q, k], [neg, exp], sqrt, add, no fewer than the plain grouping's 4, so the
// kernels keep their order.
// CHECK-LABEL: func.func @joins_only_for_fewer
// CHECK: gpt.matmul
// CHECK-NEXT: gpt.horizontal
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.neg
// CHECK-NEXT:   gpt.matmul
// CHECK-NEXT:   gpt.yield
// CHECK: gpt.horizontal
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.sqrt
// CHECK-NEXT:   gpt.exp
// CHECK-NEXT:   gpt.yield
// CHECK: gpt.add
func.func @joins_only_for_fewer(%x: tensor<4x4xf32>, %wq: tensor<4x4xf32>, %wk: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %q = gpt.matmul %x, %wq {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %qr = gpt.neg %q : tensor<4x4xf32>
  %k = gpt.matmul %x, %wk {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = gpt.sqrt %qr : tensor<4x4xf32>
  %kr = gpt.exp %k : tensor<4x4xf32>
  %a = gpt.add %s, %kr : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}
