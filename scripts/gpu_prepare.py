"""Prepares the GPU check's whole-step part (scripts/gpu_check.sh), on a machine with gptc
(MLIR, nvcc) but no GPU; the GPU machine has no MLIR, so everything it runs is made here.

    python3 scripts/gpu_prepare.py [OUTDIR]        (default: build/gpu-check)

Writes into OUTDIR, for each case, the training step compiled for the GPU (--target=cuda,
nvcc for $GPTC_CUDA_ARCH, default sm_90) and what it must reproduce:
  tiny-dropout/   the test GPT at the GPU check's tiny size (2 layers, 64 wide, batch 8,
                  block 64) with dropout 0.1: the CPU artifact's losses and parameters and
                  moments after 20 steps (examples/train_step, run here), which the GPU's
                  must equal bit for bit;
  tiny/           the same without dropout, for the parity with torch's CUDA eager (its
                  weights are the ones torch starts from);
  llama/          a LLaMA-style relative at the tiny size (RMSNorm, rotary embeddings,
                  grouped-query attention, SwiGLU; gptc.testing.llama_style): its CPU
                  artifact's 20 steps, which the GPU's must equal bit for bit too;
  accumulate/     tiny-dropout's model under gradient accumulation (gptc compile
                  --accumulate, and --train --accumulated 4 beside it: cuda/micro and
                  cuda/step): 5 steps of 4 micro-batches, the CPU's losses, parameters,
                  moments and gradient sums, which the GPU's must equal bit for bit;
  generate/       the test GPT's generator (block 64, 2 texts at once; gptc.Generator.save
                  with a character vocabulary, for examples/generate.c) built for the GPU,
                  and the text the CPU's generator writes, which the GPU's must equal;
  shakespeare_char/  6 layers, 384 wide, batch 64, block 256, for speed only (without its
                  weights: bench/gpu_torch.py writes them there, from torch's init);
and the batches (batches-*.bin), and nlohmann-json's headers (include/), which the GPU
machine may lack. Before it finishes it runs the same check against the step built for
the GPU's emulation (--target=cuda-emulated) here, so the check's own logic is proved
where there is no GPU.
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gptc  # noqa: E402
from gptc.compiler import capture_and_compile, run_compiler  # noqa: E402
from gptc.testing.llama_style import LlamaConfig, LlamaStyle  # noqa: E402
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig  # noqa: E402
from gptc.train import AdamW, _flags  # noqa: E402
from gpu_torch import GENERATE, HYPER, SIZES  # noqa: E402 (bench/, the torch side's sizes)

STEPS, SEED, LR = 20, 7, 1e-3
ACCUMULATION = 4  # micro-batches a step of the accumulate case: STEPS / 4 steps
GEN_TOKENS = 150  # the generate case's: through the shorter step, the prefill and the shift


def batches(size, steps, path):
    """`steps` batches of idx then targets (int64, little-endian), as train_step reads."""
    spec = SIZES[size]
    g = torch.Generator().manual_seed(11)
    shape = (spec["batch"], spec["block_size"])
    with open(path, "wb") as f:
        for _ in range(steps):
            for _ in range(2):
                f.write(torch.randint(0, spec["vocab_size"], shape, generator=g).numpy()
                        .astype("<i8").tobytes())
    return path


def gpt(spec, dropout):
    return TinyGPT(TinyGPTConfig(dropout=dropout, bias=True, **spec))


def llama(spec, dropout):
    assert dropout == 0.0, "the LLaMA-style model has no dropout"
    return LlamaStyle(LlamaConfig(n_kv_head=spec["n_head"] // 2, **spec))


def compile_case(out, case, size, dropout, targets, model_fn=gpt, accumulation=0):
    """The step of `size` for each target, captured once: OUT/case/<target>. With
    `accumulation` N, gradient accumulation's two programs instead: OUT/case/<target>/micro
    (--accumulate) and OUT/case/<target>/step (--train --accumulated N, beside micro)."""
    spec = dict(SIZES[size])
    batch = spec.pop("batch")
    torch.manual_seed(0)
    model = model_fn(spec, dropout).train()
    x = torch.zeros(batch, spec["block_size"], dtype=torch.long)
    work = os.path.join(out, case, "capture")
    flags = _flags(AdamW(**HYPER), 1.0)
    first_flags = ["--accumulate"] if accumulation else flags
    _, first, _ = capture_and_compile(model, (x, x.clone()), work, "gptc-gpu-",
                                      *first_flags, f"--target={targets[0]}")
    dirs = {t: os.path.join(out, case, t) for t in targets}
    shutil.rmtree(dirs[targets[0]], ignore_errors=True)
    mlir = os.path.join(work, "model.mlir")
    if accumulation:
        os.makedirs(dirs[targets[0]])
        shutil.move(first, os.path.join(dirs[targets[0]], "micro"))
        for target in targets:
            micro = os.path.join(dirs[target], "micro")
            if target != targets[0]:
                run_compiler(mlir, micro, *first_flags, f"--target={target}")
            run_compiler(mlir, os.path.join(dirs[target], "step"), *flags,
                         f"--accumulated={accumulation}", f"--target={target}",
                         "--weights-of", micro)
    else:
        shutil.move(first, dirs[targets[0]])
        for target in targets[1:]:
            run_compiler(mlir, dirs[target], *flags, f"--target={target}")
    shutil.rmtree(work)
    return dirs


def prepare_generation(out):
    """OUT/generate: the test GPT's generator for the GPU, saved, and the CPU generator's
    text (expected.txt, as examples/generate.c prints it). The generator is compiled for
    the GPU's emulation, its text checked against the CPU's here, then saved and each of
    its programs built by nvcc from the same kernels.cu (a generator for "cuda" would load
    on a GPU to save itself; the source is one, only the build differs)."""
    spec = dict(GENERATE)
    batch = spec.pop("batch")
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(bias=True, **spec)).eval()
    letters = [bytes([ord("a") + i]) for i in range(spec["vocab_size"])]
    spell = lambda ids: "".join(chr(ord("a") + t) for t in ids)  # noqa: E731 (as generate.c)
    prompt, n, seed, temperature, top_k = [2, 0, 1], GEN_TOKENS, 9, 0.8, 6
    texts = {}
    for device in ("cpu", "cuda-emulated"):
        gen = gptc.compile_generate(model, batch=batch, device=device)
        texts[device] = gen.generate([prompt] * batch, n, temperature=temperature, top_k=top_k,
                                     seed=seed)
    if texts["cpu"] != texts["cuda-emulated"]:
        sys.exit("gpu_prepare: error: generate: the emulated GPU's text differs from the CPU's")
    case = os.path.join(out, "generate")
    shutil.rmtree(case, ignore_errors=True)
    gen.save(os.path.join(case, "cuda"), tokens=letters)
    for where, _, files in os.walk(os.path.join(case, "cuda")):
        if "manifest.json" in files:
            path = os.path.join(where, "manifest.json")
            with open(path) as f:
                manifest = json.load(f)
            manifest.update(target="cuda", cuda_arch=os.environ.get("GPTC_CUDA_ARCH", "sm_90"))
            with open(path, "w") as f:
                json.dump(manifest, f, indent=2)
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "relink_cuda_artifact.py"),
                            where, "--arch", manifest["cuda_arch"]], check=True)
    with open(os.path.join(case, "expected.txt"), "w") as f:
        f.write("".join(spell(prompt + row) + "\n" + "-" * 15 + "\n" for row in texts["cpu"]))
    with open(os.path.join(case, "args.txt"), "w") as f:  # generate.c's, after the folder
        f.write(f"{spell(prompt)} {n} {seed} {temperature} {top_k}\n")


def build_train_step(out):
    exe = os.path.join(out, "train_step.host")
    src = [os.path.join(ROOT, "examples", "train_step.cpp")] + sorted(
        os.path.join(ROOT, "runtime", "src", f) for f in os.listdir(os.path.join(ROOT, "runtime", "src")))
    subprocess.run(["c++", "-std=c++17", "-O2", '-DGPTC_VERSION="gpu-check"',
                    "-I" + os.path.join(ROOT, "runtime", "include"), *src, "-o", exe,
                    "-ldl", "-pthread"], check=True)
    return exe


def train(exe, artifact, batch_file, params, losses, env=None, accumulation=0):
    """examples/train_step on `artifact` (under accumulation, its step/ beside its micro/)."""
    args = [artifact, str(STEPS)]
    if accumulation:
        args = [os.path.join(artifact, "step"), str(STEPS // accumulation)]
    more = [os.path.join(artifact, "micro"), str(accumulation)] if accumulation else []
    with open(losses, "w") as f:
        subprocess.run([exe, args[0], batch_file, args[1], str(SEED), repr(LR), params, *more],
                       check=True, stdout=f, env=env)


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "gpu-check"))
    os.makedirs(out, exist_ok=True)
    exe = build_train_step(out)
    tiny_batches = batches("tiny", STEPS, os.path.join(out, "batches-tiny.bin"))

    # The bitwise cases: the CPU's run is the reference; the emulation's must equal it here.
    for name, dropout, model_fn, n in (("tiny-dropout", 0.1, gpt, 0), ("llama", 0.0, llama, 0),
                                       ("accumulate", 0.1, gpt, ACCUMULATION)):
        d = compile_case(out, name, "tiny", dropout, ["cpu", "cuda", "cuda-emulated"], model_fn,
                         accumulation=n)
        case = os.path.join(out, name)
        train(exe, d["cpu"], tiny_batches, os.path.join(case, "expected.safetensors"),
              os.path.join(case, "expected_losses.txt"), accumulation=n)
        shape = os.path.join(case, "graph_shape.json")  # (the step's graph, as captured)
        train(exe, d["cuda-emulated"], tiny_batches, os.path.join(case, "emulated.safetensors"),
              os.path.join(case, "emulated_losses.txt"),
              env={**os.environ, "GPTC_CUDA_GRAPH_SHAPE": shape}, accumulation=n)
        with open(shape) as f:  # (under accumulation, the update's: the last captured)
            print(f"gpu_prepare: {name}: the step's graph: {f.read().strip()}")
        os.remove(shape)
        for a, b in (("expected_losses.txt", "emulated_losses.txt"),
                     ("expected.safetensors", "emulated.safetensors")):
            if not filecmp.cmp(os.path.join(case, a), os.path.join(case, b), shallow=False):
                sys.exit(f"gpu_prepare: error: {name}: the emulated GPU's {os.path.basename(b)} "
                         f"differs from the CPU's: the check would fail on any GPU")
        for f in ("emulated.safetensors", "emulated_losses.txt"):
            os.remove(os.path.join(case, f))
        shutil.rmtree(d["cuda-emulated"])
        shutil.rmtree(d["cpu"])

    prepare_generation(out)
    compile_case(out, "tiny", "tiny", 0.0, ["cuda"])
    big = compile_case(out, "shakespeare_char", "shakespeare_char", 0.0, ["cuda"])
    os.remove(os.path.join(big["cuda"], "weights.safetensors"))
    batches("shakespeare_char", 1, os.path.join(out, "batches-shakespeare_char.bin"))
    os.remove(exe)
    shutil.copytree("/usr/include/nlohmann", os.path.join(out, "include", "nlohmann"),
                    dirs_exist_ok=True)
    with open(os.path.join(out, "prepared.txt"), "w") as f:
        f.write(f"steps {STEPS} seed {SEED} lr {LR!r}\n")
    with open(os.path.join(out, "accumulate", "accumulation.txt"), "w") as f:
        f.write(f"{STEPS // ACCUMULATION} {ACCUMULATION}\n")  # steps, micro-batches a step
    total = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(out) for n in ns)
    print(f"gpu_prepare: {out}: {total / 2**20:.1f} MiB; the emulated GPU gave the CPU's "
          f"bits for {STEPS} steps of both models and under gradient accumulation, and the "
          f"CPU's text")


if __name__ == "__main__":
    main()
