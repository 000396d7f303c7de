// RUN: gptc-opt %s --pass-pipeline="builtin.module(func.func(gpt-promote-f64))" | FileCheck %s

// Tests that every f32 tensor becomes f64, constants widened exactly, and
// other element types (indices) untouched.
// CHECK-LABEL: func.func @f
// CHECK-SAME: (%arg0: tensor<4xf64>, %arg1: tensor<4xi64>) -> tensor<4xf64>
// CHECK: gpt.constant dense<0.10000000149011612> : tensor<f64>
// CHECK-NOT: f32
func.func @f(%a: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  %c = gpt.constant dense<0.100000001> : tensor<f32>
  %0 = gpt.mul %a, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = gpt.convert %i : tensor<4xi64> -> tensor<4xf32>
  %2 = gpt.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
