"""Where eager PyTorch's CPU training step spends its time, by aten op (torch.profiler): the
table to read beside bench/kernel_profile.py's for gptc's step, on the same machine.

    python3 bench/eager_profile.py [--size shakespeare] [--steps 10] [--threads 2] [--top 25]

Runs bench/train_step.py's eager step (the same model, batch, AdamW and clipping) `--warmup`
times, then `--steps` times under the profiler, and prints each op's self CPU time a step
(ms, largest first) and the same time in the groups the notes compare: the matrix products,
attention and its gradient, GELU and its gradient, the rest. Not a test: timings depend on
the machine's load.
"""
import os
import sys

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's own log (a CPU-only run's
import torch  # noqa: E402                      # "no GPU" error lines) kept off stderr
from torch.profiler import ProfilerActivity, profile  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cli import Parser, model_arguments, refuse_below, refuse_model_options  # noqa: E402
from config import HYPER, SIZES  # noqa: E402
from train_step import eager_step, make_model, torch_adamw  # noqa: E402

# The groups, by the aten op names that PyTorch's CPU step dispatches to (self time only, so
# an op that calls another is not counted twice).
GROUPS = (("products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
          ("attention", ("flash_attention", "scaled_dot_product", "aten::_softmax")),
          ("gelu", ("gelu",)))


def group_of(name: str) -> str:
    for group, keys in GROUPS:
        if any(k in name for k in keys):
            return group
    return "the rest"


def main():
    ap = Parser()
    ap.add_argument("--size", choices=list(SIZES), default="shakespeare")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    model_arguments(ap)
    args = ap.parse_args()
    refuse_below(ap, args, steps=1, warmup=0, threads=1, top=1)
    args.dropout = 0.0
    refuse_model_options(ap, args)
    torch.set_num_threads(args.threads)
    cfg_args = dict(SIZES[args.size])
    batch = cfg_args.pop("batch")
    model, _, (x, y) = make_model(cfg_args, batch, args.model, args.attention, 0.0)
    opt = torch_adamw(model, **HYPER)
    for _ in range(args.warmup):
        eager_step(model, opt, x, y)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            eager_step(model, opt, x, y)
    ops = sorted(((e.key, e.self_cpu_time_total / 1e3 / args.steps, e.count // args.steps)
                  for e in prof.key_averages()), key=lambda r: -r[1])
    total = sum(ms for _, ms, _ in ops)
    print(f"eager step, {args.size} size, {args.threads} threads: {total:.1f} ms of op self "
          f"time a step ({args.steps} steps profiled)\n")
    print("| op | ms a step | calls a step |\n|---|---:|---:|")
    for name, ms, calls in ops[:args.top]:
        print(f"| {name} | {ms:.2f} | {calls} |")
    groups = {}
    for name, ms, _ in ops:
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + ms
    print("\n| group | ms a step | share |\n|---|---:|---:|")
    for group, ms in sorted(groups.items(), key=lambda g: -g[1]):
        print(f"| {group} | {ms:.1f} | {100 * ms / total:.0f} % |")


if __name__ == "__main__":
    main()
