"""Eager PyTorch's training-step memory, measured on the CPU as the CUDA allocator would count it.

    python3 bench/eager_memory.py [--size shakespeare_char] [--steps 2]

Runs the GPU check's eager step (bench/gpu_torch.py: nanoGPT's GPT with biases, AdamW,
clip_grad_norm_, fp32) on the CPU under a dispatch mode that counts every tensor storage
from the op that makes it until it is freed, each rounded up to 512 bytes as the CUDA
caching allocator rounds, parameters and inputs included. Prints one JSON line: the peak
and what is live after the last step, in MiB. The estimate of eager's
torch.cuda.max_memory_allocated that gptc's device memory is compared with before a GPU
measures it (bench/NOTES.md, "Memory"); the GPU check measures the real one.
"""
import json
import os
import sys
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cli import Parser, refuse_below  # noqa: E402 (beside this file)
from gpu_torch import HYPER, SIZES, build  # noqa: E402
from gptc.parity import torch_adamw, torch_step  # noqa: E402 (gpu_torch put python/ first)


class StorageCounter(TorchDispatchMode):
    """Live bytes of the tensor storages seen (each once, in 512-byte blocks) and their peak."""

    def __init__(self):
        super().__init__()
        self.live, self.bytes, self.peak = set(), 0, 0

    def track(self, t):
        if not isinstance(t, torch.Tensor):
            return
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in self.live or storage.nbytes() == 0:
            return
        n = (storage.nbytes() + 511) // 512 * 512
        self.live.add(key)
        self.bytes += n
        self.peak = max(self.peak, self.bytes)

        def freed(key=key, n=n):
            if key in self.live:
                self.live.discard(key)
                self.bytes -= n
        weakref.finalize(storage, freed)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            self.track(o)
        return out


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=list(SIZES), default="shakespeare_char")
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    refuse_below(ap, args, steps=1)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, x, y = build(args.size, "cpu")
    opt = torch_adamw(model, **HYPER)
    counter = StorageCounter()
    for t in (*model.parameters(), x, y):
        counter.track(t)
    with counter:
        for _ in range(args.steps):
            torch_step(model, opt, x, y, lr=HYPER["lr"])
    mib = 1 << 20
    print(json.dumps({"framework": "torch", "mode": "eager", "size": args.size,
                      "steps": args.steps, "peak_mib": counter.peak / mib,
                      "live_after_mib": counter.bytes / mib,
                      "params": sum(p.numel() for p in model.parameters()),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
