import os
import sys

# Tests import the in-tree package (python/gptc) and use the in-tree build.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

torch.set_num_threads(1)

# One compile cache for the whole test session, not the user's ~/.cache/gptc; removed
# when the session ends.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

if "GPTC_CACHE_DIR" not in os.environ:
    os.environ["GPTC_CACHE_DIR"] = tempfile.mkdtemp(prefix="gptc-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GPTC_CACHE_DIR"], True)


def capture_one_layer(tmp_path):
    """A one-layer TinyGPT's forward (seed 0, batch 2, targets = inputs), captured to
    tmp_path/model.mlir; returns that path."""
    import gptc
    from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1)
    x = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(TinyGPT(cfg), (x, x.clone())), str(mlir))
    return mlir


def runtime_library():
    """The runtime's static library of this build (what a deployment program links), or a
    pytest skip saying why there is none to link."""
    import shutil
    import pytest
    from gptc.locate import find_tool
    if not (shutil.which("cc") and shutil.which("c++")):
        pytest.skip("no C and C++ compilers (cc, c++) to build the program")
    library = os.path.join(os.path.dirname(find_tool("gptc")), "..", "runtime",
                           "libgptc_runtime.a")
    if not os.path.exists(library):
        pytest.skip(f"no {library}: the runtime library is built with the tools")
    return library


def run_ok(*cmd, **kw):
    """The standard output of `cmd` (subprocess.run's keywords: cwd, env), asserting that it
    exits 0; the assertion shows the end of its output."""
    import subprocess
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, \
        f"{' '.join(map(str, cmd))}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def generate_program(tmp_path):
    """examples/generate.c built against the runtime's static library into
    tmp_path/generate-c (or a pytest skip saying why it cannot be); returns its path."""
    import subprocess
    library = runtime_library()
    exe = tmp_path / "generate-c"
    subprocess.run(["cc", "-I", os.path.join(REPO, "runtime", "include"), "-c",
                    os.path.join(REPO, "examples", "generate.c"), "-o", str(tmp_path / "g.o")],
                   check=True)
    subprocess.run(["c++", str(tmp_path / "g.o"), library, "-ldl", "-pthread", "-o", str(exe)],
                   check=True)
    return exe
