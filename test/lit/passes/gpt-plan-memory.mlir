// RUN: gptc-opt %s -split-input-file -gpt-plan-memory | FileCheck %s
// RUN: gptc-opt %s -split-input-file -gpt-plan-memory=views=false | FileCheck %s --check-prefix=COPY
// RUN: gptc-opt %s -split-input-file -gpt-plan-memory=redzone=100 | FileCheck %s --check-prefix=REDZONE

// Tests that a slot is reused once its last reader has run.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: gpt.arena_bytes = 128 : i64
// CHECK: %[[A:.*]] = gpt.exp %arg0 {gpt.offsets = array<i64: 0>}
// CHECK: %[[B:.*]] = gpt.exp %[[A]] {gpt.offsets = array<i64: 64>}
// CHECK: gpt.exp %[[B]] {gpt.offsets = array<i64: 0>}
// With redzones (gptc compile --sanitize) no slot is reused, and 128 bytes (100 rounded
// up to 64) lie before, between and after the buffers.
// REDZONE-LABEL: func.func @chain
// REDZONE-SAME: gpt.arena_bytes = 704 : i64, gpt.redzone = 128 : i64
// REDZONE: %[[A:.*]] = gpt.exp %arg0 {gpt.offsets = array<i64: 128>}
// REDZONE: %[[B:.*]] = gpt.exp %[[A]] {gpt.offsets = array<i64: 320>}
// REDZONE: gpt.exp %[[B]] {gpt.offsets = array<i64: 512>}
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

// -----

