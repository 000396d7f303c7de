"""The training step's matrix products, gptc's against PyTorch's, one shape at a time.

    python3 bench/matmul_shapes.py [--tokens 1024] [--embd 384] [--threads 1] [--rounds 15]

For one transformer layer of the test GPT (tokens = batch * block_size rows, n_embd
columns) times each product of the step in the layout gptc's kernels use it (the forward's
x W^T, the input gradient's dY W, the weight gradient's dY^T X, which gptc copies to rows
first) and the same product through torch (F.linear, mm, t().mm: MKL or whichever BLAS
torch was built with), alternating the two in one process so that both see the same
machine. Prints GFLOP/s (medians, and the best round) and the time ratio per shape.
Not part of the tests: timings depend on the machine's load.
"""
import ctypes
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cli import Parser, refuse_below, refuse_past_memory  # noqa: E402 (beside this file)
from kernel_profile import compile_kernels  # noqa: E402  (as gptc compiles kernels.so)

SOURCE = r"""
#include "gptc/prelude.h"
GPTC_EXPORT void set_threads(int n) { gptc::thread_count() = n; }
GPTC_EXPORT void product(const long* s, const float* A, const float* B, float* C) {
  gptc::matmul(s[0], s[1], s[2], s[3], A, s[4], s[5], s[6], B, s[7], s[8], s[9], C);
}
"""


def build(work: str) -> ctypes.CDLL:
    src, lib = os.path.join(work, "shapes.cpp"), os.path.join(work, "shapes.so")
    with open(src, "w") as f:
        f.write(SOURCE)
    compile_kernels(src, lib)
    return ctypes.CDLL(lib)


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--embd", type=int, default=384)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    refuse_below(ap, args, tokens=1, embd=1, rounds=1, threads=1)
    T, C = args.tokens, args.embd
    # The floats of x, h, q, the four weights and out, below.
    refuse_past_memory(ap, f"--tokens {T} --embd {C}",
                       4 * (8 * T * C + 12 * C * C + max(T, 4 * C) * 4 * C))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="gptc-shapes-") as work:
        lib = build(work)
        lib.set_threads(args.threads)
        F = torch.nn.functional
        x, h, q = torch.randn(T, C), torch.randn(T, 4 * C), torch.randn(T, 3 * C)
        w_qkv, w_fc = torch.randn(3 * C, C), torch.randn(4 * C, C)
        w_fcp, w_p = torch.randn(C, 4 * C), torch.randn(C, C)
        out = torch.empty(max(T, 4 * C) * 4 * C)

        def gptc_call(shape, a, b):
            s = (ctypes.c_long * 10)(*shape)
            pa, pb, pc = (ctypes.c_void_p(t.data_ptr()) for t in (a, b, out))
            call = lambda: lib.product(s, pa, pb, pc)  # noqa: E731
            call.rows, call.cols = shape[1], shape[2]
            return call

        # (name, flops, torch's product, gptc's: batch, M, N, K, A strides (b, m, k),
        # B strides (b, k, n)) for a [T, in] x [out, in]^T linear layer and its gradients.
        cases = []
        for name, a, w, n_in, n_out, dy in (("qkv", x, w_qkv, C, 3 * C, q),
                                             ("fc", x, w_fc, C, 4 * C, h),
                                             ("fc proj", h, w_fcp, 4 * C, C, x),
                                             ("attn proj", x, w_p, C, C, x)):
            flops = 2 * T * n_in * n_out
            cases += [
                (f"{name} forward", flops, lambda a=a, w=w: F.linear(a, w),
                 gptc_call((1, T, n_out, n_in, 0, n_in, 1, 0, 1, n_in), a, w)),
                (f"{name} input grad", flops, lambda dy=dy, w=w: dy.mm(w),
                 gptc_call((1, T, n_in, n_out, 0, n_out, 1, 0, n_in, 1), dy, w)),
                (f"{name} weight grad", flops, lambda dy=dy, a=a: dy.t().mm(a),
                 gptc_call((1, n_out, n_in, T, 0, 1, n_out, 0, n_in, 1), dy, a)),
            ]
        times = {c[0]: ([], []) for c in cases}
        for name, _, tf, gf in cases:  # warm-up, and each product checked against torch's
            want = tf()
            gf()
            got = out[:gf.rows * gf.cols].view(gf.rows, gf.cols)
            err = ((got - want).norm() / want.norm()).item()
            if not err < 1e-5:
                sys.exit(f"matmul_shapes: gptc's {name} product differs from torch's "
                         f"(relative error {err:.1e})")
        for r in range(args.rounds):
            for name, _, tf, gf in cases:
                order = ((0, tf), (1, gf)) if r % 2 == 0 else ((1, gf), (0, tf))
                for j, fn in order:
                    t0 = time.perf_counter()
                    fn()
                    times[name][j].append(time.perf_counter() - t0)
    print(f"{T} tokens, n_embd {C}, {args.threads} thread(s), {args.rounds} rounds; "
          f"GFLOP/s median (best), torch {torch.__version__}")
    print("| product | torch | gptc | gptc time / torch time |")
    print("|---|---|---|---|")
    total = [0.0, 0.0]
    for name, flops, _, _ in cases:
        med = []
        cells = []
        for j in (0, 1):
            t = sorted(times[name][j])
            med.append(t[len(t) // 2])
            total[j] += med[-1]
            cells.append(f"{flops / med[-1] / 1e9:.1f} ({flops / t[0] / 1e9:.1f})")
        print(f"| {name} | {cells[0]} | {cells[1]} | {med[1] / med[0]:.2f} |")
    print(f"| all | {total[0] * 1e3:.1f} ms | {total[1] * 1e3:.1f} ms | {total[1] / total[0]:.2f} |")


if __name__ == "__main__":
    main()
