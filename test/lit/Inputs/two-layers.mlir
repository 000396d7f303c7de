module {
  func.func @forward(%w1: tensor<16x16xf32> {gpt.kind = "param", gpt.name = "l1.weight"}, %b1: tensor<16xf32> {gpt.kind = "param", gpt.name = "l1.bias"}, %w2: tensor<16x16xf32> {gpt.kind = "param", gpt.name = "l2.weight"}, %b2: tensor<16xf32> {gpt.kind = "param", gpt.name = "l2.bias"}, %x: tensor<4x16xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<4x16xf32> {gpt.name = "y"}) {
    %0 = "torch.aten.linear.default"(%x, %w1, %b1) {torch.operands = ["input", "weight", "bias"]} : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("model.py":10:0)
    %1 = "torch.aten.tanh.default"(%0) {torch.operands = ["self"]} : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("model.py":11:0)
    %2 = "torch.aten.linear.default"(%1, %w2, %b2) {torch.operands = ["input", "weight", "bias"]} : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("model.py":12:0)
    %3 = "torch.aten.tanh.default"(%2) {torch.operands = ["self"]} : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("model.py":13:0)
    return %3 : tensor<4x16xf32>
  }
}
