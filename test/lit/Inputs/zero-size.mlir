module {
  func.func @forward(%arg0: tensor<16x8xf32> {gpt.kind = "param", gpt.name = "fc.weight"}, %arg1: tensor<0x8xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<f32> {gpt.name = "loss"}) {
    %0 = "torch.aten.linear.default"(%arg1, %arg0) {torch.operands = ["input", "weight"]} : (tensor<0x8xf32>, tensor<16x8xf32>) -> tensor<0x16xf32> loc("model.py":10:0)
    %1 = "torch.aten.sum.default"(%0) {torch.operands = ["self"]} : (tensor<0x16xf32>) -> tensor<f32> loc("model.py":11:0)
    return %1 : tensor<f32>
  }
}
