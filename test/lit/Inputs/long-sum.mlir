module {
  func.func @forward(%arg0: tensor<2x5000xf32> {gpt.kind = "input", gpt.name = "x"}) -> (tensor<2xf32> {gpt.name = "total"}, tensor<2x5000xf32> {gpt.name = "rms"}) {
    %0 = "torch.aten.sum.dim_IntList"(%arg0) {torch.operands = ["self"], dim = array<i64: 1>, keepdim = false} : (tensor<2x5000xf32>) -> tensor<2xf32> loc("model.py":3:0)
    %1 = "torch.aten.rms_norm.default"(%arg0) {torch.operands = ["input"], normalized_shape = array<i64: 5000>, eps = 1.0e-05 : f64} : (tensor<2x5000xf32>) -> tensor<2x5000xf32> loc("model.py":4:0)
    return %0, %1 : tensor<2xf32>, tensor<2x5000xf32>
  }
}
