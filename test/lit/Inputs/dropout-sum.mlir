module {
  func.func @forward(%arg0: tensor<16xf32> {gpt.kind = "param", gpt.name = "scale"}, %arg1: tensor<4x16xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<f32> {gpt.name = "loss"}) {
    %0 = "torch.aten.mul.Tensor"(%arg1, %arg0) {torch.operands = ["self", "other"]} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("model.py":20:0)
    %1 = "torch.aten.dropout.default"(%0) {torch.operands = ["input"], p = 0.1 : f64, train = true} : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("model.py":21:0)
    %2 = "torch.aten.add.Tensor"(%arg1, %1) {torch.operands = ["self", "other"]} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> loc("model.py":22:0)
    %3 = "torch.aten.sum.default"(%2) {torch.operands = ["self"]} : (tensor<4x16xf32>) -> tensor<f32> loc("model.py":23:0)
    return %3 : tensor<f32>
  }
}
