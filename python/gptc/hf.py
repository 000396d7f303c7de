"""Hugging Face causal language models (transformers' `*ForCausalLM`) as gptc models.

    model = transformers.AutoModelForCausalLM.from_pretrained("path/to/local/model")
    step = gptc.compile_train_step(gptc.hf.causal_lm(model), (input_ids, labels), ...)

A transformers model takes keyword arguments and returns a ModelOutput; gptc's models take
tensors and return (logits, loss). causal_lm() wraps one into the other without renaming:
the wrapper's parameters are the model's own, under the model's own names, so state_dict()
and load_state_dict() speak the checkpoint's names. `labels` are transformers' labels, the
input ids themselves (the loss shifts them; -100 is ignored), not nanoGPT's shifted targets.

What gptc does with transformers' graphs is capture's (fold.py: the attention mask built
from `arange`s becomes `is_causal`; mlir_text.py: a `torch.no_grad()` region, as the rotary
embeddings' cos/sin are computed in, is printed in place with its results detached).
"""
from __future__ import annotations

import torch

from .errors import GptcError


class CausalLM(torch.nn.Module):
    """`model(input_ids, labels)` -> (logits, loss); `model(input_ids)` -> logits."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        own = [n for n, _ in model.named_parameters(recurse=False)]
        own += [n for n, _ in model.named_buffers(recurse=False)]
        if own:
            raise GptcError(f"causal_lm: {type(model).__name__} holds tensors of its own "
                            f"({', '.join(own)}), outside its submodules")
        object.__setattr__(self, "hf", model)  # not a submodule: its children are ours
        for name, child in model.named_children():
            self.add_module(name, child)

    def train(self, mode: bool = True):
        self.hf.train(mode)
        return super().train(mode)

    def forward(self, input_ids, labels=None):
        out = self.hf(input_ids=input_ids, labels=labels, use_cache=False, return_dict=True)
        return out.logits if labels is None else (out.logits, out.loss)


def causal_lm(model: torch.nn.Module) -> CausalLM:
    """`model` (a transformers `*ForCausalLM`) as a gptc model; see the module's text."""
    if isinstance(model, CausalLM):
        return model
    if not hasattr(model, "config") or not callable(getattr(model, "forward", None)):
        raise GptcError(f"causal_lm needs a transformers model, not {type(model).__name__}")
    return CausalLM(model)
