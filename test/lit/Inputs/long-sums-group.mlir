module {
  func.func @forward(%arg0: tensor<64x64xf32> {gpt.kind = "input", gpt.name = "a"}, %arg1: tensor<64x64xf32> {gpt.kind = "input", gpt.name = "b"}, %arg2: tensor<64x64xf32> {gpt.kind = "input", gpt.name = "c"}, %arg3: tensor<64x64xf32> {gpt.kind = "input", gpt.name = "d"}) -> (tensor<f32> {gpt.name = "sa"}, tensor<f32> {gpt.name = "sb"}, tensor<f32> {gpt.name = "sc"}, tensor<f32> {gpt.name = "sd"}) {
    %0 = "torch.aten.sum.default"(%arg0) {torch.operands = ["self"]} : (tensor<64x64xf32>) -> tensor<f32> loc("model.py":3:0)
    %1 = "torch.aten.sum.default"(%arg1) {torch.operands = ["self"]} : (tensor<64x64xf32>) -> tensor<f32> loc("model.py":4:0)
    %2 = "torch.aten.sum.default"(%arg2) {torch.operands = ["self"]} : (tensor<64x64xf32>) -> tensor<f32> loc("model.py":5:0)
    %3 = "torch.aten.sum.default"(%arg3) {torch.operands = ["self"]} : (tensor<64x64xf32>) -> tensor<f32> loc("model.py":6:0)
    return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
