"""Weights files carry each tensor's CRC-32 (gptc.checksums; gptc/safetensors.hpp): one
flipped byte is refused on load, in one line, where it loaded silently before."""
import json
import subprocess

import pytest
import torch

import gptc
from conftest import capture_one_layer
from gptc.locate import load_runtime


def flip_a_data_byte(path, tensor):
    """Flip one byte in the middle of `tensor`'s data in the safetensors file `path`."""
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    begin, end = json.loads(raw[8:8 + n])[tensor]["data_offsets"]
    raw[8 + n + (begin + end) // 2] ^= 0x10
    path.write_bytes(bytes(raw))


def compiled_one_layer(tmp_path):
    """A one-layer GPT's forward compiled by `gptc compile` into tmp_path/artifact."""
    artifact = tmp_path / "artifact"
    subprocess.run([gptc.find_tool("gptc"), "compile", str(capture_one_layer(tmp_path)), "-o",
                    str(artifact)], check=True, capture_output=True)
    return artifact


def test_a_flipped_byte_in_an_artifacts_weights_is_refused(tmp_path):
    artifact = compiled_one_layer(tmp_path)
    runtime = load_runtime()
    runtime.Model(str(artifact))  # whole: loads
    weights = artifact / "weights.safetensors"
    flip_a_data_byte(weights, "transformer.wte.weight")
    with pytest.raises(RuntimeError) as e:
        runtime.Model(str(artifact))
    assert str(e.value) == (f"{weights}: tensor 'transformer.wte.weight' does not match its checksum "
                            "(the file is corrupt)")


def test_a_flipped_byte_in_the_captured_weights_stops_the_compile(tmp_path):
    mlir = capture_one_layer(tmp_path)
    flip_a_data_byte(tmp_path / "model.safetensors", "transformer.wte.weight")
    run = subprocess.run([gptc.find_tool("gptc"), "compile", str(mlir), "-o",
                          str(tmp_path / "artifact")], capture_output=True, text=True)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "tensor 'transformer.wte.weight' does not match its checksum" in lines[0]


def test_saved_weights_carry_checksums_and_files_without_them_load(tmp_path):
    """save_weights writes the sums; a file from another writer (no sums) still loads."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    artifact = compiled_one_layer(tmp_path)
    runtime = load_runtime()
    m = runtime.Model(str(artifact))
    m.save_weights(str(tmp_path / "saved.safetensors"))
    with safe_open(str(tmp_path / "saved.safetensors"), "numpy") as f:
        sums = json.loads(f.metadata()["gptc.crc32"])
        assert set(sums) == set(f.keys())
        assert all(sums[k] == gptc.checksums.crc32_hex(f.get_tensor(k)) for k in f.keys())
    with safe_open(str(artifact / "weights.safetensors"), "pt") as f:
        plain = {k: f.get_tensor(k) for k in f.keys()}
    save_file(plain, str(artifact / "weights.safetensors"))  # no metadata at all
    runtime.Model(str(artifact))
    assert torch.equal(plain["transformer.wte.weight"],
                       torch.from_numpy(runtime.Model(str(artifact)).param("transformer.wte.weight")))
