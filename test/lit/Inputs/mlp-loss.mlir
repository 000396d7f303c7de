module {
  func.func @forward(%arg0: tensor<16x8xf32> {gpt.kind = "param", gpt.name = "fc.weight"}, %arg1: tensor<8x16xf32> {gpt.kind = "param", gpt.name = "proj.weight"}, %arg2: tensor<4x8xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<f32> {gpt.name = "loss"}) {
    %0 = "torch.aten.linear.default"(%arg2, %arg0) {torch.operands = ["input", "weight"]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32> loc("model.py":10:0)
    %1 = "torch.aten.gelu.default"(%0) {torch.operands = ["self"], approximate = "none"} : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("model.py":11:0)
    %2 = "torch.aten.linear.default"(%1, %arg1) {torch.operands = ["input", "weight"]} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32> loc("model.py":12:0)
    %3 = "torch.aten.sum.default"(%2) {torch.operands = ["self"]} : (tensor<4x8xf32>) -> tensor<f32> loc("model.py":13:0)
    return %3 : tensor<f32>
  }
}
