// RUN: gptc-opt %s | gptc-opt | FileCheck %s

// Tests that every gpt op parses, verifies and prints back the same.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %m: tensor<2x3xi1>, %rng: tensor<2xi64>) -> tensor<2x3xf32> {
  // CHECK: gpt.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = gpt.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.sub
  %1 = gpt.sub %0, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.mul
  %2 = gpt.mul %1, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.div
  %3 = gpt.div %2, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.pow
  %4 = gpt.pow %3, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.max
  %5 = gpt.max %4, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.neg %{{.*}} : tensor<2x3xf32>
  %6 = gpt.neg %5 : tensor<2x3xf32>
  // CHECK: gpt.exp
  %7 = gpt.exp %6 : tensor<2x3xf32>
  // CHECK: gpt.log
  %8 = gpt.log %7 : tensor<2x3xf32>
  // CHECK: gpt.tanh
  %9 = gpt.tanh %8 : tensor<2x3xf32>
  // CHECK: gpt.erf
  %10 = gpt.erf %9 : tensor<2x3xf32>
  // CHECK: gpt.sqrt
  %11 = gpt.sqrt %10 : tensor<2x3xf32>
  // CHECK: gpt.rsqrt
  %12 = gpt.rsqrt %11 : tensor<2x3xf32>
  // CHECK: gpt.gelu %{{.*}} {approximate = #gpt.approximate<none>}
  %13 = gpt.gelu %12 {approximate = #gpt.approximate<none>} : tensor<2x3xf32>
  // CHECK: gpt.gelu %{{.*}} {approximate = #gpt.approximate<tanh>}
  %14 = gpt.gelu %13 {approximate = #gpt.approximate<tanh>} : tensor<2x3xf32>
  // CHECK: gpt.compare %{{.*}}, %{{.*}} {predicate = #gpt.predicate<ge>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %c = gpt.compare %14, %b {predicate = #gpt.predicate<ge>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: gpt.abs
  %ab = gpt.abs %14 : tensor<2x3xf32>
  // CHECK: gpt.sigmoid
  %sg = gpt.sigmoid %ab : tensor<2x3xf32>
  // CHECK: gpt.min
  %mn = gpt.min %sg, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.where
  %15 = gpt.where %c, %mn, %a : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.masked_fill {{.*}} {value = 0xFFF0000000000000 : f64}
  %16 = gpt.masked_fill %15, %m {value = 0xFFF0000000000000 : f64} : (tensor<2x3xf32>, tensor<2x3xi1>) -> tensor<2x3xf32>
  // CHECK: gpt.dropout {{.*}} {id = 0 : i64, p = 1.000000e-01 : f64, train = false}
  %17 = gpt.dropout %16 {id = 0 : i64, p = 0.1 : f64, train = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: gpt.dropout %{{.*}}, %{{.*}} {id = 1 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %18 = gpt.dropout %17, %rng {id = 1 : i64, p = 0.1 : f64, train = true} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  // CHECK: gpt.stop_gradient
  %19 = gpt.stop_gradient %18 : tensor<2x3xf32>
  return %19 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @constants_and_types
func.func @constants_and_types() -> (tensor<4xi64>, tensor<f32>, tensor<4xbf16>, tensor<4xf64>) {
  // CHECK: gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<4xi64>
  %0 = gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<4xi64>
  // CHECK: gpt.constant dense<5.000000e-01> : tensor<f32>
  %1 = gpt.constant dense<0.5> : tensor<f32>
  // CHECK: gpt.convert %{{.*}} : tensor<4xi64> -> tensor<4xbf16>
  %2 = gpt.convert %0 : tensor<4xi64> -> tensor<4xbf16>
  // CHECK: gpt.convert %{{.*}} : tensor<4xbf16> -> tensor<4xf64>
  %3 = gpt.convert %2 : tensor<4xbf16> -> tensor<4xf64>
  return %0, %1, %2, %3 : tensor<4xi64>, tensor<f32>, tensor<4xbf16>, tensor<4xf64>
}

// CHECK-LABEL: func.func @model_ops
func.func @model_ops(%wte: tensor<65x64xf32>, %idx: tensor<2x32xi64>, %w: tensor<64xf32>,
                     %q: tensor<2x2x32x32xf32>, %t: tensor<64xi64>) -> (tensor<2x32x192xf32>, tensor<2x2x32x32xf32>, tensor<f32>) {
  // CHECK: gpt.embedding
  %e = gpt.embedding %wte, %idx : (tensor<65x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
  // CHECK: gpt.layer_norm %{{.*}}, %{{.*}}, bias %{{.*}} {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>}
  %ln = gpt.layer_norm %e, %w, bias %w {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  // CHECK: gpt.layer_norm %{{.*}} {eps
  %ln2 = gpt.layer_norm %ln {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %wc = gpt.concat %wte, %wte, %wte {dim = 0 : i64} : (tensor<65x64xf32>, tensor<65x64xf32>, tensor<65x64xf32>) -> tensor<195x64xf32>
  // CHECK: gpt.concat
  %wqkv = gpt.slice %wc {dim = 0 : i64, start = 0 : i64, end = 192 : i64, step = 1 : i64} : (tensor<195x64xf32>) -> tensor<192x64xf32>
  // CHECK: gpt.slice
  // CHECK: gpt.matmul {{.*}} {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true}
  %qkv = gpt.matmul %ln2, %wqkv {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
  // CHECK: gpt.split
  %s:3 = gpt.split %qkv {dim = 2 : i64} : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
  // CHECK: gpt.reshape
  %r = gpt.reshape %s#0 : (tensor<2x32x64xf32>) -> tensor<2x32x2x32xf32>
  // CHECK: gpt.transpose {{.*}} {perm = array<i64: 0, 2, 1, 3>}
  %tq = gpt.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x32x2x32xf32>) -> tensor<2x2x32x32xf32>
  // CHECK: gpt.attention {{.*}}is_causal = true, order = #gpt.order<online_block32>
  %a:2 = gpt.attention %tq, %q, %q {dropout_p = 0.0 : f64, id = 1 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.125 : f64} : (tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32>) -> (tensor<2x2x32x32xf32>, tensor<2x2x32x2xf32>)
  // CHECK: gpt.broadcast
  %b = gpt.broadcast %w : (tensor<64xf32>) -> tensor<64x64xf32>
  // CHECK: gpt.softmax {{.*}}dim = 1
  %sm = gpt.softmax %b {dim = 1 : i64, order = #gpt.order<canonical>} : tensor<64x64xf32>
  // CHECK: gpt.log_softmax
  %lsm = gpt.log_softmax %sm {dim = 0 : i64, order = #gpt.order<canonical>} : tensor<64x64xf32>
  // CHECK: gpt.reduce_sum {{.*}}dims = array<i64: 1>, keepdim = true
  %rs = gpt.reduce_sum %lsm {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<64x64xf32>) -> tensor<64x1xf32>
  // CHECK: gpt.cumsum {{.*}}dim = 0 : i64, order = #gpt.order<sequential>, reverse = true
  %cs = gpt.cumsum %rs {dim = 0 : i64, order = #gpt.order<sequential>, reverse = true} : tensor<64x1xf32>
  // CHECK: gpt.reduce_max
  %rm = gpt.reduce_max %rs {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<64x1xf32>) -> tensor<f32>
  // CHECK: gpt.reduce_mean
  %rn = gpt.reduce_mean %lsm {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<64x64xf32>) -> tensor<64xf32>
  // CHECK: gpt.cross_entropy {{.*}}ignore_index = -1 : i64
  %l = gpt.cross_entropy %lsm, %t {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<64x64xf32>, tensor<64xi64>) -> tensor<f32>
  return %qkv, %a#0, %l : tensor<2x32x192xf32>, tensor<2x2x32x32xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%g: tensor<64x64xf32>, %x: tensor<64x64xf32>, %w: tensor<64xf32>, %q: tensor<1x2x32x32xf32>, %t: tensor<64xi64>, %s: tensor<f32>, %idx: tensor<64xi64>, %rng: tensor<2xi64>, %st: tensor<1x2x32x2xf32>, %km: tensor<1x32xi1>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<1x2x32x32xf32>, tensor<64x64xf32>, tensor<65x64xf32>) {
  // CHECK: gpt.gelu_grad
  %0 = gpt.gelu_grad %g, %x {approximate = #gpt.approximate<none>} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: gpt.layer_norm_grad
  %1 = gpt.layer_norm_grad %g, %x, %w {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  // CHECK: gpt.attention_grad {{.*}}, %arg8, %arg7 {dropout_p = 1.000000e-01 : f64
  %dq, %dk, %dv = gpt.attention_grad %q, %q, %q, %q, %st, %rng {dropout_p = 0.1 : f64, id = 3 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.125 : f64} : (tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x2xf32>, tensor<2xi64>) -> (tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>)
  // CHECK: gpt.attention_grad {{.*}}, %arg8, %arg7 key_mask %arg9 {dropout_p = 1.000000e-01 : f64
  %mq, %mk, %mv = gpt.attention_grad %q, %q, %q, %q, %st, %rng key_mask %km {dropout_p = 0.1 : f64, id = 3 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.125 : f64} : (tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x2xf32>, tensor<2xi64>, tensor<1x32xi1>) -> (tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x32xf32>)
  // CHECK: gpt.cross_entropy_grad
  %2 = gpt.cross_entropy_grad %x, %t, %s {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<64x64xf32>, tensor<64xi64>, tensor<f32>) -> tensor<64x64xf32>
  // CHECK: gpt.embedding_grad
  %3 = gpt.embedding_grad %g, %idx : (tensor<64x64xf32>, tensor<64xi64>) -> tensor<65x64xf32>
  return %0, %1, %dq, %2, %3 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<1x2x32x32xf32>, tensor<64x64xf32>, tensor<65x64xf32>
}

// CHECK-LABEL: func.func @horizontal
// CHECK: gpt.horizontal %arg0 : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: gpt.yield
func.func @horizontal(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %h:2 = gpt.horizontal %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %0 = gpt.exp %a : tensor<4xf32>
    %1 = gpt.neg %a : tensor<4xf32>
    gpt.yield %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
  return %h#0, %h#1 : tensor<4xf32>, tensor<4xf32>
}

// A slice whose step is past the end: one element (its size was computed with an
// overflowing sum and the op refused).
// CHECK-LABEL: func.func @slice_huge_step
// CHECK: gpt.slice
func.func @slice_huge_step(%x: tensor<16xf32>) -> tensor<1xf32> {
  %0 = gpt.slice %x {dim = 0 : i64, start = 0 : i64, end = 10 : i64, step = 9223372036854775807 : i64} : (tensor<16xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}
