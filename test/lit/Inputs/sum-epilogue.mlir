module {
  func.func @forward(%arg0: tensor<4x32xf32> {gpt.kind = "input", gpt.name = "x"}, %arg1: tensor<2x4x32xf32> {gpt.kind = "input", gpt.name = "y"}, %arg2: tensor<32xf32> {gpt.kind = "param", gpt.name = "w"}) -> (tensor<1x32xf32> {gpt.name = "col"}, tensor<4x32xf32> {gpt.name = "rms"}, tensor<2x4x32xf32> {gpt.name = "rms_w"}) {
    %0 = "torch.aten.sum.dim_IntList"(%arg0) {torch.operands = ["self"], dim = array<i64: 0>, keepdim = true} : (tensor<4x32xf32>) -> tensor<1x32xf32> loc("model.py":3:0)
    %1 = "torch.aten.tanh.default"(%0) {torch.operands = ["self"]} : (tensor<1x32xf32>) -> tensor<1x32xf32> loc("model.py":3:0)
    %2 = "torch.aten.rms_norm.default"(%arg0) {torch.operands = ["input"], normalized_shape = array<i64: 32>, eps = 1.0e-05 : f64} : (tensor<4x32xf32>) -> tensor<4x32xf32> loc("model.py":4:0)
    %3 = "torch.aten.rms_norm.default"(%arg1, %arg2) {torch.operands = ["input", "weight"], normalized_shape = array<i64: 32>, eps = 1.0e-05 : f64} : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32> loc("model.py":5:0)
    return %1, %2, %3 : tensor<1x32xf32>, tensor<4x32xf32>, tensor<2x4x32xf32>
  }
}
