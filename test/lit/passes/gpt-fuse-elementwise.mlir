// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-fuse-elementwise))" | FileCheck %s

// Tests that a run of elementwise ops of one shape becomes one kernel, values
// used only inside stay inside, and values used later are results.
// CHECK-LABEL: func.func @chain
// CHECK: %[[F:.*]]:2 = gpt.fused %arg0, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:   gpt.add
// CHECK:   gpt.tanh
// CHECK:   gpt.mul
// CHECK:   gpt.yield
// CHECK: gpt.reduce_sum %[[F]]#0
// CHECK: return %[[F]]#1,
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %0 = gpt.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = gpt.tanh %0 : tensor<4x8xf32>
  %2 = gpt.mul %1, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = gpt.reduce_sum %1 {dims = array<i64: 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %2, %3 : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// Tests that a reduction, a matmul or a change of shape ends a run, and that
// a run of one op stays as it is.
// CHECK-LABEL: func.func @breaks
// CHECK: gpt.exp
// CHECK-NEXT: gpt.matmul
// CHECK-NEXT: gpt.fused
// CHECK: gpt.neg
// CHECK: gpt.sqrt
// CHECK: gpt.yield
// CHECK-NEXT: }
// CHECK-NEXT: gpt.broadcast
// CHECK-NOT: gpt.fused
func.func @breaks(%x: tensor<4x4xf32>, %v: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %0 = gpt.exp %x : tensor<4x4xf32>
  %1 = gpt.matmul %0, %0 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = gpt.neg %1 : tensor<4x4xf32>
  %3 = gpt.sqrt %2 : tensor<4x4xf32>
  %4 = gpt.broadcast %3 : (tensor<4x4xf32>) -> tensor<2x4x4xf32>
  return %4 : tensor<2x4x4xf32>
}

// -----

// Tests AdamW's update: one kernel writing the parameter and both moments.
// CHECK-LABEL: func.func @adam
// CHECK: %{{.*}}:3 = gpt.fused
// CHECK-NOT: gpt.fused
func.func @adam(%p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %s: tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = gpt.sub %g, %m : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = gpt.mul %0, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = gpt.add %m, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = gpt.mul %g, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = gpt.add %v, %3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = gpt.sqrt %4 : tensor<8xf32>
  %6 = gpt.div %2, %5 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = gpt.sub %p, %6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %7, %2, %4 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a sum over a run's last value takes the run in (the sum of squares of
// a gradient norm): one kernel whose body ends in the reduce_sum.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK: %[[S:.*]] = gpt.fused %arg0 : (tensor<4x8xf32>) -> tensor<f32> {
// CHECK:   gpt.mul
// CHECK:   gpt.reduce_sum {{.*}}dims = array<i64: 0, 1>
// CHECK:   gpt.yield
// CHECK: return %[[S]]
func.func @sum_of_squares(%g: tensor<4x8xf32>) -> tensor<f32> {
  %0 = gpt.mul %g, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that the reduction stays out when another value of the run is used
// elsewhere (a kernel has one result shape).
// CHECK-LABEL: func.func @escapes
// CHECK: gpt.mul
// CHECK-NEXT: gpt.reduce_sum
// CHECK-NOT: gpt.fused
func.func @escapes(%g: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %0 = gpt.mul %g, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<f32>
  return %1, %0 : tensor<f32>, tensor<4x8xf32>
}

// -----

// Tests that a training dropout fuses with its neighbours (a residual branch's dropout and
// add: one kernel), its [seed, step] an input of the fused op; a dropout without rng (not
// training) is not fused.
// CHECK-LABEL: func.func @dropout_residual
// CHECK: gpt.matmul
// CHECK-NEXT: %[[F:.*]] = gpt.fused %{{.*}}, %arg2, %arg0 : (tensor<4x8xf32>, tensor<2xi64>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK:   gpt.dropout %{{.*}}, %{{.*}} {id = 3 : i64, p = 1.000000e-01 : f64, train = true}
// CHECK:   gpt.add
// CHECK:   gpt.yield
// CHECK: return %[[F]]
func.func @dropout_residual(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %rng: tensor<2xi64>) -> tensor<4x8xf32> {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.dropout %0, %rng {id = 3 : i64, p = 0.1 : f64, train = true} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x8xf32>
  %2 = gpt.add %1, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @dropout_eval
// CHECK-NOT: gpt.fused
// CHECK: gpt.dropout
// CHECK-NEXT: gpt.exp
// CHECK-NOT: gpt.fused
func.func @dropout_eval(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.dropout %x {id = 0 : i64, p = 0.1 : f64, train = false} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.exp %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that a comparison and the gpt.where it feeds fuse with their neighbours (the
// condition stays in a register), and that a gpt.stop_gradient inside the run (clamp's
// held value) is dropped rather than splitting it; a returned one stays.
// CHECK-LABEL: func.func @clamp_min
// CHECK: %[[F:.*]] = gpt.fused %arg0, %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK:   gpt.compare {{.*}} {predicate = #gpt.predicate<lt>}
// CHECK:   gpt.where
// CHECK:   gpt.compare {{.*}} {predicate = #gpt.predicate<gt>}
// CHECK:   gpt.where
// CHECK:   gpt.mul
// CHECK:   gpt.yield
// CHECK-NOT: gpt.fused
// CHECK: %[[S:.*]] = gpt.stop_gradient %arg0
// CHECK: return %[[F]], %[[S]]
func.func @clamp_min(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %lo = gpt.constant dense<0.0> : tensor<f32>
  %0 = gpt.compare %x, %lo {predicate = #gpt.predicate<lt>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
  %1 = gpt.where %0, %lo, %x : (tensor<4x8xi1>, tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = gpt.stop_gradient %1 : tensor<4x8xf32>
  %3 = gpt.compare %x, %lo {predicate = #gpt.predicate<gt>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
  %4 = gpt.where %3, %x, %2 : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = gpt.mul %4, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = gpt.stop_gradient %x : tensor<4x8xf32>
  return %5, %6 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that the ops right after a sum, of the sum's shape, join its kernel (its
// epilogue: RMSNorm's rsqrt of the mean square), with their scalar operands as inputs,
// and that after a row's sum (trailing dims, kept) so do the ops of the row's shape that
// follow (the scaling of x): RMSNorm is one kernel, whose results are the rsqrt (read
// later) and the output. An op of the sum's shape after those ends the kernel.
// CHECK-LABEL: func.func @rms_epilogue
// CHECK: %[[F:.*]]:2 = gpt.fused %arg0, %{{.*}}, %{{.*}}, %arg1 : (tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<8xf32>) -> (tensor<4x1xf32>, tensor<4x8xf32>) {
// CHECK:   gpt.mul
// CHECK:   gpt.reduce_sum
// CHECK:   gpt.div
// CHECK:   gpt.add
// CHECK:   gpt.rsqrt
// CHECK:   gpt.mul
// CHECK:   gpt.mul
// CHECK:   gpt.yield
// CHECK: %[[E:.*]] = gpt.exp %[[F]]#0
// CHECK: return %[[F]]#1, %[[E]]
func.func @rms_epilogue(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %n = gpt.constant dense<8.000000e+00> : tensor<f32>
  %eps = gpt.constant dense<1.000000e-05> : tensor<f32>
  %0 = gpt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %2 = gpt.div %1, %n : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = gpt.add %2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %4 = gpt.rsqrt %3 : tensor<4x1xf32>
  %5 = gpt.mul %x, %4 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %6 = gpt.mul %5, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %7 = gpt.exp %4 : tensor<4x1xf32>
  return %6, %7 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Tests that after a column sum (not a row's) an op of the summed shape starts a kernel
// of its own.
// CHECK-LABEL: func.func @column_sum_then_scale
// CHECK: %[[S:.*]] = gpt.fused %arg0 : (tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK: %[[Y:.*]] = gpt.fused %arg0, %[[S]]
// CHECK:   gpt.mul
// CHECK: return %[[Y]]
func.func @column_sum_then_scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %2 = gpt.mul %x, %1 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %3 = gpt.exp %2 : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// Tests that a sum whose operand is read elsewhere (no prologue) still takes its
// epilogue, and that the sum and an epilogue value used later are both results.
// CHECK-LABEL: func.func @bare_sum_epilogue
// CHECK: %[[Y:.*]] = gpt.mul %arg0, %arg0
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fused %[[Y]] : (tensor<4x8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
// CHECK:   gpt.reduce_sum
// CHECK:   gpt.tanh
// CHECK:   gpt.yield
// CHECK: return %[[Y]], %[[F]]#0, %[[F]]#1
func.func @bare_sum_epilogue(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = gpt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %2 = gpt.tanh %1 : tensor<8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that the ops after a row's sum may read the values it adds (softmax spelled out:
// the exponentials, summed, then divided by the sum): one kernel, which yields only the
// quotient (the code generator computes the exponentials again for it).
// CHECK-LABEL: func.func @softmax_by_hand
// CHECK: %[[F:.*]] = gpt.fused %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:   %[[E:.*]] = gpt.exp
// CHECK:   %[[S:.*]] = gpt.reduce_sum %[[E]]
// CHECK:   %[[Q:.*]] = gpt.div %[[E]], %[[S]]
// CHECK:   gpt.yield %[[Q]]
// CHECK: return %[[F]]
func.func @softmax_by_hand(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.exp %x : tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %2 = gpt.div %0, %1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that when a value the sum adds is read after the kernel, the ops before the sum
// are a kernel of their own (a lone op stays as it is) and the sum starts another.
// CHECK-LABEL: func.func @element_read_later
// CHECK: %[[P:.*]] = gpt.mul %arg0, %arg0
// CHECK-NEXT: %[[F:.*]] = gpt.fused %[[P]] : (tensor<4x8xf32>) -> tensor<4x1xf32> {
// CHECK:   gpt.reduce_sum
// CHECK:   gpt.rsqrt
// CHECK: return %[[P]], %[[F]]
func.func @element_read_later(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %0 = gpt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %2 = gpt.rsqrt %1 : tensor<4x1xf32>
  return %0, %2 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Tests that an op of the row's shape after a row's sum (a vector's sum is a row's) that
// reads nothing the run computes is not its epilogue: the squares of two gradients, each
// summed (a gradient norm's), are two kernels that do not wait for one another, not a
// kernel that sums the first and squares the second and another that sums those.
// CHECK-LABEL: func.func @two_sums_of_squares
// CHECK:      %[[A:.*]] = gpt.fused %arg0 : (tensor<8xf32>) -> tensor<1xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8xf32>):
// CHECK-NEXT:   gpt.mul %[[X]], %[[X]]
// CHECK-NEXT:   gpt.reduce_sum
// CHECK-NEXT:   gpt.yield
// CHECK:      %[[B:.*]] = gpt.fused %arg1 : (tensor<8xf32>) -> tensor<1xf32> {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<8xf32>):
// CHECK-NEXT:   gpt.mul %[[Y]], %[[Y]]
// CHECK-NEXT:   gpt.reduce_sum
// CHECK-NEXT:   gpt.yield
// CHECK:      return %[[A]], %[[B]]
func.func @two_sums_of_squares(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %0 = gpt.mul %a, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  %2 = gpt.mul %b, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = gpt.reduce_sum %2 {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  return %1, %3 : tensor<1xf32>, tensor<1xf32>
}

// -----

// Tests that SwiGLU's silu(x W1), computed before x W3's matmul, moves down past
// it to join the product with x W3: one kernel, with sigmoid and silu as results.
// CHECK-LABEL: func.func @swiglu_sinks
// CHECK: %[[A:.*]] = gpt.matmul %arg0, %arg1
// CHECK-NEXT: %[[B:.*]] = gpt.matmul %arg0, %arg2
// CHECK-NEXT: %[[F:.*]]:3 = gpt.fused %[[A]], %[[B]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gpt.sigmoid
// CHECK-NEXT: gpt.mul
// CHECK-NEXT: gpt.mul
// CHECK-NEXT: gpt.yield
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @swiglu_sinks(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w3: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = gpt.matmul %x, %w1 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = gpt.sigmoid %a : tensor<4x8xf32>
  %silu = gpt.mul %a, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = gpt.matmul %x, %w3 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = gpt.mul %silu, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %silu, %h : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that an elementwise op does not move to a user that continues a run (exp's
// user follows the neg, whose run the exp would split), nor to a user of another shape
// (tanh stays before the matmul).
// CHECK-LABEL: func.func @no_sink
// CHECK: gpt.exp
// CHECK-NEXT: gpt.matmul
// CHECK-NEXT: gpt.fused
// CHECK: gpt.neg
// CHECK-NEXT: gpt.mul
// CHECK-NEXT: gpt.tanh
// CHECK: gpt.yield
// CHECK-NEXT: }
// CHECK-NEXT: gpt.matmul
// CHECK-NEXT: gpt.broadcast
func.func @no_sink(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<2x4x4xf32>) {
  %e = gpt.exp %x : tensor<4x4xf32>
  %m = gpt.matmul %x, %x {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = gpt.neg %m : tensor<4x4xf32>
  %p = gpt.mul %n, %e : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = gpt.tanh %y : tensor<4x4xf32>
  %m2 = gpt.matmul %y, %y {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %bt = gpt.broadcast %t : (tensor<4x4xf32>) -> tensor<2x4x4xf32>
  return %p, %bt : tensor<4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Tests RMSNorm's gradient: dy * w, computed before the column sum of dy * x_hat (the
// weight's gradient), moves past that sum into the row kernel that reads it, so that the
// column sum computes only its own element and dy * w is never stored.
// CHECK-LABEL: func.func @sinks_past_a_column_sum
// CHECK: %[[C:.*]] = gpt.fused %arg0, %arg2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.reduce_sum
// CHECK-NEXT:   gpt.yield
// CHECK: %[[R:.*]] = gpt.fused %arg0, %arg1, %arg3, %arg2 : {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.reduce_sum
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.add
// CHECK-NEXT:   gpt.yield
// CHECK: return %[[C]], %[[R]]
func.func @sinks_past_a_column_sum(%dy: tensor<4x8xf32>, %w: tensor<8xf32>, %xh: tensor<4x8xf32>, %r: tensor<4x1xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %g = gpt.mul %dy, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %p = gpt.mul %dy, %xh : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = gpt.reduce_sum %p {dims = array<i64: 0>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %u = gpt.mul %g, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %v = gpt.mul %g, %xh : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = gpt.reduce_sum %v {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %t = gpt.mul %xh, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %dx = gpt.add %t, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %dx : tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Tests that an op does not move in front of its user where the user joins a row's sum
// as its epilogue (it reads the sum): there it would split that kernel, which now holds
// all four ops.
// CHECK-LABEL: func.func @no_sink_into_a_row_sum
// CHECK: gpt.fused %arg1, %arg2
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.reduce_sum
// CHECK-NEXT:   gpt.mul
// CHECK-NEXT:   gpt.yield
func.func @no_sink_into_a_row_sum(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %g = gpt.mul %y, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sq = gpt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = gpt.reduce_sum %sq {dims = array<i64: 1>, keepdim = true, order = #gpt.order<canonical>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %u = gpt.mul %g, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %u : tensor<4x8xf32>
}
