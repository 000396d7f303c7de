module {
  func.func @forward(%arg0: tensor<8x16xf32> {gpt.kind = "param", gpt.name = "logits"}) -> (tensor<f32> {gpt.name = "loss"}) {
    %0 = "torch.aten.arange.start"() {torch.operands = [], start = 0 : i64, end = 8 : i64, dtype = "i64", pin_memory = false} : () -> tensor<8xi64> loc("model.py":3:0)
    %1 = "torch.aten.cross_entropy_loss.default"(%arg0, %0) {torch.operands = ["self", "target"], reduction = 1 : i64, ignore_index = -1 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32> loc("model.py":4:0)
    return %1 : tensor<f32>
  }
}
