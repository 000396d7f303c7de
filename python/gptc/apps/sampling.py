"""Text from a trained main-job run: its meta.json, the compiled forward, the sampler.

    meta = read_meta("out/meta.json")
    tok, fwd = load_trained("out/ckpt.safetensors", meta, threads=2)
    ids = generate(fwd, tok.encode("\\n"), 200, meta["config"]["block_size"],
                   tok.vocab_size, temperature=0.8, top_k=None,
                   generator=torch.Generator().manual_seed(1337))

The sampler is nanoGPT's (temperature, optional top-k, softmax, torch.multinomial from an
explicit generator), run on logits from gptc's compiled forward, whose bits do not depend
on the thread count: a seed gives the same text on any number of threads.
"""
import json
import math
import os

import torch

from .. import compiler
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


def load_trained(ckpt_path, meta, threads):
    """(tokenizer, compiled batch-1 forward at the block size) with the checkpoint's
    parameters."""
    tok = tokenizer_of(meta)
    cfg = dict(meta["config"], dropout=0.0)
    torch.manual_seed(0)  # the initial weights are overwritten; keep the draw fixed
    model = build_model(meta.get("model"), cfg).eval()
    context = torch.zeros(1, cfg["block_size"], dtype=torch.long)
    fwd = compiler.compile(model, (context, context))
    fwd.set_num_threads(threads)
    names = [a.name for a in fwd.captured.args if a.kind == "param"]
    _, tensors = read_checkpoint(ckpt_path)
    try:
        fwd.load_state_dict({n: torch.from_numpy(tensors[n]) for n in names if n in tensors})
    except GptcError as e:
        raise RunError(f"{ckpt_path} does not fit the model of meta.json: {e}") from None
    return tok, fwd


@torch.no_grad()
def generate(fwd, prompt_ids, n, block, vocab, temperature, top_k, generator):
    """Sample n tokens after prompt_ids with a compiled forward of batch 1, T=block.

    The context (its last `block` tokens) sits at positions 0..L-1, the rest is token 0;
    causal attention makes positions >= L irrelevant to the logits at L-1."""
    ids = list(prompt_ids)
    dummy_targets = torch.zeros(1, block, dtype=torch.long)
    for _ in range(n):
        ctx = ids[-block:]
        idx = torch.zeros(1, block, dtype=torch.long)
        idx[0, :len(ctx)] = torch.tensor(ctx, dtype=torch.long)
        logits, _ = fwd(idx, dummy_targets)
        logits = logits[0, len(ctx) - 1, :vocab].to(torch.float32)
        if temperature <= 0:
            ids.append(int(torch.argmax(logits)))
            continue
        logits = logits / temperature
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits = torch.where(logits < kth, torch.full_like(logits, -math.inf), logits)
        probs = torch.softmax(logits, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=generator)))
    return ids[len(prompt_ids):]


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
