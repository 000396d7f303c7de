"""Generation: the KV-cached decode step (gptc.compile_generate), gptc's sampler, and a C
program that writes the same text (examples/generate.c)."""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open

import gptc
from conftest import REPO, generate_program, run_ok, runtime_library
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

CFG = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=23)


@pytest.fixture(scope="module")
def model_and_gen():
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(**CFG, bias=True)).eval()
    return model, gptc.compile_generate(model)


def test_decode_steps_give_the_full_forwards_logits(model_and_gen):
    """Fed one token at a time, its keys and values stored after each, the decode step's
    logits at each position are the whole forward's (to rounding: its attention sums in
    another order)."""
    model, gen = model_and_gen
    seq = torch.randint(0, CFG["vocab_size"], (1, CFG["block_size"]),
                        generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(seq, seq)[0][0]
    k = torch.zeros(gen.k_shape)  # keys transposed: [layers, 1, heads, head size, T]
    v = torch.zeros(gen.v_shape)
    for pos in range(CFG["block_size"]):
        logits, k_row, v_row = gen.step(seq[:, pos:pos + 1], torch.tensor([pos]), *k, *v)
        assert (logits[0] - full[pos]).abs().max() < 1e-5, pos
        k[:, :, :, :, pos] = k_row[:, :, :, 0]  # the caller stores the step's keys, values
        v[:, :, :, pos] = v_row[:, :, :, 0]
    # The cache holds every position's keys now, none left at zero.
    assert (k.abs().amax(dim=(0, 1, 2, 3)) > 0).all()
    # The prefill: the first half at once, the logits after it and the caches those
    # decode steps fill (zero past it).
    half = CFG["block_size"] // 2
    assert gen.prefill_len == half
    logits, pk, pv = gen.prefill(seq[:, :half])
    assert (logits[0] - full[half - 1]).abs().max() < 1e-5
    assert (pk[..., :half] - k[..., :half]).abs().max() < 1e-5
    assert (pv[:, :, :, :half] - v[:, :, :, :half]).abs().max() < 1e-5
    assert not pk[..., half:].any() and not pv[:, :, :, half:].any()


def test_trained_weights_are_loaded_by_pytorch_name(model_and_gen):
    model, gen = model_and_gen
    other = TinyGPT(TinyGPTConfig(**CFG, bias=True)).eval()
    gen.load_state_dict(other.state_dict())
    seq = torch.tensor([[3, 1, 4]])
    with torch.no_grad():
        want = other(seq, seq)[0][0, -1]
    text = gen.generate([3, 1, 4], 1, temperature=0)
    assert text == [int(torch.argmax(want))]
    # Through the prefill too (a prompt that fills it): its logits are the loaded model's.
    long = list(range(2, 2 + gen.prefill_len))
    logits, _, _ = gen.prefill(torch.tensor([long]))
    with torch.no_grad():
        full = other(torch.tensor([long]), torch.tensor([long]))[0][0, -1]
    assert (logits[0] - full).abs().max() < 1e-5
    # The prefill holds the decode step's weights, not a copy: a write through one is seen
    # by the other.
    name = "model.transformer.h.0.attn.c_attn.weight"
    w = gen.step.runtime.param(name)
    assert (gen.prefill.runtime.param(name) == w).all()
    gen.step.runtime.set_param(name, w * 2)
    assert (gen.prefill.runtime.param(name) == w * 2).all()
    gen.load_state_dict(model.state_dict())


def test_generation_is_the_same_on_any_thread_count_and_shifts_its_context(model_and_gen):
    _, gen = model_and_gen
    runs = []
    for threads in (1, 2):
        gen.set_num_threads(threads)
        runs.append(gen.generate([5, 6], 3 * CFG["block_size"], temperature=1.0, top_k=10,
                                 seed=11))
    assert runs[0] == runs[1] and len(runs[0]) == 3 * CFG["block_size"]
    assert gen.generate([5, 6], 20, temperature=1.0, top_k=10, seed=12) != runs[0][:20]
    # Past the compiled length the context is the text's last half, fed from position 0.
    # Greedily: the prompt's 2 tokens and 14 drawn fill the 16 positions; the 15th drawn
    # token is then drawn from them, and the 16th on from text[9:17] alone.
    greedy = gen.generate([5, 6], CFG["block_size"] + 4, temperature=0)
    text = [5, 6] + greedy
    half = CFG["block_size"] // 2
    assert gen.generate(text[CFG["block_size"] + 1 - half:CFG["block_size"] + 1], 3,
                        temperature=0) == greedy[CFG["block_size"] - 1:CFG["block_size"] + 2]


def test_bad_requests_are_one_line_errors(model_and_gen):
    _, gen = model_and_gen
    for args, kw, said in (
            (([], 3), {}, "generate: the prompt is empty"),
            (([1] * 17, 3), {}, "the prompt has 17 tokens, more than the compiled maximum "
                                "length 16"),
            (([23], 3), {}, "token 23 of the prompt is outside the vocabulary (0 to 22)"),
            (([1], 3), dict(top_k=0), "top_k must be at least 1"),
            (([1], 3), dict(temperature=-1.0), "temperature must be a finite number >= 0"),
            (([1], 3), dict(temperature=float("nan")), "temperature must be a finite number"),
            (([1], 3), dict(top_p=0.0), "top_p must be in (0, 1]"),
            (([1], 3), dict(top_p=1.5), "top_p must be in (0, 1]"),
            (([1], -1), {}, "generate: n must be an integer from 0")):
        with pytest.raises(gptc.GptcError) as e:
            gen.generate(*args, **kw)
        assert said in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(gptc.GptcError, match="compile_generate takes a nanoGPT-style GPT; "
                                             "Linear has no transformer.wte"):
        gptc.compile_generate(torch.nn.Linear(3, 3))


def test_a_batch_writes_each_rows_text_as_batch_1_does(model_and_gen, tmp_path):
    """A generator compiled for 3 texts writes, for each of 3 prompts, the tokens the
    batch-1 generator writes for it with seed + row: prompts of one length through the
    decode steps alone (3 tokens) and through the prefill (10); prompts of different
    lengths with none, some or all filling the prefill (8 tokens), one of them the whole
    compiled length; and past the compiled length, where every row's context shifts. The
    runtime's generator (examples/generate.c on the saved batch, and a C program with
    prompts of different lengths) writes the same rows; what a batch cannot take is one
    line."""
    model, gen = model_and_gen
    gen3 = gptc.compile_generate(model, batch=3)
    n = 2 * CFG["block_size"] + 3
    for lengths in ((3, 3, 3), (10, 10, 10), (2, 7, 5), (3, 10, 8), (1, 5, 16), (9, 12, 8)):
        prompts = [[(5 * b + 3 * i + 1) % CFG["vocab_size"] for i in range(length)]
                   for b, length in enumerate(lengths)]
        rows = gen3.generate(prompts, n, temperature=0.9, top_k=8, seed=21)
        assert rows == [gen.generate(p, n, temperature=0.9, top_k=8, seed=21 + b)
                        for b, p in enumerate(prompts)], lengths
        assert len({tuple(r) for r in rows}) == 3
    assert gen3.generate([[1], [2, 3], [4]], 0) == [[], [], []]
    for prompts, said in (([[1, 2]] * 2, "2 prompts for a generator compiled for a batch of 3"),
                          ([[1, 2], [], [1, 2]], "generate: prompt 1 is empty"),
                          ([[1, 2], [1], [1] * 17], "prompt 2 has 17 tokens, more than the "
                                                    "compiled maximum length 16"),
                          ([1, 2, 3], "give a list of 3 prompts")):
        with pytest.raises(gptc.GptcError, match=re.escape(said)):
            gen3.generate(prompts, 3)

    exe = generate_program(tmp_path)
    letters = [bytes([ord("a") + i]) for i in range(CFG["vocab_size"])]
    gen3.save(str(tmp_path / "gen3"), tokens=letters)
    # The prefill's weights file holds only what the decode step's does not: the weights
    # are on disk once, and C loads the pair (below).
    saved = {where: set(safe_open(str(tmp_path / "gen3" / where / "weights.safetensors"),
                                  "np").keys()) for where in ("", "prefill")}
    shared = set(gen3.prefill.runtime.shared_params)
    assert shared and shared <= saved[""] and not saved["prefill"] & saved[""]
    assert saved["prefill"] == {n for n, *_ in gen3.prefill.runtime.params} - shared
    c = subprocess.run([str(exe), str(tmp_path / "gen3"), "cab", "40", "9", "0.8", "6"],
                       capture_output=True, timeout=300)
    assert c.returncode == 0, c.stderr
    rows = gen3.generate([[2, 0, 1]] * 3, 40, temperature=0.8, top_k=6, seed=9)
    want = "".join("cab" + "".join(chr(ord("a") + t) for t in r) + "\n---------------\n"
                   for r in rows)
    assert c.stdout.decode() == want
    # Prompts of different lengths from C are Python's rows; the one-text call on a
    # batch, and a batch call's bad prompt, are one line each.
    (tmp_path / "one.c").write_text(r"""
#include <gptc/runtime.h>
#include <stdio.h>
int main(int argc, char** argv) {
  gptc_generator* g = gptc_generator_load(argv[1]);
  const int64_t a[3] = {2, 0, 1}, b[1] = {4}, c[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, bad[1] = {99};
  const int64_t* rows[3] = {a, b, c};
  int64_t lens[3] = {3, 1, 9}, out[3 * 4];
  printf("%lld\n", (long long)gptc_generator_batch(g));
  if (gptc_generate_batch(g, rows, lens, 4, 0.8f, 6, 1.0f, 5, out) < 0) return 1;
  for (int i = 0; i < 12; ++i) printf("%lld%c", (long long)out[i], i % 4 == 3 ? '\n' : ' ');
  if (gptc_generate(g, a, 3, 4, 1.0f, -1, 1.0f, 0, out) < 0) puts(gptc_last_error());
  rows[2] = bad;
  lens[2] = 1;
  if (gptc_generate_batch(g, rows, lens, 4, 1.0f, -1, 1.0f, 0, out) < 0) puts(gptc_last_error());
  lens[1] = -1;
  if (gptc_generate_batch(g, rows, lens, 4, 1.0f, -1, 1.0f, 0, out) < 0) puts(gptc_last_error());
  gptc_generator_free(g);
  return 0;
}
""")
    run_ok("cc", "-I", os.path.join(REPO, "runtime", "include"), "-c", str(tmp_path / "one.c"),
           "-o", str(tmp_path / "one.o"))
    run_ok("c++", str(tmp_path / "one.o"), runtime_library(), "-ldl", "-pthread", "-o",
           str(tmp_path / "one"))
    rows = gen3.generate([[2, 0, 1], [4], list(range(1, 10))], 4, temperature=0.8, top_k=6,
                         seed=5)
    assert run_ok(str(tmp_path / "one"), str(tmp_path / "gen3")) == (
        "3\n" + "".join(" ".join(map(str, r)) + "\n" for r in rows) +
        "generate: the generator writes 3 texts at once; give it that many prompts "
        "(generate_batch)\ngenerate: token 99 of prompt 2 is outside the vocabulary "
        "(0 to 22)\ngptc_generate_batch: prompt 1's length is negative\n")


def test_the_sampler_draws_by_the_probabilities():
    """Over 20,000 draws (one seed, draw numbers 0..19999) each token's frequency is its
    softmax probability within sampling error; top-k never draws past the k likeliest,
    top-p keeps the smallest likeliest set reaching p, temperature 0 takes the likeliest
    (the lowest id among ties)."""
    logits = np.array([2.0, 1.0, 0.5, 0.5, -1.0, -np.inf, 3.0], np.float32)
    n = 20_000
    draws = np.array([gptc.sample(logits, temperature=0.7, seed=3, draw=d) for d in range(n)])
    p = np.exp((logits - logits.max()) / 0.7)
    p /= p.sum()
    freq = np.bincount(draws, minlength=len(logits)) / n
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-9), (freq, p)
    assert freq[5] == 0
    top2 = {gptc.sample(logits, top_k=2, seed=4, draw=d) for d in range(500)}
    assert top2 == {6, 0}
    # p(6) = 0.63 at temperature 1 and p(0) = 0.23: top_p 0.7 keeps {6, 0}, 0.5 keeps {6}.
    assert {gptc.sample(logits, top_p=0.7, seed=4, draw=d) for d in range(500)} == {6, 0}
    assert {gptc.sample(logits, top_p=0.5, seed=4, draw=d) for d in range(50)} == {6}
    assert gptc.sample(logits, temperature=0) == 6
    assert gptc.sample(np.array([1.0, 3.0, 3.0], np.float32), temperature=0) == 1
    assert [gptc.sample(logits, seed=9, draw=d) for d in range(50)] == \
        [gptc.sample(torch.from_numpy(logits), seed=9, draw=d) for d in range(50)]
    for bad, said in ((np.array([np.nan, 1], np.float32), "logit 0 is NaN"),
                      (np.array([-np.inf, -np.inf], np.float32), "every logit is -inf"),
                      (np.zeros(0, np.float32), "no logits")):
        with pytest.raises(gptc.GptcError, match=said):
            gptc.sample(bad)


