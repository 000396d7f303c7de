"""The parity report: N training steps by gptc and by eager PyTorch, side by side.

Both start from the same weights (one model, deep-copied), see the same batches and
learning rates (nanoGPT's warm-up then cosine decay), and use AdamW with nanoGPT's two
decay groups and clip_grad_norm_. report() prints, per step, both losses, their relative
difference, and the worst absolute difference over every parameter after the update with
the tensor it is in; verdict() judges the rows against tolerances.

The PyTorch side (torch_adamw, torch_step, nanogpt_lr) is also what gptc's tests and
examples train against. The command line over this, `gptc check --against-torch` (which
runs `python3 -m gptc.parity`), is gptc.apps.parity.
"""
import copy
import math
import sys

import torch

from .errors import GptcError
from .train import AdamW, compile_train_step


def nanogpt_lr(it, *, lr, min_lr, warmup, decay_iters):
    """nanoGPT's schedule: linear warm-up, cosine decay to min_lr, then min_lr."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters or decay_iters <= warmup:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def torch_adamw(model, *, lr, betas, eps, weight_decay):
    """torch.optim.AdamW with nanoGPT's two groups: decay for tensors of 2+ dims only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)


def torch_step(model, opt, x, y, *more, lr, grad_clip=1.0):
    """One eager step: forward (of x, y and any more inputs), backward, clip_grad_norm_,
    AdamW at `lr`; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    _, loss = model(x, y, *more)
    opt.zero_grad()
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


def worst_tensor_difference(state_dict, model):
    """(name, d): the parameter of `model` furthest from `state_dict`'s, d its largest
    absolute difference (NaN when either side has one)."""
    worst = ("", 0.0)
    for name, p in model.named_parameters():
        d = (state_dict[name] - p.detach()).abs().max().item()
        if math.isnan(d) or d > worst[1]:
            worst = (name, d)
            if math.isnan(d):
                break
    return worst


def worst_param_difference(state_dict, model):
    """The largest absolute difference between `state_dict` and the model's parameters."""
    return worst_tensor_difference(state_dict, model)[1]


def report(model, batches, *, lr=1e-3, min_lr=1e-4, warmup=5, betas=(0.9, 0.99),
           weight_decay=0.1, eps=1e-8, grad_clip=1.0, threads=1, out=print):
    """Trains `model` on `batches` ([(x, y)], or (x, y, more inputs...): a padding mask)
    with gptc and a copy of it with eager PyTorch;
    prints a line per step and returns the rows: (step, gptc loss, torch loss, relative
    loss difference, worst parameter name, its absolute difference)."""
    if not batches:  # batches[0] shapes the compiled step
        raise GptcError("report needs at least one (x, y) batch")
    ref = copy.deepcopy(model)
    hyper = dict(lr=lr, betas=betas, weight_decay=weight_decay, eps=eps)
    step = compile_train_step(model, batches[0], optimizer=AdamW(**hyper),
                              grad_clip=grad_clip, check_gradients=True)
    step.set_num_threads(threads)
    opt = torch_adamw(ref, **hyper)
    out(f"{step.num_kernels} kernels/step, batch {tuple(batches[0][0].shape)}, "
        f"{len(batches)} steps, grad clip {grad_clip}, {threads} thread(s)")
    out(f"{'step':>4} {'gptc loss':>12} {'torch loss':>12} {'loss rel diff':>13} "
        f"{'worst param diff':>16}  tensor")
    rows = []
    for it, batch in enumerate(batches):
        rate = nanogpt_lr(it, lr=lr, min_lr=min_lr, warmup=warmup, decay_iters=len(batches))
        loss = step(*batch, lr=rate).item()
        ref_loss = torch_step(ref, opt, *batch, lr=rate, grad_clip=grad_clip)
        name, worst = worst_tensor_difference(step.state_dict(), ref)
        rel = abs(loss - ref_loss) / abs(ref_loss) if ref_loss != 0 else abs(loss)
        rows.append((it + 1, loss, ref_loss, rel, name, worst))
        out(f"{it + 1:4d} {loss:12.7f} {ref_loss:12.7f} {rel:13.2e} {worst:16.2e}  {name}")
    return rows


def verdict(rows, loss_tolerance, param_tolerance):
    """(summary line, None) when every row is within the tolerances, else (summary line,
    the first failure as one line). NaN is never within."""
    if not rows:  # no worst row to summarize, and passing on nothing would be a false pass
        raise GptcError("verdict needs at least one row of report()")
    worst_loss = max(rows, key=lambda r: (math.isnan(r[3]), r[3]))
    worst_param = max(rows, key=lambda r: (math.isnan(r[5]), r[5]))
    summary = (f"worst over {len(rows)} steps: loss {worst_loss[3]:.2e} relative (step "
               f"{worst_loss[0]}), parameters {worst_param[5]:.2e} absolute ({worst_param[4]}, "
               f"step {worst_param[0]})")
    for n, _, _, rel, name, worst in rows:
        if not rel <= loss_tolerance:
            return summary, (f"parity failed: step {n}'s loss is {rel:.2e} from PyTorch's, "
                             f"relative (tolerance {loss_tolerance:g})")
        if not worst <= param_tolerance:
            return summary, (f"parity failed: after step {n}, {name} is {worst:.2e} from "
                             f"PyTorch's (tolerance {param_tolerance:g})")
    return summary, None


if __name__ == "__main__":  # `python3 -m gptc.parity`: what `gptc check --against-torch` runs
    from gptc.apps.parity import cli
    sys.exit(cli())