// Tests that an update that also reads its parameter through a strided view (here its
// transpose, gpt-strided-views' mark) is not written in place: it reads elements other
// than the one it writes, which an in-place update would have overwritten.
// CHECK-LABEL: func.func @update_reads_a_view
// CHECK: gpt.fused %arg0, %arg1, %{{.*}} {gpt.offsets = array<i64: 0>}
func.func @update_reads_a_view(%p: tensor<4x4xf32> {gpt.kind = "param", gpt.name = "p"}, %g: tensor<4x4xf32>) -> (tensor<4x4xf32> {gpt.name = "p", gpt.updates = "p"}) {
  %t = gpt.transpose %p {gpt.strided, perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = gpt.fused %p, %g, %t : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>):
    %x = gpt.sub %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = gpt.add %x, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    gpt.yield %y : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// Tests the fused q/k/v projection's split that attention alone reads, a strided view
// (as gpt-strided-views leaves it): no slot of its own, the operand's slot live until the
// gradient's last read. And the concat of dq, dk and dv that attention_grad writes in
// place, gathered (as gpt-strided-views leaves it): its slot (48 floats) taken by
// attention_grad, each gradient given the whole slot (codegen writes each at its
// columns). Neither is a kernel.
// CHECK-LABEL: func.func @qkv_views
// CHECK-SAME: gpt.arena_bytes = 512 : i64
// CHECK: %[[QKV:.*]] = gpt.exp %arg0 {gpt.offsets = array<i64: 0>}
// CHECK: gpt.split %[[QKV]] {dim = 2 : i64, gpt.strided}
// CHECK: gpt.attention {{.*}}gpt.offsets = array<i64: 192, 256>
// CHECK: gpt.attention_grad {{.*}}gpt.offsets = array<i64: 320, 320, 320>
// CHECK: gpt.concat {{.*}} {dim = 2 : i64, gpt.gathered, gpt.offsets = array<i64: 320>}
func.func @qkv_views(%x: tensor<1x4x12xf32>, %g: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x12xf32>) {
  %qkv = gpt.exp %x : tensor<1x4x12xf32>
  %q, %k, %v = gpt.split %qkv {dim = 2 : i64, gpt.strided} : (tensor<1x4x12xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  %q4 = gpt.reshape %q : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %k4 = gpt.reshape %k : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %v4 = gpt.reshape %v : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %y, %stats = gpt.attention %q4, %k4, %v4 {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>)
  %dq, %dk, %dv = gpt.attention_grad %q4, %k4, %v4, %g, %stats {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>)
  %dq3 = gpt.reshape %dq : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dk3 = gpt.reshape %dk : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dv3 = gpt.reshape %dv : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %cat = gpt.concat %dq3, %dk3, %dv3 {dim = 2 : i64, gpt.gathered} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x12xf32>
  return %y, %cat : tensor<1x4x2x2xf32>, tensor<1x4x12xf32>
}

// -----

// Tests that a split no pass made a strided view is a kernel, and that a gradient read
// elsewhere keeps the concat one: each piece then has a slot of its own.
// CHECK-LABEL: func.func @not_views
// CHECK-NOT: gpt.view
// CHECK: gpt.split {{.*}} {dim = 2 : i64, gpt.offsets = array<i64: 192, 256, 320>}
// CHECK-NOT: gpt.view
func.func @not_views(%x: tensor<1x4x12xf32>, %g: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x4xf32>, tensor<1x4x12xf32>, tensor<1x4x2x2xf32>) {
  %qkv = gpt.exp %x : tensor<1x4x12xf32>
  %q, %k, %v = gpt.split %qkv {dim = 2 : i64} : (tensor<1x4x12xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  %e = gpt.exp %q : tensor<1x4x4xf32>
  %q4 = gpt.reshape %q : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %k4 = gpt.reshape %k : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %v4 = gpt.reshape %v : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %y, %stats = gpt.attention %q4, %k4, %v4 {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>)
  %dq, %dk, %dv = gpt.attention_grad %q4, %k4, %v4, %g, %stats {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>)
  %dq3 = gpt.reshape %dq : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dk3 = gpt.reshape %dk : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dv3 = gpt.reshape %dv : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %cat = gpt.concat %dq3, %dk3, %dv3 {dim = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x12xf32>
  return %y, %e, %cat, %dk : tensor<1x4x2x2xf32>, tensor<1x4x4xf32>, tensor<1x4x12xf32>, tensor<1x4x2x2xf32>
}

// -----

// Tests that a concat of vectors whose pieces their kernels compute for it alone (a
// gradient norm's per-tensor sums, one through a reshape of a scalar) is a view: each
// piece written at its place in the concat's slot, taken when the first is computed, and
// the concat no kernel. A piece read elsewhere too keeps it a copy.
// CHECK-LABEL: func.func @vector_concat
// CHECK-SAME: gpt.arena_bytes = 128 : i64
// CHECK: gpt.reduce_sum %arg0 {{.*}}gpt.offsets = array<i64: 0>
// CHECK: gpt.reduce_sum %arg1 {{.*}}gpt.offsets = array<i64: 4>
// CHECK: gpt.exp %arg0 {gpt.offsets = array<i64: 64>}
// CHECK: gpt.reduce_sum {{.*}}gpt.offsets = array<i64: 8>
// CHECK: gpt.concat {{.*}} {dim = 0 : i64, gpt.offsets = array<i64: 0>, gpt.view}
// CHECK: gpt.sqrt {{.*}} {gpt.offsets = array<i64: 64>}
// COPY-LABEL: func.func @vector_concat
// COPY-NOT: gpt.view
func.func @vector_concat(%a: tensor<8xf32>, %b: tensor<4x2xf32>) -> tensor<3xf32> {
  %0 = gpt.reduce_sum %a {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  %1 = gpt.reduce_sum %b {dims = array<i64: 0, 1>, keepdim = false, order = #gpt.order<canonical>} : (tensor<4x2xf32>) -> tensor<f32>
  %2 = gpt.reshape %1 : (tensor<f32>) -> tensor<1xf32>
  %3 = gpt.exp %a : tensor<8xf32>
  %4 = gpt.reduce_sum %3 {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  %cat = gpt.concat %0, %2, %4 {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
  %5 = gpt.sqrt %cat : tensor<3xf32>
  return %5 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @vector_concat_read_elsewhere
// CHECK-NOT: gpt.view
func.func @vector_concat_read_elsewhere(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2xf32>, tensor<1xf32>) {
  %0 = gpt.reduce_sum %a {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  %1 = gpt.reduce_sum %b {dims = array<i64: 0>, keepdim = true, order = #gpt.order<canonical>} : (tensor<8xf32>) -> tensor<1xf32>
  %cat = gpt.concat %0, %1 {dim = 0 : i64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %cat, %1 : tensor<2xf32>, tensor<1xf32>
}
