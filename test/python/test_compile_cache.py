"""The compile cache: an unchanged model is not rebuilt by the host compiler."""
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import gptc
from conftest import REPO, capture_one_layer
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


def run_cli(mlir, out, cache, *flags, env=None):
    env = dict(env or os.environ, GPTC_CACHE_DIR=str(cache))
    return subprocess.run([gptc.find_tool("gptc"), "compile", str(mlir), "-o", str(out), *flags],
                          capture_output=True, text=True, env=env)


def compile_cli(mlir, out, cache, *flags, env=None):
    t = time.perf_counter()
    run = run_cli(mlir, out, cache, *flags, env=env)
    assert run.returncode == 0, run.stderr
    return time.perf_counter() - t


def test_second_compile_hits_the_cache(tmp_path):
    torch.manual_seed(0)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).train()
    x = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(model, (x, x.clone())), str(mlir))
    cache = tmp_path / "cache"
    first = compile_cli(mlir, tmp_path / "a", cache, "--train")
    second = compile_cli(mlir, tmp_path / "b", cache, "--train")
    print(f"\ntraining step: first compile {first:.2f} s, second {second:.2f} s")
    assert (tmp_path / "a" / "compile.log").exists()       # the host compiler ran
    assert not (tmp_path / "b" / "compile.log").exists()   # it did not
    assert (tmp_path / "a" / "kernels.so").read_bytes() == (tmp_path / "b" / "kernels.so").read_bytes()
    assert len(list(cache.glob("*.so"))) == 1
    # Another program (the forward only) is another entry.
    compile_cli(mlir, tmp_path / "c", cache)
    assert len(list(cache.glob("*.so"))) == 2


def test_a_changed_prelude_misses_the_cache(tmp_path):
    """The kernels include the prelude, so it is part of the key: editing it, or any header
    of its families, rebuilds."""
    mlir = capture_one_layer(tmp_path)
    include = tmp_path / "include"
    shutil.copytree(os.path.join(REPO, "runtime", "include"), include)
    env = dict(os.environ, GPTC_RUNTIME_INCLUDE=str(include))
    cache = tmp_path / "cache"
    compile_cli(mlir, tmp_path / "a", cache, env=env)
    compile_cli(mlir, tmp_path / "b", cache, env=env)
    assert not (tmp_path / "b" / "compile.log").exists()     # unchanged: a hit
    with open(include / "gptc" / "prelude.h", "a") as f:
        f.write("\n// an edit\n")
    compile_cli(mlir, tmp_path / "c", cache, env=env)
    assert (tmp_path / "c" / "compile.log").exists()         # changed: rebuilt
    assert len(list(cache.glob("*.so"))) == 2
    with open(include / "gptc" / "prelude" / "cpu" / "attention.h", "a") as f:
        f.write("\n// an edit to a family\n")
    compile_cli(mlir, tmp_path / "d", cache, env=env)
    assert (tmp_path / "d" / "compile.log").exists()
    assert len(list(cache.glob("*.so"))) == 3


def test_a_compile_replaces_kernels_so_whole(tmp_path):
    """kernels.so is written aside and renamed over the previous one, from the cache as
    from the host compiler: a process running the previous library keeps its file, and no
    temporary is left behind. The runtime runs its own copy of the library, whose symbols
    `symbol_address` finds."""
    mlir = capture_one_layer(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "cache"
    compile_cli(mlir, out, cache)  # the host compiler
    first = (out / "kernels.so").stat().st_ino
    compile_cli(mlir, out, cache)  # the cache
    assert (out / "kernels.so").stat().st_ino != first
    # (No compile.log: the host compiler did not run, and the first compile's is removed.)
    assert sorted(p.name for p in out.iterdir()) == [
        "kernels.cpp", "kernels.so", "manifest.json", "weights.safetensors"]
    from gptc import _runtime
    model = _runtime.Model(str(out))
    abi = ctypes.CFUNCTYPE(ctypes.c_int)(model.symbol_address("gptc_entry_abi"))
    assert abi() == 1
    assert model.symbol_address("no_such_symbol") == 0
    # The library exports its entry points only: the prelude's statics (thread count,
    # error slot, scratch) are its own, not process-wide unique symbols shared by every
    # model loaded.
    exported = subprocess.run(["nm", "-D", "--defined-only", str(out / "kernels.so")],
                              capture_output=True, text=True, check=True).stdout.split()[2::3]
    assert {s for s in exported if s not in ("_init", "_fini")} == {
        "gptc_entry", "gptc_entry_abi", "gptc_set_num_threads", "gptc_signature"}
    # What the library was built for, against the manifest written beside it, spelled as
    # docs/artifact.md says: the runtime refuses a manifest that differs.
    manifest = json.loads((out / "manifest.json").read_text())
    line = lambda role, t: f"{role} {t['dtype']} [{', '.join(map(str, t['shape']))}] {t['name']}"
    expected = ([f"arena {manifest['arena_bytes']}"] + [line(a["kind"], a) for a in manifest["args"]]
                + [line("result", r) for r in manifest["results"]])
    signature = ctypes.CFUNCTYPE(ctypes.c_char_p)(model.symbol_address("gptc_signature"))()
    assert signature.decode().split("\n") == expected
    manifest["results"][0]["shape"][-1] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RuntimeError, match=r"manifest.json: says 'result f32 \[2, 32, 66\] output0' where "
                       r".*kernels.so was built for 'result f32 \[2, 32, 65\] output0'; the manifest was "
                       r"edited or is another build's: compile the model again"):
        _runtime.Model(str(out))


