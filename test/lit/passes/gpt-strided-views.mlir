// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-strided-views))" | FileCheck %s

// Tests rotary embeddings' shape: a transpose split into halves that elementwise kernels
// alone read (a lone op and a gpt.fused) becomes two strided views.
// CHECK-LABEL: func.func @rotary
// CHECK: gpt.transpose %arg0 {gpt.strided,
// CHECK: gpt.split %{{.*}} {dim = 2 : i64, gpt.strided}
// CHECK: gpt.mul
// CHECK: gpt.fused
func.func @rotary(%x: tensor<2x4x6xf32>, %c: tensor<6x2xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x2xf32>) {
  %t = gpt.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x4x6xf32>) -> tensor<2x6x4xf32>
  %h:2 = gpt.split %t {dim = 2 : i64} : (tensor<2x6x4xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x2xf32>)
  %a = gpt.mul %h#0, %c : (tensor<2x6x2xf32>, tensor<6x2xf32>) -> tensor<2x6x2xf32>
  %b = gpt.fused %h#1, %c : (tensor<2x6x2xf32>, tensor<6x2xf32>) -> tensor<2x6x2xf32> {
  ^bb0(%p: tensor<2x6x2xf32>, %q: tensor<6x2xf32>):
    %0 = gpt.mul %p, %q : (tensor<2x6x2xf32>, tensor<6x2xf32>) -> tensor<2x6x2xf32>
    %1 = gpt.neg %0 : tensor<2x6x2xf32>
    gpt.yield %1 : tensor<2x6x2xf32>
  }
  return %a, %b : tensor<2x6x2xf32>, tensor<2x6x2xf32>
}

// -----

