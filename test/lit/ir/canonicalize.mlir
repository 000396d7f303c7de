// RUN: gptc-opt %s -split-input-file --canonicalize | FileCheck %s

// Tests that transposes of dims 1 and 2 into and out of attention fold into
// the op's bthd layout: one kernel, no copies.
// CHECK-LABEL: func.func @attention_bthd
// The per-row stats keep their [B, H, T, 2] layout, and their users follow the fold.
// CHECK-NEXT: %[[Y:.*]], %[[S:.*]] = gpt.attention %arg0, %arg1, %arg2 {bthd = array<i1: true, true, true, true>, {{.*}}} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x2xf32>)
// CHECK-NEXT: return %[[Y]], %[[S]]
func.func @attention_bthd(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x2xf32>) {
  %0 = gpt.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %1 = gpt.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %2 = gpt.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %3:2 = gpt.attention %0, %1, %2 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x2xf32>)
  %4 = gpt.transpose %3#0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  return %4, %3#1 : tensor<2x5x3x4xf32>, tensor<2x3x5x2xf32>
}

// -----

// Tests that each operand folds on its own: q, k and v read in place, the
// result, used as it is, keeps the [B, H, T, D] layout.
// CHECK-LABEL: func.func @attention_result_used_directly
// CHECK-NEXT: %[[Y:.*]], %{{.*}} = gpt.attention %arg0, %arg1, %arg2 {bthd = array<i1: true, true, true, false>, {{.*}}} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x2xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @attention_result_used_directly(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32> {
  %0 = gpt.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %1 = gpt.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %2 = gpt.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %3:2 = gpt.attention %0, %1, %2 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x2xf32>)
  return %3#0 : tensor<2x3x5x4xf32>
}

// -----

// Tests a LLaMA block's shape: q computed heads outer (by its rotary embeddings, here
// an argument), k and v transposed in, the result transposed out: q stays, the rest
// fold; k's transpose, which something else also reads, stays for that reader.
// CHECK-LABEL: func.func @attention_some_transposed
// CHECK-NEXT: %[[K:.*]] = gpt.transpose %arg1
// CHECK-NEXT: %[[Y:.*]], %{{.*}} = gpt.attention %arg0, %arg1, %arg2 {bthd = array<i1: false, true, true, true>, {{.*}}} : (tensor<2x3x5x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x2xf32>)
// CHECK-NEXT: return %[[Y]], %[[K]]
func.func @attention_some_transposed(%q: tensor<2x3x5x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>) {
  %1 = gpt.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %2 = gpt.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %3:2 = gpt.attention %q, %1, %2 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x2xf32>)
  %4 = gpt.transpose %3#0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  return %4, %1 : tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>
}

// -----