def test_a_c_program_writes_the_text_python_writes(tmp_path):
    """The main job trains a little and saves its decode step; examples/generate.c, linked
    with the runtime library only, runs it through the runtime's generator (gptc_generate)
    on every core and prints the text examples/sample.py prints for the same prompt,
    length, seed and settings."""
    exe = generate_program(tmp_path)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{i} little pigs met {i % 5} wolves, said the tale.\n"
                            for i in range(300)))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = tmp_path / "out"
    train = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "train.py"), "--data", str(text),
         "--out", str(out), "--iters", "30", "--eval-interval", "30", "--eval-batches", "2",
         "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16",
         "--batch", "4", "--sample-chars", "10", "--threads", "2"],
        capture_output=True, text=True, env=env, timeout=600)
    assert train.returncode == 0, train.stderr[-2000:]
    assert (out / "generate" / "tokens.bin").exists()
    for prompt, n, seed, temp, top_k in (("3 little", 60, 7, "0.8", "5"),
                                         ("1", 45, 8, "1.0", "-1")):
        c = subprocess.run([str(exe), str(out / "generate"), prompt, str(n), str(seed), temp,
                            top_k], capture_output=True, timeout=300)
        assert c.returncode == 0, c.stderr
        py = subprocess.run(
            [sys.executable, os.path.join(REPO, "examples", "sample.py"), str(out),
             "--prompt", prompt, "--length", str(n), "--seed", str(seed), "--temperature",
             temp, "--threads", "1"] + ([] if top_k == "-1" else ["--top-k", top_k]),
            capture_output=True, env=env, timeout=300)
        assert py.returncode == 0, py.stderr
        assert c.stdout == py.stdout and len(c.stdout) > n, (c.stdout, py.stdout)
    # --num-samples 2: side by side, the texts seeds 7 and 8 write alone.
    sample = [sys.executable, os.path.join(REPO, "examples", "sample.py"), str(out), "--prompt",
              "3 little", "--length", "30", "--top-k", "5", "--threads", "1"]
    alone = [run_ok(*sample, "--seed", str(seed), env=env) for seed in (7, 8)]
    assert len(set(alone)) == 2
    assert run_ok(*sample, "--seed", "7", "--num-samples", "2", env=env) == "".join(
        t + "---------------\n" for t in alone)
    bad = subprocess.run([str(exe), str(out / "generate"), "\u00e9", "5", "1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr == (
        "generate: error: encode: the text holds a character outside the vocabulary "
        "(byte 0)\n")
    long = subprocess.run([str(exe), str(out / "generate"), "1" * 17, "5", "1"],
                          capture_output=True, text=True, timeout=60)
    assert long.returncode == 1 and long.stderr == (
        "generate: error: generate: the prompt has 17 tokens, more than the compiled maximum "
        "length 16\n")


def test_a_cpp_program_trains_bit_for_bit_as_python(tmp_path):
    """examples/train_step.cpp, linked with the runtime library only, runs a training-step
    artifact on the batches Python trained on, with the same seed and learning rate, on
    every core: each step's loss and, after the last, every parameter and AdamW moment are
    gptc.TrainStep's bits (dropout included)."""
    library = runtime_library()
    from safetensors.numpy import load_file
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(**dict(CFG, n_layer=1), dropout=0.1)).train()
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randint(0, 23, (4, 16), generator=g), torch.randint(0, 23, (4, 16),
                                                                         generator=g))
               for _ in range(6)]
    step = gptc.compile_train_step(model, batches[0], optimizer=gptc.AdamW(
        lr=1e-3, weight_decay=0.1), grad_clip=1.0, seed=5, workdir=str(tmp_path / "w"))
    step.set_num_threads(1)
    losses = [float(step(x, y, lr=3e-3)) for x, y in batches]
    step.save(str(tmp_path / "python.safetensors"))
    with open(tmp_path / "batches.bin", "wb") as f:
        for x, y in batches:
            f.write(x.numpy().astype("<i8").tobytes() + y.numpy().astype("<i8").tobytes())
    exe = tmp_path / "train_step"
    subprocess.run(["c++", "-std=c++17", "-I", os.path.join(REPO, "runtime", "include"),
                    os.path.join(REPO, "examples", "train_step.cpp"), library, "-ldl",
                    "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(tmp_path / "w" / "artifact"), str(tmp_path / "batches.bin"),
                          "6", "5", "3e-3", str(tmp_path / "cpp.safetensors")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [float.fromhex(line) for line in run.stdout.split()] == losses
    ours, theirs = load_file(str(tmp_path / "cpp.safetensors")), load_file(
        str(tmp_path / "python.safetensors"))
    assert set(theirs) <= set(ours) and any(k.startswith("exp_avg_sq.") for k in theirs)
    for name, t in theirs.items():
        assert ours[name].tobytes() == t.tobytes(), name
    short = subprocess.run([str(exe), str(tmp_path / "w" / "artifact"),
                            str(tmp_path / "batches.bin"), "7", "5", "3e-3",
                            str(tmp_path / "x.safetensors")], capture_output=True, text=True)
    assert short.returncode == 1 and short.stderr.strip().endswith(
        "batches.bin holds fewer batches than STEPS")
    # Gradient accumulation: the micro-batch program and the update, 3 micro-batches a
    # step, against TrainStep's (the 6 batches are two steps' micro-batches).
    acc = gptc.compile_train_step(model, batches[0], optimizer=gptc.AdamW(
        lr=1e-3, weight_decay=0.1), grad_clip=1.0, seed=5, workdir=str(tmp_path / "a"),
        accumulation_steps=3)
    losses = [float(acc(torch.stack(xs), torch.stack(ys), lr=3e-3))
              for xs, ys in (zip(*batches[:3]), zip(*batches[3:]))]
    acc.save(str(tmp_path / "python_acc.safetensors"))
    run = subprocess.run([str(exe), str(tmp_path / "a" / "step" / "artifact"),
                          str(tmp_path / "batches.bin"), "2", "5", "3e-3",
                          str(tmp_path / "cpp_acc.safetensors"),
                          str(tmp_path / "a" / "micro" / "artifact"), "3"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [float.fromhex(line) for line in run.stdout.split()] == losses
    ours, theirs = load_file(str(tmp_path / "cpp_acc.safetensors")), load_file(
        str(tmp_path / "python_acc.safetensors"))
    assert any(k.startswith("grad.") for k in ours) and any(k.startswith("exp_avg.") for k in theirs)
    for name, t in theirs.items():
        assert ours[name].tobytes() == t.tobytes(), name
    # A plain step beside a micro-batch program is not an accumulation's pair: one line.
    bad = subprocess.run([str(exe), str(tmp_path / "w" / "artifact"), str(tmp_path / "batches.bin"),
                          "2", "5", "3e-3", str(tmp_path / "x.safetensors"),
                          str(tmp_path / "a" / "micro" / "artifact"), "3"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and bad.stderr.strip().endswith(
        "are not an accumulation's micro-batch program and update"), bad.stderr


def test_shorter_decode_steps_give_the_full_steps_bits(tmp_path):
    """A generator of 96 positions also compiles decode steps over 32 and 64 (a step reads
    its caches' every position, written or not) and runs them while its texts are that
    short. Each gives the full step's logits and rows bit for bit at every position it
    holds; the texts are the full step's alone, through the caches' moves between them, a
    prefill among short prompts and the context shift; and a saved generator loads them
    from steps/ in C, writing the same text."""
    from gptc.generate import shorter_lengths
    from gptc.locate import load_runtime
    assert shorter_lengths(1024) == [128, 256, 512] and shorter_lengths(16) == []
    assert shorter_lengths(1000) == [136, 264, 520]  # 1000 less a multiple of 32
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=96,
                                  vocab_size=23, bias=True)).eval()
    gen = gptc.compile_generate(model, batch=2)
    assert [s.runtime.inputs[2][2][-1] for s in gen.shorter] == [32, 64]
    rng = np.random.default_rng(0)
    L, B, H, hs, T = 2, 2, 2, 16, 96
    for s in gen.shorter:
        length = s.runtime.inputs[2][2][-1]
        for pos in (0, 1, 17, length - 1):
            k = rng.standard_normal((L, B, H, hs, T)).astype(np.float32)
            v = rng.standard_normal((L, B, H, T, hs)).astype(np.float32)
            k[..., pos:], v[..., pos:, :] = 0, 0  # what the generator's caches hold there
            fixed = [np.array([[5], [7]], np.int64), np.array([pos], np.int64)]
            full = gen.step.runtime.run(fixed + list(k) + list(v))
            short = s.runtime.run(fixed + [np.ascontiguousarray(c[..., :length]) for c in k]
                                  + [np.ascontiguousarray(c[..., :length, :]) for c in v])
            for a, b in zip(full, short):
                assert a.tobytes() == b.tobytes(), (length, pos)
    alone = load_runtime().Generator(gen.step.runtime, gen.prefill.runtime)
    cases = ([[1, 2, 3], [4]], [[1] * 50, [2] * 10], [[3] * 60, [5] * 70])
    for prompts in cases:
        rows = gen.generate(prompts, 150, temperature=1.0, seed=3)
        assert rows == alone.generate_batch(prompts, 150, 1.0, -1, 1.0, 3, 0), prompts
    with pytest.raises(RuntimeError, match="not a shorter decode step of"):
        load_runtime().Generator(gen.step.runtime, gen.prefill.runtime, [gen.step.runtime])

    gen.save(str(tmp_path / "gen"))
    assert sorted(os.listdir(tmp_path / "gen" / "steps")) == ["32", "64"]
    (tmp_path / "two.c").write_text(r"""
#include <gptc/runtime.h>
#include <stdio.h>
int main(int argc, char** argv) {
  gptc_generator* g = gptc_generator_load(argv[1]);
  if (!g) { puts(gptc_last_error()); return 1; }
  const int64_t a[3] = {1, 2, 3}, b[1] = {4};
  const int64_t* rows[2] = {a, b};
  int64_t lens[2] = {3, 1}, out[2 * 150];
  if (gptc_generate_batch(g, rows, lens, 150, 1.0f, -1, 1.0f, 3, out) < 0) return 1;
  for (int i = 0; i < 300; ++i) printf("%lld%c", (long long)out[i], i % 150 == 149 ? '\n' : ' ');
  gptc_generator_free(g);
  return 0;
}
""")
    run_ok("cc", "-I", os.path.join(REPO, "runtime", "include"), "-c", str(tmp_path / "two.c"),
           "-o", str(tmp_path / "two.o"))
    run_ok("c++", str(tmp_path / "two.o"), runtime_library(), "-ldl", "-pthread", "-o",
           str(tmp_path / "two"))
    rows = gen.generate(cases[0], 150, temperature=1.0, seed=3)
    assert run_ok(str(tmp_path / "two"), str(tmp_path / "gen")) == "".join(
        " ".join(map(str, r)) + "\n" for r in rows)


def test_the_gpus_text_is_the_cpus(tmp_path):
    """compile_generate(device="cuda-emulated"): the decode steps and the prefill as CUDA
    kernels, sharing the weights in device memory, write the CPU generator's texts token
    for token (sampled, through the prefill, the shorter steps' moves and the context
    shift; after a load_state_dict too), and a saved one in C as well; a token waits for
    the device once."""
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64,
                                  vocab_size=23, bias=True)).eval()
    gens = {d: gptc.compile_generate(model, batch=2, device=d, workdir=str(tmp_path / d))
            for d in ("cpu", "cuda-emulated")}
    gpu = gens["cuda-emulated"]
    assert len(gpu.shorter) == 1
    with open(os.path.join(gpu.prefill.artifact_dir, "manifest.json")) as f:
        assert '"target": "cuda-emulated"' in f.read()
    prompts = [[1, 2, 3], [4] * 40]
    programs = [gpu.step, gpu.prefill, *gpu.shorter]
    before = [p.runtime.transfers for p in programs]
    texts = {d: g.generate(prompts, 150, temperature=1.0, top_k=8, seed=3)
             for d, g in gens.items()}
    assert texts["cpu"] == texts["cuda-emulated"] and len(texts["cpu"][0]) == 150
    # The caches stay in device memory: a token moves its ids and logits, not the caches
    # (the full step's keys and values, every layer's: 64 KiB here) each way.
    moved = [sum(p.runtime.transfers[i] - b[i] for p, b in zip(programs, before))
             for i in (0, 1)]
    caches = sum(4 * math.prod(shape) for _, _, shape in gpu.step.runtime.inputs[2:])
    assert caches == 64 * 1024 and 0 < moved[0] < 150 * caches // 64 and \
        0 < moved[1] < 150 * caches // 64, moved
    assert gens["cpu"].step.runtime.transfers == (0, 0)
    # Through the shorter step, the move to the full one and two context shifts: the same
    # texts, and a token waits for the device once, for its logits. The caches' copies are
    # queued on the stream of the program that runs next (the emulation, like a GPU, does
    # not finish them before another program's work), so the generator waits beyond its
    # 100 runs only when the program changes with copies queued (the move, the two shifts)
    # and before it returns.
    before = [p.runtime.waits for p in programs]
    texts = {d: g.generate([[1], [2]], 100, temperature=1.0, top_k=8, seed=3)
             for d, g in gens.items()}
    assert texts["cpu"] == texts["cuda-emulated"]
    assert sum(p.runtime.waits - b for p, b in zip(programs, before)) == 100 + 3 + 1
    assert gens["cpu"].step.runtime.waits == 0
    # The programs of one generator run on one target (the GPU's prefill beside the CPU's
    # decode step would write its caches in host memory): one line.
    from gptc.locate import load_runtime
    with pytest.raises(RuntimeError, match=r'^\S+prefill\S*: a program for target '
                       r'"cuda-emulated" beside a decode step for "cpu" \(\S+\)$'):
        load_runtime().Generator(gens["cpu"].step.runtime, gpu.prefill.runtime, [])
    other = TinyGPT(TinyGPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64,
                                  vocab_size=23, bias=True)).state_dict()
    for g in gens.values():
        g.load_state_dict(other)
    texts = {d: g.generate(prompts, 70, temperature=0) for d, g in gens.items()}
    assert texts["cpu"] == texts["cuda-emulated"]
    letters = [bytes([ord("a") + i]) for i in range(23)]
    gpu.save(str(tmp_path / "gen"), tokens=letters)
    c = run_ok(generate_program(tmp_path), str(tmp_path / "gen"), "cab", "40", "9", "0.8", "6")
    rows = gens["cpu"].generate([[2, 0, 1]] * 2, 40, temperature=0.8, top_k=6, seed=9)
    assert c == "".join("cab" + "".join(chr(ord("a") + t) for t in r) + "\n" + "-" * 15 + "\n"
                        for r in rows)


def test_programs_beside_the_decode_step_hold_only_their_own_weights(tmp_path):
    """compile_generate writes and copies the model's weights once: the prefill's and the
    shorter steps' weights files leave out what the decode step holds (gptc compile
    --weights-of), and no program writes an example inputs file (a decode step's are its
    caches' zeros). gptc compile checks such a program against the artifact it names: a
    param left out and not held there, or a folder that is not an artifact, is one line."""
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64,
                                  vocab_size=23, bias=True)).eval()
    work = tmp_path / "w"
    gen = gptc.compile_generate(model, workdir=str(work))
    assert sorted(os.listdir(work)) == ["decode", "decode-32", "prefill"]
    keys = lambda path: set(safe_open(str(path), "np").keys())  # noqa: E731
    params = {n for n, *_ in gen.step.runtime.params}
    assert keys(work / "decode" / "model.safetensors") == params
    assert keys(work / "decode" / "artifact" / "weights.safetensors") == params
    for folder, program in (("prefill", gen.prefill), ("decode-32", gen.shorter[0])):
        own = {n for n, *_ in program.runtime.params} - set(program.runtime.shared_params)
        assert program.runtime.shared_params and not own & params
        assert keys(work / folder / "model.safetensors") == own
        assert keys(work / folder / "artifact" / "weights.safetensors") == own
    assert not list(work.glob("*/model.inputs.safetensors"))

    def compile_prefill(*flags):
        return subprocess.run([gptc.find_tool("gptc"), "compile", str(work / "prefill" /
                               "model.mlir"), "-o", str(tmp_path / "p"), *flags],
                              capture_output=True, text=True)
    alone = compile_prefill()
    assert alone.returncode == 1 and len(alone.stderr.splitlines()) == 1, alone.stderr
    assert "missing tensor 'model.transformer.wte.weight'" in alone.stderr
    nowhere = compile_prefill("--weights-of", str(tmp_path / "nowhere"))
    assert nowhere.returncode == 1 and "does not exist" in nowhere.stderr
    assert len(nowhere.stderr.splitlines()) == 1, nowhere.stderr
    emit = compile_prefill("--weights-of", str(work / "decode" / "artifact"), "--emit=gpt")
    assert emit.returncode == 2 and "--weights-of applies to an artifact" in emit.stderr
    beside = compile_prefill("--weights-of", str(work / "decode" / "artifact"))
    assert beside.returncode == 0, beside.stderr
    from gptc.locate import load_runtime
    again = load_runtime().Model(str(tmp_path / "p"), gen.step.runtime)
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6] * 4], np.int64)
    for a, b in zip(again.run([ids]), gen.prefill.runtime.run([ids])):
        assert a.tobytes() == b.tobytes()
