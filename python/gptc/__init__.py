"""gptc: a GPT graph compiler with bitwise-reproducible numerics.

    import gptc
    compiled = gptc.compile(model, (idx, targets))   # capture, lower, build
    logits, loss = compiled(idx, targets)             # runs the generated kernels

The library: capture (capture.py, with signature.py, fold.py and mlir_text.py), compile
and run (compiler.py; locate.py finds the `gptc` tool and the runtime module), train
(train.py), generate with a KV cache and gptc's sampler (generate.py), gradcheck
(gradcheck.py), the parity comparison (parity.py), nanoGPT's checkpoints (nanogpt.py),
Hugging Face models (hf.py) and the exceptions (errors.py).
gptc.apps holds what is built on it: the main job's data pipeline and the parity CLI.
See README.md for what works today.
"""
from .capture import Captured, capture
from .capture import save as capture_save
from .compiler import MAX_THREADS, CompiledModel, compile
from .errors import CaptureError, GptcError, GradientFlowError, ParityError
from . import dynamo  # noqa: F401  (torch.compile(..., backend="gptc"); no TorchDynamo import)
from . import checksums  # noqa: F401  (gptc.checksums)
from . import hf  # noqa: F401  (gptc.hf.causal_lm: transformers' models; no transformers import)
from .generate import Generator, compile_generate, sample
from .gradcheck import gradcheck
from .locate import find_tool
from .nanogpt import load_checkpoint as load_nanogpt_checkpoint
from .train import AdamW, TrainStep, compile_train_step

__all__ = ["capture", "capture_save", "compile", "compile_train_step", "compile_generate",
           "Generator", "sample", "AdamW", "TrainStep",
           "Captured", "CaptureError", "CompiledModel", "GptcError", "GradientFlowError",
           "ParityError", "find_tool", "gradcheck", "load_nanogpt_checkpoint", "MAX_THREADS"]
__version__ = "0.1.0"
