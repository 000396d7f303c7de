// RUN: gptc-opt %s -split-input-file -verify-diagnostics

// Tests that each verifier rejects malformed ops with a clear message.

func.func @bad_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{operand shapes [2x3] and [4] do not broadcast}}
  %0 = gpt.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @bad_predicate(%a: tensor<2x3xf32>) -> tensor<2x3xi1> {
  // expected-error @+2 {{expected ::mlir::gpt::ComparePredicate to be one of: lt, le, gt, ge, eq, ne}}
  // expected-error @+1 {{failed to parse Gpt_ComparePredicateAttr}}
  %0 = gpt.compare %a, %a {predicate = #gpt.predicate<less>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

func.func @compare_types(%a: tensor<2x3xf32>, %b: tensor<3xf64>) -> tensor<2x3xi1> {
  // expected-error @+1 {{operands must share an element type}}
  %0 = gpt.compare %a, %b {predicate = #gpt.predicate<lt>} : (tensor<2x3xf32>, tensor<3xf64>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

func.func @bad_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{result shape [3x3] is not the broadcast shape [2x3]}}
  %0 = gpt.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @mixed_types(%a: tensor<3xf32>, %b: tensor<3xf64>) -> tensor<3xf32> {
  // expected-error @+1 {{operands and result must share an element type}}
  %0 = gpt.sub %a, %b : (tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{contraction sizes differ: 8 vs 7}}
  %0 = gpt.matmul %a, %b {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<7x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_addend(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %c: tensor<5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{addend must have the result's type}}
  %0 = gpt.matmul %a, %b plus %c {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_bias(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %c: tensor<4xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{bias must be [5] of the result's element type}}
  %0 = gpt.matmul %a, %b bias %c {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<4xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_dropout_attrs(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %rng: tensor<2xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{dropout needs all of rng, dropout_p and dropout_id}}
  %0 = gpt.matmul %a, %b dropout %rng {dropout_p = 1.000000e-01 : f64, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<2xi64>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_dropout_p(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %rng: tensor<2xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{dropout_p must be in (0, 1), got 1}}
  %0 = gpt.matmul %a, %b dropout %rng {dropout_id = 0 : i64, dropout_p = 1.000000e+00 : f64, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<2xi64>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_order(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{supports only reduction order 'sequential'}}
  %0 = gpt.matmul %a, %b {order = #gpt.order<canonical>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @layer_norm_weight(%x: tensor<2x64xf32>, %w: tensor<32xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{weight and bias must be [64]}}
  %0 = gpt.layer_norm %x, %w {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<2x64xf32>, tensor<32xf32>) -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

func.func @softmax_dim(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{dim 2 out of range for rank 2}}
  %0 = gpt.softmax %x {dim = 2 : i64, order = #gpt.order<canonical>} : tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

func.func @attention_shapes(%q: tensor<2x2x32x16xf32>, %k: tensor<2x2x32x8xf32>) -> tensor<2x2x32x16xf32> {
  // expected-error @+1 {{do not agree}}
  %0:2 = gpt.attention %q, %k, %q {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x2x32x16xf32>, tensor<2x2x32x8xf32>, tensor<2x2x32x16xf32>) -> (tensor<2x2x32x16xf32>, tensor<2x2x32x2xf32>)
  return %0#0 : tensor<2x2x32x16xf32>
}

// -----

// The key mask is [B, S]: q's batch, k's keys.
func.func @attention_key_mask(%q: tensor<2x2x32x16xf32>, %m: tensor<2x16xi1>) -> tensor<2x2x32x16xf32> {
  // expected-error @+1 {{key_mask must be [2x32] (batch, keys)}}
  %0:2 = gpt.attention %q, %q, %q key_mask %m {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x16xi1>) -> (tensor<2x2x32x16xf32>, tensor<2x2x32x2xf32>)
  return %0#0 : tensor<2x2x32x16xf32>
}

// -----

// A layout for each of q, k, v and the result: four entries.
func.func @attention_layouts(%q: tensor<2x2x32x16xf32>) -> tensor<2x2x32x16xf32> {
  // expected-error @+1 {{bthd must have 4 entries: q, k, v and the result}}
  %0:2 = gpt.attention %q, %q, %q {bthd = array<i1: true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>) -> (tensor<2x2x32x16xf32>, tensor<2x2x32x2xf32>)
  return %0#0 : tensor<2x2x32x16xf32>
}

// -----

// k laid out [B, T, H, D] is [2, 5, 3, 16] heads outer, q's [2, 3, 5, 16]: the keys' count
// (5 against 3 heads) does not agree with v's, read heads outer.
func.func @attention_layout_shapes(%q: tensor<2x3x5x16xf32>) -> tensor<2x3x5x16xf32> {
  // expected-error @+1 {{q, k, v shapes (heads outer) [2x3x5x16], [2x5x3x16], [2x3x5x16] do not agree}}
  %0:2 = gpt.attention %q, %q, %q {bthd = array<i1: false, true, false, false>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x3x5x16xf32>, tensor<2x3x5x16xf32>, tensor<2x3x5x16xf32>) -> (tensor<2x3x5x16xf32>, tensor<2x3x5x2xf32>)
  return %0#0 : tensor<2x3x5x16xf32>
}

// -----

// The result in the bthd layout is [B, T, H, Dv].
func.func @attention_result_layout(%q: tensor<2x3x5x16xf32>) -> tensor<2x3x5x16xf32> {
  // expected-error @+1 {{result must be [2x5x3x16]}}
  %0:2 = gpt.attention %q, %q, %q {bthd = array<i1: false, false, false, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x3x5x16xf32>, tensor<2x3x5x16xf32>, tensor<2x3x5x16xf32>) -> (tensor<2x3x5x16xf32>, tensor<2x3x5x2xf32>)
  return %0#0 : tensor<2x3x5x16xf32>
}

// -----

// Grouped-query attention: k's and v's heads (4) must divide q's (6).
func.func @attention_groups(%q: tensor<2x6x32x16xf32>, %k: tensor<2x4x32x16xf32>) -> tensor<2x6x32x16xf32> {
  // expected-error @+1 {{q, k, v shapes (heads outer) [2x6x32x16], [2x4x32x16], [2x4x32x16] do not agree}}
  %0:2 = gpt.attention %q, %k, %k {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x6x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> (tensor<2x6x32x16xf32>, tensor<2x6x32x2xf32>)
  return %0#0 : tensor<2x6x32x16xf32>
}

// -----

// With grouped heads dk and dv are k's and v's (a group's parts summed): [B, Hkv, S, D],
// not each query head's part.
func.func @attention_grad_groups(%q: tensor<1x4x8x4xf32>, %k: tensor<1x2x8x4xf32>, %st: tensor<1x4x8x2xf32>) -> tensor<1x4x8x4xf32> {
  // expected-error @+1 {{gradients must have the types of q, k and v}}
  %dq, %dk, %dv = gpt.attention_grad %q, %k, %k, %q, %st {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x2xf32>) -> (tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>)
  return %dk : tensor<1x4x8x4xf32>
}

// -----

func.func @attention_stats(%q: tensor<2x2x32x16xf32>) -> tensor<2x2x32x16xf32> {
  // expected-error @+1 {{stats must be [2x2x32x2] of q's element type}}
  %0:2 = gpt.attention %q, %q, %q {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.25 : f64} : (tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>) -> (tensor<2x2x32x16xf32>, tensor<2x2x32x1xf32>)
  return %0#0 : tensor<2x2x32x16xf32>
}

// -----

func.func @cross_entropy_rank(%l: tensor<2x32x65xf32>, %t: tensor<64xi64>) -> tensor<f32> {
  // expected-error @+1 {{expects logits [N, V] and targets [N]}}
  %0 = gpt.cross_entropy %l, %t {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<2x32x65xf32>, tensor<64xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @reshape_count(%x: tensor<2x32xf32>) -> tensor<65xf32> {
  // expected-error @+1 {{cannot reshape [2x32] (64 elements) to [65] (65 elements)}}
  %0 = gpt.reshape %x : (tensor<2x32xf32>) -> tensor<65xf32>
  return %0 : tensor<65xf32>
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{perm is not a permutation}}
  %0 = gpt.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @slice_range(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{bad slice [6:10:1] of a dim of 8}}
  %0 = gpt.slice %x {dim = 0 : i64, start = 6 : i64, end = 10 : i64, step = 1 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @split_sum(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{pieces sum to 7, not 8}}
  %0:2 = gpt.split %x {dim = 0 : i64} : (tensor<8xf32>) -> (tensor<4xf32>, tensor<3xf32>)
  return %0#0 : tensor<4xf32>
}

// -----

func.func @concat_sum(%x: tensor<4xf32>) -> tensor<9xf32> {
  // expected-error @+1 {{inputs sum to 8 along dim 0, not 9}}
  %0 = gpt.concat %x, %x {dim = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<9xf32>
  return %0 : tensor<9xf32>
}

// -----

func.func @broadcast_bad(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{cannot broadcast [3] to [2x4]}}
  %0 = gpt.broadcast %x : (tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @reduce_shape(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{result shape should be [4]}}
  %0 = gpt.reduce_sum %x {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @embedding_shape(%w: tensor<65x64xf32>, %i: tensor<2x32xi64>) -> tensor<2x32x32xf32> {
  // expected-error @+1 {{result must be [2x32x64]}}
  %0 = gpt.embedding %w, %i : (tensor<65x64xf32>, tensor<2x32xi64>) -> tensor<2x32x32xf32>
  return %0 : tensor<2x32x32xf32>
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected ::mlir::gpt::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse Gpt_GeluApproximationAttr}}
  %0 = gpt.gelu %x {approximate = #gpt.approximate<sigmoid>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_p(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{p must be in [0, 1)}}
  %0 = gpt.dropout %x {id = 0 : i64, p = 1.5 : f64, train = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_rng(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs an rng operand ([seed, step]) when it drops anything}}
  %0 = gpt.dropout %x {id = 0 : i64, p = 0.5 : f64, train = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @convert_shape(%x: tensor<4xf32>) -> tensor<5xf64> {
  // expected-error @+1 {{shape must not change}}
  %0 = gpt.convert %x : tensor<4xf32> -> tensor<5xf64>
  return %0 : tensor<5xf64>
}

// -----

func.func @bad_element_type(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{must be ranked tensor of}}
  %0 = gpt.neg %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @horizontal_members_read_each_other(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{members must not read one another's results}}
  %h:2 = gpt.horizontal %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %0 = gpt.exp %a : tensor<4xf32>
    %1 = gpt.neg %0 : tensor<4xf32>
    gpt.yield %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
  return %h#0, %h#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @tanh_erf(%x: tensor<8x16xf32>, %g: tensor<8x16xf32>, %e: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @below {{an erf operand needs approximate = #gpt.approximate<none> and x's type}}
  %0 = gpt.gelu_grad %g, %x erf %e {approximate = #gpt.approximate<tanh>} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// The checks below were crashes or silent wrong code in the passes and the code
// generator, found by feeding gptc-opt and gptc compile hand-written IR.

func.func @layer_norm_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{normalizes the last dimension: x must have one}}
  %0 = gpt.layer_norm %x {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @layer_norm_grad_scalar(%g: tensor<f32>, %x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{normalizes the last dimension: x must have one}}
  %0 = gpt.layer_norm_grad %g, %x {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @attention_grad_keys(%q: tensor<1x1x4x8xf32>, %k: tensor<3x7x100x2xf32>, %st: tensor<1x1x4x2xf32>) -> tensor<1x1x4x8xf32> {
  // expected-error @+1 {{q, k, v shapes (heads outer) [1x1x4x8], [3x7x100x2], [1x1x4x8] do not agree}}
  %dq, %dk, %dv = gpt.attention_grad %q, %k, %q, %q, %st {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.125 : f64} : (tensor<1x1x4x8xf32>, tensor<3x7x100x2xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x1x4x8xf32>, tensor<3x7x100x2xf32>, tensor<1x1x4x8xf32>)
  return %dq : tensor<1x1x4x8xf32>
}

// -----

func.func @cross_entropy_grad_ranks(%x: tensor<8xf32>, %t: tensor<3x5xi64>, %s: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{logits must be [N, V] and targets [N]}}
  %0 = gpt.cross_entropy_grad %x, %t, %s {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<8xf32>, tensor<3x5xi64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @embedding_grad_types(%g: tensor<4x8xf32>, %idx: tensor<4xi64>) -> tensor<5x8xf64> {
  // expected-error @+1 {{g and result must share an element type}}
  %0 = gpt.embedding_grad %g, %idx : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<5x8xf64>
  return %0 : tensor<5x8xf64>
}

// -----

func.func @integer_division(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{takes floating-point operands, got 'tensor<4xi64>'}}
  %0 = gpt.div %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @sparse_constant() -> tensor<4xf32> {
  // expected-error @+1 {{value must be dense<...> (gptc writes out dense values only)}}
  %0 = gpt.constant sparse<[[1]], [2.0]> : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_shapes(%x: tensor<8xf32>, %r: tensor<2xi64>) -> tensor<8xf32> {
  // expected-error @+1 {{body op 'gpt.add' has shape [2], not the kernel's [8]}}
  %y = gpt.fused %x, %r : (tensor<8xf32>, tensor<2xi64>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<2xi64>):
    %r2 = gpt.add %b, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
    %d = gpt.dropout %a, %r2 {id = 0 : i64, p = 0.5 : f64, train = true} : (tensor<8xf32>, tensor<2xi64>) -> tensor<8xf32>
    gpt.yield %d : tensor<8xf32>
  }
  return %y : tensor<8xf32>
}

// -----

func.func @fused_matmul(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'gpt.matmul' cannot be computed one element at a time}}
  %y = gpt.fused %a : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%x: tensor<4x4xf32>):
    %m = gpt.matmul %x, %x {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    gpt.yield %m : tensor<4x4xf32>
  }
  return %y : tensor<4x4xf32>
}

// -----

func.func @fused_epilogue_reads_prologue(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{body op 'gpt.add' after the reduce_sum reads an element of the sum}}
  %y = gpt.fused %x : (tensor<4x1xf32>) -> tensor<4x1xf32> {
  ^bb0(%a: tensor<4x1xf32>):
    %p = gpt.mul %a, %a : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
    %s = gpt.reduce_sum %p {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x1xf32>) -> tensor<4x1xf32>
    %e = gpt.add %s, %p : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
    gpt.yield %e : tensor<4x1xf32>
  }
  return %y : tensor<4x1xf32>
}

// -----

func.func @fused_two_sums(%x: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{a body holds one reduce_sum at most}}
  %y = gpt.fused %x : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = gpt.reduce_sum %a {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %t = gpt.reduce_sum %s {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4xf32>) -> tensor<f32>
    gpt.yield %t : tensor<f32>
  }
  return %y : tensor<f32>
}

// -----

func.func @fused_post_needs_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{body op 'gpt.mul' after the reduce_sum has the summed shape, but the sum is not over kept trailing dims}}
  %y = gpt.fused %x : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = gpt.reduce_sum %a {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
    %e = gpt.mul %a, %s : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    gpt.yield %e : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @fused_epilogue_after_post(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  // expected-error @+1 {{body op 'gpt.exp' of the sum's shape follows ops of the summed shape}}
  %y:2 = gpt.fused %x : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %s = gpt.reduce_sum %a {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %e = gpt.mul %a, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %f = gpt.exp %s : tensor<4x1xf32>
    gpt.yield %e, %f : tensor<4x8xf32>, tensor<4x1xf32>
  }
  return %y#0, %y#1 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

func.func @matmul_gelu_x(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %x: tensor<5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{gelu_grad's x must have the result's type}}
  %0 = gpt.matmul %a, %b gelu_grad %x {gelu_approximate = #gpt.approximate<none>, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_gelu_erf_tanh(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{erf takes an exact gelu_grad's x, of the result's type}}
  %0 = gpt.matmul %a, %b gelu_grad %x erf %x {gelu_approximate = #gpt.approximate<tanh>, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_gelu_attr(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{gelu_grad needs both x and gelu_approximate}}
  %0 = gpt.matmul %a, %b gelu_grad %x {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @cumsum_order(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{supports only reduction order 'sequential'}}
  %0 = gpt.cumsum %x {dim = 1 : i64, order = #gpt.order<canonical>, reverse = false} : tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

func.func @cumsum_dim(%x: tensor<2x64xi64>) -> tensor<2x64xi64> {
  // expected-error @+1 {{dim -1 out of range for rank 2}}
  %0 = gpt.cumsum %x {dim = -1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x64xi64>
  return %0 : tensor<2x64xi64>
}

// -----

func.func @cumsum_bool(%x: tensor<2x64xi1>) -> tensor<2x64xi1> {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 64-bit float or 64-bit signless integer values}}
  %0 = gpt.cumsum %x {dim = 1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x64xi1>
  return %0 : tensor<2x64xi1>
}
