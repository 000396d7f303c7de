// RUN: gptc-opt %s --pass-pipeline="builtin.module(func.func(gpt-adamw{beta1=0.9 beta2=0.99 eps=1e-8 weight-decay=0.1 grad-clip=1.0}))" | FileCheck %s

// Tests the optimizer IR: new inputs lr/step, one state argument per moment,
// the clipping coefficient, decay only for the 2-D tensor, in-place updates
// and the per-parameter gradient norms.

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f64> {gpt.kind = "input", gpt.name = "lr"}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<f64> {gpt.kind = "input", gpt.name = "step"}
// CHECK-SAME: {gpt.kind = "state", gpt.name = "exp_avg.w"}
// CHECK-SAME: {gpt.kind = "state", gpt.name = "exp_avg_sq.w"}
// CHECK-SAME: {gpt.kind = "state", gpt.name = "exp_avg.b"}
// CHECK-SAME: {gpt.kind = "state", gpt.name = "exp_avg_sq.b"}
// CHECK-SAME: -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.name = "w", gpt.updates = "w"}, tensor<4x4xf32> {gpt.name = "exp_avg.w", gpt.updates = "exp_avg.w"}, tensor<4x4xf32> {gpt.name = "exp_avg_sq.w", gpt.updates = "exp_avg_sq.w"}, tensor<4xf32> {gpt.name = "b", gpt.updates = "b"}, tensor<4xf32> {gpt.name = "exp_avg.b", gpt.updates = "exp_avg.b"}, tensor<4xf32> {gpt.name = "exp_avg_sq.b", gpt.updates = "exp_avg_sq.b"}, tensor<2xf32> {gpt.name = "grad_norms"})
// Each tensor's norm and its square right after its sum, gathered; the total from the
// squares; the clipping coefficient min(1 / (total + 1e-6), 1):
// CHECK: %[[SW:.*]] = gpt.reduce_sum %{{.*}} {dims = array<i64: 0, 1>
// CHECK: %[[NW:.*]] = gpt.sqrt %[[SW]] : tensor<f32>
// CHECK: %[[QW:.*]] = gpt.mul %[[NW]], %[[NW]]
// CHECK: %[[SB:.*]] = gpt.reduce_sum %{{.*}} {dims = array<i64: 0>
// CHECK: %[[NB:.*]] = gpt.sqrt %[[SB]] : tensor<f32>
// CHECK: %[[QB:.*]] = gpt.mul %[[NB]], %[[NB]]
// CHECK: %[[NORMS:.*]] = gpt.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// CHECK: %[[SQ:.*]] = gpt.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// CHECK: gpt.reduce_sum %[[SQ]] {dims = array<i64: 0>
// CHECK: gpt.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: gpt.min
// Bias corrections in f64:
// CHECK: gpt.pow %{{.*}}, %[[STEP]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
// CHECK: gpt.convert %{{.*}} : tensor<f64> -> tensor<f32>
// Decay for the 2-D weight only:
// CHECK: %[[DECAYED:.*]] = gpt.mul %arg0, %{{.*}} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK: %[[NEWW:.*]] = gpt.add %[[DECAYED]], %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: gpt.mul %arg1, %{{.*}} : (tensor<4xf32>, tensor<f32>)
// CHECK: %[[NEWB:.*]] = gpt.add %arg1, %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[NEWW]], %{{.*}}, %{{.*}}, %[[NEWB]], %{{.*}}, %{{.*}}, %[[NORMS]]
func.func @step(%w: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}, %b: tensor<4xf32> {gpt.kind = "param", gpt.name = "b"}, %gw: tensor<4x4xf32>, %gb: tensor<4xf32>, %loss: tensor<f32>) -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.grad_of = "w"}, tensor<4xf32> {gpt.grad_of = "b"}) {
  return %loss, %gw, %gb : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>
}

// A parameter that gpt-autodiff found no gradient for (unused, or used only through a
// detach) is left as it is: no moments, no decay, no update, as torch.optim skips a
// parameter whose .grad is None (it was decayed). Its norm is still reported, as 0.
// CHECK-LABEL: func.func @unreached
// CHECK-SAME: {gpt.kind = "state", gpt.name = "exp_avg_sq.w"}) -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.name = "w", gpt.updates = "w"}, tensor<4x4xf32> {gpt.name = "exp_avg.w", gpt.updates = "exp_avg.w"}, tensor<4x4xf32> {gpt.name = "exp_avg_sq.w", gpt.updates = "exp_avg_sq.w"}, tensor<2xf32> {gpt.name = "grad_norms"})
// CHECK-NOT: gpt.mul %arg1,
// CHECK: return
func.func @unreached(%w: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}, %u: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "u"}, %gw: tensor<4x4xf32>, %gu: tensor<4x4xf32>, %loss: tensor<f32>) -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.grad_of = "w"}, tensor<4x4xf32> {gpt.grad_of = "u", gpt.no_gradient}) {
  return %loss, %gw, %gu : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// RUN: gptc-opt %s --pass-pipeline="builtin.module(func.func(gpt-adamw{accumulated=4 grad-clip=1.0}))" | FileCheck %s --check-prefix=ACC
// With accumulated=N the gradients are the grad.<p> states over N, the first thing
// computed (so the norms and the clipping see the scaled sums, as PyTorch's after a
// loss divided by N); the loss, the forward (here its product and sum) and the inputs
// only the forward read (x) are gone.
// ACC-LABEL: func.func @forward_too
// ACC-SAME: (%arg0: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}, %arg1: tensor<4x4xf32>, %[[ACC:[a-z0-9]+]]: tensor<4x4xf32> {gpt.kind = "state", gpt.name = "grad.w"}, %{{.*}}: tensor<f64> {gpt.kind = "input", gpt.name = "lr"}
// ACC-SAME: -> (tensor<4x4xf32> {gpt.name = "w", gpt.updates = "w"}, tensor<4x4xf32> {gpt.name = "exp_avg.w", gpt.updates = "exp_avg.w"}, tensor<4x4xf32> {gpt.name = "exp_avg_sq.w", gpt.updates = "exp_avg_sq.w"}, tensor<1xf32> {gpt.name = "grad_norms"})
// ACC-NEXT: %[[QUARTER:.*]] = gpt.constant dense<2.500000e-01> : tensor<f32>
// ACC-NEXT: %[[G:.*]] = gpt.mul %[[ACC]], %[[QUARTER]]
// ACC-NEXT: gpt.mul %[[G]], %[[G]]
// ACC-NOT: %arg1
// ACC: return
func.func @forward_too(%w: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}, %x: tensor<4x4xf32> {gpt.kind = "input", gpt.name = "x"}, %gw: tensor<4x4xf32>) -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.grad_of = "w"}) {
  %0 = gpt.mul %w, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = gpt.reduce_sum %0 {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x4xf32>) -> tensor<f32>
  return %1, %gw : tensor<f32>, tensor<4x4xf32>
}
