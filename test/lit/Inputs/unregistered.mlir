func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "foo.bar"(%x) : (tensor<4xf32>) -> i32
  return %x : tensor<4xf32>
}
