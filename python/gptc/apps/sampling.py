"""Text from a trained main-job run: its meta.json, checkpoint and a compiled generator.

    meta = read_meta("out/meta.json")
    tok, gen = load_trained("out/ckpt.safetensors", meta, threads=2)
    ids = gen.generate(tok.encode("\\n"), 200, temperature=0.8, top_k=None, seed=1337,
                       vocab=tok.vocab_size)

The generator is gptc.compile_generate's (a KV-cached decode step and gptc's sampler) for
a nanoGPT-style GPT, else FullBlock (the whole block per token, the same sampler). The
logits' bits do not depend on the thread count: a seed gives the same text on any number
of threads.
"""
import json
import os

import torch

from .. import compiler
from .. import generate as generate_api
from ..errors import GptcError
from ..train import read_checkpoint
from .model_file import MODEL_ARGS, build_model
from .vocab import tokenizer_from_meta


class RunError(ValueError):
    """A run folder, meta.json or checkpoint that cannot be used: one line."""


def read_meta(path):
    """meta.json of a main-job run: a JSON object with the model's config and tokenizer."""
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise RunError(f"{path} not found: not a folder the main job wrote") from None
    except (OSError, ValueError) as e:  # not JSON, not UTF-8
        raise RunError(f"cannot read {path}: {e}") from None
    if not isinstance(meta, dict):
        raise RunError(f"{path} is not a JSON object: not the main job's meta.json")
    cfg = meta.get("config")
    if not isinstance(cfg, dict) or any(k not in cfg for k in MODEL_ARGS):
        raise RunError(f"{path} has no model config ({', '.join(MODEL_ARGS)})")
    if "tokenizer" not in meta:  # the main job's meta before BPE: the characters
        if not isinstance(meta.get("vocab"), str):
            raise RunError(f"{path} has no tokenizer")
        meta["tokenizer"] = {"kind": "char", "vocab": meta["vocab"]}
    return meta


def tokenizer_of(meta, path="meta.json"):
    try:
        return tokenizer_from_meta(meta["tokenizer"])
    except ValueError as e:
        raise RunError(f"{path}: {e}") from None


def load_trained(ckpt_path, meta, threads, batch=1):
    """(tokenizer, generator) for a run's checkpoint: see make_generator."""
    tok = tokenizer_of(meta)
    cfg = dict(meta["config"], dropout=0.0)
    torch.manual_seed(0)  # the initial weights are overwritten; keep the draw fixed
    model = build_model(meta.get("model"), cfg).eval()
    _, tensors = read_checkpoint(ckpt_path)
    state = {n: torch.from_numpy(t) for n, t in tensors.items()}
    try:
        return tok, make_generator(model, cfg["block_size"], state, threads, batch)
    except GptcError as e:
        raise RunError(f"{ckpt_path} does not fit the model of meta.json: {e}") from None


def make_generator(model, block, state, threads, batch=1):
    """A compiled generator with `state`'s parameters for `batch` texts at once (gptc.
    Generator's rules: a list of `batch` prompts, row b drawn with seed + b):
    gptc.compile_generate's KV-cached decode step for a nanoGPT-style GPT, else (another
    architecture) FullBlock."""
    try:
        gen = generate_api.compile_generate(model, block, batch=batch)
    except GptcError as e:
        if not str(e).startswith("compile_generate takes a nanoGPT-style GPT"):
            raise
        gen = FullBlock(model, block, batch)
    gen.load_state_dict(state)
    gen.set_num_threads(threads)
    return gen


class FullBlock:
    """Generation without a KV cache, for models compile_generate does not take: the
    compiled batch-1 forward over the whole block for every token, the context being the
    last `block` tokens at positions 0..L-1 (causal attention makes the rest, token 0,
    irrelevant to the logits at L-1); the same sampler and draws."""

    def __init__(self, model, block, batch=1):
        context = torch.zeros(1, block, dtype=torch.long)
        self.fwd = compiler.compile(model, (context, context))
        self.block = block
        self.batch = batch  # texts one after another, row b drawn with seed + b

    def load_state_dict(self, state):
        names = {a.name for a in self.fwd.captured.args if a.kind == "param"}
        self.fwd.load_state_dict({n: t for n, t in state.items() if n in names})

    def set_num_threads(self, n):
        self.fwd.set_num_threads(n)

    def generate(self, prompt, n, *, temperature=1.0, top_k=None, top_p=1.0, seed=0,
                 vocab=None):
        if self.batch == 1:
            return self._one(prompt, n, temperature, top_k, top_p, seed, vocab)
        if len(prompt) != self.batch:
            raise GptcError(f"generate: {len(prompt)} prompts for a generator compiled for a "
                            f"batch of {self.batch}")
        return [self._one(p, n, temperature, top_k, top_p, (seed + b) % 2**64, vocab)
                for b, p in enumerate(prompt)]

    @torch.no_grad()
    def _one(self, prompt, n, temperature, top_k, top_p, seed, vocab):
        ids = list(prompt)
        if not ids:
            raise GptcError("generate: the prompt is empty")
        dummy_targets = torch.zeros(1, self.block, dtype=torch.long)
        for draw in range(n):
            ctx = ids[-self.block:]
            idx = torch.zeros(1, self.block, dtype=torch.long)
            idx[0, :len(ctx)] = torch.tensor(ctx, dtype=torch.long)
            logits = self.fwd(idx, dummy_targets)[0][0, len(ctx) - 1]
            ids.append(generate_api.sample(logits[:vocab], temperature=temperature,
                                           top_k=top_k, top_p=top_p, seed=seed, draw=draw))
        return ids[len(prompt):]


def default_prompt(tok):
    """A newline when the vocabulary can say it, else the first token's text."""
    try:
        tok.encode("\n")
        return "\n"
    except ValueError:
        return tok.decode([0])


def run_paths(path):
    """(meta.json, checkpoint) for a run folder or a checkpoint file inside one."""
    if os.path.isdir(path):
        return os.path.join(path, "meta.json"), os.path.join(path, "ckpt.safetensors")
    return os.path.join(os.path.dirname(path) or ".", "meta.json"), path
