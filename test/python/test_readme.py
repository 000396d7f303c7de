"""The README's quickstarts work as written: its Python block, and its command-line block
followed by its C program, run from a fresh folder against this checkout's build.

The only changes made to the text: the checkout's paths made absolute (the README runs
from the repository root), and two command lines left out, each tested on its own: the
parity report (test_parity.py) and `gptc sample`, which needs ./run.sh's trained model
(test_main_job.py)."""
import os
import re
import sys

from conftest import REPO, run_ok, runtime_library
from gptc.locate import find_tool

with open(os.path.join(REPO, "README.md")) as f:
    README = f.read()


def block(language: str, after: str) -> str:
    """The first ```language block after the line `after`."""
    start = README.index(after)
    m = re.compile(r"```" + language + r"\n(.*?)```", re.S).search(README, start)
    assert m, f"no ```{language} block after {after!r} in README.md"
    return m.group(1)


def test_python_quickstart(tmp_path):
    code = block("python", "### Python")
    # What the block leaves behind, checked after it.
    code += ("\nassert torch.isfinite(loss) and len(ids) == 100 and os.path.getsize("
             "'ckpt.safetensors') > 0\nprint('ok', float(loss))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))  # "With PYTHONPATH=python"
    out = run_ok(sys.executable, "-c", "import os\n" + code, cwd=tmp_path, env=env)
    assert out.splitlines()[-1].startswith("ok ")


def test_command_line_and_c_quickstarts(tmp_path):
    gptc_bin = os.path.dirname(find_tool("gptc"))
    script = block("sh", "### The `gptc` command line")
    lines = [line for line in script.splitlines()
             if "--against-torch" not in line and "gptc sample" not in line]
    script = "\n".join(lines).replace("PYTHONPATH=python ", f"PYTHONPATH={REPO}/python ")
    script = script.replace("build/bin/", gptc_bin + "/")
    assert gptc_bin + "/gptc compile model.mlir -o out/tiny" in script  # the C block's model
    run_ok("bash", "-euo", "pipefail", "-c", script, cwd=tmp_path)
    assert os.path.exists(tmp_path / "out" / "tiny" / "kernels.so")
    assert os.path.exists(tmp_path / "out" / "step" / "kernels.so")

    # The C program, built as the README's first command line builds it.
    library = runtime_library()
    (tmp_path / "main.c").write_text(block("c", "### C (and C++)"))
    build = block("sh", "### C (and C++)").splitlines()[0]
    assert build.startswith("cc -Iruntime/include -c main.c && c++ main.o "
                            "build/runtime/libgptc_runtime.a"), build
    build = build.replace("-Iruntime/include", f"-I{REPO}/runtime/include")
    build = build.replace("build/runtime/libgptc_runtime.a", library)
    run_ok("bash", "-c", build, cwd=tmp_path)
    out = run_ok(str(tmp_path / "main"), cwd=tmp_path)
    assert re.fullmatch(r"loss \d+\.\d{7}\n", out), out
