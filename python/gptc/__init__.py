"""gptc: a GPT graph compiler with bitwise-reproducible numerics.

    import gptc
    compiled = gptc.compile(model, (idx, targets))   # capture, lower, build
    logits, loss = compiled(idx, targets)             # runs the generated kernels

See README.md for what works today.
"""
from .capture import Captured, CaptureError, capture
from .capture import save as capture_save
from .compiler import MAX_THREADS, CompiledModel, GptcError, compile, find_tool
from .gradcheck import gradcheck
from .train import AdamW, GradientFlowError, TrainStep, compile_train_step

__all__ = ["capture", "capture_save", "compile", "compile_train_step", "AdamW", "TrainStep",
           "Captured", "CaptureError", "CompiledModel", "GptcError", "GradientFlowError",
           "find_tool", "gradcheck", "MAX_THREADS"]
__version__ = "0.1.0"