def test_the_runtime_reads_big_endian_arrays_by_value(tmp_path):
    """numpy arrays in the other byte order ('>i8', '>f4') are their values, not their bytes
    (they were read as this machine's order: wrong results, garbage parameters)."""
    out = tmp_path / "out"
    compile_cli(capture_one_layer(tmp_path), out, tmp_path / "cache")
    from gptc import _runtime
    model = _runtime.Model(str(out))
    rng = np.random.default_rng(0)
    inputs = [rng.integers(0, 8, size=shape).astype(np.int64) for _, _, shape in model.inputs]
    native = model.run(inputs)
    swapped = model.run([x.astype(">i8") for x in inputs])
    assert all(np.array_equal(a, b) for a, b in zip(native, swapped))
    name = model.params[0][0]
    value = model.param(name)
    model.set_param(name, (value + 1).astype(">f4"))
    assert np.array_equal(model.param(name), value + 1)


def test_a_corrupt_cache_entry_is_rebuilt_not_published(tmp_path):
    """A cache entry whose library no longer matches its checksum (a disk error, an edit) is
    removed with a warning naming it, and the library rebuilt; otherwise every later compile
    of the model would publish the same broken kernels.so. An entry without its checksum
    (from an older gptc) is a plain miss."""
    mlir = capture_one_layer(tmp_path)
    cache = tmp_path / "cache"
    compile_cli(mlir, tmp_path / "a", cache)
    [entry] = cache.glob("*.so")
    good = entry.read_bytes()
    assert entry.with_suffix(".sum").read_text() != ""
    broken = bytearray(good)
    broken[len(broken) // 2:len(broken) // 2 + 64] = bytes(64)
    entry.write_bytes(bytes(broken))
    run = run_cli(mlir, tmp_path / "b", cache)
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == (f"gptc: warning: compile cache entry {entry} does not match "
                                  "its checksum; removed, rebuilding")
    assert (tmp_path / "b" / "compile.log").exists()  # rebuilt by the host compiler
    assert (tmp_path / "b" / "kernels.so").read_bytes() == good
    assert entry.read_bytes() == good                 # and the entry is whole again
    from gptc import _runtime
    _runtime.Model(str(tmp_path / "b"))
    # Without its checksum: rebuilt, silently, and stored with one.
    entry.with_suffix(".sum").unlink()
    run = run_cli(mlir, tmp_path / "c", cache)
    assert run.returncode == 0 and run.stderr == ""
    assert (tmp_path / "c" / "compile.log").exists()
    assert entry.with_suffix(".sum").exists()
    compile_cli(mlir, tmp_path / "d", cache)
    assert not (tmp_path / "d" / "compile.log").exists()  # a hit again


def entry_sum(entry, data):
    """What gptc writes in KEY.sum (codegen/Artifact.cpp): xxh3 of "KEY:" and the hex xxh3
    of the library, upper-case hex without leading zeros, through libxxhash's XXH3_64bits
    (LLVM's xxh3_64bits is the same function)."""
    try:
        lib = ctypes.CDLL("libxxhash.so.0")
    except OSError:
        pytest.skip("libxxhash.so.0 (Debian's libxxhash0) is not installed")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h = lambda b: format(lib.XXH3_64bits(b, len(b)), "X")  # noqa: E731
    return h(f"{entry.stem}:{h(data)}".encode())


def test_a_consistent_but_foreign_cache_entry_is_rebuilt(tmp_path):
    """An entry whose checksum is consistent but whose library is not this key's made
    every compile of the model publish a kernels.so that cannot load, with advice that
    never named the cache. Another entry's pair copied under this key fails its checksum
    (the sum covers the key); a file that is not a library gptc built, with a sum made to
    match, is refused too: each is removed with a warning, and the library rebuilt."""
    mlir = capture_one_layer(tmp_path)
    cache = tmp_path / "cache"
    compile_cli(mlir, tmp_path / "a", cache)
    compile_cli(mlir, tmp_path / "b", cache, "--train")
    forward = next(e for e in cache.glob("*.so")
                   if e.read_bytes() == (tmp_path / "a" / "kernels.so").read_bytes())
    step = next(e for e in cache.glob("*.so") if e != forward)
    good = forward.read_bytes()
    assert forward.with_suffix(".sum").read_text() == entry_sum(forward, good)
    # The training step's pair under the forward's key.
    forward.write_bytes(step.read_bytes())
    forward.with_suffix(".sum").write_text(step.with_suffix(".sum").read_text())
    run = run_cli(mlir, tmp_path / "c", cache)
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == (f"gptc: warning: compile cache entry {forward} does not "
                                  "match its checksum; removed, rebuilding")
    assert (tmp_path / "c" / "kernels.so").read_bytes() == good
    # Not a library gptc built, its sum made to match: text, and a system library.
    libc = ctypes.util.find_library("m")
    for poison in (b"not a library\n", open(f"/lib/x86_64-linux-gnu/{libc}", "rb").read()
                   if libc and os.path.exists(f"/lib/x86_64-linux-gnu/{libc}") else None):
        if poison is None:
            continue
        forward.write_bytes(poison)
        forward.with_suffix(".sum").write_text(entry_sum(forward, poison))
        run = run_cli(mlir, tmp_path / "d", cache)
        assert run.returncode == 0, run.stderr
        assert run.stderr.strip() == (f"gptc: warning: compile cache entry {forward} is not "
                                      "a kernels library gptc built; removed, rebuilding")
        assert (tmp_path / "d" / "kernels.so").read_bytes() == good
        assert forward.read_bytes() == good
    from gptc import _runtime
    _runtime.Model(str(tmp_path / "d"))


def test_the_python_api_passes_the_compilers_warning_on(tmp_path, monkeypatch):
    """A compile through the Python API that meets a corrupt cache entry warns (a
    RuntimeWarning naming the entry) and still returns a working model."""
    monkeypatch.setenv("GPTC_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1)
    model = TinyGPT(cfg).eval()
    x = torch.randint(0, cfg.vocab_size, (2, cfg.block_size))
    gptc.compile(model, (x,))
    [entry] = (tmp_path / "cache").glob("*.so")
    entry.write_bytes(entry.read_bytes()[:-100] + bytes(100))
    with pytest.warns(RuntimeWarning, match="compile cache entry .* does not match its checksum"):
        compiled = gptc.compile(model, (x,))
    want, _ = model(x)
    got, _ = compiled(x)
    assert torch.allclose(got, want, atol=1e-5)


def fnv1a64(data: bytes) -> str:
    """FNV-1a, 64 bits, as docs/artifact.md defines the manifest's library_fnv1a64."""
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & (2 ** 64 - 1)
    return f"{h:016x}"


def test_a_truncated_or_swapped_kernels_so_is_refused_not_loaded(tmp_path):
    """The manifest records kernels.so's size and checksum, from the host compiler and from
    the cache alike, and the runtime checks them and the ELF file before dlopen: a truncated
    library killed the process with SIGBUS inside dlopen, and another artifact's library
    loaded and would have run kernels laid out for another arena. Each load in a child
    process, so that a crash is seen as one."""
    import json
    mlir = capture_one_layer(tmp_path)
    o3, o0, cache = tmp_path / "o3", tmp_path / "o0", tmp_path / "cache"
    compile_cli(mlir, o3, cache)
    compile_cli(mlir, o0, cache, "-O0")
    for out in (o3, o0):
        manifest = json.loads((out / "manifest.json").read_text())
        lib = (out / "kernels.so").read_bytes()
        assert manifest["library_bytes"] == len(lib)
        assert manifest["library_fnv1a64"] == fnv1a64(lib)

    def load(out):
        code = ("import sys\nfrom gptc import _runtime\ntry:\n    _runtime.Model(sys.argv[1])\n"
                "except RuntimeError as e:\n    sys.exit(str(e))\nprint('loaded')")
        return subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))

    assert load(o3).stdout.strip() == "loaded"
    good = (o3 / "kernels.so").read_bytes()
    (o3 / "kernels.so").write_bytes(good[:5000])
    run = load(o3)
    assert run.returncode == 1, (run.returncode, run.stderr)  # not a signal
    assert run.stderr.strip() == (f"{o3}/kernels.so: 5000 bytes where the manifest says "
                                  f"{len(good)}: truncated, corrupt or not this artifact's "
                                  "library; compile the model again")
    shutil.copy(o0 / "kernels.so", o3 / "kernels.so")  # another artifact's library
    run = load(o3)
    assert run.returncode == 1 and "not this artifact's library" in run.stderr, run.stderr
    # Compiled again, from the cache: the manifest matches the library again.
    compile_cli(mlir, o3, cache)
    assert load(o3).stdout.strip() == "loaded"
