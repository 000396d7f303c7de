module {
  func.func @forward(%arg0: tensor<2x3x12xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<2x3x12xf32> {gpt.name = "y"}) {
    %0:3 = "torch.aten.split.Tensor"(%arg0) {torch.operands = ["self"], split_size = 4 : i64, dim = 2 : i64} : (tensor<2x3x12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) loc("model.py":3:0)
    %1 = "torch.aten.cat.default"(%0#2, %0#0, %0#1) {torch.operands = ["tensors", "tensors", "tensors"], dim = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32> loc("model.py":4:0)
    return %1 : tensor<2x3x12xf32>
  }
}
