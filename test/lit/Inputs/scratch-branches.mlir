// Two attention gradients (each using the CUDA families' scratch) and an exp that reads
// neither: one gpt.horizontal group of three independent members.
func.func @scratch_branches(%q: tensor<1x2x4x2xf32>, %g: tensor<1x2x4x2xf32>, %st: tensor<1x2x4x2xf32>, %x: tensor<8xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<8xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) {
  %dq, %dk, %dv = gpt.attention_grad %q, %q, %q, %g, %st {dropout_p = 0.0 : f64, id = 0 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  %e = gpt.exp %x : tensor<8xf32>
  %dq2, %dk2, %dv2 = gpt.attention_grad %g, %g, %g, %q, %st {dropout_p = 0.0 : f64, id = 1 : i64, is_causal = true, order = #gpt.order<online_block32>, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  return %dq, %dk, %dv, %e, %dq2, %dk2, %dv2 : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<8xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
}
