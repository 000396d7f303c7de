"""Prints a model of N independent sums of 4-element inputs (one group of N members, two
pointers each): python3 many-sums.py N > model.mlir."""
import sys

n = int(sys.argv[1])
args = ", ".join(f'%arg{i}: tensor<4xf32> {{gpt.kind = "input", gpt.name = "x{i}"}}'
                 for i in range(n))
results = ", ".join(f'tensor<f32> {{gpt.name = "s{i}"}}' for i in range(n))
print("module {")
print(f"  func.func @forward({args}) -> ({results}) {{")
for i in range(n):
    print(f'    %{i} = "torch.aten.sum.default"(%arg{i}) {{torch.operands = ["self"]}} : '
          f'(tensor<4xf32>) -> tensor<f32> loc("model.py":{i + 3}:0)')
print("    return " + ", ".join(f"%{i}" for i in range(n)) + " : " +
      ", ".join("tensor<f32>" for _ in range(n)))
print("  }\n}")
