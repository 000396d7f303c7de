"""Text generation with a KV cache: one compiled decode step, gptc's sampler.

    gen = gptc.compile_generate(model)              # a nanoGPT-style GPT, eval mode
    gen.load_state_dict(trained_state)              # PyTorch names, as compile's
    ids = gen.generate(prompt_ids, 200, temperature=0.8, top_k=40, seed=7)
    gen.save("out/generate")                        # for a C or C++ program (runtime.h)

The decode step is a forward of its own, captured from the model's modules: it takes one
token per sequence, its position and the key/value cache of every layer ([layers, batch,
heads, max_len, head size] each), appends the token's keys and values at that position,
attends over the positions up to it and returns the next token's logits with the new
caches. A prompt is fed one token at a time (the prefill); each new token costs one step
whose attention spans at most max_len positions, where running the whole block again
costs max_len positions of every layer. When the text reaches max_len the context shifts:
the last max_len // 2 tokens are fed again from position 0 (nanoGPT instead crops to the
last block_size tokens and reruns them for every token).

Tokens are drawn by gptc.sample (runtime/include/gptc/sample.hpp): temperature, top-k,
top-p, from a Philox stream keyed by the seed, the n-th new token being draw n; the C
API's gptc_sample is the same function, so a C program that runs the saved decode step
writes the same text. The logits' bits do not depend on the thread count.
"""
from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .compiler import CompiledModel, capture_and_compile, check_int
from .errors import GptcError
from .locate import load_runtime


def sample(logits, *, temperature: float = 1.0, top_k: int | None = None,
           top_p: float = 1.0, seed: int = 0, draw: int = 0) -> int:
    """The token gptc's sampler draws from a 1-D row of logits (see the module's doc)."""
    row = np.ascontiguousarray(
        (logits.detach().float().numpy() if isinstance(logits, torch.Tensor)
         else np.asarray(logits)), dtype=np.float32)
    if row.ndim != 1:
        raise GptcError(f"sample: logits must be one row, got shape {row.shape}")
    try:
        return int(load_runtime().sample(row, float(temperature),
                                         -1 if top_k is None else int(top_k), float(top_p),
                                         check_int("seed", seed, -2**63, 2**64 - 1) % 2**64,
                                         check_int("draw", draw, 0, 2**64 - 1)))
    except RuntimeError as e:
        raise GptcError(str(e)) from None


