"""PyTorch's side of the GPU check (scripts/gpu_check.sh), on a machine with torch and a GPU
but neither MLIR nor gptc's compiled module: nanoGPT's GPT (gptc.testing.tiny_gpt) and a
full training step (forward, backward, clip_grad_norm_, AdamW with nanoGPT's two groups),
fp32 with TF32 off.

    python3 bench/gpu_torch.py time --size tiny --mode eager|compile|reduce-overhead
    python3 bench/gpu_torch.py parity --weights W.safetensors --batches B.bin --steps N \
        --lr LR --losses LOSSES.txt --params OUT.safetensors
    python3 bench/gpu_torch.py weights --size shakespeare_char --manifest M.json --out W
    python3 bench/gpu_torch.py generate --mode eager|compile --tokens 150 --texts 3

`time` prints one JSON line: the median, minimum and maximum step in ms over --steps steps
after --warmup, the CUDA kernels one eager step launches (torch.profiler), and the peak
memory torch allocated (max_memory_allocated). torch.compile compiles the model; the
optimizer and clipping stay eager.

`weights` writes the model's initial parameters (the ones `time` starts from) under the
names an artifact's manifest lists, for an artifact copied without its weights (the GPU
check carries shakespeare_char's step without its 42 MiB of weights).

`generate` times nanoGPT's generate loop (bench/generate.py's: the context cropped to the
block, the whole model run over it for every token) on the GPU check's generator model
(GENERATE: the rows the generator writes at once, a one-token prompt each, top-k 40),
after one warm-up text, as bench/generate_time.cpp times gptc's generator; one JSON line,
tokens a second at the median, fastest and slowest text.

`parity` trains eager from the weights gptc started from, on the batches gptc's step took
(examples/train_step.cpp's BATCHES.bin: each step's idx then targets, little-endian int64),
at the constant rate gptc's run used, and compares each step's loss with LOSSES.txt
(train_step's hexadecimal floats) and the parameters after the last step with OUT's. One
JSON line: the largest relative loss difference, the largest parameter difference, and
whether both are within the GPU check's bounds (1e-5, 1e-4).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from gptc.parity import torch_adamw, torch_step  # noqa: E402 (pure Python: no gptc module)
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig  # noqa: E402

# The GPU check's sizes (issue 41): the test GPT's, and shakespeare_char's with its batch.
SIZES = {
    "tiny": dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=65, batch=8),
    "shakespeare_char": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65,
                             batch=64),
}
HYPER = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8)
# The GPU check's generator (scripts/gpu_prepare.py): the test GPT at a 23-letter vocabulary,
# writing `batch` texts at once.
GENERATE = dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=23, batch=2)


def fp32_exactly():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def build(size, device):
    spec = dict(SIZES[size])
    batch = spec.pop("batch")
    torch.manual_seed(0)
    cfg = TinyGPTConfig(dropout=0.0, bias=True, **spec)
    model = TinyGPT(cfg).to(device).train()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g).to(device)
    y = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g).to(device)
    return model, x, y


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def eager_kernels(model, opt, x, y):
    """CUDA kernels one eager step launches."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch_step(model, opt, x, y, lr=HYPER["lr"])
        sync("cuda")
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def time_steps(args):
    fp32_exactly()
    model, x, y = build(args.size, args.device)
    opt = torch_adamw(model, **HYPER)
    run = model if args.mode == "eager" else torch.compile(
        model, mode="reduce-overhead" if args.mode == "reduce-overhead" else None)
    kernels = None
    if args.mode == "eager" and args.device.startswith("cuda"):
        kernels = eager_kernels(model, opt, x, y)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    ms = []
    for k in range(args.warmup + args.steps):
        sync(args.device)
        t0 = time.perf_counter()
        torch_step(run, opt, x, y, lr=HYPER["lr"])  # (.item(): waits for the step)
        t1 = time.perf_counter()
        if k >= args.warmup:
            ms.append((t1 - t0) * 1e3)
    peak = torch.cuda.max_memory_allocated() if args.device.startswith("cuda") else None
    print(json.dumps({"framework": "torch", "mode": args.mode, "size": args.size,
                      "device": args.device, "steps": args.steps, "warmup": args.warmup,
                      "median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
                      "kernels_per_step": kernels, "peak_bytes": peak,
                      "torch": torch.__version__}))