// Tests that a sum without kept dims, reshaped to the kept shape, keeps its dims (the
// same sums), and that a sum read elsewhere or reshaped otherwise is left as it is.
// CHECK-LABEL: func.func @keep_reduced_dims
// CHECK-NEXT: %[[S:.*]] = gpt.reduce_sum %arg0 {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[T:.*]] = gpt.reduce_sum %arg0 {dims = array<i64: 1>, keepdim = false
// CHECK-NEXT: %[[R:.*]] = gpt.reshape %[[T]] : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[U:.*]] = gpt.reduce_sum %arg0 {dims = array<i64: 0>, keepdim = false
// CHECK-NEXT: %[[V:.*]] = gpt.reshape %[[U]] : (tensor<8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[S]], %[[R]], %[[T]], %[[V]]
func.func @keep_reduced_dims(%x: tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %0 = gpt.reduce_sum %x {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %1 = gpt.reshape %0 : (tensor<4xf32>) -> tensor<4x1xf32>
  %2 = gpt.reduce_sum %x {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %3 = gpt.reshape %2 : (tensor<4xf32>) -> tensor<4x1xf32>
  %4 = gpt.reduce_sum %x {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %5 = gpt.reshape %4 : (tensor<8xf32>) -> tensor<2x4xf32>
  return %1, %3, %2, %5 : tensor<4x1xf32>, tensor<4x1xf32>, tensor<4xf32>, tensor<2x4xf32>
}

// -----

// Tests nanoGPT's position embedding: the rows of an arange within the weight are a slice
// of it (rows 2 to 5 of 8), and a slice of every row is the weight itself; an arange
// past the weight's rows stays an embedding (its kernel reports the index).
// CHECK-LABEL: func.func @embedding_of_arange
// CHECK-NEXT: %[[S:.*]] = gpt.slice %arg0 {dim = 0 : i64, end = 6 : i64, start = 2 : i64, step = 1 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[P:.*]] = gpt.arange {start = 6 : i64, step = 1 : i64} : tensor<4xi64>
// CHECK-NEXT: %[[E:.*]] = gpt.embedding %arg0, %[[P]]
// CHECK-NEXT: return %[[S]], %arg0, %[[E]]
func.func @embedding_of_arange(%w: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>) {
  %p = gpt.arange {start = 2 : i64, step = 1 : i64} : tensor<4xi64>
  %e = gpt.embedding %w, %p : (tensor<8x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
  %q = gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<8xi64>
  %f = gpt.embedding %w, %q : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %r = gpt.arange {start = 6 : i64, step = 1 : i64} : tensor<4xi64>
  %g = gpt.embedding %w, %r : (tensor<8x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
  return %e, %f, %g : tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}

// -----

// Tests transformers' position ids, the arange reshaped to [1, T]: the rows are the slice,
// reshaped to [1, T, C]; a reshape to [2, 2] is not an arange of rows and stays.
// CHECK-LABEL: func.func @embedding_of_reshaped_arange
// CHECK: %[[S:.*]] = gpt.slice %arg0 {dim = 0 : i64, end = 4 : i64, start = 0 : i64, step = 1 : i64} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[R:.*]] = gpt.reshape %[[S]] : (tensor<4x4xf32>) -> tensor<1x4x4xf32>
// CHECK: %[[E:.*]] = gpt.embedding %arg0, %{{.*}} : (tensor<8x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
// CHECK-NEXT: return %[[R]], %[[E]]
func.func @embedding_of_reshaped_arange(%w: tensor<8x4xf32>) -> (tensor<1x4x4xf32>, tensor<2x2x4xf32>) {
  %p = gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<4xi64>
  %r = gpt.reshape %p : (tensor<4xi64>) -> tensor<1x4xi64>
  %e = gpt.embedding %w, %r : (tensor<8x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %s = gpt.reshape %p : (tensor<4xi64>) -> tensor<2x2xi64>
  %f = gpt.embedding %w, %s : (tensor<8x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
  return %e, %f : tensor<1x4x4xf32>, tensor<2x2x4xf32>
}

// -----

// Tests that two transposes that undo each other fold away (a key cache held transposed,
// turned to [B, H, T, D] and back), and that two that do not are one transpose.
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-NEXT: %[[T:.*]] = gpt.transpose %arg0 {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %arg0, %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = gpt.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %1 = gpt.transpose %0 {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %2 = gpt.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// Tests that the identity permutation is its operand.
// CHECK-LABEL: func.func @transpose_identity
// CHECK-NEXT: return %arg0
func.func @transpose_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = gpt.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that a mean is its sum divided by the count reduced into each result (8 x 4 = 32
// here), in the sum's order: the same bits, and fused as any sum.
// CHECK-LABEL: func.func @mean_as_sum
// CHECK-DAG: %[[N:.*]] = gpt.constant dense<3.200000e+01> : tensor<f32>
// CHECK-DAG: %[[S:.*]] = gpt.reduce_sum %arg0 {dims = array<i64: 1, 2>, keepdim = true, order = #gpt.order<canonical>} : (tensor<2x8x4xf32>) -> tensor<2x1x1xf32>
// CHECK: %[[M:.*]] = gpt.div %[[S]], %[[N]] : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
// CHECK-NEXT: return %[[M]]
// CHECK-NOT: reduce_mean
func.func @mean_as_sum(%x: tensor<2x8x4xf32>) -> tensor<2x1x1xf32> {
  %0 = gpt.reduce_mean %x {dims = array<i64: 1, 2>, keepdim = true, order = #gpt.order<canonical>} : (tensor<2x8x4xf32>) -> tensor<2x1x1xf32>
  return %0 : tensor<2x1x1xf32>
}

// -----

// Tests transformers' rotate_half (x * cos + cat(-x2, x1) * sin): the concat's only use,
// an elementwise mul, moves into its pieces, then the add's; x's two slices become one
// split, and cos and sin are split alike. Each half is computed from halves, with no
// concat left before the last op.
// CHECK-LABEL: func.func @rotate_half
// CHECK-DAG: %[[X:.*]]:2 = gpt.split %arg0 {dim = 2 : i64}
// CHECK-DAG: %[[C:.*]]:2 = gpt.split %arg1 {dim = 1 : i64}
// CHECK-DAG: %[[S:.*]]:2 = gpt.split %arg2 {dim = 1 : i64}
// CHECK-DAG: %[[XC0:.*]] = gpt.mul %[[X]]#0, %[[C]]#0
// CHECK-DAG: %[[XC1:.*]] = gpt.mul %[[X]]#1, %[[C]]#1
// CHECK-DAG: %[[N:.*]] = gpt.neg %[[X]]#1
// CHECK-DAG: %[[NS:.*]] = gpt.mul %[[N]], %[[S]]#0
// CHECK-DAG: %[[XS:.*]] = gpt.mul %[[X]]#0, %[[S]]#1
// CHECK-DAG: %[[LO:.*]] = gpt.add %[[XC0]], %[[NS]]
// CHECK-DAG: %[[HI:.*]] = gpt.add %[[XC1]], %[[XS]]
// CHECK: %[[R:.*]] = gpt.concat %[[LO]], %[[HI]] {dim = 2 : i64}
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: gpt.slice
func.func @rotate_half(%x: tensor<2x3x8xf32>, %cos: tensor<3x8xf32>, %sin: tensor<3x8xf32>) -> tensor<2x3x8xf32> {
  %0 = gpt.mul %x, %cos : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %1 = gpt.slice %x {dim = 2 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %2 = gpt.slice %x {dim = 2 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %3 = gpt.neg %2 : tensor<2x3x4xf32>
  %4 = gpt.concat %3, %1 {dim = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
  %5 = gpt.mul %4, %sin : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %6 = gpt.add %0, %5 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %6 : tensor<2x3x8xf32>
}

// -----

// Tests what stays: a concat with another use, one broadcast along the result's concat
// dimension, a dropout (its mask depends on each element's index), slices that leave a
// gap, and a split whose pieces something other than an elementwise op reads (the exp
// stays whole, where a product's epilogue can take it).
// CHECK-LABEL: func.func @stays
// CHECK: %[[CAT:.*]] = gpt.concat %arg0, %arg0 {dim = 1 : i64}
// CHECK: gpt.exp %[[CAT]]
// CHECK: gpt.mul %[[CAT]], %[[CAT]]
// CHECK: %[[ONE:.*]] = gpt.concat %arg0 {dim = 0 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK: gpt.add %[[ONE]], %arg1 : (tensor<1x4xf32>, tensor<2x4xf32>)
// CHECK: %[[D:.*]] = gpt.concat %arg0, %arg0 {dim = 1 : i64}
// CHECK: gpt.dropout %[[D]]
// CHECK: gpt.slice %arg2 {dim = 0 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64}
// CHECK: gpt.slice %arg2 {dim = 0 : i64, end = 8 : i64, start = 3 : i64, step = 1 : i64}
// CHECK: %[[E:.*]] = gpt.exp %arg2
// CHECK: gpt.split %[[E]]
func.func @stays(%a: tensor<1x4xf32>, %b: tensor<2x4xf32>, %c: tensor<8xf32>, %rng: tensor<2xi64>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<2x4xf32>, tensor<1x8xf32>, tensor<2xf32>, tensor<5xf32>, tensor<f32>, tensor<4xf32>) {
  %0 = gpt.concat %a, %a {dim = 1 : i64} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %1 = gpt.exp %0 : tensor<1x8xf32>
  %2 = gpt.mul %0, %0 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  %3 = gpt.concat %a {dim = 0 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %4 = gpt.add %3, %b : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %5 = gpt.concat %a, %a {dim = 1 : i64} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %6 = gpt.dropout %5, %rng {id = 1 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<1x8xf32>, tensor<2xi64>) -> tensor<1x8xf32>
  %7 = gpt.slice %c {dim = 0 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : (tensor<8xf32>) -> tensor<2xf32>
  %8 = gpt.slice %c {dim = 0 : i64, start = 3 : i64, end = 8 : i64, step = 1 : i64} : (tensor<8xf32>) -> tensor<5xf32>
  %9 = gpt.exp %c : tensor<8xf32>
  %10:2 = gpt.split %9 {dim = 0 : i64} : (tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %11 = gpt.reduce_sum %10#0 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4xf32>) -> tensor<f32>
  %12 = gpt.reshape %10#1 : (tensor<4xf32>) -> tensor<4xf32>
  return %1, %2, %4, %6, %7, %8, %11, %12 : tensor<1x8xf32>, tensor<1x8xf32>, tensor<2x4xf32>, tensor<1x8xf32>, tensor<2xf32>, tensor<5xf32>, tensor<f32>, tensor<4xf32>
}
