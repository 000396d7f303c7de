"""`gptc check --against-cpu`: the same training steps on the CPU and on a GPU target, bit
for bit.

    gptc check --against-cpu [MODEL.py] [--device cuda|cuda-emulated] [--steps N]
                             [--dropout P] [--accumulate N] [--config KEY=VALUE ...]
    python3 -m gptc.apps.against_cpu [the same arguments]

Compiles one training step of MODEL.py's GPT (without it, gptc's test GPT) for the CPU and
for the device, from the same weights, and runs both on the same batches, learning rates
and dropout seed. After each step it compares the losses and every parameter and AdamW
moment bit for bit, and stops at the first difference, naming the step, the tensor and
the first element that differ (exit 1). Portable numerics promise there is none; dropout
is allowed, its masks drawn by element index on both. --accumulate N compiles gradient
accumulation's two programs instead (N micro-batches a step), and compares the summed
gradients too. --device cuda-emulated runs the CUDA kernels on the CPU under the GPU's
emulation, where there is no GPU.
"""
import argparse
import sys

import numpy as np
import torch

from ..compiler import check_device
from ..errors import ParityError
from ..parity import nanogpt_lr
from ..train import AdamW, compile_train_step
from .parity import SEEDS, _OneLineErrors, build_model, model_arguments
from .parity import cli as parity_cli


def parse_args(argv=None):
    ap = _OneLineErrors(
        prog="gptc check --against-cpu",
        description="N training steps on the CPU and on a GPU target from the same weights, "
                    "batches and seed; the first tensor and step that differ, bit for bit.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    model_arguments(ap)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cuda-emulated"])
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--accumulate", type=int, default=1, metavar="N",
                    help="micro-batches a step (gradient accumulation)")
    ap.add_argument("--seed", type=int, default=0, help="the weights', batches' and dropout's")
    args = ap.parse_args(argv)
    for name in ("steps", "batch", "accumulate"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if not 0.0 <= args.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    if not SEEDS[0] <= args.seed <= SEEDS[1]:
        ap.error(f"--seed must be from {SEEDS[0]} to {SEEDS[1]}")
    return args


def first_difference(a: np.ndarray, b: np.ndarray):
    """The flat index of the first element whose bits differ, or None."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return 0
    diff = np.flatnonzero(a.reshape(-1).view(np.uint8).reshape(a.size, -1)
                          != b.reshape(-1).view(np.uint8).reshape(b.size, -1))
    return None if diff.size == 0 else int(diff[0] // a.dtype.itemsize)


def main(argv=None):
    args = parse_args(argv)
    device = check_device(args.device)
    model, cfg = build_model(args.model, args.config, args.seed, dropout=args.dropout)
    g = torch.Generator().manual_seed(args.seed + 1)
    n = args.accumulate
    shape = (n, args.batch, cfg.block_size) if n > 1 else (args.batch, cfg.block_size)
    batches = [(torch.randint(0, cfg.vocab_size, shape, generator=g),
                torch.randint(0, cfg.vocab_size, shape, generator=g))
               for _ in range(args.steps)]
    example = tuple(t[0] for t in batches[0]) if n > 1 else batches[0]
    steps = {d: compile_train_step(model, example, optimizer=AdamW(lr=1e-3, weight_decay=0.1),
                                   seed=args.seed, device=d, accumulation_steps=n)
             for d in ("cpu", device)}

    def held(step):  # {name: the program holding it}: parameters and both moments, and
        out = {name: step.model for name in step._persistent}  # the gradient sums
        if step._micro is not None:
            out.update((name, step._micro) for name, _, _ in step._micro.runtime.params
                       if name.startswith("grad."))
        return out
    holders = {d: held(s) for d, s in steps.items()}
    names = holders["cpu"]
    for it, (x, y) in enumerate(batches):
        lr = nanogpt_lr(it, lr=1e-3, min_lr=1e-4, warmup=2, decay_iters=args.steps)
        losses = {d: s(x, y, lr=lr).numpy() for d, s in steps.items()}
        where = first_difference(losses["cpu"], losses[device])
        if where is not None:
            raise ParityError(f"step {it + 1}: the loss differs: CPU {float(losses['cpu']):.9g}, "
                              f"{device} {float(losses[device]):.9g}")
        for name in names:
            a, b = (holders[d][name].runtime.param(name) for d in ("cpu", device))
            where = first_difference(a, b)
            if where is not None:
                index = np.unravel_index(where, a.shape) if a.shape == b.shape else (where,)
                raise ParityError(
                    f"step {it + 1}: {name} differs first at {tuple(int(i) for i in index)}: "
                    f"CPU {a.reshape(-1)[where]!r}, {device} {b.reshape(-1)[where]!r}")
        print(f"step {it + 1:3d}: loss {float(losses['cpu']):.7f}, the same bits on both")
    print(f"against the CPU: {device} gave the CPU's bits for {args.steps} steps "
          f"(losses, {len(names)} parameters, moments"
          + (f" and gradient sums; {n} micro-batches a step" if n > 1 else "")
          + f"), dropout {args.dropout:g}")


def cli(argv=None):
    return parity_cli(argv, main=main)


if __name__ == "__main__":
    sys.exit(cli())
