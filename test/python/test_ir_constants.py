"""Constants in hand-written IR reach the kernels with their exact values."""
import subprocess

import numpy as np

import gptc

MODEL = """\
func.func @forward(%a: tensor<4x3xf32> {gpt.kind = "input", gpt.name = "a"}, %i: tensor<2xi64> {gpt.kind = "input", gpt.name = "i"}) -> (tensor<4x3xf32> {gpt.name = "y"}, tensor<2xi64> {gpt.name = "j"}) {
  %c = gpt.constant dense<1.5> : tensor<4x3xf32>
  %k = gpt.constant dense<[9007199254740993, -9223372036854775808]> : tensor<2xi64>
  %0 = gpt.add %a, %c : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = gpt.add %i, %k : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0, %1 : tensor<4x3xf32>, tensor<2xi64>
}
"""


def test_splat_and_wide_integer_constants_keep_their_values(tmp_path):
    """A splat is filled when the library loads (it was written out element by element: a
    20M-element one made a 220 MB kernels.cpp), and an i64 past 2^53 keeps its value (it
    went through a double: 2^53 + 1 became 2^53)."""
    (tmp_path / "m.mlir").write_text(MODEL)
    out = tmp_path / "out"
    run = subprocess.run([gptc.find_tool("gptc"), "compile", str(tmp_path / "m.mlir"), "-o",
                          str(out), "-O0"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    source = (out / "kernels.cpp").read_text()
    assert "1.5" not in source and source.count("0x1.8p+0f") == 1, "the splat written once"
    from gptc import _runtime
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    y, j = _runtime.Model(str(out)).run([a, np.array([0, 1], dtype=np.int64)])
    assert np.array_equal(y, a + np.float32(1.5))
    assert j.tolist() == [2**53 + 1, -2**63 + 1]
