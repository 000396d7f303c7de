// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-raise-attention))" | gptc-opt -split-input-file | FileCheck %s

// Tests that nanoGPT's attention without flash becomes one causal gpt.attention: the
// scores of q against k transposed, scaled by a constant, -inf where a leading block of
// the tril(ones) buffer is 0, softmax, dropout, times v. The scale is the constant's
// value, the dropout's p, id and rng go to the attention, and the mask goes too.
// CHECK-LABEL: func.func @nanogpt
// CHECK-NOT: gpt.softmax
// CHECK-NOT: gpt.compare
// CHECK: %[[Y:.*]], %{{.*}} = gpt.attention %arg0, %arg1, %arg2, %arg4 {dropout_p = 1.000000e-01 : f64, id = 3 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 1.250000e-01 : f64}
// CHECK-NOT: gpt.softmax
// CHECK-NOT: gpt.dropout
// CHECK: return %[[Y]]
func.func @nanogpt(%q: tensor<2x3x8x64xf32>, %k: tensor<2x3x8x64xf32>, %v: tensor<2x3x8x16xf32>,
                   %bias: tensor<1x1x16x16xf32> {gpt.kind = "param", gpt.name = "bias", gpt.trainable = false, gpt.tril_ones},
                   %rng: tensor<2xi64>) -> tensor<2x3x8x16xf32> {
  %kt = gpt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x8x64xf32>) -> tensor<2x3x64x8xf32>
  %s = gpt.matmul %q, %kt {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<2x3x8x64xf32>, tensor<2x3x64x8xf32>) -> tensor<2x3x8x8xf32>
  %c = gpt.constant dense<1.250000e-01> : tensor<f32>
  %a = gpt.mul %s, %c : (tensor<2x3x8x8xf32>, tensor<f32>) -> tensor<2x3x8x8xf32>
  %b1 = gpt.slice %bias {dim = 2 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<1x1x16x16xf32>) -> tensor<1x1x8x16xf32>
  %b2 = gpt.slice %b1 {dim = 3 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<1x1x8x16xf32>) -> tensor<1x1x8x8xf32>
  %zero = gpt.constant dense<0.000000e+00> : tensor<f32>
  %m = gpt.compare %b2, %zero {predicate = #gpt.predicate<eq>} : (tensor<1x1x8x8xf32>, tensor<f32>) -> tensor<1x1x8x8xi1>
  %f = gpt.masked_fill %a, %m {value = 0xFFF0000000000000 : f64} : (tensor<2x3x8x8xf32>, tensor<1x1x8x8xi1>) -> tensor<2x3x8x8xf32>
  %p = gpt.softmax %f {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<2x3x8x8xf32>
  %d = gpt.dropout %p, %rng {id = 3 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<2x3x8x8xf32>, tensor<2xi64>) -> tensor<2x3x8x8xf32>
  %y = gpt.matmul %d, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<2x3x8x8xf32>, tensor<2x3x8x16xf32>) -> tensor<2x3x8x16xf32>
  return %y : tensor<2x3x8x16xf32>
}

// -----

