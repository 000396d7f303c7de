func.func @forward(%a: tensor<4x8xf32>, %b: tensor<5xf32>) -> tensor<4x8xf32> {
  %0 = gpt.add %a, %b : (tensor<4x8xf32>, tensor<5xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
