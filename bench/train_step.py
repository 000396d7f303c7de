"""Time one training step (forward, backward, clip_grad_norm_, AdamW) of a nanoGPT-style
model in one framework, in this process alone, and print one JSON line.

    python bench/train_step.py --framework gptc|eager|compile --size tiny|shakespeare

Each framework runs in its own process (bench/run.py starts them), so peak memory (the
process's maximum resident set) is its own. Thread counts are set explicitly and equal.
"""
import gc
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import gptc  # noqa: E402
from gptc.parity import torch_adamw  # noqa: E402
from gptc.testing.llama_style import LlamaConfig, LlamaStyle  # noqa: E402
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig  # noqa: E402
from _cli import (Parser, model_arguments, refuse_below,  # noqa: E402 (beside this file)
                  refuse_dropout, refuse_huge_batch, refuse_model_options)
from config import HYPER, SIZES, hf_model, step_flops  # noqa: E402 (beside this file)


def count_eager_kernels(model, opt, *batch):
    """aten ops dispatched by one eager step (each is at least one kernel launch)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        eager_step(model, opt, *batch)
    return Count.n


def reset_peak_rss() -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def proc_status_mib(field: str) -> float:
    """A memory line of /proc/self/status (VmHWM: peak resident set, VmRSS: current)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def eager_step(model, opt, *batch):
    _, loss = model(*batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def make_model(cfg_args: dict, batch: int, kind: str, attention: str, dropout: float,
               padded: bool = False):
    """The bench's model (seeded) and its one batch: (model, config, (x, y)), with `padded`
    (a transformers model) (x, y, attention_mask): row i right-padded by i sixteenths of the
    block, its labels -100 there."""
    torch.manual_seed(0)
    if kind == "llama":
        cfg = LlamaConfig(n_kv_head=2, **cfg_args)
        model = LlamaStyle(cfg).train()
    elif kind in ("hf-gpt2", "hf-llama"):
        cfg = TinyGPTConfig(**cfg_args)  # the sizes, for the batch below
        hf = hf_model(kind, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size,
                      cfg.block_size, dropout)
        model = gptc.hf.causal_lm(hf).train()
    else:
        cfg = TinyGPTConfig(dropout=dropout, bias=False, flash=attention == "sdpa", **cfg_args)
        model = TinyGPT(cfg).train()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
    y = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
    if not padded:
        return model, cfg, (x, y)
    mask = torch.ones_like(x)
    for i in range(batch):
        mask[i, cfg.block_size - i * cfg.block_size // 16:] = 0
    return model, cfg, (x, y.masked_fill(mask == 0, -100), mask)


def main():
    ap = Parser()
    ap.add_argument("--framework", choices=["gptc", "eager", "compile"], required=True)
    ap.add_argument("--size", choices=list(SIZES), required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="the model's dropout (nanoGPT's shakespeare_char trains with 0.2)")
    ap.add_argument("--batch", type=int, help="sequences per step (default: the size's)")
    model_arguments(ap)
    args = ap.parse_args()
    refuse_below(ap, args, threads=1, steps=1, warmup=0, batch=1)
    refuse_dropout(ap, args.dropout)
    refuse_model_options(ap, args)
    if args.batch:
        refuse_huge_batch(ap, args.batch, [args.size])
    torch.set_num_threads(args.threads)
    cfg_args = dict(SIZES[args.size])
    batch = cfg_args.pop("batch")
    batch = args.batch or batch
    model, cfg, data = make_model(cfg_args, batch, args.model, args.attention, args.dropout,
                                  args.padded)
    out = dict(framework=args.framework, size=args.size, batch=batch,
               block_size=cfg.block_size, threads=args.threads, dropout=args.dropout,
               attention=args.attention, model=args.model, padded=args.padded,
               params=sum(p.numel() for p in model.parameters()))
    wpe = getattr(getattr(model, "transformer", None), "wpe", None)  # looked up, not multiplied
    out["step_gflop"] = step_flops(out["params"] - (wpe.weight.numel() if wpe else 0),
                                   cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size,
                                   batch * cfg.block_size) / 1e9

    t0 = time.perf_counter()
    if args.framework == "gptc":
        step = gptc.compile_train_step(model, data, optimizer=gptc.AdamW(**HYPER),
                                       grad_clip=1.0)
        step.set_num_threads(args.threads)
        run = lambda: step(*data)  # noqa: E731
        out["kernels_per_step"] = step.num_kernels
    else:
        opt = torch_adamw(model, **HYPER)  # nanoGPT's two decay groups
        if args.framework == "eager":
            run = lambda: eager_step(model, opt, *data)  # noqa: E731
        else:
            compiled = torch.compile(model)
            run = lambda: eager_step(compiled, opt, *data)  # noqa: E731
            out["kernels_per_step"] = None
    first_loss = None
    for _ in range(args.warmup):
        loss = run()
        first_loss = float(loss.detach()) if first_loss is None else first_loss
    out["compile_and_warmup_s"] = time.perf_counter() - t0
    # The step's own peak: reset the kernel's resident-set high-water mark (VmHWM) to the
    # current size, so it then records only what the timed steps add on top of what is held.
    gc.collect()
    step_peak = reset_peak_rss()
    held = proc_status_mib("VmRSS")
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        loss = run()
        times.append((time.perf_counter() - t) * 1e3)
    out["times_ms"] = list(times)
    # The losses of the first step and the last (every framework runs the same steps from
    # the same initialisation on the same batch): run.py compares them, so that a speed is
    # never that of a step computing something else.
    out.update(first_loss=first_loss, last_loss=float(loss.detach()))
    times.sort()
    hwm = proc_status_mib("VmHWM") if step_peak else None
    out.update(ms_min=times[0], ms_median=times[len(times) // 2], ms_max=times[-1],
               tokens_per_s=batch * cfg.block_size / (times[len(times) // 2] / 1e3),
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               # The largest child process's peak: gptc's capture child and its compiler,
               # torch.compile's compile workers. They have exited before the step runs.
               children_peak_rss_mib=resource.getrusage(
                   resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
               step_peak_rss_mib=hwm,
               # What the timed steps add on top of what the process held before them.
               step_growth_mib=hwm - held if step_peak else None)
    if args.framework == "eager":
        # After the timed steps and their measurements: counting runs one more step, which
        # would otherwise put eager one step ahead of the other frameworks.
        out["kernels_per_step"] = count_eager_kernels(model, opt, *data)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
