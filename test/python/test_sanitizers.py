"""gptc compile --sanitize: generated kernels under AddressSanitizer and UBSan.

The kernels index their operands with computed offsets: packed matmul panels, masked
vector tails, attention's key blocks, the copied dY^T of a weight gradient. A read one
element past a buffer usually gives the right answer anyway, and in the planned arena it
lands in another buffer, so no other test would see it. Here a training step whose every
size leaves a tail (97 positions, head size 24, 776 rows, a weight gradient large enough
to be copied to rows) is compiled with sanitize=True: kernels.so built with the
sanitizers, every buffer its own arena bytes with poisoned redzones between them. It runs
in a child process with the sanitizers' runtimes preloaded, where any out-of-bounds
access or undefined behaviour ends the child with the sanitizer's report. Its losses and
parameters must also be the plain build's, bit for bit.
"""
import json
import os
import platform
import shutil
import subprocess
import sys

import pytest

from gptc import _runtime

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import hashlib, json, sys
import torch
import gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

device = sys.argv[3]
torch.manual_seed(0)
# (the GPU's emulation runs a smaller step: its tiles' tails, at a tenth of the time)
cfg = TinyGPTConfig(n_layer=1, n_head=4, n_embd=96, block_size=97, dropout=0.1, bias=True) \
    if device == "cpu" else \
    TinyGPTConfig(n_layer=1, n_head=2, n_embd=40, block_size=33, dropout=0.1, bias=True)
model = TinyGPT(cfg).train()
g = torch.Generator().manual_seed(1)
batch = 8 if device == "cpu" else 2
data = [tuple(torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
              for _ in "xy") for _ in range(3)]
out = {}
for fuse in (True, False) if device == "cpu" else (True,):
    step = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(lr=1e-3), seed=5,
                                   grad_clip=1.0, fuse=fuse, sanitize=sys.argv[2] == "1",
                                   device=device, workdir=sys.argv[1] + str(fuse))
    if device == "cpu":
        step.set_num_threads(2)
    losses = [step(x, y, lr=1e-3).item().hex() for x, y in data]
    digest = hashlib.sha256()
    for name, t in sorted(step.state_dict().items()):
        digest.update(name.encode() + t.numpy().tobytes())
    out[str(fuse)] = {"losses": losses, "params": digest.hexdigest()}
print(json.dumps(out))
"""


def runtime_library(name):
    """The path of the host compiler's sanitizer runtime `name`, or None."""
    cxx = shutil.which("c++")
    if not cxx:
        return None
    path = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def run_child(workdir, sanitize, env, device="cpu"):
    env = dict(env, PYTHONPATH=os.path.join(REPO, "python"))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(workdir), str(int(sanitize)), device],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


LINUX_ONLY = pytest.mark.skipif(platform.system() != "Linux", reason="the sanitizer runtimes "
                                "are preloaded with LD_PRELOAD, as on Linux")


def plain_and_sanitized(tmp_path, device):
    """The child's results on `device`, plain and sanitized, and the sanitized artifact,
    which must be instrumented and guard its arena's redzones."""
    libs = [runtime_library(n) for n in ("libasan.so", "libubsan.so")]
    if None in libs:
        pytest.skip("the host compiler has no AddressSanitizer or UBSan runtime")
    plain = run_child(tmp_path / "plain", False, os.environ, device)
    sanitized = run_child(tmp_path / "sanitized", True, dict(
        os.environ, LD_PRELOAD=" ".join(libs),
        # Python itself keeps memory to the end; the kernels' accesses are what is checked.
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=1", UBSAN_OPTIONS="print_stacktrace=1"),
        device)
    artifact = tmp_path / "sanitizedTrue" / "artifact"
    symbols = subprocess.run(["nm", "-D", str(artifact / "kernels.so")], capture_output=True,
                             text=True).stdout
    assert "__asan_" in symbols and "__ubsan_" in symbols
    source = "kernels.cpp" if device == "cpu" else "kernels.cu"
    assert "gptc::ArenaRedzones guard(" in (artifact / source).read_text()
    return plain, sanitized, artifact


@LINUX_ONLY
def test_training_step_kernels_are_clean_under_asan_and_ubsan(tmp_path):
    plain, sanitized, artifact = plain_and_sanitized(tmp_path, "cpu")
    assert sanitized == plain
    assert plain["True"] == plain["False"]  # fused and unfused, as everywhere else
    # Without the sanitizers' runtimes, loading it is a clear error, not a dead process.
    with pytest.raises(RuntimeError, match="built with gptc compile --sanitize; run it with "
                       "the sanitizers' runtimes preloaded"):
        _runtime.Model(str(artifact))


@LINUX_ONLY
def test_the_emulated_gpus_step_is_clean_under_asan_and_ubsan(tmp_path):
    """The same for the GPU's code path (gptc compile --target=cuda-emulated --sanitize):
    the CUDA source built with the sanitizers over the emulation, the arena's redzones
    poisoned around the families' scratch; the CPU's stand-in for compute-sanitizer's
    memcheck of a step (a store past a matmul's columns, planted by hand, stopped it)."""
    plain, sanitized, _ = plain_and_sanitized(tmp_path, "cuda-emulated")
    assert sanitized == plain