// Tests readers that need a dense buffer: a matmul, the function's return, a sum and an
// exact GELU (its array form) each keep the op they read a kernel; and so does a
// transpose read only by another transpose that a matmul reads (unmarked in turn).
// CHECK-LABEL: func.func @dense_readers
// CHECK-NOT: gpt.strided
func.func @dense_readers(%x: tensor<4x8xf32>, %w: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x4xf32>, tensor<4x4xf32>) {
  %t = gpt.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %m = gpt.matmul %w, %t {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %r = gpt.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s0 = gpt.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s = gpt.reduce_sum %s0 {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<8x4xf32>) -> tensor<8xf32>
  %g0 = gpt.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %g = gpt.gelu %g0 {approximate = #gpt.approximate<none>} : tensor<8x4xf32>
  %u = gpt.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %v = gpt.transpose %u {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %n = gpt.matmul %v, %t {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %m, %r, %s, %g, %n : tensor<4x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}

// -----

// Tests a reshape between a view and its reader: splitting a dim keeps the strides (the
// transpose is a view); merging two dims that the transpose does not space evenly has
// none (it stays a kernel).
// CHECK-LABEL: func.func @reshapes
// CHECK: gpt.transpose %arg0 {gpt.strided,
// CHECK: gpt.transpose %arg0 {perm
// CHECK-NOT: gpt.strided
func.func @reshapes(%x: tensor<2x3x4xf32>) -> (tensor<3x2x2x2xf32>, tensor<6x4xf32>) {
  %t = gpt.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %s = gpt.reshape %t : (tensor<3x2x4xf32>) -> tensor<3x2x2x2xf32>
  %a = gpt.neg %s : tensor<3x2x2x2xf32>
  %u = gpt.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %m = gpt.reshape %u : (tensor<3x2x4xf32>) -> tensor<6x4xf32>
  %b = gpt.neg %m : tensor<6x4xf32>
  return %a, %b : tensor<3x2x2x2xf32>, tensor<6x4xf32>
}

// -----

// Tests the way back: two elementwise results concatenated and transposed, computed for
// the concat alone, are written in place into the transpose's buffer (both gathered); a
// transpose kernel (of a matmul's result) writes its piece of a concat in place too, and
// so does a reshape between a piece and its concat.
// CHECK-LABEL: func.func @gathered
// CHECK: gpt.concat %{{.*}}, %{{.*}} {dim = 2 : i64, gpt.gathered}
// CHECK: gpt.transpose %{{.*}} {gpt.gathered, perm
// CHECK: gpt.transpose %{{.*}} {perm
// CHECK: gpt.concat %{{.*}}, %{{.*}} {dim = 1 : i64, gpt.gathered}
func.func @gathered(%x: tensor<2x6x2xf32>, %y: tensor<2x6x2xf32>, %a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %z: tensor<4x2x2xf32>) -> (tensor<2x4x6xf32>, tensor<4x8xf32>) {
  %0 = gpt.neg %x : tensor<2x6x2xf32>
  %1 = gpt.add %x, %y : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x2xf32>
  %c = gpt.concat %0, %1 {dim = 2 : i64} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x4xf32>
  %t = gpt.transpose %c {perm = array<i64: 0, 2, 1>} : (tensor<2x6x4xf32>) -> tensor<2x4x6xf32>
  %m = gpt.matmul %a, %b {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %mt = gpt.transpose %m {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = gpt.exp %z : tensor<4x2x2xf32>
  %r = gpt.reshape %e : (tensor<4x2x2xf32>) -> tensor<4x4xf32>
  %g = gpt.concat %mt, %r {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  return %t, %g : tensor<2x4x6xf32>, tensor<4x8xf32>
}

// -----

// Tests pieces that cannot be written in place: a function argument, a result read by
// another op too, a matmul's result, a sum's, and a reshape that merges dims the concat
// does not space evenly (a [2, 8] piece of [4, 8] columns 4 wide); none is gathered.
// CHECK-LABEL: func.func @not_gathered
// CHECK-NOT: gpt.gathered
func.func @not_gathered(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %y: tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %0 = gpt.neg %x : tensor<4x4xf32>
  %a = gpt.concat %x, %0 {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %1 = gpt.exp %x : tensor<4x4xf32>
  %2 = gpt.tanh %x : tensor<4x4xf32>
  %b = gpt.concat %1, %2 {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %m = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = gpt.sigmoid %x : tensor<4x4xf32>
  %c = gpt.concat %m, %3 {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %s = gpt.reduce_sum %x {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x4xf32>) -> tensor<4xf32>
  %n = gpt.neg %s : tensor<4xf32>
  %d = gpt.concat %s, %n {dim = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %4 = gpt.exp %y : tensor<2x8xf32>
  %5 = gpt.reshape %4 : (tensor<2x8xf32>) -> tensor<4x4xf32>
  %6 = gpt.neg %x : tensor<4x4xf32>
  %e = gpt.concat %6, %5 {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  return %a, %b, %2, %c, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Tests a LLaMA block's k/v projection: its split's first piece is rotated (read by an
// elementwise kernel through a transpose), the second is attention's v in the [B, T, H, D]
// layout (each row contiguous), which attention and its gradient read in place: the split
// is a strided view. Attention's g, or a piece whose rows are not contiguous (a transpose
// of the last two dims), keeps the op it reads a kernel.
// CHECK-LABEL: func.func @attention_reads
// CHECK: gpt.split %arg0 {dim = 2 : i64, gpt.strided}
// CHECK: gpt.transpose %{{.*}} {gpt.strided, perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[G:.*]] = gpt.transpose %arg1 {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[KT:.*]] = gpt.transpose %arg2 {perm = array<i64: 0, 1, 3, 2>}
func.func @attention_reads(%kv: tensor<1x4x8xf32>, %gin: tensor<1x2x4x2xf32>, %kin: tensor<1x2x2x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) {
  %k, %v = gpt.split %kv {dim = 2 : i64} : (tensor<1x4x8xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  %k4 = gpt.reshape %k : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %kh = gpt.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %kr = gpt.neg %kh : tensor<1x2x4x2xf32>
  %v4 = gpt.reshape %v : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %y, %stats = gpt.attention %kr, %kr, %v4 {bthd = array<i1: false, false, true, false>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  %g = gpt.transpose %gin {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x2xf32>) -> tensor<1x4x2x2xf32>
  %dq, %dk, %dv = gpt.attention_grad %kr, %kr, %v4, %g, %stats {bthd = array<i1: false, false, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>)
  %kt = gpt.transpose %kin {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x2x4xf32>) -> tensor<1x2x4x2xf32>
  %z, %zs = gpt.attention %kt, %kt, %kt {dropout_p = 0.0 : f64, id = 1 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  return %y, %dq, %dk, %dv, %z : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests attention's gradient writing in place: dk and dv (each row contiguous) into their
// columns of a concat, which is gathered; dq through a transpose of the last two dims
// (rows not contiguous) is not, so that transpose stays a kernel.
// CHECK-LABEL: func.func @attention_grad_writes
// CHECK: %[[DQT:.*]] = gpt.transpose %{{.*}} {perm = array<i64: 0, 1, 3, 2>}
// CHECK: gpt.concat %{{.*}}, %{{.*}} {dim = 2 : i64, gpt.gathered}
func.func @attention_grad_writes(%q: tensor<1x2x4x2xf32>, %k: tensor<1x4x2x2xf32>, %g: tensor<1x4x2x2xf32>, %stats: tensor<1x2x4x2xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x4x8xf32>) {
  %dq, %dk, %dv = gpt.attention_grad %q, %k, %k, %g, %stats {bthd = array<i1: false, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>)
  %dqt = gpt.transpose %dq {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x2xf32>) -> tensor<1x2x2x4xf32>
  %dk3 = gpt.reshape %dk : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dv3 = gpt.reshape %dv : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %cat = gpt.concat %dk3, %dv3 {dim = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x8xf32>
  return %dqt, %cat : tensor<1x2x2x4xf32>, tensor<1x4x8xf32>
}