// Tests the other spellings: k^T as the matmul's transpose_rhs, no scale (1), a [T, T]
// bool buffer compared with false on the left, and an evaluation-mode dropout (none).
// CHECK-LABEL: func.func @plain
// CHECK: gpt.attention %arg0, %arg1, %arg2 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 1.000000e+00 : f64}
// CHECK-NOT: gpt.softmax
func.func @plain(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>,
                 %bias: tensor<4x4xi1> {gpt.kind = "param", gpt.name = "mask", gpt.trainable = false, gpt.tril_ones}) -> tensor<1x2x4x8xf32> {
  %s = gpt.matmul %q, %k {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %false = gpt.constant dense<false> : tensor<i1>
  %m = gpt.compare %false, %bias {predicate = #gpt.predicate<eq>} : (tensor<i1>, tensor<4x4xi1>) -> tensor<4x4xi1>
  %f = gpt.masked_fill %s, %m {value = 0xFFF0000000000000 : f64} : (tensor<1x2x4x4xf32>, tensor<4x4xi1>) -> tensor<1x2x4x4xf32>
  %p = gpt.softmax %f {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x2x4x4xf32>
  %d = gpt.dropout %p {id = 0 : i64, p = 1.000000e-01 : f64, train = false} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = gpt.matmul %d, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests what is left as it is: a mask buffer the capture did not find to be tril(ones),
// a fill other than -inf, probabilities that are also returned, a mask that is not
// `== 0`, and a block of the buffer that does not start at 0.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: gpt.attention
// CHECK-COUNT-5: gpt.softmax
// CHECK-NOT: gpt.attention
func.func @kept(%q: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>,
                %plain: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "plain", gpt.trainable = false},
                %bias: tensor<8x8xf32> {gpt.kind = "param", gpt.name = "bias", gpt.trainable = false, gpt.tril_ones})
    -> (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) {
  %zero = gpt.constant dense<0.000000e+00> : tensor<f32>
  %top = gpt.slice %bias {dim = 0 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %tril = gpt.slice %top {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %causal = gpt.compare %tril, %zero {predicate = #gpt.predicate<eq>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>

  %s0 = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %m0 = gpt.compare %plain, %zero {predicate = #gpt.predicate<eq>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %f0 = gpt.masked_fill %s0, %m0 {value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x1x4x4xf32>
  %p0 = gpt.softmax %f0 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x1x4x4xf32>
  %y0 = gpt.matmul %p0, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>

  %s1 = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %f1 = gpt.masked_fill %s1, %causal {value = -1.000000e+09 : f64} : (tensor<1x1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x1x4x4xf32>
  %p1 = gpt.softmax %f1 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x1x4x4xf32>
  %y1 = gpt.matmul %p1, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>

  %s2 = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %f2 = gpt.masked_fill %s2, %causal {value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x1x4x4xf32>
  %p2 = gpt.softmax %f2 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x1x4x4xf32>
  %y2 = gpt.matmul %p2, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>

  %s3 = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %m3 = gpt.compare %tril, %zero {predicate = #gpt.predicate<ne>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %f3 = gpt.masked_fill %s3, %m3 {value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x1x4x4xf32>
  %p3 = gpt.softmax %f3 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x1x4x4xf32>
  %y3 = gpt.matmul %p3, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>

  %s4 = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %low = gpt.slice %bias {dim = 0 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %lowl = gpt.slice %low {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %m4 = gpt.compare %lowl, %zero {predicate = #gpt.predicate<eq>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %f4 = gpt.masked_fill %s4, %m4 {value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x1x4x4xf32>
  %p4 = gpt.softmax %f4 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x1x4x4xf32>
  %y4 = gpt.matmul %p4, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %y0, %y1, %y2, %p2, %y3, %y4 : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
}

// -----

// Tests one head of Karpathy's lecture GPT: q, k, v of [B, T, D], k transposed at rank 3,
// a [N, N] buffer sliced to [T, T]. The attention runs on [B, 1, T, D] between reshapes.
// CHECK-LABEL: func.func @one_head
// CHECK-DAG: %[[Q:.*]] = gpt.reshape %arg0 : (tensor<2x8x16xf32>) -> tensor<2x1x8x16xf32>
// CHECK-DAG: %[[K:.*]] = gpt.reshape %arg1 : (tensor<2x8x16xf32>) -> tensor<2x1x8x16xf32>
// CHECK-DAG: %[[V:.*]] = gpt.reshape %arg2 : (tensor<2x8x4xf32>) -> tensor<2x1x8x4xf32>
// CHECK: %[[A:.*]], %{{.*}} = gpt.attention %[[Q]], %[[K]], %[[V]], %arg4 {dropout_p = 2.000000e-01 : f64, id = 1 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 5.000000e-01 : f64} : (tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x4xf32>, tensor<2xi64>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8x2xf32>)
// CHECK: %[[Y:.*]] = gpt.reshape %[[A]] : (tensor<2x1x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NOT: gpt.softmax
// CHECK-NOT: gpt.transpose
// CHECK: return %[[Y]]
func.func @one_head(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x4xf32>,
                    %tril: tensor<16x16xf32> {gpt.kind = "param", gpt.name = "tril", gpt.trainable = false, gpt.tril_ones},
                    %rng: tensor<2xi64>) -> tensor<2x8x4xf32> {
  %kt = gpt.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %s = gpt.matmul %q, %kt {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  %c = gpt.constant dense<5.000000e-01> : tensor<f32>
  %a = gpt.mul %s, %c : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8x8xf32>
  %t1 = gpt.slice %tril {dim = 0 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<16x16xf32>) -> tensor<8x16xf32>
  %t2 = gpt.slice %t1 {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x8xf32>
  %zero = gpt.constant dense<0.000000e+00> : tensor<f32>
  %m = gpt.compare %t2, %zero {predicate = #gpt.predicate<eq>} : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xi1>
  %f = gpt.masked_fill %a, %m {value = 0xFFF0000000000000 : f64} : (tensor<2x8x8xf32>, tensor<8x8xi1>) -> tensor<2x8x8xf32>
  %p = gpt.softmax %f {dim = 2 : i64, order = #gpt.order<canonical>} : tensor<2x8x8xf32>
  %d = gpt.dropout %p, %rng {id = 1 : i64, p = 2.000000e-01 : f64, train = true} : (tensor<2x8x8xf32>, tensor<2xi64>) -> tensor<2x8x8xf32>
  %y = gpt.matmul %d, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<2x8x8xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Tests that q and k of rank 2 (no batch) are left as they are.
// CHECK-LABEL: func.func @rank_two
// CHECK-NOT: gpt.attention
// CHECK: gpt.softmax
func.func @rank_two(%q: tensor<8x16xf32>, %v: tensor<8x4xf32>,
                    %tril: tensor<8x8xf32> {gpt.kind = "param", gpt.name = "tril", gpt.trainable = false, gpt.tril_ones}) -> tensor<8x4xf32> {
  %s = gpt.matmul %q, %q {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %zero = gpt.constant dense<0.000000e+00> : tensor<f32>
  %m = gpt.compare %tril, %zero {predicate = #gpt.predicate<eq>} : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xi1>
  %f = gpt.masked_fill %s, %m {value = 0xFFF0000000000000 : f64} : (tensor<8x8xf32>, tensor<8x8xi1>) -> tensor<8x8xf32>
  %p = gpt.softmax %f {dim = 1 : i64, order = #gpt.order<canonical>} : tensor<8x8xf32>
  %y = gpt.matmul %p, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Tests scores divided by a constant (`att / math.sqrt(d)`): the scale is 1 / d. Divided
// by a value that is not a constant, they are left as they are.
// CHECK-LABEL: func.func @divided
// CHECK: gpt.attention %arg0, %arg1, %arg2 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 1.250000e-01 : f64}
// CHECK-NOT: gpt.div
// CHECK: gpt.div %{{.*}}, %arg4
// CHECK: gpt.softmax
func.func @divided(%q: tensor<1x2x4x64xf32>, %k: tensor<1x2x4x64xf32>, %v: tensor<1x2x4x8xf32>,
                   %bias: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "mask", gpt.trainable = false, gpt.tril_ones},
                   %d: tensor<f32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %zero = gpt.constant dense<0.000000e+00> : tensor<f32>
  %m = gpt.compare %bias, %zero {predicate = #gpt.predicate<eq>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %eight = gpt.constant dense<8.000000e+00> : tensor<f32>
  %s = gpt.matmul %q, %k {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32>) -> tensor<1x2x4x4xf32>
  %a = gpt.div %s, %eight : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %f = gpt.masked_fill %a, %m {value = 0xFFF0000000000000 : f64} : (tensor<1x2x4x4xf32>, tensor<4x4xi1>) -> tensor<1x2x4x4xf32>
  %p = gpt.softmax %f {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x2x4x4xf32>
  %y = gpt.matmul %p, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %s2 = gpt.matmul %q, %k {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32>) -> tensor<1x2x4x4xf32>
  %a2 = gpt.div %s2, %d : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %f2 = gpt.masked_fill %a2, %m {value = 0xFFF0000000000000 : f64} : (tensor<1x2x4x4xf32>, tensor<4x4xi1>) -> tensor<1x2x4x4xf32>
  %p2 = gpt.softmax %f2 {dim = 3 : i64, order = #gpt.order<canonical>} : tensor<1x2x4x4xf32>
  %y2 = gpt.matmul %p2, %v {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y, %y2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}
