module {
  func.func @forward(%arg0: tensor<3x5xf32> {gpt.kind = "param", gpt.name = "w"}, %arg1: tensor<2x6xi64> {gpt.kind = "input", gpt.name = "mask"}) -> (tensor<f32> {gpt.name = "loss"}, tensor<2x6xi64> {gpt.name = "positions"}) {
    %0 = "torch.aten.cumsum.default"(%arg1) {torch.operands = ["self"], dim = 1 : i64} : (tensor<2x6xi64>) -> tensor<2x6xi64> loc("model.py":3:0)
    %1 = "torch.aten.mul.Tensor"(%0, %arg1) {torch.operands = ["self", "other"]} : (tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6xi64> loc("model.py":3:0)
    %2 = "torch.aten.cumsum.default"(%arg0) {torch.operands = ["self"], dim = 0 : i64} : (tensor<3x5xf32>) -> tensor<3x5xf32> loc("model.py":4:0)
    %3 = "torch.aten.mul.Tensor"(%2, %2) {torch.operands = ["self", "other"]} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32> loc("model.py":5:0)
    %4 = "torch.aten.sum.default"(%3) {torch.operands = ["self"]} : (tensor<3x5xf32>) -> tensor<f32> loc("model.py":5:0)
    return %4, %1 : tensor<f32>, tensor<2x6xi64>
  }
}
