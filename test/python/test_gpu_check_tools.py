"""The GPU check's tools, run on the CPU where there is no GPU: scripts/gpu_prepare.py's
compile of a case, examples/train_step, bench/step_time and bench/generate_time over gptc's
runtime, and bench/gpu_torch.py's parity, timing, generation and weights (with --device
cpu). The GPU check
(scripts/gpu_check.sh) runs the same tools on CUDA artifacts and torch's CUDA device."""
import json
import os
import subprocess
import sys

import torch
from safetensors.numpy import load_file

from conftest import REPO, run_ok, runtime_library

sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import gpu_prepare  # noqa: E402

GPU_TORCH = os.path.join(REPO, "bench", "gpu_torch.py")


def build(tmp_path, source, name):
    exe = str(tmp_path / name)
    run_ok("c++", "-std=c++17", "-O2", "-I", os.path.join(REPO, "runtime", "include"),
           os.path.join(REPO, source), runtime_library(), "-ldl", "-pthread", "-o", exe)
    return exe


def torch_tool(*args):
    return json.loads(run_ok(sys.executable, GPU_TORCH, *args).strip().splitlines()[-1])


def test_the_gpu_checks_tools_agree_on_the_cpu(tmp_path):
    artifact = gpu_prepare.compile_case(str(tmp_path), "tiny", "tiny", 0.0, ["cpu"])["cpu"]
    batches = gpu_prepare.batches("tiny", 3, str(tmp_path / "batches.bin"))
    train_step = build(tmp_path, "examples/train_step.cpp", "train_step")
    (tmp_path / "losses.txt").write_text(
        run_ok(train_step, artifact, batches, "3", "7", "0.001", str(tmp_path / "out.safetensors")))
    # gptc's steps and torch's eager ones, from the same weights and batches.
    parity = torch_tool("parity", "--device", "cpu", "--weights",
                        os.path.join(artifact, "weights.safetensors"), "--batches", batches,
                        "--steps", "3", "--lr", "0.001", "--losses", str(tmp_path / "losses.txt"),
                        "--params", str(tmp_path / "out.safetensors"))
    assert parity["within"] and parity["steps"] == 3, parity
    assert 0 < parity["worst_param_abs"] <= 1e-4  # compared, and not trivially equal
    # The weights gpu_torch writes for an artifact copied without them are the ones the
    # prepared case was captured with (the same init).
    run_ok(sys.executable, GPU_TORCH, "weights", "--size", "tiny", "--manifest",
           os.path.join(artifact, "manifest.json"), "--out", str(tmp_path / "w.safetensors"))
    ours, captured = load_file(str(tmp_path / "w.safetensors")), load_file(
        os.path.join(artifact, "weights.safetensors"))
    assert set(ours) == set(captured)
    for name in ours:
        assert ours[name].tobytes() == captured[name].tobytes(), name
    # The timers.
    step_time = build(tmp_path, "bench/step_time.cpp", "step_time")
    timed = json.loads(run_ok(step_time, artifact, "1", "3"))
    with open(os.path.join(artifact, "manifest.json")) as f:  # (a CPU step: no graph)
        assert (timed["kernels"], timed["kernels_from"]) == (json.load(f)["kernels"], "manifest")
    assert timed["steps"] == 3 and 0 < timed["min_ms"] <= timed["median_ms"] <= timed["max_ms"]
    eager = torch_tool("time", "--device", "cpu", "--size", "tiny", "--mode", "eager",
                       "--steps", "2", "--warmup", "1")
    assert eager["mode"] == "eager" and eager["median_ms"] > 0
    bad = subprocess.run([step_time, artifact, "1", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "STEPS >= 1" in bad.stderr
    # Generation's timers, on the GPU check's generator model (saved as gpu_prepare saves it).
    import gptc
    from gpu_torch import GENERATE
    from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
    spec = dict(GENERATE)
    batch = spec.pop("batch")
    gptc.compile_generate(TinyGPT(TinyGPTConfig(**spec)).eval(), batch=batch).save(
        str(tmp_path / "generate"))
    generate_time = build(tmp_path, "bench/generate_time.cpp", "generate_time")
    ours_gen = json.loads(run_ok(generate_time, str(tmp_path / "generate"), "80", "3"))
    assert (ours_gen["batch"], ours_gen["tokens"], ours_gen["texts"]) == (batch, 80, 3)
    assert 0 < ours_gen["tokens_per_s_min"] <= ours_gen["tokens_per_s_median"] <= \
        ours_gen["tokens_per_s_max"]
    torch_gen = torch_tool("generate", "--device", "cpu", "--mode", "eager", "--tokens", "80",
                           "--texts", "1")
    assert (torch_gen["mode"], torch_gen["batch"]) == ("eager", batch)
    assert torch_gen["tokens_per_s_median"] > 0
    bad = subprocess.run([generate_time, str(tmp_path / "generate"), "0", "1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "TOKENS and TEXTS must be >= 1" in bad.stderr
    # These outputs, laid out as scripts/gpu_check.sh writes them, become a step record of
    # the results store (bench/gpu_record.py) and a section of the results page.
    out = tmp_path / "gpu-check"
    out.mkdir()
    (out / "nvidia-smi.csv").write_text(  # nvidia-smi --format=csv's header and a row
        "name, driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz], "
        "memory.total [MiB]\nNVIDIA H200, 580.159.04, 1980 MHz, 1980 MHz, 143771 MiB\n")
    (out / "step.json").write_text(
        '{"bitwise": true, "repeatable": true, "bitwise_llama": false, '
        '"bitwise_accumulate": true, "generate_text": true, "memcheck": "clean", "steps": 3}\n')
    (out / "parity.json").write_text(json.dumps(parity) + "\n")
    (out / "speed.jsonl").write_text(json.dumps(timed) + "\n" + json.dumps(eager) + "\n")
    (out / "generate_speed.jsonl").write_text(json.dumps(ours_gen) + "\n" +
                                              json.dumps(torch_gen) + "\n")
    (out / "speed_variants.jsonl").write_text(
        json.dumps({"env": "GPTC_CUDA_BRANCHES=0", **timed}) + "\n")
    (out / "profile_tiny.tsv").write_text(  # GPTC_CUDA_PROFILE's format
        "kernel\tcalls\ttotal_ms\tus_per_call\nk3_matmul (tiny_gpt.py:70)\t10\t0.5000\t50.00\n")
    written = run_ok(sys.executable, os.path.join(REPO, "bench", "gpu_record.py"), str(out),
                     "--store", str(tmp_path / "gpu"), "--note", "a test").split()
    assert len(written) == 1 and written[0].endswith("-h200-step.json"), written
    with open(written[0]) as f:
        record = json.load(f)
    assert record["kind"] == "step" and record["gpu"] == "NVIDIA H200" and record["bitwise"]
    assert record["parity"]["within"] and record["note"] == "a test"
    ours = [r for r in record["speed"] if r["framework"] == "gptc"]
    assert [(r["size"], r["median_ms"], r["kernels"]) for r in ours] == \
        [("tiny", timed["median_ms"], timed["kernels"])]
    assert [r["median_ms"] for r in record["speed"] if r["mode"] == "eager"] == \
        [eager["median_ms"]]
    assert record["variants"][0]["env"] == "GPTC_CUDA_BRANCHES=0"
    assert [(g["framework"], g["mode"], g["tokens_per_s_median"])
            for g in record["generate_speed"]] == [
        ("gptc", "generator", ours_gen["tokens_per_s_median"]),
        ("torch", "eager", torch_gen["tokens_per_s_median"])]
    assert record["profile"]["tiny"] == [
        {"kernel": "k3_matmul (tiny_gpt.py:70)", "calls": 10, "total_ms": 0.5}]
    import report
    section = "\n".join(report.gpu_section(str(tmp_path / "gpu")))
    assert "## GPU: the training step" in section and "bitwise over 3 steps" in section
    assert "a LLaMA-style relative, CPU == GPU bitwise: no" in section
    assert "gradient accumulation, CPU == GPU bitwise: yes" in section
    assert "generation, the CPU's text: yes" in section
    assert f"| tiny | {timed['median_ms']:.2f} ms | {eager['median_ms']:.2f} ms |" in section
    assert "## GPU: the CUDA kernel families" not in section  # (no families' record)
    assert (f"Generation, tokens a second ({batch} texts at once, 80 tokens each" in section
            and f"gptc's generator {ours_gen['tokens_per_s_median']:,.0f} (" in section
            and "nanoGPT's loop, torch eager" in section), section
    # A speed line of neither tool's form is refused in one line that names it.
    (out / "speed.jsonl").write_text(json.dumps(timed) + "\n" + '{"median_ms": 1.0}\n')
    odd = subprocess.run([sys.executable, os.path.join(REPO, "bench", "gpu_record.py"),
                          str(out), "--store", str(tmp_path / "gpu")],
                         capture_output=True, text=True)
    assert odd.returncode == 1 and "speed.jsonl:2: not a line" in odd.stderr, odd.stderr
    # An output folder with neither part is refused in one line.
    empty = subprocess.run([sys.executable, os.path.join(REPO, "bench", "gpu_record.py"),
                            str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 1 and "holds neither" in empty.stderr, empty.stderr
