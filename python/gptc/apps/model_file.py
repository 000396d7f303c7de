"""nanoGPT-style model files: a Python file that defines GPTConfig and GPT, where
GPT(GPTConfig(...)) builds the model and model(idx, targets) returns (logits, loss).

Used by the main job's --model and by the parity report (`gptc check --against-torch`).
"""
import importlib.machinery
import importlib.util
import os
import sys


class ModelFileError(ValueError):
    """A model file that is missing, does not load or lacks GPTConfig/GPT: one line."""


def load_model_file(path):
    """(GPTConfig, GPT) from the nanoGPT-style model file at `path`."""
    if not os.path.isfile(path):
        raise ModelFileError(f"model file not found: {path}")
    name = "gptc_model_file_" + os.path.splitext(os.path.basename(path))[0]
    # An explicit source loader: by suffix, importlib finds none for a file not named .py.
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # its own imports
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ModelFileError(f"cannot load {path}: {e.msg} (line {e.lineno})") from None
    except SystemExit as e:  # sys.exit(0) while loading would end the caller with success
        raise ModelFileError(f"cannot load {path}: it exited while loading "
                             f"(SystemExit: {e.code})") from None
    except Exception as e:
        raise ModelFileError(f"cannot load {path}: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    missing = [n for n in ("GPTConfig", "GPT") if not hasattr(module, n)]
    if missing:
        raise ModelFileError(f"{path} does not define {' and '.join(missing)} "
                             "(a nanoGPT-style model file: GPT(GPTConfig(...)))")
    return module.GPTConfig, module.GPT


# The GPTConfig fields the main job sets, as nanoGPT's train.py passes them (model_args).
MODEL_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")


def build_model(path, model_args):
    """GPT(GPTConfig(**model_args)) from the model file at `path`, or gptc's own nanoGPT
    (gptc.testing.tiny_gpt) when `path` is None."""
    if path:
        config_cls, model_cls = load_model_file(path)
    else:
        from ..testing.tiny_gpt import TinyGPT as model_cls, TinyGPTConfig as config_cls
    try:
        cfg = config_cls(**model_args)
    except Exception as e:  # the user's constructor: its message is the error
        raise ModelFileError(f"{path or 'the model'}: GPTConfig(...) failed: "
                             f"{type(e).__name__}: {e}") from None
    try:
        return model_cls(cfg)
    except Exception as e:
        raise ModelFileError(f"{path or 'the model'}: GPT(config) failed: "
                             f"{type(e).__name__}: {e}") from None


def check_returns_loss(model, x, y, path):
    """model(x, y) must return (logits, loss) with a scalar floating loss, as nanoGPT's GPT."""
    import torch
    with torch.no_grad():
        try:
            out = model(x, y)
        except Exception as e:
            raise ModelFileError(f"{path or 'the model'}: GPT(idx, targets) failed: "
                                 f"{type(e).__name__}: {e}") from None
    ok = (isinstance(out, (tuple, list)) and len(out) == 2
          and isinstance(out[1], torch.Tensor) and out[1].dim() == 0
          and out[1].is_floating_point())
    if not ok:
        got = (f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list))
               else f"a {type(out).__name__}")
        raise ModelFileError(f"{path or 'the model'}: GPT(idx, targets) must return "
                             f"(logits, loss) with a scalar loss, as nanoGPT's; it returned "
                             f"{got}")
