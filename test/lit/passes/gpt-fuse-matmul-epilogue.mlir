// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-fuse-matmul-epilogue{gelu-grad=true}))" | gptc-opt -split-input-file | FileCheck %s
// RUN: gptc-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(gpt-fuse-matmul-epilogue))" | FileCheck %s --check-prefix=NOGELU

// Tests that a residual add of a matmul's only use becomes the matmul's addend,
// whichever side of the add the matmul is on, and that the printed form
// (`plus`) parses back.
// CHECK-LABEL: func.func @residual
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %arg1, %arg2 plus %arg0 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[N:.*]] = gpt.matmul %arg1, %arg2 plus %[[M]] {{.*}} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: return %[[N]]
func.func @residual(%r: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %w: tensor<4x16xf32>) -> tensor<2x8x4xf32> {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %1 = gpt.add %r, %0 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %2 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %3 = gpt.add %2, %1 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %3 : tensor<2x8x4xf32>
}

// -----

// Tests what stays unfused: a matmul with another user (its product is needed
// alone), a broadcast addend that is not a bias (one value per row), and an add
// of a matmul to itself.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: plus
// CHECK-NOT: bias
// CHECK: return
func.func @kept(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<8x1xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %1 = gpt.add %0, %0 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %3 = gpt.add %2, %b : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
  %4 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %5 = gpt.add %4, %1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %3, %4, %5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Tests a linear layer's chain folding step by step into one matmul: the bias add
// (the [N] vector on either side), a training dropout (its rng, p and id), then
// the residual add; and a bias alone, whose result goes on to a GELU.
// CHECK-LABEL: func.func @bias_dropout_residual
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %arg1, %arg2 bias %arg3 dropout %arg4 plus %arg0 {dropout_id = 3 : i64, dropout_p = 1.000000e-01 : f64, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<2xi64>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[H:.*]] = gpt.matmul %arg1, %arg2 bias %arg3 {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[G:.*]] = gpt.gelu %[[H]]
// CHECK-NEXT: return %[[M]], %[[G]]
func.func @bias_dropout_residual(%r: tensor<2x8x4xf32>, %x: tensor<2x8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>, %rng: tensor<2xi64>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %1 = gpt.add %b, %0 : (tensor<4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %2 = gpt.dropout %1, %rng {id = 3 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<2x8x4xf32>, tensor<2xi64>) -> tensor<2x8x4xf32>
  %3 = gpt.add %r, %2 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %4 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %5 = gpt.add %4, %b : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
  %6 = gpt.gelu %5 {approximate = #gpt.approximate<none>} : tensor<2x8x4xf32>
  return %3, %6 : tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// -----

// Tests the order and the single uses: a bias after a residual add is an
// elementwise add (the epilogue adds the bias first), a dropout whose input has
// another user stays, and so does a dropout with no rng (evaluation).
// CHECK-LABEL: func.func @out_of_order
// CHECK-NEXT: %[[M:.*]] = gpt.matmul %arg1, %arg2 plus %arg0 {{.*}} -> tensor<8x4xf32>
// CHECK-NEXT: gpt.add %[[M]], %arg3
// CHECK-NEXT: %[[N:.*]] = gpt.matmul %arg1, %arg2 {{{.*}}} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: gpt.dropout %[[N]], %arg4
// CHECK-NEXT: gpt.add %[[N]], %arg0
// CHECK-NEXT: %[[E:.*]] = gpt.matmul %arg1, %arg2 {{{.*}}} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: gpt.dropout %[[E]] {{{.*}}train = false}
// CHECK-NEXT: return
func.func @out_of_order(%r: tensor<8x4xf32>, %x: tensor<8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>, %rng: tensor<2xi64>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %1 = gpt.add %0, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = gpt.add %1, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %3 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %4 = gpt.dropout %3, %rng {id = 0 : i64, p = 1.000000e-01 : f64, train = true} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<8x4xf32>
  %5 = gpt.add %3, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %6 = gpt.matmul %x, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %7 = gpt.dropout %6 {id = 1 : i64, p = 1.000000e-01 : f64, train = false} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %2, %4, %5, %7 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Tests a GELU's input gradient whose incoming gradient is a product (dY W in an MLP's
// backward), with gelu-grad (the GPU targets): it becomes the product's last epilogue
// step at x, with the kept erf where there is one, in the tanh form too, and in the
// product's place (its x is defined before it), so the products keep their order. It
// stays a kernel of its own where the product has another user, or where the product is
// x rather than the gradient; and without gelu-grad (the CPU's pipeline).
// NOGELU-LABEL: func.func @gelu_grad
// NOGELU-NOT:   gpt.matmul {{.*}}gelu_grad
// NOGELU:       return
// CHECK-LABEL: func.func @gelu_grad
// CHECK-NEXT: %[[A:.*]] = gpt.matmul %arg2, %arg3 gelu_grad %arg0 erf %arg1 {gelu_approximate = #gpt.approximate<none>, order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = gpt.matmul %arg2, %arg3 gelu_grad %arg0 {gelu_approximate = #gpt.approximate<tanh>, {{.*}}} : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[W:.*]] = gpt.matmul %arg2, %arg2 {{{.*}}transpose_lhs = true
// CHECK-NEXT: %[[C:.*]] = gpt.matmul %arg2, %arg3 {{{.*}}} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: gpt.gelu_grad %[[C]], %arg0
// CHECK-NEXT: %[[D:.*]] = gpt.matmul %arg2, %arg3 {{{.*}}} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: gpt.gelu_grad %arg0, %[[D]]
// CHECK-NEXT: return %[[A]], %[[B]], %[[W]]
func.func @gelu_grad(%x: tensor<8x16xf32>, %e: tensor<8x16xf32>, %dy: tensor<8x4xf32>, %w: tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<4x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = gpt.matmul %dy, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %1 = gpt.matmul %dy, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %2 = gpt.matmul %dy, %dy {order = #gpt.order<sequential>, transpose_lhs = true, transpose_rhs = false} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %3 = gpt.gelu_grad %0, %x erf %e {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = gpt.gelu_grad %1, %x {approximate = #gpt.approximate<tanh>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = gpt.matmul %dy, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %6 = gpt.gelu_grad %5, %x {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %7 = gpt.matmul %dy, %w {order = #gpt.order<sequential>, transpose_lhs = false, transpose_rhs = false} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %8 = gpt.gelu_grad %x, %7 {approximate = #gpt.approximate<none>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %3, %4, %2, %6, %5, %8 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<4x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
