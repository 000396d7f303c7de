"""Training with gptc: one compiled program per step (forward, backward, clipping, AdamW).

    step = gptc.compile_train_step(model, (x, y), optimizer=gptc.AdamW(lr=1e-3),
                                   grad_clip=1.0, seed=1337)
    loss = step(x, y, lr=...)          # parameters and moments stay in the runtime
    step.save("ckpt.safetensors")      # atomic; step.load() resumes bit for bit

With accumulation_steps=N, a step is two programs: one adds a micro-batch's gradients
into states (N runs, in micro-batch order), the other applies their sum over N; the
step takes the N micro-batches stacked along a first dimension.

The gradient comes from the compiler's autodiff pass, the update from its AdamW pass;
PyTorch only captures the model.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import threading
from dataclasses import dataclass

import numpy as np
import torch

from . import checksums
from .compiler import (_NUMPY, CompiledModel, capture_and_compile, check_device, check_int,
                       compile_captured)
from .errors import GptcError, GradientFlowError


@dataclass
class AdamW:
    """torch.optim.AdamW's hyperparameters (decay applies to tensors of 2+ dims)."""
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 1e-2

    def __post_init__(self):
        """The ranges torch.optim.AdamW accepts, and finite: a beta of 1 or more, or a
        negative decay, trained without a word before."""
        check_at_least("lr", self.lr, 0.0)
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise GptcError(f"betas must be two numbers, got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            if not (isinstance(beta, (int, float)) and not isinstance(beta, bool)
                    and 0.0 <= beta < 1.0):  # ("a", 0.9) was a TypeError from <=
                raise GptcError(f"betas[{i}] must be in [0, 1), got {beta!r}")
        check_at_least("eps", self.eps, 0.0)
        check_at_least("weight_decay", self.weight_decay, 0.0)


def check_at_least(name: str, value, low: float) -> float:
    """`value` (a number, or a one-element tensor) as a float, finite and >= low; else one
    GptcError naming `name`. A string such as '0.001' is not a number (float() took it)."""
    try:
        number = None if isinstance(value, (str, bytes, bool)) else float(value)
    except (TypeError, ValueError, RuntimeError):  # e.g. a tensor of several elements
        number = None
    if number is None or not (math.isfinite(number) and number >= low):
        raise GptcError(f"{name} must be a finite number >= {low:g}, got {value!r}")
    return number


# The step feeds [seed, step] to its kernels as an int64 array (rng), so both must fit.
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def _flags(opt: AdamW, grad_clip: float | None) -> list[str]:
    return ["--train", f"--beta1={opt.betas[0]!r}", f"--beta2={opt.betas[1]!r}",
            f"--eps={opt.eps!r}", f"--weight-decay={opt.weight_decay!r}",
            f"--grad-clip={float(grad_clip or 0.0)!r}"]


def _has_loss(captured) -> None:
    """Refuse, before compiling, a capture without the scalar float result that autodiff
    differentiates: the compiler's error would name the temporary model.mlir, deleted by
    the time anyone reads it. With several such results (loss, metric) autodiff took the
    last one, and trained the metric, without a word."""
    scalars = [r.name for r in captured.results
               if r.shape == () and r.dtype in ("f32", "f64", "bf16")]
    if not scalars:
        outputs = ", ".join(f"{r.dtype} {r.shape}" for r in captured.results) or "none"
        raise GptcError("the model must return its loss as a scalar floating-point output "
                        f"(its tensor outputs: {outputs})")
    if len(scalars) > 1:
        raise GptcError(f"the model returns {len(scalars)} scalar floating-point outputs "
                        f"({', '.join(scalars)}): the loss must be the only one")




# A checkpoint being written: .gptc-ckpt-<pid>-<random>, beside its final name.
_TMP_PREFIX = ".gptc-ckpt-"


