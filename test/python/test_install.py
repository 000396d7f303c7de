"""`cmake --install` into a fresh prefix, then what a user of the installed tree does:
compile a model with the installed gptc, and build a C program against the installed runtime
with CMake's find_package and with pkg-config."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import REPO, capture_one_layer
from conftest import run_ok as run
from gptc.testing.tiny_gpt import TinyGPTConfig

BUILD = os.environ.get("GPTC_BUILD_DIR", os.path.join(REPO, "build"))

MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <gptc/runtime.h>

int main(int argc, char** argv) {
  gptc_model* m = gptc_model_load(argv[1]);
  if (!m) { fprintf(stderr, "%s\n", gptc_last_error()); return 1; }
  const void* in[8];
  void* out[8];
  for (int i = 0; i < gptc_model_num_inputs(m); ++i) {
    gptc_tensor_info t;
    gptc_model_input_info(m, i, &t);
    in[i] = calloc(1, t.nbytes);  /* token ids and targets 0 */
  }
  for (int i = 0; i < gptc_model_num_results(m); ++i) {
    gptc_tensor_info t;
    gptc_model_result_info(m, i, &t);
    out[i] = calloc(1, t.nbytes);
  }
  if (gptc_model_run(m, in, out) != 0) { fprintf(stderr, "%s\n", gptc_last_error()); return 1; }
  printf("loss %.9g\n", *(const float*)out[1]);
  gptc_model_free(m);
  return 0;
}
"""

CONSUMER = """cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C CXX)
find_package(gptc 0.1 CONFIG REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE gptc::runtime)
"""


def test_the_installed_tree_compiles_models_and_builds_programs(tmp_path):
    if not os.path.exists(os.path.join(BUILD, "cmake_install.cmake")):
        pytest.skip(f"no CMake build in {BUILD}")
    for tool in ("cmake", "cc", "pkg-config"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not found")
    prefix = tmp_path / "prefix"
    run("cmake", "--install", BUILD, "--prefix", str(prefix))
    for f in ("bin/gptc", "bin/gptc-opt", "include/gptc/runtime.h", "include/gptc/prelude.h",
              "include/gptc/prelude/math.h", "lib/libgptc_runtime.a",
              "lib/cmake/gptc/gptcConfig.cmake", "lib/pkgconfig/gptc-runtime.pc"):
        assert (prefix / f).exists(), f
    # Nothing installed points back into the source tree or the build.
    for f in list((prefix / "lib" / "cmake" / "gptc").iterdir()) + [
            prefix / "lib" / "pkgconfig" / "gptc-runtime.pc"]:
        text = f.read_text()
        assert REPO not in text and str(prefix) not in text, f

    # The installed gptc compiles a model with the installed prelude (no source tree).
    mlir = capture_one_layer(tmp_path)
    artifact = tmp_path / "artifact"
    env = {k: v for k, v in os.environ.items() if k != "GPTC_RUNTIME_INCLUDE"}
    compile_cmd = [str(prefix / "bin" / "gptc"), "compile", str(mlir), "-o", str(artifact)]
    # It reads the installed headers, not the source tree's: break the installed prelude
    # and the compile fails; mend it and it succeeds.
    prelude = prefix / "include" / "gptc" / "prelude.h"
    good = prelude.read_text()
    prelude.write_text(good + '\n#error "the installed prelude"\n')
    broken = subprocess.run(compile_cmd, capture_output=True, text=True, env=env)
    assert broken.returncode != 0 and "host compiler failed" in broken.stderr, broken.stderr
    prelude.write_text(good)
    run(*compile_cmd, env=env)

    # A CMake project: find_package(gptc CONFIG) and gptc::runtime.
    src = tmp_path / "consumer"
    src.mkdir()
    (src / "main.c").write_text(MAIN)
    (src / "CMakeLists.txt").write_text(CONSUMER)
    run("cmake", "-S", str(src), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={prefix}",
        "-DCMAKE_BUILD_TYPE=Release")
    run("cmake", "--build", str(tmp_path / "b"))
    by_cmake = run(str(tmp_path / "b" / "consumer"), str(artifact))

    # A plain C build through pkg-config.
    flags = run("pkg-config", "--cflags", "--libs", "gptc-runtime",
                env=dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))).split()
    run("cc", str(src / "main.c"), "-o", str(tmp_path / "by_pkg_config"), *flags)
    by_pkg_config = run(str(tmp_path / "by_pkg_config"), str(artifact))

    # Both run the artifact, with the loss the Python runtime computes from it.
    from gptc import _runtime
    model = _runtime.Model(str(artifact))
    zeros = torch.zeros(2, TinyGPTConfig(n_layer=1).block_size, dtype=torch.int64)
    loss = float(model.run([zeros.numpy(), zeros.numpy()])[1])
    assert by_cmake == by_pkg_config == f"loss {loss:.9g}\n"


INSTALLED = r"""
import importlib.metadata, json, torch, gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
torch.manual_seed(0)
model = TinyGPT(TinyGPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=65)).eval()
x = torch.randint(0, 65, (2, 16))
logits, loss = gptc.compile(model, (x, x))(x, x)
backends = [e.name for e in importlib.metadata.entry_points(group="torch_dynamo_backends")]
print(json.dumps({"package": gptc.__file__, "tool": gptc.find_tool(), "loss": float(loss),
                  "eager": float(model(x, x)[1]), "backends": backends}))
"""


def test_pip_install_gives_a_package_that_finds_its_own_tools(tmp_path):
    """`pip install .` into a fresh virtual environment (torch from the system's packages),
    then, from another folder and without the checkout on PYTHONPATH: import gptc, compile
    and run a model with the package's own gptc and headers, and the `gptc` command."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", str(venv))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPTC_BUILD_DIR", "GPTC_RUNTIME_INCLUDE", "GPTC_PYTHON")}
    python = str(venv / "bin" / "python")
    # From the checkout, whose pyproject.toml keeps the build in build-wheel/ between runs
    # (and whose compiles ccache serves from build/'s: docs/architecture.md, "Packaging").
    # Nothing is downloaded: setup.sh installed the build backend (requirements.txt), and the
    # dependencies are the system's (pip would upgrade the venv's own setuptools for torch).
    run(python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", "--no-deps",
        "--disable-pip-version-check", ".", cwd=REPO, env=env)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = json.loads(run(python, "-c", INSTALLED, cwd=elsewhere, env=env).splitlines()[-1])
    site = str(venv / "lib")
    assert got["package"].startswith(site), got
    assert got["tool"] == os.path.join(os.path.dirname(got["package"]), "bin", "gptc"), got
    assert abs(got["loss"] - got["eager"]) <= 1e-5 * abs(got["eager"]), got
    assert "gptc" in got["backends"], got
    # The command pip put on the environment's PATH, and its subcommand that runs Python.
    gptc_cmd = str(venv / "bin" / "gptc")
    assert run(gptc_cmd, "--version", cwd=elsewhere, env=env).startswith("gptc 0.1.0 ")
    assert "aten.linear.default" in run(gptc_cmd, "ops", cwd=elsewhere, env=env)
    assert "--temperature" in run(gptc_cmd, "sample", "--help", cwd=elsewhere, env=env)
