// RUN: gptc-opt %s -split-input-file -gpt-autodiff | FileCheck %s

// Tests that a broadcast operand's gradient is summed back to its shape, and
// that the seed is 1.
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: -> (tensor<f32>, tensor<3xf32> {gpt.grad_of = "b", gpt.name = "grad.b"})
// CHECK: %[[SEED:.*]] = gpt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[R:.*]] = gpt.reshape %[[SEED]] : (tensor<f32>) -> tensor<1x1xf32>
// CHECK: %[[G:.*]] = gpt.broadcast %[[R]] : (tensor<1x1xf32>) -> tensor<2x3xf32>
// CHECK: %[[S:.*]] = gpt.reduce_sum %[[G]] {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: return %{{.*}}, %[[S]]
func.func @add_broadcast(%b: tensor<3xf32> {gpt.kind = "param", gpt.name = "b"}, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = gpt.add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests a linear layer's weight gradient: tokens folded into rows, one
// contraction over all of them (x^T g, transposed because y = x w^T).
// CHECK-LABEL: func.func @linear
// CHECK: %[[X2:.*]] = gpt.reshape %arg1 : (tensor<2x5x8xf32>) -> tensor<10x8xf32>
// CHECK: %[[G2:.*]] = gpt.reshape %{{.*}} : (tensor<2x5x4xf32>) -> tensor<10x4xf32>
// CHECK: %[[DW:.*]] = gpt.matmul %[[G2]], %[[X2]] {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<10x4xf32>, tensor<10x8xf32>) -> tensor<4x8xf32>
// CHECK: return %{{.*}}, %[[DW]]
func.func @linear(%w: tensor<4x8xf32> {gpt.kind = "param", gpt.name = "w"}, %x: tensor<2x5x8xf32>) -> tensor<f32> {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x5x8xf32>, tensor<4x8xf32>) -> tensor<2x5x4xf32>
  %1 = gpt.reduce_mean %0 {dims = array<i64: 0, 1, 2>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x5x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests a tied weight (embedding and lm_head): the two contributions are
// added in program order of the uses, the embedding's first.
// CHECK-LABEL: func.func @tied
// CHECK-DAG: %[[HEAD:.*]] = gpt.matmul %{{.*}}, %{{.*}} {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-DAG: %[[EMB:.*]] = gpt.embedding_grad %{{.*}}, %arg1 : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<5x3xf32>
// CHECK: %[[SUM:.*]] = gpt.add %[[EMB]], %[[HEAD]] : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// CHECK: return %{{.*}}, %[[SUM]]
func.func @tied(%wte: tensor<5x3xf32> {gpt.kind = "param", gpt.name = "wte"}, %idx: tensor<4xi64>, %t: tensor<4xi64>) -> tensor<f32> {
  %e = gpt.embedding %wte, %idx : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  %l = gpt.matmul %e, %wte {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %loss = gpt.cross_entropy %l, %t {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests layer_norm: the input gradient op, the weight gradient from the
// recomputed normalised input, the bias gradient as a sum over rows.
// CHECK-LABEL: func.func @layer_norm
// CHECK: gpt.layer_norm_grad %{{.*}}, %arg2, %arg0 {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>}
// CHECK: %[[XHAT:.*]] = gpt.layer_norm %arg2 {eps = 1.000000e-05 : f64, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[GX:.*]] = gpt.mul %{{.*}}, %[[XHAT]]
// CHECK: %[[DW:.*]] = gpt.reduce_sum %[[GX]] {dims = array<i64: 0>
// CHECK: %[[DB:.*]] = gpt.reduce_sum %{{.*}} {dims = array<i64: 0>
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
func.func @layer_norm(%w: tensor<8xf32> {gpt.kind = "param", gpt.name = "w"}, %b: tensor<8xf32> {gpt.kind = "param", gpt.name = "b"}, %x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = gpt.layer_norm %x, %w, bias %b {eps = 1.0e-05 : f64, order = #gpt.order<canonical>} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests attention, gelu and dropout: the backward ops take the forward's
// operands; the dropout of the gradient reuses the forward's rng and id.
// CHECK-LABEL: func.func @attention_gelu_dropout
// CHECK: %{{.*}}, %[[S:.*]] = gpt.attention
// CHECK: gpt.dropout %{{.*}}, %arg2 {id = 4 : i64, p = 1.000000e-01 : f64, train = true}
// CHECK: gpt.gelu_grad %{{.*}}, %{{.*}} {approximate = #gpt.approximate<none>}
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = gpt.attention_grad %arg0, %arg0, %arg0, %{{.*}}, %[[S]], %arg2 {dropout_p = 2.000000e-01 : f64, id = 3 : i64, is_causal = true
// CHECK: gpt.add
// CHECK: gpt.add
func.func @attention_gelu_dropout(%q: tensor<1x2x8x4xf32> {gpt.kind = "param", gpt.name = "q"}, %t: tensor<8xi64>, %rng: tensor<2xi64>) -> tensor<f32> {
  %a:2 = gpt.attention %q, %q, %q, %rng {dropout_p = 0.2 : f64, id = 3 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2xi64>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x2xf32>)
  %g = gpt.gelu %a#0 {approximate = #gpt.approximate<none>} : tensor<1x2x8x4xf32>
  %d = gpt.dropout %g, %rng {id = 4 : i64, p = 0.1 : f64, train = true} : (tensor<1x2x8x4xf32>, tensor<2xi64>) -> tensor<1x2x8x4xf32>
  %r = gpt.reshape %d : (tensor<1x2x8x4xf32>) -> tensor<8x8xf32>
  %l = gpt.cross_entropy %r, %t {ignore_index = -1 : i64, order = #gpt.order<canonical>} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests a key mask: the gradient takes it as the forward does, and gives it none.
// CHECK-LABEL: func.func @key_mask
// CHECK: %{{.*}}, %[[S:.*]] = gpt.attention %arg0, %arg0, %arg0 key_mask %arg1
// CHECK: gpt.attention_grad %arg0, %arg0, %arg0, %{{.*}}, %[[S]] key_mask %arg1 {{{.*}}is_causal = true
func.func @key_mask(%q: tensor<2x2x8x4xf32> {gpt.kind = "param", gpt.name = "q"}, %m: tensor<2x8xi1>) -> tensor<f32> {
  %a:2 = gpt.attention %q, %q, %q key_mask %m {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x8xi1>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x2xf32>)
  %s = gpt.reduce_sum %a#0 {dims = array<i64: 0, 1, 2, 3>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x2x8x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests grouped-query attention (2 key/value heads for 4 query heads, v read [B, T, H, D]):
// attention_grad gives k's and v's gradients themselves, in their layouts (each group's 2
// query heads' parts summed inside it in the canonical order, the gradient of repeating
// the heads): no sum after it.
// CHECK-LABEL: func.func @grouped_heads
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = gpt.attention_grad %arg0, %arg1, %arg2, %{{.*}}, %{{.*}} {bthd = array<i1: false, false, true, false>, {{.*}}} : (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x2xf32>) -> (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>)
// CHECK-NOT: gpt.reduce_sum
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]] : tensor<f32>, tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>
func.func @grouped_heads(%q: tensor<1x4x8x4xf32> {gpt.kind = "param", gpt.name = "q"}, %k: tensor<1x2x8x4xf32> {gpt.kind = "param", gpt.name = "k"}, %v: tensor<1x8x2x4xf32> {gpt.kind = "param", gpt.name = "v"}) -> tensor<f32> {
  %a:2 = gpt.attention %q, %k, %v {bthd = array<i1: false, false, true, false>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>) -> (tensor<1x4x8x4xf32>, tensor<1x4x8x2xf32>)
  %s = gpt.reduce_sum %a#0 {dims = array<i64: 0, 1, 2, 3>, keepdim = false, order = #gpt.order<canonical>} : (tensor<1x4x8x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that stop_gradient cuts the path and an unreached parameter gets
// zeros (the gradient-flow check reports both).
// CHECK-LABEL: func.func @cut
// CHECK: %[[Z:.*]] = gpt.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[ZEROS:.*]] = gpt.broadcast %[[Z]] : (tensor<f32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[ZEROS]]
func.func @cut(%w: tensor<4xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %0 = gpt.stop_gradient %w : tensor<4xf32>
  %1 = gpt.exp %0 : tensor<4xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Tests split, transpose and softmax gradients: pieces are concatenated back
// (zeros for the unused one), transposes inverted.
// CHECK-LABEL: func.func @split_softmax
// CHECK: gpt.reduce_sum {{.*}}keepdim = true
// CHECK: gpt.transpose %{{.*}} {perm = array<i64: 1, 0>}
// CHECK: %[[Z:.*]] = gpt.broadcast %{{.*}} : (tensor<f32>) -> tensor<4x2xf32>
// CHECK: gpt.concat %{{.*}}, %[[Z]] {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
func.func @split_softmax(%w: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %s:2 = gpt.split %w {dim = 1 : i64} : (tensor<4x4xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  %t = gpt.transpose %s#0 {perm = array<i64: 1, 0>} : (tensor<4x2xf32>) -> tensor<2x4xf32>
  %p = gpt.softmax %t {dim = 1 : i64, order = #gpt.order<canonical>} : tensor<2x4xf32>
  %l = gpt.log %p : tensor<2x4xf32>
  %r = gpt.reduce_sum %l {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x4xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Tests that a param marked gpt.trainable = false (a buffer, or a parameter without
// requires_grad) gets no gradient result: only the trainable one does.
// CHECK-LABEL: func.func @frozen
// CHECK-SAME: -> (tensor<f32>, tensor<3xf32> {gpt.grad_of = "b", gpt.name = "grad.b"})
// CHECK-NOT: grad.s
func.func @frozen(%b: tensor<3xf32> {gpt.kind = "param", gpt.name = "b"}, %s: tensor<3xf32> {gpt.kind = "param", gpt.name = "s", gpt.trainable = false}, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = gpt.add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = gpt.mul %0, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Tests that a parameter nothing reaches (unused, or read only through a detach) gets a
// zero gradient marked gpt.no_gradient, which gpt-adamw leaves un-updated (PyTorch's
// .grad is None there), and so is its argument (the manifest's "no_gradient"); one that is
// reached is not marked.
// CHECK-LABEL: func.func @unreached
// CHECK-SAME: %arg0: tensor<3xf32> {gpt.kind = "param", gpt.name = "b"}, %arg1: tensor<3xf32> {gpt.kind = "param", gpt.name = "d", gpt.no_gradient}, %arg2: tensor<3xf32> {gpt.kind = "param", gpt.name = "u", gpt.no_gradient}
// CHECK-SAME: -> (tensor<f32>, tensor<3xf32> {gpt.grad_of = "b", gpt.name = "grad.b"}, tensor<3xf32> {gpt.grad_of = "d", gpt.name = "grad.d", gpt.no_gradient}, tensor<3xf32> {gpt.grad_of = "u", gpt.name = "grad.u", gpt.no_gradient})
func.func @unreached(%b: tensor<3xf32> {gpt.kind = "param", gpt.name = "b"}, %d: tensor<3xf32> {gpt.kind = "param", gpt.name = "d"}, %u: tensor<3xf32> {gpt.kind = "param", gpt.name = "u"}, %x: tensor<2x3xf32>) -> tensor<f32> {
  %s = gpt.stop_gradient %d : tensor<3xf32>
  %0 = gpt.add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = gpt.mul %0, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = gpt.reduce_sum %1 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// maximum's gradient is PyTorch's: all of it to the larger operand, half to each where
// they tie; |x|'s is g * sign(x) with sign(0) = 0; sigmoid's is g * (1 - y) * y.
// CHECK-LABEL: func.func @max_abs_sigmoid
// CHECK: %[[Y:.*]] = gpt.sigmoid %arg0
// CHECK: %[[A:.*]] = gpt.abs %arg0
// CHECK: %[[M:.*]] = gpt.max %[[Y]], %[[A]]
// CHECK: %[[TIE:.*]] = gpt.compare %[[Y]], %[[A]] {predicate = #gpt.predicate<eq>}
// CHECK: %[[HALF:.*]] = gpt.mul %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: %[[SHARED:.*]] = gpt.where %[[TIE]], %[[HALF]], %{{.*}}
// CHECK: %[[YLOSES:.*]] = gpt.compare %[[Y]], %[[A]] {predicate = #gpt.predicate<lt>}
// CHECK: %[[ALOSES:.*]] = gpt.compare %[[A]], %[[Y]] {predicate = #gpt.predicate<lt>}
// CHECK: %[[DY:.*]] = gpt.where %[[YLOSES]], %{{.*}}, %[[SHARED]]
// CHECK: %[[DA:.*]] = gpt.where %[[ALOSES]], %{{.*}}, %[[SHARED]]
// CHECK: %[[NEG:.*]] = gpt.compare %arg0, %{{.*}} {predicate = #gpt.predicate<lt>}
// CHECK: %[[POS:.*]] = gpt.compare %arg0, %{{.*}} {predicate = #gpt.predicate<gt>}
// CHECK: gpt.where %[[NEG]]
// CHECK: %[[SIGN:.*]] = gpt.where %[[POS]]
// CHECK: gpt.mul %[[DA]], %[[SIGN]]
// CHECK: %[[ONE:.*]] = gpt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[OMY:.*]] = gpt.sub %[[ONE]], %[[Y]]
// CHECK: %[[G1:.*]] = gpt.mul %[[DY]], %[[OMY]]
// CHECK: gpt.mul %[[G1]], %[[Y]]
func.func @max_abs_sigmoid(%w: tensor<4xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %0 = gpt.sigmoid %w : tensor<4xf32>
  %1 = gpt.abs %w : tensor<4xf32>
  %2 = gpt.max %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = gpt.reduce_sum %2 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// A comparison passes no gradient: w reaches the loss only through gpt.where's chosen
// branch, not through the condition it feeds.
// CHECK-LABEL: func.func @compare_no_gradient
// CHECK: %[[C:.*]] = gpt.compare %arg0, %{{.*}} {predicate = #gpt.predicate<gt>}
// CHECK: gpt.where %[[C]], %{{.*}}, %{{.*}}
// CHECK-NOT: gpt.compare
// CHECK: return
func.func @compare_no_gradient(%w: tensor<4xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %z = gpt.constant dense<0.0> : tensor<f32>
  %c = gpt.compare %w, %z {predicate = #gpt.predicate<gt>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %0 = gpt.where %c, %w, %z : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// reduce_max's gradient is PyTorch's: shared evenly among the elements equal to the
// maximum, (g / count) * mask.
// CHECK-LABEL: func.func @reduce_max
// CHECK: %[[M:.*]] = gpt.reduce_max %arg0
// CHECK: %[[MK:.*]] = gpt.reshape %[[M]] : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK: %[[HIT:.*]] = gpt.compare %arg0, %[[MK]] {predicate = #gpt.predicate<eq>} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xi1>
// CHECK: %[[MASK:.*]] = gpt.convert %[[HIT]] : tensor<2x3xi1> -> tensor<2x3xf32>
// CHECK: %[[COUNT:.*]] = gpt.reduce_sum %[[MASK]] {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>}
// CHECK: %[[SHARE:.*]] = gpt.div %{{.*}}, %[[COUNT]] : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK: gpt.mul %[[SHARE]], %[[MASK]] : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @reduce_max(%w: tensor<2x3xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %0 = gpt.reduce_max %w {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x3xf32>) -> tensor<2xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that a running sum's gradient is the running sum of g from the other end, and
// that an i64 running sum (position ids from a mask) gets none.
// CHECK-LABEL: func.func @cumsum
// CHECK: gpt.cumsum %arg1 {dim = 1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xi64>
// CHECK: %[[F:.*]] = gpt.cumsum %arg0 {dim = 0 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xf32>
// CHECK: gpt.cumsum %{{.*}} {dim = 0 : i64, order = #gpt.order<sequential>, reverse = true} : tensor<2x5xf32>
// CHECK-NOT: gpt.cumsum
// CHECK: return
func.func @cumsum(%w: tensor<2x5xf32> {gpt.kind = "param", gpt.name = "w"}, %m: tensor<2x5xi64> {gpt.kind = "input", gpt.name = "m"}) -> tensor<f32> {
  %p = gpt.cumsum %m {dim = 1 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xi64>
  %pf = gpt.convert %p : tensor<2x5xi64> -> tensor<2x5xf32>
  %c = gpt.cumsum %w {dim = 0 : i64, order = #gpt.order<sequential>, reverse = false} : tensor<2x5xf32>
  %y = gpt.mul %c, %pf : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %r = gpt.reduce_sum %y {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<2x5xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Tests a strided slice's gradient: g with step - 1 zeros after each element (a concat
// along a new dim, merged back), cut where x ends, placed at the start. x[1::3] of 8
// elements: elements 1, 4, 7; spread to 9, cut to the 7 after the start, 1 zero before.
// CHECK-LABEL: func.func @strided_slice
// CHECK: %[[C:.*]] = gpt.reshape %{{.*}} : (tensor<3xf32>) -> tensor<3x1xf32>
// CHECK: %[[I:.*]] = gpt.concat %[[C]], %{{.*}} {dim = 1 : i64} : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x3xf32>
// CHECK: %[[S:.*]] = gpt.reshape %[[I]] : (tensor<3x3xf32>) -> tensor<9xf32>
// CHECK: %[[K:.*]] = gpt.slice %[[S]] {dim = 0 : i64, end = 7 : i64, start = 0 : i64, step = 1 : i64} : (tensor<9xf32>) -> tensor<7xf32>
// CHECK: gpt.concat %{{.*}}, %[[K]] {dim = 0 : i64} : (tensor<1xf32>, tensor<7xf32>) -> tensor<8xf32>
func.func @strided_slice(%w: tensor<8xf32> {gpt.kind = "param", gpt.name = "w"}) -> tensor<f32> {
  %s = gpt.slice %w {dim = 0 : i64, start = 1 : i64, end = 8 : i64, step = 3 : i64} : (tensor<8xf32>) -> tensor<3xf32>
  %y = gpt.mul %s, %s : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %r = gpt.reduce_sum %y {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<3xf32>) -> tensor<f32>
  return %r : tensor<f32>
}