class DecodeStep(nn.Module):
    """One decode step of a nanoGPT-style GPT (transformer.wte, .wpe, .h[i].ln_1,
    .attn.c_attn, .attn.c_proj, .attn.n_head, .ln_2, .mlp, transformer.ln_f, lm_head),
    reading its modules: the weights are the model's."""

    def __init__(self, model: nn.Module, max_len: int):
        super().__init__()
        self.model = model
        self.max_len = max_len

    def forward(self, idx, pos, k_cache, v_cache):
        tr = self.model.transformer
        B, C, T = idx.shape[0], tr.wte.weight.shape[1], self.max_len
        x = tr.wte(idx) + tr.wpe(pos)                          # [B, 1, C]
        t = torch.arange(T, dtype=torch.long)
        write = (t == pos).view(1, 1, T, 1)                    # this token's row
        later = (t > pos).view(1, 1, 1, T)                     # not yet written
        ks, vs = [], []
        for i, block in enumerate(tr.h):
            H = block.attn.n_head
            hs = C // H
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(C, dim=2)
            q = q.view(B, 1, H, hs).transpose(1, 2)            # [B, H, 1, hs]
            k = torch.where(write, k.view(B, 1, H, hs).transpose(1, 2), k_cache[i])
            v = torch.where(write, v.view(B, 1, H, hs).transpose(1, 2), v_cache[i])
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = F.softmax(att.masked_fill(later, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, 1, C)
            x = x + block.attn.c_proj(y)
            x = x + block.mlp(block.ln_2(x))
            ks.append(k)
            vs.append(v)
        logits = self.model.lm_head(tr.ln_f(x))[:, -1, :]      # [B, vocab]
        return logits, torch.stack(ks), torch.stack(vs)


_NEEDS = ("transformer.wte", "transformer.wpe", "transformer.h", "transformer.ln_f", "lm_head")
_BLOCK_NEEDS = ("ln_1", "attn.c_attn", "attn.c_proj", "attn.n_head", "ln_2", "mlp")


def _check_nanogpt_style(model) -> None:
    def has(obj, dotted):
        for part in dotted.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    missing = [n for n in _NEEDS if not has(model, n)]
    if not missing and len(model.transformer.h):
        missing = [f"transformer.h[0].{n}" for n in _BLOCK_NEEDS
                   if not has(model.transformer.h[0], n)]
    if missing:
        raise GptcError(f"compile_generate takes a nanoGPT-style GPT; "
                        f"{type(model).__name__} has no {missing[0]}")


class Generator:
    """A compiled decode step and the loop around it; see the module's doc."""

    def __init__(self, step: CompiledModel, model: nn.Module, max_len: int):
        self.step = step
        tr = model.transformer
        self.max_len = max_len
        self.vocab_size = tr.wte.weight.shape[0]
        self.n_layer = len(tr.h)
        self.n_head = tr.h[0].attn.n_head
        self.head_size = tr.wte.weight.shape[1] // self.n_head
        self.cache_shape = (self.n_layer, 1, self.n_head, max_len, self.head_size)

    def load_state_dict(self, state: dict) -> None:
        """The model's parameters by PyTorch name (the step's are the model's, under
        "model."), as gptc.compile's load_state_dict; extra entries (AdamW's moments in a
        training checkpoint, say) are left out."""
        names = {a.name for a in self.step.captured.args if a.kind == "param"}
        mine = {"model." + k: v for k, v in state.items() if "model." + k in names}
        self.step.load_state_dict(mine)

    def set_num_threads(self, n: int) -> None:
        self.step.set_num_threads(n)

    def _check(self, prompt, n, temperature, top_k, top_p, vocab):
        if isinstance(prompt, torch.Tensor):
            prompt = prompt.flatten().tolist()
        prompt = [int(i) for i in prompt]
        vocab = self.vocab_size if vocab is None else check_int("vocab", vocab, 1,
                                                                self.vocab_size)
        if not prompt:
            raise GptcError("generate: the prompt is empty")
        if len(prompt) > self.max_len:
            raise GptcError(f"generate: the prompt has {len(prompt)} tokens, more than the "
                            f"compiled maximum length {self.max_len}")
        bad = [i for i in prompt if not 0 <= i < vocab]
        if bad:
            raise GptcError(f"generate: token {bad[0]} of the prompt is outside the "
                            f"vocabulary (0 to {vocab - 1})")
        check_int("generate: n", n, 0, 2**63 - 1)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or top_k < 1):
            raise GptcError(f"generate: top_k must be at least 1 (None: every token), "
                            f"got {top_k!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature)
                and temperature >= 0):
            raise GptcError(f"generate: temperature must be a finite number >= 0, "
                            f"got {temperature!r}")
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise GptcError(f"generate: top_p must be in (0, 1], got {top_p!r}")
        return prompt, vocab

    def _feed(self, tokens):
        """Feed `tokens` from position 0 with empty caches; (logits, k, v)."""
        k = torch.zeros(self.cache_shape)
        v = torch.zeros(self.cache_shape)
        logits = None
        for pos, tok in enumerate(tokens):
            logits, k, v = self.step(torch.tensor([[tok]]), torch.tensor([pos]), k, v)
        return logits, k, v

    @torch.no_grad()
    def generate(self, prompt, n: int, *, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float = 1.0, seed: int = 0, vocab: int | None = None) -> list:
        """`n` new token ids after `prompt` (ids); draw from the first `vocab` logits (all
        by default: nanoGPT's padded vocabularies are larger than the tokenizer's)."""
        prompt, vocab = self._check(prompt, n, temperature, top_k, top_p, vocab)
        ids = list(prompt)
        logits, k, v = self._feed(ids)
        pos = len(ids)
        out = []
        for draw in range(n):
            tok = sample(logits[0, :vocab], temperature=temperature, top_k=top_k,
                         top_p=top_p, seed=seed, draw=draw)
            out.append(tok)
            ids.append(tok)
            if draw + 1 == n:
                break
            if pos == self.max_len:  # the context shifts: the last half again from 0
                logits, k, v = self._feed(ids[-(self.max_len // 2):])
                pos = self.max_len // 2
            else:
                logits, k, v = self.step(torch.tensor([[tok]]), torch.tensor([pos]), k, v)
                pos += 1
        return out

    def save(self, directory: str, tokens: list | None = None) -> None:
        """The decode step as an artifact folder with the current weights, for
        gptc_model_load; with `tokens` (each token's bytes, in id order) also tokens.bin
        (a u32 count, then each token as a u32 length and its bytes, little-endian), the
        vocabulary a C program encodes and prints with."""
        os.makedirs(directory, exist_ok=True)
        for name in ("manifest.json", "kernels.so"):
            shutil.copyfile(os.path.join(self.step.artifact_dir, name),
                            os.path.join(directory, name))
        self.step.runtime.save_weights(os.path.join(directory, "weights.safetensors"))
        with open(os.path.join(directory, "generate.json"), "w") as f:
            json.dump({"max_len": self.max_len, "vocab_size": self.vocab_size,
                       "cache_shape": list(self.cache_shape),
                       "inputs": ["idx", "pos", "k_cache", "v_cache"],
                       "results": ["logits", "k_cache", "v_cache"]}, f, indent=1)
        if tokens is not None:
            blob = bytearray(len(tokens).to_bytes(4, "little"))
            for t in tokens:
                blob += len(t).to_bytes(4, "little") + bytes(t)
            with open(os.path.join(directory, "tokens.bin"), "wb") as f:
                f.write(blob)


def compile_generate(model: nn.Module, max_len: int | None = None, *,
                     workdir: str | None = None) -> Generator:
    """Compile `model`'s decode step (see the module's doc) for texts of up to `max_len`
    tokens (default: the model's block size, its position table's length)."""
    _check_nanogpt_style(model)
    positions = model.transformer.wpe.weight.shape[0]
    max_len = positions if max_len is None else check_int("max_len", max_len, 2, positions)
    if model.training:
        model = model.eval()
    step = DecodeStep(model, max_len).eval()
    tr = model.transformer
    n_head = tr.h[0].attn.n_head
    cache = torch.zeros(len(tr.h), 1, n_head, max_len, tr.wte.weight.shape[1] // n_head)
    example = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long),
               cache, cache.clone())
    compiled = CompiledModel(*capture_and_compile(step, example, workdir, "gptc-generate-"))
    return Generator(compiled, model, max_len)
