"""nanoGPT's checkpoints (the ckpt.pt its train.py writes) into gptc.

    args = gptc.load_nanogpt_checkpoint(compiled_or_step, "out/ckpt.pt")

A nanoGPT checkpoint holds the model's state_dict under "model" (with "_orig_mod." before
every name when the model was wrapped by torch.compile), its GPTConfig under "model_args",
and the optimizer, iteration and config. It is read with torch.load(weights_only=True):
tensors and plain values only, never pickled code.
"""
import os

from .errors import GptcError

_PREFIX = "_orig_mod."


def read_checkpoint(path: str) -> tuple[dict, dict]:
    """(state_dict, model_args) of a nanoGPT ckpt.pt, names without torch.compile's
    "_orig_mod." prefix."""
    import torch
    if not os.path.isfile(path):
        raise GptcError(f"{path}: no such checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a pickle with code in it, a truncated file, not a torch file
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GptcError(f"{path}: cannot read as a nanoGPT checkpoint ({first})") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        raise GptcError(f"{path}: not a nanoGPT checkpoint (no 'model' state_dict in it)")
    state = {(k[len(_PREFIX):] if k.startswith(_PREFIX) else k): v
             for k, v in ckpt["model"].items()}
    args = ckpt.get("model_args")
    return state, dict(args) if isinstance(args, dict) else {}


def load_checkpoint(target, path: str) -> dict:
    """Loads a nanoGPT ckpt.pt's weights into `target` (a CompiledModel or a TrainStep, by
    the model's PyTorch names; checked whole before anything is written) and returns its
    model_args (n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout)."""
    state, args = read_checkpoint(path)
    target.load_state_dict(state)
    return args
