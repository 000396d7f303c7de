"""gptc.compile: capture a model, run the `gptc` compiler, load the artifact.

The compiler runs as the `gptc` command (tools/gptc), so this module needs no
MLIR; the artifact runs through the runtime's pybind11 module (gptc._runtime).
locate.py says where both are found.
"""
from __future__ import annotations

import inspect
import operator
import os
import re
import shutil
import subprocess
import tempfile
import warnings
import weakref

import numpy as np
import torch
import torch.utils._pytree as pytree

from .capture import Captured, capture_in_child, save
from .errors import GptcError
from .locate import find_tool, load_runtime
from .signature import is_tril_ones

_NUMPY = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i1": np.bool_}


MAX_THREADS = 1024  # the runtime's limit on a model's threads (gptc::rt::Model::kMaxThreads)


def check_int(name: str, value, low: int, high: int, text: bool = False) -> int:
    """`value` (an integer; with `text`, also the decimal string of one, as checkpoint
    metadata holds) as an int in [low, high]; else one GptcError naming `name`. A bool
    is not an integer here, though Python counts it as one."""
    try:
        if isinstance(value, str) and text:
            number = int(value, 10)
        elif isinstance(value, (str, bool, np.bool_)):
            number = None
        else:
            number = operator.index(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not low <= number <= high:
        raise GptcError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return number


# The torch dtypes a tensor may have where the runtime takes an integer or bool tensor:
# those it converts exactly (uint8, which torch's embedding refuses, and complex or bool
# token ids were converted silently). Float tensors take any floating dtype.
_EXACT = {"i64": (torch.int8, torch.int16, torch.int32, torch.int64), "i1": (torch.bool,)}


def _accepts(dtype: str, t: torch.dtype) -> bool:
    """Whether a tensor of torch dtype `t` may fill one of manifest dtype `dtype`."""
    return t in _EXACT[dtype] if dtype in _EXACT else t.is_floating_point


def _numpy(t: torch.Tensor, what: str) -> np.ndarray:
    """`t`'s values as a numpy array; bf16, which numpy lacks, widened (exactly) to f32."""
    if t.is_meta:
        raise GptcError(f"{what} is a meta tensor: it holds no values")
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def run_compiler(mlir_path: str, out_dir: str, *extra: str) -> None:
    cmd = [find_tool("gptc"), "compile", mlir_path, "-o", out_dir, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        raise GptcError(lines[0] if lines else f"gptc exited with {proc.returncode}")
    for line in proc.stderr.splitlines():  # a compile that succeeds may still warn
        if line.startswith("gptc: warning: "):
            warnings.warn(line[len("gptc: warning: "):], RuntimeWarning, stacklevel=3)


class CompiledModel:
    """A compiled forward pass; call it like the model. Parameters live in the runtime."""

    def __init__(self, captured: Captured, artifact_dir: str, temporary: str | None = None,
                 weights_of: "CompiledModel | None" = None):
        """`temporary`: a folder (holding artifact_dir) that gptc made and removes when
        this object is garbage collected or the interpreter exits. `weights_of`: another
        inference program of the same model, whose parameters this one shares (held once;
        a write through either is seen by both)."""
        _runtime = load_runtime()  # the pybind11 module over runtime/
        self.captured = captured
        self.artifact_dir = artifact_dir
        if temporary:
            weakref.finalize(self, shutil.rmtree, temporary, True)
        try:
            self.runtime = _runtime.Model(artifact_dir,
                                          weights_of.runtime if weights_of else None)
        except RuntimeError as e:
            raise GptcError(str(e)) from None
        self.inputs = [a for a in captured.args if a.kind == "input"]
        with open(os.path.join(artifact_dir, "manifest.json")) as f:
            import json
            self.manifest = json.load(f)
        # As many threads as PyTorch's own ops would use here (the thread count never
        # changes a result); set_num_threads changes it.
        self.set_num_threads(torch.get_num_threads())

    @property
    def num_kernels(self) -> int:
        return int(self.manifest["kernels"])

    def input_array(self, name: str, x) -> np.ndarray:
        """`x` as the contiguous numpy array the runtime expects for input `name`."""
        spec = next(a for a in self.inputs if a.name == name)
        if not isinstance(x, torch.Tensor):
            raise GptcError(f"input '{spec.name}' must be a torch.Tensor")
        if tuple(x.shape) != spec.shape:
            raise GptcError(f"input '{spec.name}' has shape {tuple(x.shape)}, "
                            f"compiled for {spec.shape}")
        if not _accepts(spec.dtype, x.dtype):
            raise GptcError(f"input '{spec.name}' has dtype {x.dtype}, compiled for {spec.dtype}")
        # (np.asarray with order="C", not np.ascontiguousarray, which makes a rank-0 array 1-D)
        return np.asarray(_numpy(x, f"input '{spec.name}'"), dtype=_NUMPY[spec.dtype], order="C")

    def set_num_threads(self, n: int) -> None:
        """Threads for the kernels' parallel loops (0: one per core; at first,
        torch.get_num_threads()); results never change."""
        n = check_int("thread count", n, 0, MAX_THREADS)  # 2.5 was truncated to 2
        try:
            self.runtime.set_num_threads(n)
        except RuntimeError as e:
            raise GptcError(str(e)) from None
        self.num_threads = n

    def load_state_dict(self, state: dict) -> None:
        """Copy parameters (by PyTorch name) into the compiled model."""
        self.set_params(state, [a.name for a in self.captured.args if a.kind == "param"])

    def set_params(self, state: dict, names) -> None:
        """Overwrite parameters `names` from `state` (tensors by name): all are checked
        before any is written, so a wrong state_dict leaves the model as it was. Like
        torch's strict load, a name the model does not have is refused (a misspelt one was
        ignored), and so is a tied parameter's other name with a value of its own: the
        compiled model holds the two as one tensor."""
        known = {a.name for a in self.captured.args if a.kind == "param"} | set(self.captured.tied)
        unknown = [n for n in state if n not in known]
        if unknown:
            shown = ", ".join(f"'{n}'" for n in unknown[:3])
            more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
            raise GptcError(f"state_dict has entries the model does not have: {shown}{more}")
        specs = self.param_specs()

        def array(entry, n):  # state[entry] for parameter n, checked
            t = state[entry]
            dtype, shape = specs[n]
            if not isinstance(t, torch.Tensor):
                raise GptcError(f"state_dict entry '{entry}' must be a torch.Tensor, "
                                f"got {type(t).__name__}")
            if tuple(t.shape) != shape:
                raise GptcError(f"state_dict entry '{entry}' has shape {tuple(t.shape)}, "
                                f"the model has {shape}")
            if not _accepts(dtype, t.dtype):
                raise GptcError(f"state_dict entry '{entry}' has dtype {t.dtype}, "
                                f"the model has {dtype}")
            return np.asarray(_numpy(t, f"state_dict entry '{entry}'"), dtype=_NUMPY[dtype],
                              order="C")

        arrays = {}
        trainable = {a.name for a in self.captured.args if a.trainable}  # params only
        for n in names:
            if n in state:
                arrays[n] = array(n, n)
            elif n in trainable:  # a buffer or constant may be missing: torch's state_dict
                raise GptcError(f"state_dict has no entry '{n}'")  # leaves non-persistent out
        for a in self.captured.args:  # a causal mask buffer may have been compiled away
            if getattr(a, "tril_ones", False) and a.name in arrays and not is_tril_ones(
                    torch.from_numpy(arrays[a.name])):
                raise GptcError(f"state_dict entry '{a.name}' is not the causal mask "
                                "(tril of ones) the model was compiled with; recompile it")

        for alias, n in self.captured.tied.items():
            if alias in state and n in arrays and not np.array_equal(
                    array(alias, n), arrays[n], equal_nan=True):
                raise GptcError(f"state_dict entries '{alias}' and '{n}' differ, but they are "
                                "one parameter in the compiled model (tied)")
        for n, a in arrays.items():
            self.set_param(n, a)

    def param_specs(self) -> dict:
        """{name: (dtype, shape)} of every tensor the runtime keeps between runs (parameters
        and, in a training step, the optimizer's moments); dtype as the manifest spells it."""
        return {name: (dtype, tuple(shape)) for name, dtype, shape in self.runtime.params}

    def set_param(self, name: str, value: np.ndarray) -> None:
        """Overwrite parameter `name` (same dtype and shape) in the runtime."""
        try:
            self.runtime.set_param(name, value)
        except (RuntimeError, ValueError) as e:
            raise GptcError(str(e)) from None

    def __call__(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise GptcError(f"expected {len(self.inputs)} inputs "
                            f"({', '.join(a.name for a in self.inputs)}), got {len(inputs)}")
        arrays = [self.input_array(spec.name, x) for spec, x in zip(self.inputs, inputs)]
        try:
            outs = self.runtime.run(arrays)
        except (RuntimeError, ValueError) as e:
            raise GptcError(str(e)) from None
        tensors = [torch.from_numpy(np.asarray(o)) for o in outs]
        flat, it = [], iter(tensors)
        n = len(tensors) + len(self.captured.const_outputs)
        for i in range(n):
            flat.append(self.captured.const_outputs[i] if i in self.captured.const_outputs
                        else next(it))
        return pytree.tree_unflatten(flat, self.captured.out_spec)


def _input_names(model, example_inputs):
    """The forward's parameter names for the example inputs (idx, targets, ...)."""
    try:
        return list(inspect.signature(model.forward).parameters)[:len(example_inputs)]
    except (TypeError, ValueError):
        return None


# What gptc.compile's `device` may name (gptc compile --target): the CPU; an NVIDIA GPU
# (nvcc builds the kernels; the runtime moves the tensors through the artifact's device
# layer); or the CUDA kernels run on the CPU under the GPU's emulation.
DEVICES = ("cpu", "cuda", "cuda-emulated")


def check_device(device) -> str:
    device = str(device) if isinstance(device, torch.device) else device
    if device == "cuda:0":
        device = "cuda"
    if device not in DEVICES:
        raise GptcError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    return device


def compile(model: torch.nn.Module, example_inputs, *, sanitize: bool = False,
            workdir: str | None = None, device: str = "cpu") -> CompiledModel:
    """Capture `model` on `example_inputs`, compile it for the CPU, and load it.

    The artifact is written under `workdir` (by default a new temporary folder, removed
    with the compiled model). Shapes are static: call the result with inputs shaped like
    the examples. sanitize=True: gptc compile --sanitize (see compile_train_step).
    device="cuda" compiles the kernels for the GPU (see compile_train_step).
    """
    device = check_device(device)
    compiled = CompiledModel(*capture_and_compile(model, example_inputs, workdir, "gptc-",
                                                  *(["--sanitize"] if sanitize else []),
                                                  f"--target={device}"))
    if draws_dropout(compiled):  # every call failed: nothing here feeds the masks' seed
        raise GptcError("the model draws dropout masks (training mode with dropout > 0): call "
                        "model.eval() or set dropout to 0 to compile it for inference; "
                        "compile_train_step trains with dropout")
    return compiled


def draws_dropout(compiled: CompiledModel) -> bool:
    """Whether the compiler added the `rng` input (the seed of dropout masks), which only
    a training step feeds."""
    user = {a.name for a in compiled.inputs}
    return any(name == "rng" and name not in user for name, _, _ in compiled.runtime.inputs)


def check_float_dtypes(model: torch.nn.Module, what: str = "gptc") -> None:
    """Refuse, in one line naming the first, a model with a half-precision parameter or
    buffer: its kernels are float32 (and float64) only, and a bf16 model otherwise failed
    deep in the compiler ("unsupported argument type") or in torch.export."""
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            if t.dtype in (torch.bfloat16, torch.float16):
                raise GptcError(f"{what}: {kind} '{name}' is {t.dtype}; gptc's kernels are "
                                "float32 (bf16 and f16 compile to its dialect only): convert "
                                "the model with .float() first")


def capture_job(model, example_inputs) -> tuple:
    """(model, example inputs as a tuple, input names): what a capture takes, checked."""
    if not isinstance(model, torch.nn.Module):
        raise GptcError(f"gptc compiles a torch.nn.Module, got {type(model).__name__}")
    check_float_dtypes(model)
    if isinstance(example_inputs, torch.Tensor):  # tuple() would split it along dim 0
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise GptcError("example_inputs must be a tuple of the model's inputs, "
                        f"got {type(example_inputs).__name__}")
    example_inputs = tuple(example_inputs)
    return model, example_inputs, _input_names(model, example_inputs)


def capture_and_compile(model, example_inputs, workdir, prefix, *flags, check=None):
    """Capture `model`, write WORKDIR/model.{mlir,safetensors,inputs.safetensors}, run
    `gptc compile ... FLAGS` into WORKDIR/artifact; returns (captured, artifact dir,
    temporary), temporary being the folder made here when workdir is None (the caller
    owns it: CompiledModel removes it) and None otherwise. `check(captured)` may refuse
    the capture before compiling."""
    captured = capture_in_child(*capture_job(model, example_inputs))
    if check:
        check(captured)
    return compile_captured(captured, workdir, prefix, *flags)


def compile_captured(captured: Captured, workdir, prefix, *flags, weights_of=None,
                     inputs_file=True):
    """capture_and_compile's compile, of a model captured already. `weights_of`: the
    CompiledModel the artifact will load beside (CompiledModel's weights_of): the weights
    it holds alike are neither written nor copied (`gptc compile --weights-of`).
    inputs_file=False: no model.inputs.safetensors."""
    temporary = None if workdir else tempfile.mkdtemp(prefix=prefix)
    workdir = workdir or temporary
    try:
        os.makedirs(workdir, exist_ok=True)
        mlir_path = os.path.join(workdir, "model.mlir")
        leave_out = set()
        if weights_of is not None:
            held = {(name, dtype, tuple(shape)) for name, dtype, shape in
                    weights_of.runtime.params}
            leave_out = {a.name for a in captured.args if a.kind == "param"
                         and (a.name, a.dtype, tuple(a.shape)) in held}
            flags = (*flags, "--weights-of", weights_of.artifact_dir)
        save(captured, mlir_path, leave_out, inputs=inputs_file)
        out_dir = os.path.join(workdir, "artifact")
        try:
            run_compiler(mlir_path, out_dir, *flags)
        except GptcError as e:
            if not temporary:
                raise
            # A location in our model.mlir names a file removed below: drop it.
            raise GptcError(re.sub(rf"^gptc: {re.escape(mlir_path)}:\d+:\d+: ", "gptc: ",
                                   str(e))) from None
    except BaseException:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    return captured, out_dir, temporary
