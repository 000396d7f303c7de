// RUN: gptc-opt %s -split-input-file -gpt-convert-aten | FileCheck %s

// Tests that each captured aten op becomes the gpt ops documented in
// frontend/*Patterns.cpp.

// CHECK-LABEL: func.func @linear_bias
// CHECK: %[[M:.*]] = gpt.matmul %arg0, %arg1 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true}
// CHECK: gpt.add %[[M]], %arg2 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
func.func @linear_bias(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %0 = "torch.aten.linear.default"(%x, %w, %b) {torch.operands = ["input", "weight", "bias"]} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// CHECK-LABEL: func.func @linear_nobias
// CHECK: gpt.matmul
// CHECK-NOT: gpt.add
func.func @linear_nobias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = "torch.aten.linear.default"(%x, %w) {torch.operands = ["input", "weight"]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @matmuls
// CHECK: gpt.matmul %arg0, %arg1 {{.*}}transpose_rhs = false
// CHECK: gpt.matmul {{.*}} -> tensor<3x4x4xf32>
func.func @matmuls(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<3x4x8xf32>, %d: tensor<3x8x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>) {
  %0 = "torch.aten.mm.default"(%a, %b) {torch.operands = ["self", "mat2"]} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "torch.aten.bmm.default"(%c, %d) {torch.operands = ["self", "mat2"]} : (tensor<3x4x8xf32>, tensor<3x8x4xf32>) -> tensor<3x4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<3x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @embedding_arange
// CHECK: gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<8xi64>
// CHECK: gpt.embedding %arg0, %{{.*}} : (tensor<16x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
func.func @embedding_arange(%w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = "torch.aten.arange.start"() {torch.operands = [], start = 0 : i64, end = 8 : i64, dtype = "i64"} : () -> tensor<8xi64>
  %1 = "torch.aten.embedding.default"(%w, %0) {torch.operands = ["weight", "indices"]} : (tensor<16x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func.func @elementwise
// CHECK: gpt.add %arg0, %arg1
// CHECK: %[[ALPHA:.*]] = gpt.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[SCALED:.*]] = gpt.mul %arg1, %[[ALPHA]]
// CHECK: gpt.sub %{{.*}}, %[[SCALED]]
// CHECK: %[[HALF:.*]] = gpt.constant dense<5.000000e-01> : tensor<f32>
// CHECK: gpt.mul %{{.*}}, %[[HALF]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: %[[Q:.*]] = gpt.div
// CHECK: %[[SQ:.*]] = gpt.mul %[[Q]], %[[Q]]
// CHECK: gpt.mul %[[SQ]], %[[Q]]
// CHECK: gpt.max
// CHECK: gpt.neg
// CHECK: gpt.exp
// CHECK: gpt.log
// CHECK: gpt.tanh
// CHECK: gpt.erf
// CHECK: gpt.sqrt
// CHECK: gpt.rsqrt
// CHECK: gpt.gelu %{{.*}} {approximate = #gpt.approximate<tanh>}
// CHECK: gpt.sub %{{.*}}, %{{.*}} : (tensor<f32>, tensor<4xf32>)
func.func @elementwise(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "torch.aten.add.Tensor"(%a, %b) {torch.operands = ["self", "other"]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "torch.aten.sub.Tensor"(%0, %b) {torch.operands = ["self", "other"], alpha = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "torch.aten.mul.Tensor"(%1) {torch.operands = ["self"], other = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "torch.aten.div.Tensor"(%2, %a) {torch.operands = ["self", "other"]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = "torch.aten.pow.Tensor_Scalar"(%3) {torch.operands = ["self"], exponent = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "torch.aten.maximum.default"(%4, %a) {torch.operands = ["self", "other"]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = "torch.aten.neg.default"(%5) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %7 = "torch.aten.exp.default"(%6) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %8 = "torch.aten.log.default"(%7) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %9 = "torch.aten.tanh.default"(%8) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %10 = "torch.aten.erf.default"(%9) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %11 = "torch.aten.sqrt.default"(%10) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %12 = "torch.aten.rsqrt.default"(%11) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %13 = "torch.aten.gelu.default"(%12) {torch.operands = ["self"], approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
  %14 = "torch.aten.rsub.Scalar"(%13) {torch.operands = ["self"], other = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %14 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @select_ops
// CHECK: gpt.where %arg1, %arg0, %{{.*}} : (tensor<4xi1>, tensor<4xf32>, tensor<f32>)
// CHECK: gpt.masked_fill %{{.*}}, %arg1 {value = 0xFFF0000000000000 : f64}
func.func @select_ops(%a: tensor<4xf32>, %m: tensor<4xi1>) -> tensor<4xf32> {
  %0 = "torch.aten.where.self"(%m, %a) {torch.operands = ["condition", "self"], other = 0.0 : f64} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "torch.aten.masked_fill.Scalar"(%0, %m) {torch.operands = ["self", "mask"], value = 0xFFF0000000000000 : f64} : (tensor<4xf32>, tensor<4xi1>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @norms
// CHECK-SAME: %[[RNGARG:.*]]: tensor<2xi64> {gpt.kind = "input", gpt.name = "rng"}
// CHECK: gpt.layer_norm %arg0, %arg1 {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>}
// CHECK: gpt.softmax %{{.*}} {dim = 1 : i64, order = #gpt.order<canonical>}
// CHECK: gpt.log_softmax %{{.*}} {dim = 1 : i64
// CHECK: gpt.cross_entropy %{{.*}}, %arg2 {ignore_index = -1 : i64, order = #gpt.order<canonical>}
// CHECK: gpt.dropout %{{.*}}, %[[RNG:.*]] {id = 0 : i64, p = 1.000000e-01 : f64, train = true}
func.func @norms(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %t: tensor<8xi64>) -> (tensor<f32>, tensor<8x16xf32>) {
  %0 = "torch.aten.layer_norm.default"(%x, %w) {torch.operands = ["input", "weight"], normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64, cudnn_enable = false} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %1 = "torch.aten.softmax.int"(%0) {torch.operands = ["self"], dim = -1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = "torch.aten.log_softmax.int"(%1) {torch.operands = ["self"], dim = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = "torch.aten.cross_entropy_loss.default"(%2, %t) {torch.operands = ["self", "target"], reduction = 1 : i64, ignore_index = -1 : i64, label_smoothing = 0.0 : f64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %4 = "torch.aten.dropout.default"(%2) {torch.operands = ["input"], p = 0.1 : f64, train = true} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %3, %4 : tensor<f32>, tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK: gpt.reduce_sum %arg0 {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>}
// CHECK: gpt.reduce_mean %arg0 {dims = array<i64: 0, 1>, keepdim = false
// CHECK: gpt.reduce_max %arg0 {dims = array<i64: 0>, keepdim = false
func.func @reductions(%x: tensor<8x16xf32>) -> (tensor<8x1xf32>, tensor<f32>, tensor<16xf32>) {
  %0 = "torch.aten.sum.dim_IntList"(%x) {torch.operands = ["self"], dim = array<i64: -1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %1 = "torch.aten.mean.default"(%x) {torch.operands = ["self"]} : (tensor<8x16xf32>) -> tensor<f32>
  %2 = "torch.aten.amax.default"(%x) {torch.operands = ["self"], dim = array<i64: 0>, keepdim = false} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %0, %1, %2 : tensor<8x1xf32>, tensor<f32>, tensor<16xf32>
}

// -----

// Tests that a bool tensor's running sums are i64 (PyTorch's promotion), a dtype converts
// first, the dim is made positive, and a scalar is its own sum.
// CHECK-LABEL: func.func @cumsum
// CHECK: %[[I:.*]] = gpt.convert %arg0 : tensor<2x5xi1> -> tensor<2x5xi64>
// CHECK: gpt.cumsum %[[I]] {dim = 1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xi64>
// CHECK: %[[D:.*]] = gpt.convert %arg1 : tensor<2x5xf32> -> tensor<2x5xf64>
// CHECK: gpt.cumsum %[[D]] {dim = 0 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xf64>
// CHECK-NOT: gpt.cumsum
// CHECK: return
func.func @cumsum(%m: tensor<2x5xi1>, %x: tensor<2x5xf32>, %s: tensor<f32>) -> (tensor<2x5xi64>, tensor<2x5xf64>, tensor<f32>) {
  %0 = "torch.aten.cumsum.default"(%m) {torch.operands = ["self"], dim = -1 : i64} : (tensor<2x5xi1>) -> tensor<2x5xi64>
  %1 = "torch.aten.cumsum.default"(%x) {torch.operands = ["self"], dim = 0 : i64, dtype = "f64"} : (tensor<2x5xf32>) -> tensor<2x5xf64>
  %2 = "torch.aten.cumsum.default"(%s) {torch.operands = ["self"], dim = 0 : i64} : (tensor<f32>) -> tensor<f32>
  return %0, %1, %2 : tensor<2x5xi64>, tensor<2x5xf64>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK: gpt.attention %arg0, %arg0, %arg0 {dropout_p = 0.000000e+00 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 2.500000e-01 : f64}
func.func @attention(%q: tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32> {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q) {torch.operands = ["query", "key", "value"], dropout_p = 0.0 : f64, is_causal = true} : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  return %0 : tensor<2x2x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @data_movement
// CHECK: gpt.split %arg0 {dim = 1 : i64} : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK: gpt.reshape %{{.*}} : (tensor<2x4xf32>) -> tensor<2x2x2xf32>
// CHECK: gpt.transpose %{{.*}} {perm = array<i64: 0, 2, 1>}
// CHECK: gpt.transpose %{{.*}} {perm = array<i64: 2, 1, 0>}
// CHECK: gpt.slice %arg0 {dim = 1 : i64, end = 12 : i64, start = 2 : i64, step = 2 : i64}
// CHECK: gpt.slice %arg0 {dim = 0 : i64, end = 2 : i64, start = 1 : i64, step = 1 : i64}
// CHECK: gpt.reshape %{{.*}} : (tensor<1x12xf32>) -> tensor<12xf32>
// CHECK: gpt.concat %arg0, %arg0 {dim = 0 : i64}
// CHECK: gpt.broadcast %{{.*}} : (tensor<12xf32>) -> tensor<3x12xf32>
// CHECK: gpt.transpose %arg0 {perm = array<i64: 1, 0>}
// CHECK: gpt.convert %arg0 : tensor<2x12xf32> -> tensor<2x12xf64>
func.func @data_movement(%x: tensor<2x12xf32>) -> (tensor<2x2x2xf32>, tensor<2x2x2xf32>, tensor<2x5xf32>, tensor<4x12xf32>, tensor<3x12xf32>, tensor<12x2xf32>, tensor<2x12xf64>) {
  %0:3 = "torch.aten.split.Tensor"(%x) {torch.operands = ["self"], split_size = 4 : i64, dim = -1 : i64} : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %1 = "torch.aten.view.default"(%0#1) {torch.operands = ["self"], size = array<i64: 2, 2, 2>} : (tensor<2x4xf32>) -> tensor<2x2x2xf32>
  %2 = "torch.aten.transpose.int"(%1) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %3 = "torch.aten.permute.default"(%2) {torch.operands = ["self"], dims = array<i64: -1, 1, 0>} : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %4 = "torch.aten.slice.Tensor"(%x) {torch.operands = ["self"], dim = 1 : i64, start = 2 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : (tensor<2x12xf32>) -> tensor<2x5xf32>
  %5 = "torch.aten.select.int"(%x) {torch.operands = ["self"], dim = 0 : i64, index = -1 : i64} : (tensor<2x12xf32>) -> tensor<12xf32>
  %6 = "torch.aten.cat.default"(%x, %x) {torch.operands = ["tensors", "tensors"], dim = 0 : i64} : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<4x12xf32>
  %7 = "torch.aten.expand.default"(%5) {torch.operands = ["self"], size = array<i64: 3, -1>} : (tensor<12xf32>) -> tensor<3x12xf32>
  %8 = "torch.aten.t.default"(%x) {torch.operands = ["self"]} : (tensor<2x12xf32>) -> tensor<12x2xf32>
  %9 = "torch.aten._to_copy.default"(%x) {torch.operands = ["self"], dtype = "f64"} : (tensor<2x12xf32>) -> tensor<2x12xf64>
  %10 = "torch.aten.contiguous.default"(%3) {torch.operands = ["self"]} : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  return %1, %10, %4, %6, %7, %8, %9 : tensor<2x2x2xf32>, tensor<2x2x2xf32>, tensor<2x5xf32>, tensor<4x12xf32>, tensor<3x12xf32>, tensor<12x2xf32>, tensor<2x12xf64>
}

// -----

// CHECK-LABEL: func.func @detach
// CHECK: gpt.stop_gradient %arg0 : tensor<4xf32>
func.func @detach(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "torch.aten.detach.default"(%x) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @index_last
// CHECK: gpt.slice %arg0 {dim = 1 : i64, end = 8 : i64, start = 7 : i64, step = 1 : i64} : (tensor<2x8x4xf32>) -> tensor<2x1x4xf32>
// CHECK-NOT: torch.aten
func.func @index_last(%x: tensor<2x8x4xf32>) -> tensor<2x1x4xf32> {
  %c = gpt.constant dense<[-1]> : tensor<1xi64>
  %0 = "torch.aten.index.Tensor"(%x, %c) {torch.operands = ["self", "indices"], indices_positions = array<i64: 1>} : (tensor<2x8x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  return %0 : tensor<2x1x4xf32>
}

// -----

// A matmul of a transpose of the last two dims (Falcon's `x @ self.weight.T`, a batched
// `a.transpose(1, 2) @ b`) reads that operand transposed: no copy. Two such transposes
// cancel (the decode step's key cache, transposed by transformers' cache and back by
// gptc's attention): the operand itself, read as it is.
// CHECK-LABEL: func.func @matmul_of_transposes
// CHECK: gpt.matmul %arg0, %arg1 {{{.*}}transpose_lhs = false, transpose_rhs = true} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
// CHECK: gpt.matmul %arg2, %arg2 {{{.*}}transpose_lhs = true, transpose_rhs = false} : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
// CHECK: gpt.matmul %arg2, %arg3 {{{.*}}transpose_lhs = true, transpose_rhs = false} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
func.func @matmul_of_transposes(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %a: tensor<2x4x3xf32>, %c: tensor<2x4x5xf32>) -> (tensor<3x5xf32>, tensor<2x3x3xf32>, tensor<2x3x5xf32>) {
  %t = "torch.aten.t.default"(%w) {torch.operands = ["self"]} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %0 = "torch.aten.matmul.default"(%x, %t) {torch.operands = ["self", "other"]} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %at = "torch.aten.transpose.int"(%a) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %1 = "torch.aten.bmm.default"(%at, %a) {torch.operands = ["self", "mat2"]} : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %ct = "torch.aten.transpose.int"(%c) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
  %ctt = "torch.aten.transpose.int"(%ct) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x5x4xf32>) -> tensor<2x4x5xf32>
  %2 = "torch.aten.matmul.default"(%at, %ctt) {torch.operands = ["self", "other"]} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0, %1, %2 : tensor<3x5xf32>, tensor<2x3x3xf32>, tensor<2x3x5xf32>
}

// -----

// An index tensor computed from the input, on the first dimension: the rows of x as a
// table [8, 2 x 4], gpt.embedding's lookup (CodeGen's rotary table at its positions).
// CHECK-LABEL: func.func @index_rows
// CHECK: %[[T:.*]] = gpt.reshape %arg0 : (tensor<8x2x4xf32>) -> tensor<8x8xf32>
// CHECK: %[[E:.*]] = gpt.embedding %[[T]], %arg1 : (tensor<8x8xf32>, tensor<1x3xi64>) -> tensor<1x3x8xf32>
// CHECK: gpt.reshape %[[E]] : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
func.func @index_rows(%x: tensor<8x2x4xf32>, %i: tensor<1x3xi64>) -> tensor<1x3x2x4xf32> {
  %0 = "torch.aten.index.Tensor"(%x, %i) {torch.operands = ["self", "indices"]} : (tensor<8x2x4xf32>, tensor<1x3xi64>) -> tensor<1x3x2x4xf32>
  return %0 : tensor<1x3x2x4xf32>
}

// -----

// A bool scalar is 1 or 0: `x * True` and `x.masked_fill(m, True)` read an i1 true as
// its sign extension, -1 (x * True gave -x).
// CHECK-LABEL: func.func @bool_scalars
// CHECK: gpt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: gpt.mul
// CHECK: gpt.constant dense<0.000000e+00> : tensor<f32>
// CHECK: gpt.add
// CHECK: gpt.masked_fill {{.*}} {value = 1.000000e+00 : f64}
func.func @bool_scalars(%x: tensor<4xf32>, %m: tensor<4xi1>) -> tensor<4xf32> {
  %0 = "torch.aten.mul.Tensor"(%x) {torch.operands = ["self"], other = true} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "torch.aten.add.Tensor"(%0) {torch.operands = ["self"], other = false} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "torch.aten.masked_fill.Scalar"(%1, %m) {torch.operands = ["self", "mask"], value = true} : (tensor<4xf32>, tensor<4xi1>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Comparisons: in PyTorch's promoted type (the wider float tensor's; f32 for an integer
// tensor against a non-integer scalar; i64 between integers); bool logic as gpt.where.
// CHECK-LABEL: func.func @comparisons
// CHECK: %[[ZERO:.*]] = gpt.constant dense<0.000000e+00> : tensor<f32>
// CHECK: gpt.compare %arg0, %[[ZERO]] {predicate = #gpt.predicate<lt>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
// CHECK: %[[WIDE:.*]] = gpt.convert %arg0 : tensor<4xf32> -> tensor<4xf64>
// CHECK: gpt.compare %[[WIDE]], %arg1 {predicate = #gpt.predicate<ge>} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
// CHECK: %[[IDX:.*]] = gpt.convert %arg2 : tensor<4xi64> -> tensor<4xf32>
// CHECK: %[[HALF:.*]] = gpt.constant dense<2.500000e+00> : tensor<f32>
// CHECK: gpt.compare %[[IDX]], %[[HALF]] {predicate = #gpt.predicate<le>}
// CHECK: %[[THREE:.*]] = gpt.constant dense<3> : tensor<i64>
// CHECK: gpt.compare %arg2, %[[THREE]] {predicate = #gpt.predicate<eq>} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK: %[[FALSE:.*]] = gpt.constant dense<false> : tensor<i1>
// CHECK: %[[AND:.*]] = gpt.where %{{.*}}, %{{.*}}, %[[FALSE]] : (tensor<4xi1>, tensor<4xi1>, tensor<i1>) -> tensor<4xi1>
// CHECK: %[[TRUE:.*]] = gpt.constant dense<true> : tensor<i1>
// CHECK: gpt.compare %[[AND]], %[[TRUE]] {predicate = #gpt.predicate<ne>}
func.func @comparisons(%x: tensor<4xf32>, %y: tensor<4xf64>, %i: tensor<4xi64>) -> (tensor<4xi1>, tensor<4xi1>) {
  %0 = "torch.aten.lt.Scalar"(%x) {torch.operands = ["self"], other = 0 : i64} : (tensor<4xf32>) -> tensor<4xi1>
  %1 = "torch.aten.ge.Tensor"(%x, %y) {torch.operands = ["self", "other"]} : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xi1>
  %2 = "torch.aten.le.Scalar"(%i) {torch.operands = ["self"], other = 2.5 : f64} : (tensor<4xi64>) -> tensor<4xi1>
  %3 = "torch.aten.eq.Scalar"(%i) {torch.operands = ["self"], other = 3 : i64} : (tensor<4xi64>) -> tensor<4xi1>
  %4 = "torch.aten.__and__.Tensor"(%0, %1) {torch.operands = ["self", "other"]} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %5 = "torch.aten.bitwise_not.default"(%4) {torch.operands = ["self"]} : (tensor<4xi1>) -> tensor<4xi1>
  %6 = "torch.aten.logical_or.default"(%2, %3) {torch.operands = ["self", "other"]} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %5, %6 : tensor<4xi1>, tensor<4xi1>
}

// -----

// relu(x): x <= 0 ? (x < 0 ? 0 : x, without gradient) : x; silu(x) = x * sigmoid(x);
// clamp keeps its gradient strictly inside the bounds: x where x > lo, else the held value
// (the bound, or x at the bound or NaN) through gpt.stop_gradient.
// CHECK-LABEL: func.func @activations
// CHECK: %[[ZERO:.*]] = gpt.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[LT:.*]] = gpt.compare %arg0, %[[ZERO]] {predicate = #gpt.predicate<lt>}
// CHECK: %[[HELD:.*]] = gpt.where %[[LT]], %[[ZERO]], %arg0
// CHECK: %[[STOP:.*]] = gpt.stop_gradient %[[HELD]]
// CHECK: %[[LE:.*]] = gpt.compare %arg0, %[[ZERO]] {predicate = #gpt.predicate<le>}
// CHECK: gpt.where %[[LE]], %[[STOP]], %arg0
// CHECK: %[[S:.*]] = gpt.sigmoid %arg0 : tensor<4xf32>
// CHECK: gpt.mul %arg0, %[[S]]
// CHECK: %[[LO:.*]] = gpt.constant dense<-5.000000e-01> : tensor<f32>
// CHECK: %[[BELOW:.*]] = gpt.compare %arg0, %[[LO]] {predicate = #gpt.predicate<lt>}
// CHECK: %[[HELD:.*]] = gpt.where %[[BELOW]], %[[LO]], %arg0
// CHECK: %[[STOP:.*]] = gpt.stop_gradient %[[HELD]]
// CHECK: %[[INSIDE:.*]] = gpt.compare %arg0, %[[LO]] {predicate = #gpt.predicate<gt>}
// CHECK: gpt.where %[[INSIDE]], %arg0, %[[STOP]]
// CHECK: gpt.abs %arg0
// CHECK: gpt.min %arg0, %arg0
func.func @activations(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "torch.aten.relu.default"(%x) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "torch.aten.silu.default"(%x) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "torch.aten.clamp_min.default"(%x) {torch.operands = ["self"], min = -5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "torch.aten.abs.default"(%x) {torch.operands = ["self"]} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "torch.aten.minimum.default"(%x, %x) {torch.operands = ["self", "other"]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// zeros/ones/full are splat constants of the traced type (an int64 fill exact); mT swaps
// the last two dimensions.
// CHECK-LABEL: func.func @creation_and_mT
// CHECK: gpt.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: gpt.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK: gpt.constant dense<9007199254740993> : tensor<3xi64>
// CHECK: gpt.transpose %arg0 {perm = array<i64: 0, 2, 1>} : (tensor<5x2x3xf32>) -> tensor<5x3x2xf32>
func.func @creation_and_mT(%x: tensor<5x2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xi64>, tensor<5x3x2xf32>) {
  %0 = "torch.aten.zeros.default"() {torch.operands = [], size = array<i64: 2, 3>} : () -> tensor<2x3xf32>
  %1 = "torch.aten.ones_like.default"(%0) {torch.operands = ["self"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "torch.aten.full.default"() {torch.operands = [], size = array<i64: 3>, fill_value = 9007199254740993 : i64} : () -> tensor<3xi64>
  %3 = "torch.aten.mT.default"(%x) {torch.operands = ["self"]} : (tensor<5x2x3xf32>) -> tensor<5x3x2xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xi64>, tensor<5x3x2xf32>
}

// -----

// rms_norm: x * rsqrt(sum(x * x) / n + eps) * weight, over the normalized dims; eps
// defaults to f32's machine epsilon.
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[SQ:.*]] = gpt.mul %arg0, %arg0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[SUM:.*]] = gpt.reduce_sum %[[SQ]] {dims = array<i64: 1, 2>, keepdim = true, order = #gpt.order<canonical>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
// CHECK: %[[N:.*]] = gpt.constant dense<1.200000e+01> : tensor<f32>
// CHECK: %[[MS:.*]] = gpt.div %[[SUM]], %[[N]]
// CHECK: %[[EPS:.*]] = gpt.constant dense<1.1920929E-7> : tensor<f32>
// CHECK: %[[ADD:.*]] = gpt.add %[[MS]], %[[EPS]]
// CHECK: %[[R:.*]] = gpt.rsqrt %[[ADD]] : tensor<2x1x1xf32>
// CHECK: %[[Y:.*]] = gpt.mul %arg0, %[[R]]
// CHECK: gpt.mul %[[Y]], %arg1 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
func.func @rms_norm(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = "torch.aten.rms_norm.default"(%x, %w) {torch.operands = ["input", "weight"], normalized_shape = array<i64: 3, 4>} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// transformers' repeat_kv (each of 2 key/value heads unsqueezed, expanded to its 3 query
// heads, reshaped to 6) is read as grouped-query attention over the 2 heads themselves:
// no copy of k or v repeated along the heads.
// CHECK-LABEL: func.func @repeat_kv
// CHECK-DAG: %[[K:.*]] = gpt.reshape %{{.*}} : (tensor<1x2x1x5x4xf32>) -> tensor<1x2x5x4xf32>
// CHECK-DAG: %[[V:.*]] = gpt.reshape %{{.*}} : (tensor<1x2x1x5x4xf32>) -> tensor<1x2x5x4xf32>
// CHECK: gpt.attention %arg0, %[[K]], %[[V]] {{.*}} : (tensor<1x6x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> (tensor<1x6x5x4xf32>, tensor<1x6x5x2xf32>)
func.func @repeat_kv(%q: tensor<1x6x5x4xf32>, %k: tensor<1x2x5x4xf32>, %v: tensor<1x2x5x4xf32>) -> tensor<1x6x5x4xf32> {
  %k1 = "torch.aten.unsqueeze.default"(%k) {torch.operands = ["self"], dim = 2 : i64} : (tensor<1x2x5x4xf32>) -> tensor<1x2x1x5x4xf32>
  %k3 = "torch.aten.expand.default"(%k1) {torch.operands = ["self"], size = array<i64: 1, 2, 3, 5, 4>} : (tensor<1x2x1x5x4xf32>) -> tensor<1x2x3x5x4xf32>
  %k6 = "torch.aten.reshape.default"(%k3) {torch.operands = ["self"], shape = array<i64: 1, 6, 5, 4>} : (tensor<1x2x3x5x4xf32>) -> tensor<1x6x5x4xf32>
  %v1 = "torch.aten.unsqueeze.default"(%v) {torch.operands = ["self"], dim = 2 : i64} : (tensor<1x2x5x4xf32>) -> tensor<1x2x1x5x4xf32>
  %v3 = "torch.aten.expand.default"(%v1) {torch.operands = ["self"], size = array<i64: 1, 2, 3, 5, 4>} : (tensor<1x2x1x5x4xf32>) -> tensor<1x2x3x5x4xf32>
  %v6 = "torch.aten.reshape.default"(%v3) {torch.operands = ["self"], shape = array<i64: 1, 6, 5, 4>} : (tensor<1x2x3x5x4xf32>) -> tensor<1x6x5x4xf32>
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %k6, %v6) {torch.operands = ["query", "key", "value"], is_causal = true} : (tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>, tensor<1x6x5x4xf32>) -> tensor<1x6x5x4xf32>
  return %0 : tensor<1x6x5x4xf32>
}

// -----

// enable_gqa: gpt.attention reads the 2 key/value heads as they are, each for 3 query
// heads (no copy of k or v repeated along the heads).
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: gpt.broadcast
// CHECK: gpt.attention %arg0, %arg1, %arg2 {{.*}} : (tensor<1x6x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> (tensor<1x6x5x4xf32>, tensor<1x6x5x2xf32>)
func.func @gqa(%q: tensor<1x6x5x4xf32>, %k: tensor<1x2x5x4xf32>, %v: tensor<1x2x5x4xf32>) -> tensor<1x6x5x4xf32> {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %k, %v) {torch.operands = ["query", "key", "value"], is_causal = true, enable_gqa = true} : (tensor<1x6x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x6x5x4xf32>
  return %0 : tensor<1x6x5x4xf32>
}

// -----

// tril(x, 1): x where j - 1 <= i, from two aranges, else 0.
// CHECK-LABEL: func.func @tril
// CHECK: %[[I:.*]] = gpt.arange {start = 0 : i64, step = 1 : i64} : tensor<3xi64>
// CHECK: %[[ROWS:.*]] = gpt.reshape %[[I]] : (tensor<3xi64>) -> tensor<3x1xi64>
// CHECK: %[[J:.*]] = gpt.arange {start = -1 : i64, step = 1 : i64} : tensor<4xi64>
// CHECK: %[[COLS:.*]] = gpt.reshape %[[J]] : (tensor<4xi64>) -> tensor<1x4xi64>
// CHECK: %[[KEEP:.*]] = gpt.compare %[[COLS]], %[[ROWS]] {predicate = #gpt.predicate<le>} : (tensor<1x4xi64>, tensor<3x1xi64>) -> tensor<3x4xi1>
// CHECK: gpt.where %[[KEEP]], %arg0, %{{.*}} : (tensor<3x4xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
func.func @tril(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = "torch.aten.tril.default"(%x) {torch.operands = ["self"], diagonal = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// addmm(bias, x, w) (Hugging Face GPT-2's Conv1D): x @ w, then the bias.
// CHECK-LABEL: func.func @addmm
// CHECK: %[[M:.*]] = gpt.matmul %arg1, %arg2 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false}
// CHECK: gpt.add %[[M]], %arg0 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
func.func @addmm(%b: tensor<16xf32>, %x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = "torch.aten.addmm.default"(%b, %x, %w) {torch.operands = ["self", "mat1", "mat2"]} : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// baddbmm(bias, q, k, beta=1, alpha=0.25) (Bloom's ALiBi scores): the product times alpha,
// plus the bias (beta 1: not multiplied); beta 0.5 multiplies it.
// CHECK-LABEL: func.func @baddbmm
// CHECK: %[[M:.*]] = gpt.matmul %arg1, %arg2 {{.*}} -> tensor<2x3x5xf32>
// CHECK: %[[A:.*]] = gpt.mul %[[M]], %{{.*}} : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
// CHECK: gpt.add %[[A]], %arg0 : (tensor<2x3x5xf32>, tensor<2x1x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[M2:.*]] = gpt.matmul %arg1, %arg2
// CHECK: %[[B:.*]] = gpt.mul %arg0, %{{.*}} : (tensor<2x1x5xf32>, tensor<f32>) -> tensor<2x1x5xf32>
// CHECK: gpt.add %[[M2]], %[[B]]
func.func @baddbmm(%b: tensor<2x1x5xf32>, %q: tensor<2x3x4xf32>, %k: tensor<2x4x5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %0 = "torch.aten.baddbmm.default"(%b, %q, %k) {torch.operands = ["self", "batch1", "batch2"], beta = 1.0 : f64, alpha = 0.25 : f64} : (tensor<2x1x5xf32>, tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = "torch.aten.baddbmm.default"(%b, %q, %k) {torch.operands = ["self", "batch1", "batch2"], beta = 0.5 : f64} : (tensor<2x1x5xf32>, tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0, %1 : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// x.repeat(2, 1, 3) of a [4, 5] tensor: [1, 1, 1, 4, 1, 5] broadcast to [2, 1, 1, 4, 3, 5],
// then the result's shape; x.T reverses the dimensions; broadcast_to is expand.
// CHECK-LABEL: func.func @repeat_and_T
// CHECK: %[[R:.*]] = gpt.reshape %arg0 : (tensor<4x5xf32>) -> tensor<1x1x1x4x1x5xf32>
// CHECK: %[[B:.*]] = gpt.broadcast %[[R]] : (tensor<1x1x1x4x1x5xf32>) -> tensor<2x1x1x4x3x5xf32>
// CHECK: gpt.reshape %[[B]] : (tensor<2x1x1x4x3x5xf32>) -> tensor<2x4x15xf32>
// CHECK: gpt.transpose %arg0 {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
// CHECK: gpt.broadcast %arg0 : (tensor<4x5xf32>) -> tensor<3x4x5xf32>
func.func @repeat_and_T(%x: tensor<4x5xf32>) -> (tensor<2x4x15xf32>, tensor<5x4xf32>, tensor<3x4x5xf32>) {
  %0 = "torch.aten.repeat.default"(%x) {torch.operands = ["self"], repeats = array<i64: 2, 1, 3>} : (tensor<4x5xf32>) -> tensor<2x4x15xf32>
  %1 = "torch.aten.numpy_T.default"(%x) {torch.operands = ["self"]} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  %2 = "torch.aten.broadcast_to.default"(%x) {torch.operands = ["self"], size = array<i64: 3, 4, 5>} : (tensor<4x5xf32>) -> tensor<3x4x5xf32>
  return %0, %1, %2 : tensor<2x4x15xf32>, tensor<5x4xf32>, tensor<3x4x5xf32>
}

// -----

// One key/value head without enable_gqa (Falcon's multi-query attention, which PyTorch
// broadcasts): read as it is, as grouped heads; with a mask, repeated for the query heads
// before the scores.
// CHECK-LABEL: func.func @one_kv_head
// CHECK: gpt.attention %arg0, %arg1, %arg1 {{.*}} : (tensor<1x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>)
// CHECK: %[[R:.*]] = gpt.reshape %arg1 : (tensor<1x1x5x8xf32>) -> tensor<1x1x1x5x8xf32>
// CHECK: %[[B:.*]] = gpt.broadcast %[[R]] : (tensor<1x1x1x5x8xf32>) -> tensor<1x1x4x5x8xf32>
// CHECK: %[[K:.*]] = gpt.reshape %[[B]] : (tensor<1x1x4x5x8xf32>) -> tensor<1x4x5x8xf32>
// CHECK: gpt.matmul %arg0, %[[K]]
func.func @one_kv_head(%q: tensor<1x4x5x8xf32>, %k: tensor<1x1x5x8xf32>, %m: tensor<1x1x5x5xi1>) -> (tensor<1x4x5x8xf32>, tensor<1x4x5x8xf32>) {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %k, %k) {torch.operands = ["query", "key", "value"], is_causal = true} : (tensor<1x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<1x4x5x8xf32>
  %1 = "torch.aten.scaled_dot_product_attention.default"(%q, %k, %k, %m) {torch.operands = ["query", "key", "value", "attn_mask"]} : (tensor<1x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x5xi1>) -> tensor<1x4x5x8xf32>
  return %0, %1 : tensor<1x4x5x8xf32>, tensor<1x4x5x8xf32>
}

// -----

// pad(labels, (0, 1), value=-100) (transformers' causal-LM loss): a concat with a filled
// column; pad(x, (1, 0, 0, 2)): the last dimension first, then the one before.
// CHECK-LABEL: func.func @pad
// CHECK: %[[FILL:.*]] = gpt.constant dense<-100> : tensor<2x1xi64>
// CHECK: gpt.concat %arg0, %[[FILL]] {dim = 1 : i64} : (tensor<2x5xi64>, tensor<2x1xi64>) -> tensor<2x6xi64>
// CHECK: %[[LEFT:.*]] = gpt.constant dense<0.000000e+00> : tensor<3x1xf32>
// CHECK: %[[ROWS:.*]] = gpt.concat %[[LEFT]], %arg1 {dim = 1 : i64} : (tensor<3x1xf32>, tensor<3x4xf32>) -> tensor<3x5xf32>
// CHECK: %[[BELOW:.*]] = gpt.constant dense<0.000000e+00> : tensor<2x5xf32>
// CHECK: gpt.concat %[[ROWS]], %[[BELOW]] {dim = 0 : i64} : (tensor<3x5xf32>, tensor<2x5xf32>) -> tensor<5x5xf32>
func.func @pad(%y: tensor<2x5xi64>, %x: tensor<3x4xf32>) -> (tensor<2x6xi64>, tensor<5x5xf32>) {
  %0 = "torch.aten.pad.default"(%y) {torch.operands = ["self"], pad = array<i64: 0, 1>, mode = "constant", value = -1.000000e+02 : f64} : (tensor<2x5xi64>) -> tensor<2x6xi64>
  %1 = "torch.aten.pad.default"(%x) {torch.operands = ["self"], pad = array<i64: 1, 0, 0, 2>} : (tensor<3x4xf32>) -> tensor<5x5xf32>
  return %0, %1 : tensor<2x6xi64>, tensor<5x5xf32>
}

// -----

// embedding with padding_idx 0: the rows, those of token 0 without gradient.
// CHECK-LABEL: func.func @embedding_padding_idx
// CHECK: %[[ROWS:.*]] = gpt.embedding %arg0, %arg1 : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[IDS:.*]] = gpt.reshape %arg1 : (tensor<2x3xi64>) -> tensor<2x3x1xi64>
// CHECK: %[[ZERO:.*]] = gpt.constant dense<0> : tensor<i64>
// CHECK: %[[PAD:.*]] = gpt.compare %[[IDS]], %[[ZERO]] {predicate = #gpt.predicate<eq>}
// CHECK: %[[HELD:.*]] = gpt.stop_gradient %[[ROWS]]
// CHECK: gpt.where %[[PAD]], %[[HELD]], %[[ROWS]] : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
func.func @embedding_padding_idx(%w: tensor<16x4xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = "torch.aten.embedding.default"(%w, %i) {torch.operands = ["weight", "indices"], padding_idx = 0 : i64} : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// x ** 2 and x ** 3 are PyTorch's CPU products, x * x and (x * x) * x; x ** 4 is gpt.pow.
// CHECK-LABEL: func.func @pow_products
// CHECK: %[[SQ:.*]] = gpt.mul %arg0, %arg0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[SQ3:.*]] = gpt.mul %arg0, %arg0
// CHECK: gpt.mul %[[SQ3]], %arg0
// CHECK: gpt.pow %arg0, %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @pow_products(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "torch.aten.pow.Tensor_Scalar"(%x) {torch.operands = ["self"], exponent = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "torch.aten.pow.Tensor_Scalar"(%x) {torch.operands = ["self"], exponent = 3.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "torch.aten.pow.Tensor_Scalar"(%x) {torch.operands = ["self"], exponent = 4 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A boolean attn_mask (transformers' padding mask): PyTorch's math spelled out, the hidden
// scores -inf; a query that sees no key has its scores set to 0 and its output to 0.
// CHECK-LABEL: func.func @attention_with_a_mask
// CHECK: %[[S:.*]] = gpt.matmul %arg0, %arg0 {{{.*}}transpose_rhs = true} : {{.*}} -> tensor<2x2x3x3xf32>
// CHECK: %[[SC:.*]] = gpt.mul %[[S]]
// CHECK: %[[NEG:.*]] = gpt.constant dense<0xFF800000>
// CHECK: %[[HID:.*]] = gpt.where %arg1, %[[SC]], %[[NEG]]
// CHECK: %[[M:.*]] = gpt.convert %arg1 : tensor<2x1x3x3xi1> -> tensor<2x1x3x3xf32>
// CHECK: %[[MAX:.*]] = gpt.reduce_max %[[M]] {dims = array<i64: 3>, keepdim = true
// CHECK: %[[ANY:.*]] = gpt.compare %[[MAX]], %{{.*}} {predicate = #gpt.predicate<gt>}
// CHECK: %[[SAFE:.*]] = gpt.where %[[ANY]], %[[HID]]
// CHECK: %[[P:.*]] = gpt.softmax %[[SAFE]] {dim = 3 : i64
// CHECK: %[[Y:.*]] = gpt.matmul %[[P]], %arg0 {{.*}} -> tensor<2x2x3x4xf32>
// CHECK: %[[OUT:.*]] = gpt.where %[[ANY]], %[[Y]]
// CHECK: return %[[OUT]]
func.func @attention_with_a_mask(%q: tensor<2x2x3x4xf32>, %m: tensor<2x1x3x3xi1>) -> tensor<2x2x3x4xf32> {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q, %m) {torch.operands = ["query", "key", "value", "attn_mask"]} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x3x3xi1>) -> tensor<2x2x3x4xf32>
  return %0 : tensor<2x2x3x4xf32>
}

// -----

// A boolean attn_mask that hides keys alone ([B, 1, 1, S]: a padding mask) is gpt.attention's
// key_mask [B, S], no scores spelled out; with is_causal (capture's form of transformers'
// causal-and-padding mask, python/gptc/fold.py) both hold. A mask of fewer dimensions is
// broadcast to the batch.
// CHECK-LABEL: func.func @attention_with_a_key_mask
// CHECK: %[[KM:.*]] = gpt.reshape %arg1 : (tensor<2x1x1x3xi1>) -> tensor<2x3xi1>
// CHECK: gpt.attention %arg0, %arg0, %arg0 key_mask %[[KM]] {{{.*}}is_causal = true
// CHECK: %[[R:.*]] = gpt.reshape %arg2 : (tensor<3xi1>) -> tensor<1x3xi1>
// CHECK: %[[B:.*]] = gpt.broadcast %[[R]] : (tensor<1x3xi1>) -> tensor<2x3xi1>
// CHECK: gpt.attention %arg0, %arg0, %arg0 key_mask %[[B]] {{{.*}}is_causal = false
// CHECK-NOT: gpt.softmax
func.func @attention_with_a_key_mask(%q: tensor<2x2x3x4xf32>, %m: tensor<2x1x1x3xi1>, %m1: tensor<3xi1>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q, %m) {torch.operands = ["query", "key", "value", "attn_mask"], is_causal = true} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x1x3xi1>) -> tensor<2x2x3x4xf32>
  %1 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q, %m1) {torch.operands = ["query", "key", "value", "attn_mask"]} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<3xi1>) -> tensor<2x2x3x4xf32>
  return %0, %1 : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>
}

// -----

// A float attn_mask is a bias added to the scores (-inf hides a key); which keys a query
// sees is where the mask is not -inf.
// CHECK-LABEL: func.func @attention_with_a_bias
// CHECK: %[[SC:.*]] = gpt.mul
// CHECK: %[[B:.*]] = gpt.add %[[SC]], %arg1 : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
// CHECK: %[[VIS:.*]] = gpt.compare %arg1, %{{.*}} {predicate = #gpt.predicate<ne>}
// CHECK: gpt.convert %[[VIS]] : tensor<1x1x3x3xi1> -> tensor<1x1x3x3xf32>
// CHECK: gpt.softmax
func.func @attention_with_a_bias(%q: tensor<1x2x3x4xf32>, %m: tensor<1x1x3x3xf32>) -> tensor<1x2x3x4xf32> {
  %0 = "torch.aten.scaled_dot_product_attention.default"(%q, %q, %q, %m) {torch.operands = ["query", "key", "value", "attn_mask"]} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x4xf32>
  return %0 : tensor<1x2x3x4xf32>
}
