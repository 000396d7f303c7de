"""The bench's tools still build and run: a small run of each, for its results, not its times."""
import os
import subprocess
import sys

from conftest import REPO


def test_matmul_shapes_checks_every_product_against_torch():
    """bench/matmul_shapes.py builds gptc's matmul with the kernels' flags and checks each of
    a layer's 12 products against torch's before it times them. (With the kernels' flags its
    entry points need GPTC_EXPORT: a build without it had no symbols to call.) Odd sizes,
    so that the tiles and panels have remainders."""
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "matmul_shapes.py"),
                          "--tokens", "37", "--embd", "20", "--rounds", "1", "--threads", "2"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 12 + 1  # the header, 12 products, the total
    assert rows[-1].startswith("| all |")
