module {
  func.func @forward(%arg0: tensor<2x4x6xf32> {gpt.kind = "input", gpt.name = "x"}, %arg1: tensor<2x6x2xf32> {gpt.kind = "input", gpt.name = "c"}) -> (tensor<2x4x6xf32> {gpt.name = "y"}) {
    %0 = "torch.aten.transpose.int"(%arg0) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x4x6xf32>) -> tensor<2x6x4xf32> loc("model.py":3:0)
    %1:2 = "torch.aten.split.Tensor"(%0) {torch.operands = ["self"], split_size = 2 : i64, dim = 2 : i64} : (tensor<2x6x4xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x2xf32>) loc("model.py":4:0)
    %2 = "torch.aten.mul.Tensor"(%1#0, %arg1) {torch.operands = ["self", "other"]} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x2xf32> loc("model.py":5:0)
    %3 = "torch.aten.sub.Tensor"(%2, %1#1) {torch.operands = ["self", "other"]} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x2xf32> loc("model.py":6:0)
    %4 = "torch.aten.add.Tensor"(%1#0, %1#1) {torch.operands = ["self", "other"]} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x2xf32> loc("model.py":7:0)
    %5 = "torch.aten.cat.default"(%3, %4) {torch.operands = ["tensors", "tensors"], dim = 2 : i64} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x4xf32> loc("model.py":8:0)
    %6 = "torch.aten.transpose.int"(%5) {torch.operands = ["self"], dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x6x4xf32>) -> tensor<2x4x6xf32> loc("model.py":9:0)
    return %6 : tensor<2x4x6xf32>
  }
}
