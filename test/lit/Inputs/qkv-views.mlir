// The fused q/k/v projection ([1, 4, 12]: q, k, v of 2 heads of 2, each row 12 floats)
// split for attention and its gradient, and dq, dk, dv joined again: at -O3 a strided view
// and a gathered concat (gpt-strided-views), neither a kernel.
func.func @qkv_views(%x: tensor<1x4x12xf32>, %g: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x12xf32>) {
  %qkv = gpt.exp %x : tensor<1x4x12xf32>
  %q, %k, %v = gpt.split %qkv {dim = 2 : i64} : (tensor<1x4x12xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  %q4 = gpt.reshape %q : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %k4 = gpt.reshape %k : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %v4 = gpt.reshape %v : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %y, %stats = gpt.attention %q4, %k4, %v4 {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>)
  %dq, %dk, %dv = gpt.attention_grad %q4, %k4, %v4, %g, %stats {bthd = array<i1: true, true, true, true>, dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>)
  %dq3 = gpt.reshape %dq : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dk3 = gpt.reshape %dk : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %dv3 = gpt.reshape %dv : (tensor<1x4x2x2xf32>) -> tensor<1x4x4xf32>
  %cat = gpt.concat %dq3, %dk3, %dv3 {dim = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x12xf32>
  return %y, %cat : tensor<1x4x2x2xf32>, tensor<1x4x12xf32>
}