def time_generation(args):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from generate import TOP_K, nanogpt_generate
    fp32_exactly()
    spec = dict(GENERATE)
    batch = spec.pop("batch")
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(dropout=0.0, bias=True, **spec)).to(args.device).eval()
    net = torch.compile(model, dynamic=True) if args.mode == "compile" else model
    per_s = []
    for k in range(args.texts + 1):  # the first: the warm-up (torch.compile compiles)
        idx = torch.zeros(batch, 1, dtype=torch.long, device=args.device)
        gen = torch.Generator(device=args.device).manual_seed(k + 1)
        sync(args.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            nanogpt_generate(net, idx, args.tokens, spec["block_size"], 1.0, TOP_K, gen)
        sync(args.device)
        if k > 0:
            per_s.append(args.tokens * batch / (time.perf_counter() - t0))
    per_s.sort()
    print(json.dumps({"framework": "torch", "mode": args.mode, "device": args.device,
                      "batch": batch, "tokens": args.tokens, "texts": args.texts,
                      "tokens_per_s_median": per_s[len(per_s) // 2],
                      "tokens_per_s_max": per_s[-1], "tokens_per_s_min": per_s[0],
                      "torch": torch.__version__}))


def parity(args):
    from safetensors.torch import load_file
    fp32_exactly()
    weights = load_file(args.weights)
    spec = dict(SIZES[args.size])
    batch = spec.pop("batch")
    cfg = TinyGPTConfig(dropout=0.0, bias=True, **spec)
    model = TinyGPT(cfg)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"}  # gptc keeps nanoGPT's tied wte/lm_head as one parameter
    if set(missing) - tied or unexpected:
        sys.exit(f"gpu_torch: error: {args.weights} does not fit the {args.size} model "
                 f"(missing {sorted(set(missing) - tied)}, unexpected {sorted(unexpected)})")
    model = model.to(args.device).train()
    opt = torch_adamw(model, **HYPER)
    with open(args.losses) as f:
        theirs = [float.fromhex(line.strip()) for line in f if line.strip()]
    per_step = 2 * batch * cfg.block_size * 8
    with open(args.batches, "rb") as f:
        data = f.read()
    if len(theirs) < args.steps or len(data) < args.steps * per_step:
        sys.exit("gpu_torch: error: fewer losses or batches than --steps")
    worst_loss = 0.0
    for k in range(args.steps):
        ids = torch.frombuffer(bytearray(data[k * per_step:(k + 1) * per_step]),
                               dtype=torch.int64).view(2, batch, cfg.block_size)
        loss = torch_step(model, opt, ids[0].to(args.device), ids[1].to(args.device), lr=args.lr)
        worst_loss = max(worst_loss, abs(loss - theirs[k]) / abs(loss))
    gptc_params = load_file(args.params)
    worst_param = 0.0
    for name, p in model.named_parameters():
        if name in gptc_params:
            worst_param = max(worst_param,
                              (p.detach().cpu() - gptc_params[name]).abs().max().item())
    print(json.dumps({"steps": args.steps, "worst_loss_rel": worst_loss,
                      "worst_param_abs": worst_param,
                      "within": worst_loss <= 1e-5 and worst_param <= 1e-4}))


def weights(args):
    import json
    from safetensors.torch import save_file
    model, _, _ = build(args.size, "cpu")
    state = model.state_dict()
    with open(args.manifest) as f:
        names = [a["name"] for a in json.load(f)["args"] if a["kind"] == "param"]
    save_file({n: state[n].contiguous() for n in names}, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("time")
    t.add_argument("--size", choices=list(SIZES), required=True)
    t.add_argument("--mode", choices=["eager", "compile", "reduce-overhead"], required=True)
    t.add_argument("--device", default="cuda")
    t.add_argument("--steps", type=int, default=50)
    t.add_argument("--warmup", type=int, default=10)
    p = sub.add_parser("parity")
    p.add_argument("--size", choices=list(SIZES), default="tiny")
    p.add_argument("--weights", required=True)
    p.add_argument("--batches", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--losses", required=True)
    p.add_argument("--params", required=True)
    p.add_argument("--device", default="cuda")
    w = sub.add_parser("weights")
    w.add_argument("--size", choices=list(SIZES), required=True)
    w.add_argument("--manifest", required=True)
    w.add_argument("--out", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--mode", choices=["eager", "compile"], required=True)
    g.add_argument("--device", default="cuda")
    g.add_argument("--tokens", type=int, default=150)
    g.add_argument("--texts", type=int, default=3)
    args = ap.parse_args()
    {"time": time_steps, "parity": parity, "weights": weights,
     "generate": time_generation}[args.command](args)


if __name__ == "__main__":
    main()
