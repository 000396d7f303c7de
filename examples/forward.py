"""gptc's main job today: compile the test GPT's forward pass and compare with PyTorch.

Captures a nanoGPT-style model (2 layers, 2 heads, 64 wide, vocab 65, block 32),
compiles it with gptc for the CPU, runs one batch through the generated kernels and
prints the loss beside PyTorch eager's, with the worst logit difference.
"""
import argparse
import time

import torch

import gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--no-bias", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    # Up front: a negative size was a torch traceback, -1 layers ran as none, and n_embd
    # not divisible by n_head failed inside torch.export.
    for name in ("n_layer", "n_head", "n_embd", "block_size", "batch"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.n_embd % args.n_head:
        ap.error("--n-embd must be a multiple of --n-head")
    if not -2**63 <= args.seed < 2**64:  # torch.manual_seed's range
        ap.error(f"--seed must be from {-2**63} to {2**64 - 1}")

    torch.manual_seed(args.seed)
    cfg = TinyGPTConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                        block_size=args.block_size, vocab_size=65, bias=not args.no_bias)
    model = TinyGPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size))
    targets = torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size))

    t0 = time.perf_counter()
    compiled = gptc.compile(model, (idx, targets))
    t1 = time.perf_counter()
    logits, loss = compiled(idx, targets)
    t2 = time.perf_counter()
    with torch.no_grad():
        ref_logits, ref_loss = model(idx, targets)

    print(f"model: {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} wide, "
          f"batch {args.batch}x{cfg.block_size}, bias={cfg.bias}")
    print(f"compiled in {t1 - t0:.2f} s to {compiled.num_kernels} kernels "
          f"({compiled.artifact_dir})")
    print(f"forward pass: {1e3 * (t2 - t1):.2f} ms")
    print(f"loss   gptc {loss.item():.7f}   pytorch {ref_loss.item():.7f}   "
          f"relative difference {abs(loss.item() - ref_loss.item()) / abs(ref_loss.item()):.2e}")
    print(f"logits worst absolute difference {(logits - ref_logits).abs().max().item():.2e}")


if __name__ == "__main__":
    try:
        main()
    except (gptc.GptcError, gptc.CaptureError) as e:
        message = str(e)  # the compiler's own lines already start with "gptc: "
        raise SystemExit(message if message.startswith("gptc: ") else f"gptc: error: {message}")
