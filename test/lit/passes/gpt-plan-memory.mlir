// RUN: gptc-opt %s -split-input-file -gpt-plan-memory | FileCheck %s

// Tests that a slot is reused once its last reader has run.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: gpt.arena_bytes = 128 : i64
// CHECK: %[[A:.*]] = gpt.exp %arg0 {gpt.offsets = array<i64: 0>}
// CHECK: %[[B:.*]] = gpt.exp %[[A]] {gpt.offsets = array<i64: 64>}
// CHECK: gpt.exp %[[B]] {gpt.offsets = array<i64: 0>}
func.func @chain(%a: tensor<16xf32>) -> tensor<16xf32> {
  %0 = gpt.exp %a : tensor<16xf32>
  %1 = gpt.exp %0 : tensor<16xf32>
  %2 = gpt.exp %1 : tensor<16xf32>
  return %2 : tensor<16xf32>
}

// -----

// Tests that an op's result never shares memory with its own operands, and
// that a value stays live until its last reader.
// CHECK-LABEL: func.func @live
// CHECK-SAME: gpt.arena_bytes = 192 : i64
// CHECK: gpt.exp %arg0 {gpt.offsets = array<i64: 0>}
// CHECK: gpt.exp %{{.*}} {gpt.offsets = array<i64: 64>}
// CHECK: gpt.add {{.*}} {gpt.offsets = array<i64: 128>}
func.func @live(%a: tensor<16xf32>) -> tensor<16xf32> {
  %0 = gpt.exp %a : tensor<16xf32>
  %1 = gpt.exp %0 : tensor<16xf32>
  %2 = gpt.add %0, %1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %2 : tensor<16xf32>
}

// -----

// Tests that a reshape aliases its input (no slot of its own) and keeps the
// input's slot alive while the reshape is read; constants get no slot.
// CHECK-LABEL: func.func @alias
// CHECK: %[[E:.*]] = gpt.exp %arg0 {gpt.offsets = array<i64: 0>}
// CHECK: %[[R:.*]] = gpt.reshape %[[E]] :
// CHECK: gpt.constant
// CHECK-NOT: gpt.offsets
// CHECK: gpt.exp %arg0 {gpt.offsets = array<i64: 64>}
// CHECK: gpt.add %[[R]], {{.*}} {gpt.offsets = array<i64: 128>}
func.func @alias(%a: tensor<16xf32>) -> tensor<4x4xf32> {
  %0 = gpt.exp %a : tensor<16xf32>
  %1 = gpt.reshape %0 : (tensor<16xf32>) -> tensor<4x4xf32>
  %c = gpt.constant dense<1.0> : tensor<f32>
  %2 = gpt.exp %a : tensor<16xf32>
  %3 = gpt.reshape %2 : (tensor<16xf32>) -> tensor<4x4xf32>
  %4 = gpt.add %1, %3 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %5 = gpt.add %4, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %5 : tensor<4x4xf32>
}

// -----

// Tests that freed neighbours merge into one block that a larger tensor fits.
// CHECK-LABEL: func.func @merge
// CHECK: gpt.exp %arg0 {gpt.offsets = array<i64: 0>} : tensor<16xf32>
// CHECK: gpt.exp %arg0 {gpt.offsets = array<i64: 64>} : tensor<16xf32>
// CHECK: gpt.add {{.*}} {gpt.offsets = array<i64: 128>}
// CHECK: gpt.broadcast {{.*}} {gpt.offsets = array<i64: 0>} : (tensor<16xf32>) -> tensor<2x16xf32>
func.func @merge(%a: tensor<16xf32>) -> tensor<2x16xf32> {
  %0 = gpt.exp %a : tensor<16xf32>
  %1 = gpt.exp %a : tensor<16xf32>
  %2 = gpt.add %0, %1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %3 = gpt.broadcast %2 : (tensor<16xf32>) -> tensor<2x16xf32>
  return %3 : tensor<2x16xf32>
}

// -----

// Tests in-place updates: an elementwise kernel that reads a parameter at the
// index it writes, with nothing reading the old value afterwards, writes the
// update into the argument (gpt.in_place; no arena slot). The moment %m is
// read again after its update, so that update gets a slot.
// CHECK-LABEL: func.func @updates
// CHECK: %[[P:.*]] = gpt.fused %arg0, %arg2 {gpt.in_place = array<i64: 0>, gpt.offsets = array<i64: -1>}
// CHECK: %[[M:.*]] = gpt.fused %arg1, %arg2 {gpt.offsets = array<i64: 0>}
// CHECK: gpt.neg %arg1 {gpt.offsets = array<i64: 64>}
func.func @updates(%p: tensor<8xf32> {gpt.kind = "param", gpt.name = "p"}, %m: tensor<8xf32> {gpt.kind = "state", gpt.name = "m"}, %g: tensor<8xf32>) -> (tensor<8xf32> {gpt.name = "p", gpt.updates = "p"}, tensor<8xf32> {gpt.name = "m", gpt.updates = "m"}, tensor<8xf32>) {
  %0 = gpt.fused %p, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %x = gpt.sub %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    gpt.yield %x : tensor<8xf32>
  }
  %1 = gpt.fused %m, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %x = gpt.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    gpt.yield %x : tensor<8xf32>
  }
  %2 = gpt.neg %m : tensor<8xf32>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
