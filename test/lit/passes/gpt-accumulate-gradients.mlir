// RUN: gptc-opt %s --pass-pipeline="builtin.module(func.func(gpt-accumulate-gradients))" --split-input-file --verify-diagnostics | FileCheck %s

// Each reached gradient goes into its state grad.<p>: first ? g : acc + g, updated in
// place; one input `first`; the loss stays; an unreached parameter's zeros are dropped.
// CHECK-LABEL: func.func @micro
// CHECK-SAME: %[[FIRST:[a-z0-9]+]]: tensor<i1> {gpt.kind = "input", gpt.name = "first"}
// CHECK-SAME: %[[AW:[a-z0-9]+]]: tensor<4x4xf32> {gpt.kind = "state", gpt.name = "grad.w"}
// CHECK-SAME: %[[AB:[a-z0-9]+]]: tensor<4xf32> {gpt.kind = "state", gpt.name = "grad.b"}
// CHECK-SAME: -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.name = "grad.w", gpt.updates = "grad.w"}, tensor<4xf32> {gpt.name = "grad.b", gpt.updates = "grad.b"})
// CHECK: %[[SW:.*]] = gpt.add %[[AW]], %arg3
// CHECK: %[[W:.*]] = gpt.where %[[FIRST]], %arg3, %[[SW]] : (tensor<i1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[SB:.*]] = gpt.add %[[AB]], %arg4
// CHECK: %[[B:.*]] = gpt.where %[[FIRST]], %arg4, %[[SB]]
// CHECK: return %arg6, %[[W]], %[[B]]
func.func @micro(%w: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "w"}, %b: tensor<4xf32> {gpt.kind = "param", gpt.name = "b"}, %u: tensor<4xf32> {gpt.kind = "param", gpt.name = "u"}, %gw: tensor<4x4xf32>, %gb: tensor<4xf32>, %gu: tensor<4xf32>, %loss: tensor<f32>) -> (tensor<f32> {gpt.name = "loss"}, tensor<4x4xf32> {gpt.grad_of = "w"}, tensor<4xf32> {gpt.grad_of = "b"}, tensor<4xf32> {gpt.grad_of = "u", gpt.no_gradient}) {
  return %loss, %gw, %gb, %gu : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{gpt-accumulate-gradients: no gradients to accumulate (gpt-autodiff did not run)}}
func.func @forward(%w: tensor<4xf32> {gpt.kind = "param", gpt.name = "w"}) -> (tensor<4xf32> {gpt.name = "y"}) {
  return %w : tensor<4xf32>
}
