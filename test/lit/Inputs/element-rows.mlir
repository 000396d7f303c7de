module {
  func.func @forward(%arg0: tensor<2x64x16xf32> {gpt.kind = "input", gpt.name = "x"}, %arg1: tensor<16xf32> {gpt.kind = "param", gpt.name = "b"}, %arg2: tensor<128x16xf32> {gpt.kind = "input", gpt.name = "x2"}, %arg3: tensor<1xf32> {gpt.kind = "input", gpt.name = "s"}, %arg4: tensor<2x64x32xf32> {gpt.kind = "input", gpt.name = "z"}, %arg5: tensor<2x16x16xf32> {gpt.kind = "input", gpt.name = "y"}) -> (tensor<2x64x16xf32> {gpt.name = "biased"}, tensor<128x16xf32> {gpt.name = "tanh_biased"}, tensor<2x64x32xf32> {gpt.name = "scaled"}, tensor<2x16x16xf32> {gpt.name = "few_rows"}) {
    %0 = "torch.aten.add.Tensor"(%arg0, %arg1) {torch.operands = ["self", "other"]} : (tensor<2x64x16xf32>, tensor<16xf32>) -> tensor<2x64x16xf32> loc("model.py":3:0)
    %1 = "torch.aten.add.Tensor"(%arg2, %arg1) {torch.operands = ["self", "other"]} : (tensor<128x16xf32>, tensor<16xf32>) -> tensor<128x16xf32> loc("model.py":4:0)
    %2 = "torch.aten.tanh.default"(%1) {torch.operands = ["self"]} : (tensor<128x16xf32>) -> tensor<128x16xf32> loc("model.py":4:0)
    %3 = "torch.aten.mul.Tensor"(%arg4, %arg3) {torch.operands = ["self", "other"]} : (tensor<2x64x32xf32>, tensor<1xf32>) -> tensor<2x64x32xf32> loc("model.py":5:0)
    %4 = "torch.aten.add.Tensor"(%arg5, %arg1) {torch.operands = ["self", "other"]} : (tensor<2x16x16xf32>, tensor<16xf32>) -> tensor<2x16x16xf32> loc("model.py":6:0)
    return %0, %2, %3, %4 : tensor<2x64x16xf32>, tensor<128x16xf32>, tensor<2x64x32xf32>, tensor<2x16x16xf32>
  }
}
