"""The PyTorch side of gptc's parity checks: nanoGPT's training step in eager PyTorch.

    opt = torch_adamw(ref, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8)
    ref_loss = torch_step(ref, opt, x, y, lr=nanogpt_lr(it, ...))
    worst = worst_param_difference(step.state_dict(), ref)
"""
import math

import torch


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


def torch_step(model, opt, x, y, *, lr, grad_clip=1.0):
    """One eager step: forward, backward, clip_grad_norm_, AdamW at `lr`; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


def worst_param_difference(state_dict, model):
    """The largest absolute difference between `state_dict` and the model's parameters."""
    return max((state_dict[n] - p.detach()).abs().max().item()
               for n, p in model.named_parameters())
