"""Training parity report: N steps by gptc and by PyTorch eager from the same weights.

Both start from one TinyGPT (dropout 0), see the same batches and learning rates
(nanoGPT's warm-up + cosine), and use AdamW (two decay groups) with clip_grad_norm_(1.0).
Prints, per step, both losses, their relative difference and the worst absolute
difference over every parameter after the update.

    PYTHONPATH=python python3 examples/parity.py --steps 50
"""
import argparse
import copy

import torch

import gptc
from gptc.testing.parity import nanogpt_lr, torch_adamw, torch_step, worst_param_difference
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--no-bias", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    cfg = TinyGPTConfig(bias=not args.no_bias, dropout=0.0)
    model = TinyGPT(cfg).train()
    ref = copy.deepcopy(model)
    g = torch.Generator().manual_seed(args.seed + 1)
    data = [(torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size), generator=g),
             torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size), generator=g))
            for _ in range(args.steps)]
    hyper = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8)
    step = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**hyper),
                                   grad_clip=1.0, check_gradients=True)
    opt = torch_adamw(ref, **hyper)
    print(f"bias={cfg.bias}, batch {args.batch}x{cfg.block_size}, {step.num_kernels} kernels/step")
    print(f"{'step':>4} {'gptc loss':>11} {'torch loss':>11} {'rel diff':>9} {'worst param':>11}")
    worst_rel = worst_param = 0.0
    for it, (x, y) in enumerate(data):
        lr = nanogpt_lr(it, lr=1e-3, min_lr=1e-4, warmup=5, decay_iters=args.steps)
        loss = step(x, y, lr=lr).item()
        ref_loss = torch_step(ref, opt, x, y, lr=lr)
        worst = worst_param_difference(step.state_dict(), ref)
        rel = abs(loss - ref_loss) / abs(ref_loss)
        worst_rel, worst_param = max(worst_rel, rel), max(worst_param, worst)
        print(f"{it + 1:4d} {loss:11.7f} {ref_loss:11.7f} {rel:9.2e} {worst:11.2e}")
    print(f"worst over {args.steps} steps: loss {worst_rel:.2e} relative, "
          f"parameters {worst_param:.2e} absolute")


if __name__ == "__main__":
    main()