def remove_stale_temporaries(directory: str) -> None:
    """Removes the checkpoint temporaries in `directory` that a killed process left (its pid
    no longer runs): a save interrupted by kill -9 never renamed or removed its file."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(_TMP_PREFIX):
            continue
        pid = name[len(_TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue  # ours (another thread's save in flight), or not one of these
        try:
            os.kill(int(pid), 0)
            continue  # still running: its save may be in flight
        except ProcessLookupError:
            pass
        except OSError:  # another user's process: alive
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def check_gradient_flow(names, norms, unreached=(), zero_before=()) -> None:
    """Raise GradientFlowError naming every parameter whose gradient is not finite, that no
    gradient reaches (`unreached`: unused, or used only through a detach), or whose
    gradient is zero on this step and was on the one before (`zero_before`). A zero on one
    step alone is not a failure: LoRA's A matrices get exactly zero at the first step,
    while their B matrices are still the zeros they start as."""
    bad = [f"{n} ({'non-finite gradient' if not math.isfinite(v) else 'no gradient'})"
           for n, v in zip(names, norms)
           if not math.isfinite(v) or n in unreached or (v == 0 and n in zero_before)]
    if bad:
        raise GradientFlowError("gradient-flow check failed: " + ", ".join(bad))


class TrainStep:
    """A compiled training step; see compile_train_step."""

    def __init__(self, captured, artifact_dir: str, optimizer: AdamW, seed: int,
                 check_gradients: bool, temporary: str | None = None,
                 micro: CompiledModel | None = None, accumulation_steps: int = 1):
        """`micro`: with gradient accumulation, the program that adds a micro-batch's
        gradients into its states; artifact_dir is then the one that applies them, and
        loads beside it (sharing the parameters and those sums)."""
        self.captured = captured
        self.optimizer = optimizer
        self.seed = int(seed)
        self.num_steps = 0
        self.check_gradients = check_gradients
        self.accumulation_steps = accumulation_steps
        self._micro = micro
        self.model = CompiledModel(captured, artifact_dir, temporary, weights_of=micro)
        rt = self.model.runtime
        self._inputs = [name for name, _, _ in rt.inputs]
        self._params = [a.name for a in captured.args if a.kind == "param"]
        self._trainable = [a.name for a in captured.args if a.trainable]  # params only
        self._unreached = {a["name"] for a in self.model.manifest["args"] if a.get("no_gradient")}
        self._zero_before = set()  # trainable parameters whose last step's gradient was zero
        # Params and moments; not the accumulation's sums, which live within a step.
        sums = {n for n, _, _ in micro.runtime.params} - set(self._params) if micro else set()
        self._persistent = [name for name, _, _ in rt.params if name not in sums]
        self._results = [name for name, _, _ in rt.results]
        self.last_grad_norms = None
        # One step, save, load or parameter read at a time: a step's number is taken and
        # written back, and a checkpoint's tensors copied with their label, while no other
        # thread can run a step (the run itself releases the GIL).
        self._lock = threading.RLock()

    @property
    def artifact_dir(self) -> str:
        return self.model.artifact_dir

    @property
    def num_kernels(self) -> int:
        """Kernels a step runs (with accumulation: N micro-batches' and the update's)."""
        if self._micro is None:
            return self.model.num_kernels
        return self.accumulation_steps * self._micro.num_kernels + self.model.num_kernels

    def set_num_threads(self, n: int) -> None:
        """Threads for the kernels' parallel loops (0: one per core; at first,
        torch.get_num_threads()); results never change."""
        self.model.set_num_threads(n)
        if self._micro is not None:
            self._micro.set_num_threads(n)

    @property
    def num_threads(self) -> int:
        return self.model.num_threads

    def __call__(self, x: torch.Tensor, y: torch.Tensor, *more: torch.Tensor,
                 lr: float | None = None) -> torch.Tensor:
        """One step on batch (x, y) (and any more inputs the model takes after them: a
        padding mask) at learning rate `lr`; returns the loss before the update. With
        accumulation_steps=N each input holds N micro-batches along a first dimension,
        and the loss returned is their losses' mean."""
        lr = check_at_least("lr", self.optimizer.lr if lr is None else lr, 0.0)
        with self._lock:
            return self._step((x, y) + more, lr)

    def _accumulate(self, batch: tuple, step: int) -> np.ndarray:
        """Gradient accumulation's first half: each micro-batch's gradients added into the
        states (the first overwrites them); returns the micro-batches' mean loss (their
        float32 sum, in order, over N). Micro-batch i of step s draws its dropout masks
        as step (s - 1) N + i + 1 would without accumulation."""
        n = self.accumulation_steps
        names = [name for name, _, _ in self._micro.runtime.inputs]
        user = [name for name in names if name not in ("rng", "first")]
        if len(user) != len(batch):
            raise GptcError(f"the training step takes inputs {user}, got {len(batch)} tensors")
        for name, t in zip(user, batch):
            if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != n:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise GptcError(f"input '{name}' must hold {n} micro-batches along its first "
                                f"dimension (accumulation_steps={n}), got {got}")
        arrays = [[self._micro.input_array(name, t[i]) for i in range(n)]
                  for name, t in zip(user, batch)]
        total = np.float32(0)
        for i in range(n):
            feed = {"rng": np.array([self.seed, (step - 1) * n + i + 1], dtype=np.int64),
                    "first": np.array(i == 0)}
            feed.update({name: a[i] for name, a in zip(user, arrays)})
            try:
                outs = self._micro.runtime.run([feed[name] for name in names])
            except (RuntimeError, ValueError) as e:
                raise GptcError(str(e)) from None
            loss = [o for o in outs if np.asarray(o).ndim == 0][-1]  # the last scalar
            total = np.float32(total + np.float32(loss))
        return np.float32(total / np.float32(n))

    def _step(self, batch: tuple, lr: float) -> torch.Tensor:
        step = self.num_steps + 1
        feed = {"rng": np.array([self.seed, step], dtype=np.int64),
                "lr": np.array(lr, dtype=np.float64),
                "step": np.array(float(step), dtype=np.float64)}
        mean = None
        if self._micro is not None:  # the micro-batches' sums first; the update takes none
            mean = self._accumulate(batch, step)
            batch = ()
        user = [n for n in self._inputs if n not in feed]
        if len(user) != len(batch):
            raise GptcError(f"the training step takes inputs {user}, got {len(batch)} tensors")
        for name, t in zip(user, batch):
            feed[name] = self.model.input_array(name, t)
        # The kernels update in place, in the same call that computes the gradients' norms:
        # with the check on, the state before the step is kept so that a refused step can
        # be undone whole.
        before = ({n: self.model.runtime.param(n) for n in self._persistent}
                  if self.check_gradients else None)
        try:
            outs = self.model.runtime.run([feed[n] for n in self._inputs])
        except (RuntimeError, ValueError) as e:
            raise GptcError(str(e)) from None
        results = dict(zip(self._results, outs))
        self.last_grad_norms = torch.from_numpy(np.asarray(results["grad_norms"]))
        if self.check_gradients:
            try:
                norms = self.last_grad_norms.tolist()
                check_gradient_flow(self._trainable, norms, self._unreached, self._zero_before)
                self._zero_before = {n for n, v in zip(self._trainable, norms) if v == 0}
            except GradientFlowError as e:
                for n, a in before.items():
                    self.model.set_param(n, a)
                raise GradientFlowError(f"{e}; the step was not applied (parameters, "
                                        f"moments and the step count are as before it)") from None
        self.num_steps = step
        if mean is not None:
            return torch.from_numpy(np.asarray(mean))
        loss = [o for n, o in results.items() if n != "grad_norms" and np.asarray(o).ndim == 0]
        return torch.from_numpy(np.asarray(loss[-1]))

    # -- state --------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Parameters and persistent buffers by their PyTorch names, tied names included:
        the model's own state_dict() keys, so `model.load_state_dict(step.state_dict())`."""
        persistent = {a.name for a in self.captured.args if a.persistent}
        with self._lock:
            out = {n: torch.from_numpy(self.model.runtime.param(n)) for n in self._params
                   if n in persistent}
        for alias, name in self.captured.tied.items():
            out[alias] = out[name]
        return out

    def load_state_dict(self, state: dict) -> None:
        with self._lock:
            self.model.set_params(state, self._params)

    def save(self, path: str) -> None:
        """Parameters, AdamW moments and the step counter; written atomically (a temporary
        file beside it, renamed over it), through a symbolic link to its target."""
        from safetensors.numpy import save_file
        with self._lock:  # one step's tensors under that step's label
            tensors = {n: self.model.runtime.param(n) for n in self._persistent}
            meta = {"format": "gptc-train-checkpoint", "step": str(self.num_steps),
                    "seed": str(self.seed)}
        meta.update(checksums.metadata(tensors))
        target = os.path.realpath(path)  # a link stays a link; its target gets the checkpoint
        directory = os.path.dirname(target)
        remove_stale_temporaries(directory)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-", dir=directory)
        except OSError as e:
            raise GptcError(f"cannot save checkpoint {path}: {e.strerror or e}") from None
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata=meta)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except Exception as e:  # OSError, or safetensors' own error (a full disk, say)
            raise GptcError(f"cannot save checkpoint {path}: {e}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def load(self, path: str) -> None:
        """Restore a checkpoint written by save(); the next step continues bit for bit."""
        with self._lock:
            self._load(path)

    def _load(self, path: str) -> None:
        meta, tensors = read_checkpoint(path, self._persistent)
        # step + 1 is the next step's number, fed as int64 like the seed.
        num_steps = check_int(f"{path}: metadata 'step'", meta["step"], 0, INT64_MAX - 1,
                              text=True)
        seed = check_int(f"{path}: metadata 'seed'", meta.get("seed", self.seed),
                         INT64_MIN, INT64_MAX, text=True)
        # Every tensor is read and checked before any is copied in: a checkpoint of
        # another model leaves this one's state as it was.
        specs = self.model.param_specs()
        for n, t in tensors.items():
            dtype, shape = specs[n]
            if t.shape != shape or t.dtype != _NUMPY[dtype]:
                raise GptcError(f"{path}: tensor '{n}' is {t.dtype} {t.shape}, this step "
                                f"has {np.dtype(_NUMPY[dtype])} {shape}")
        for n, t in tensors.items():
            self.model.set_param(n, t)
        self.num_steps = num_steps
        self.seed = seed


def read_checkpoint(path: str, names=None) -> tuple[dict, dict]:
    """(metadata, {name: numpy array}) of a training checkpoint written by TrainStep.save:
    the tensors `names` (default all), each checked against its recorded CRC-32. A file
    that is not such a checkpoint, lacks a tensor or fails a checksum is a GptcError."""
    from safetensors import safe_open
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            if meta.get("format") != "gptc-train-checkpoint":
                raise GptcError(f"{path}: not a gptc training checkpoint")
            if "step" not in meta:
                raise GptcError(f"{path}: no 'step' in the checkpoint's metadata")
            names = list(f.keys()) if names is None else list(names)
            missing = [n for n in names if n not in f.keys()]
            if missing:
                raise GptcError(f"{path}: missing tensor '{missing[0]}'")
            tensors = {n: f.get_tensor(n) for n in names}
        # A flipped byte loaded silently (a loss off in the fifth digit). Checkpoints from
        # before checksums were recorded have none to check.
        if checksums.KEY in meta:
            sums = json.loads(meta[checksums.KEY])
            for n, t in tensors.items():
                if sums.get(n) != checksums.crc32_hex(t):
                    raise GptcError(f"{path}: tensor '{n}' does not match its checksum "
                                    "(the file is corrupt)")
    except GptcError:
        raise
    except Exception as e:  # corrupt or truncated file
        raise GptcError(f"{path}: cannot read checkpoint ({str(e).splitlines()[0]})") from None
    return meta, tensors


def compile_train_step(model: torch.nn.Module, example_inputs, *, optimizer: AdamW | None = None,
                       grad_clip: float | None = 1.0, seed: int = 0,
                       check_gradients: bool = False, fuse: bool = True,
                       sanitize: bool = False, workdir: str | None = None,
                       device: str = "cpu", accumulation_steps: int = 1) -> TrainStep:
    """Compile one training step of `model` (in its current train/eval mode) for the CPU.

    `example_inputs` is (x, y) shaped like every later batch; the model must return its
    loss as a scalar output. With check_gradients, every step checks that each parameter
    got a finite gradient, that a gradient reaches it at all, and that it is not zero on two
    steps in a row (the gradient-flow arbiter; LoRA's A matrices get a zero gradient at the
    first step, while their B matrices are zeros); a step that fails it is
    undone (parameters, moments and step count as before it; each step keeps a copy of the
    state for that) and raises GradientFlowError. fuse=False compiles
    one kernel per op (gptc compile -O0): slower, and bit for bit the same results.
    sanitize=True builds the kernels with AddressSanitizer and UBSan and poisoned redzones
    between buffers (gptc compile --sanitize): the same results, or a sanitizer's report
    for a kernel that reads or writes out of bounds; the process must have the sanitizers'
    runtimes preloaded (docs/artifact.md). The artifact is written under `workdir` (by
    default a new temporary folder, removed with the step). device="cuda" builds the
    kernels with nvcc for the GPU ($GPTC_CUDA_ARCH, default sm_90): parameters, moments and
    the arena live on the GPU, and are read back only when asked for (state_dict, save);
    "cuda-emulated" builds the same CUDA kernels for the CPU, under the GPU's emulation
    (gptc compile --target, docs/architecture.md): the GPU's code path where there is none.
    Inputs may be torch tensors on any device (they are copied).

    accumulation_steps=N > 1 (gradient accumulation, nanoGPT's
    gradient_accumulation_steps; on any device): example_inputs are one micro-batch, and
    each step takes N of them stacked along a new first dimension, adds their gradients
    in order and applies the sum over N (the gradients of the micro-batches' mean loss,
    as nanoGPT's loss / N), with the activations of one micro-batch at a time. It
    returns the micro-batches' mean loss.
    """
    device = check_device(device)
    optimizer = AdamW() if optimizer is None else optimizer
    if not isinstance(optimizer, AdamW):  # the step runs its own AdamW, from these settings
        raise GptcError(f"optimizer must be a gptc.AdamW (the same lr, betas, eps and "
                        f"weight_decay), got {type(optimizer).__module__}."
                        f"{type(optimizer).__name__}")
    if grad_clip is not None:  # 0: no clipping (a negative clip silently meant the same)
        check_at_least("grad_clip", grad_clip, 0.0)
    seed = check_int("seed", seed, INT64_MIN, INT64_MAX)  # else an OverflowError at step 1
    accumulation_steps = check_int("accumulation_steps", accumulation_steps, 1, 1 << 20)
    common = [*([] if fuse else ["-O0"]), *(["--sanitize"] if sanitize else []),
              f"--target={device}"]
    if accumulation_steps > 1:
        micro = CompiledModel(*capture_and_compile(
            model, example_inputs, workdir and os.path.join(workdir, "micro"), "gptc-train-",
            "--accumulate", *common, check=_has_loss))
        _, out_dir, temporary = compile_captured(
            micro.captured, workdir and os.path.join(workdir, "step"), "gptc-train-",
            *_flags(optimizer, grad_clip), f"--accumulated={accumulation_steps}", *common,
            weights_of=micro)
        return TrainStep(micro.captured, out_dir, optimizer, seed, check_gradients, temporary,
                         micro=micro, accumulation_steps=accumulation_steps)
    captured, out_dir, temporary = capture_and_compile(
        model, example_inputs, workdir, "gptc-train-", *_flags(optimizer, grad_clip), *common,
        check=_has_loss)
    return TrainStep(captured, out_dir, optimizer, seed, check_gradients, temporary)
