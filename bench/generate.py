"""Generation speed: tokens a second of gptc's KV-cached decode step against nanoGPT's own
`generate` loop in eager PyTorch and under torch.compile, and gptc without its cache (the
whole block per token), on the main job's model size, the same threads, in one run; the
peak memory of each, each in its own process. The record goes to bench/results/generate/.

    python3 bench/generate.py [--tokens 500] [--threads 2] [--frameworks ...]
    python3 bench/generate.py --model hf-gpt2|hf-llama|hf-falcon   # a transformers model
    python3 bench/generate.py --batch 8        # 8 texts at once in every framework
    python3 bench/generate.py --model hf-gpt2 --size gpt2 --tokens 100   # GPT-2 small's size


The model is the main job's recipe (4 layers, 4 heads, 128 wide, block 64, vocabulary 97,
no biases) at its initial weights: speed does not depend on the weights. Every framework
writes --tokens tokens after a one-token prompt, at temperature 1 with top-k 40; the
clock runs over the generation only, after one warm-up text (which is when torch.compile
compiles). nanoGPT's loop crops the context to the block and runs the model over all of
it for every token; gptc's decode step runs one position against the cache, and shifts
the context to its last half when the cache is full. With --batch B every framework
writes B texts at once (gptc: compile_generate(batch=B); nanoGPT's loop and transformers'
generate: B rows; gptc without its cache: one text after another) and tokens/s counts
the tokens of all B.

With --size gpt2 the model has GPT-2 small's sizes instead (12 layers, 12 heads, 768 wide,
50,257 tokens, 1,024 positions: 124 M parameters, ~500 MB of weights read a token), where a
decode step reads the weights from memory rather than from the caches.

With --model hf-gpt2, hf-llama or hf-falcon the model is transformers' GPT2LMHeadModel,
LlamaForCausalLM or FalconForCausalLM at the same sizes (LLaMA: 2 key/value heads, SwiGLU
352 wide; Falcon: one key/value head, and its own attention code, to which gptc's decode
step hands the whole caches) with 512 positions, so that the text fits without a shift
(transformers' generate does not shift), and the frameworks are gptc (compile_generate: the model's forward with gptc's caches,
512 positions each step), transformers' generate in eager PyTorch (its DynamicCache grows
a position a token) and under torch.compile (a static cache, the forward compiled).
"""
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import config  # noqa: E402 (beside this file)
import store  # noqa: E402 (beside this file)
from _cli import Parser  # noqa: E402

STORE = os.path.join(HERE, "results", "generate")
FRAMEWORKS = ("gptc", "gptc-no-cache", "eager", "compile")
HF_FRAMEWORKS = ("gptc", "transformers", "transformers-compile")
MODEL = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, vocab_size=97, bias=False)
HF_POSITIONS = 512
SIZES = {"bench": (MODEL, HF_POSITIONS),
         "gpt2": (dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257,
                       bias=True), 1024)}
TOP_K = 40


def hf_model(kind, size):
    """transformers' model `kind` at the sizes SIZES names, seed 0."""
    import torch
    torch.manual_seed(0)
    model, positions = SIZES[size]
    return config.hf_model(kind, model["n_layer"], model["n_head"], model["n_embd"],
                           model["vocab_size"], positions).eval()


def hf_runner(kind, framework, tokens, threads, batch, size):
    """run(seed) writing `tokens` tokens after a one-token prompt, `batch` texts at once,
    with `framework`."""
    import torch
    import gptc
    hf = hf_model(kind, size)
    if framework == "gptc":
        gen = gptc.compile_generate(hf, batch=batch)
        gen.set_num_threads(threads)
        prompt = [[0]] * batch if batch > 1 else [0]
        return lambda seed: gen.generate(prompt, tokens, temperature=1.0, top_k=TOP_K,
                                         seed=seed)
    kw = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, top_k=TOP_K,
              temperature=1.0, pad_token_id=0)
    if framework == "transformers-compile":
        hf.forward = torch.compile(hf.forward)
        kw["cache_implementation"] = "static"

    def run(seed):
        torch.manual_seed(seed)
        with torch.no_grad():
            return hf.generate(torch.zeros(batch, 1, dtype=torch.long), **kw)
    return run


def nanogpt_generate(model, idx, n, block, temperature, top_k, generator):
    """nanoGPT's GPT.generate: crop to the block, forward, the last position's logits,
    temperature, top-k, softmax, multinomial."""
    import torch
    import torch.nn.functional as F
    for _ in range(n):
        cond = idx if idx.size(1) <= block else idx[:, -block:]
        logits, _ = model(cond)
        logits = logits[:, -1, :] / temperature
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, 1, generator=generator)), dim=1)
    return idx


def runner(kind, framework, tokens, threads, batch, size):
    """run(seed) writing `tokens` tokens after a one-token prompt, `batch` texts at once,
    with `framework`, the model at the sizes SIZES names."""
    import torch
    import gptc
    from gptc.apps.sampling import FullBlock
    from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
    if kind != "gpt":
        return hf_runner(kind, framework, tokens, threads, batch, size)
    torch.manual_seed(0)
    sizes = SIZES[size][0]
    model = TinyGPT(TinyGPTConfig(**sizes)).eval()
    block = sizes["block_size"]
    if framework in ("gptc", "gptc-no-cache"):
        gen = (gptc.compile_generate(model, batch=batch) if framework == "gptc"
               else FullBlock(model, block, batch))
        gen.set_num_threads(threads)
        prompt = [[0]] * batch if batch > 1 else [0]

        def run(seed):
            return gen.generate(prompt, tokens, temperature=1.0, top_k=TOP_K, seed=seed)
    else:
        net = torch.compile(model, dynamic=True) if framework == "compile" else model

        def run(seed):
            with torch.no_grad():
                return nanogpt_generate(net, torch.zeros(batch, 1, dtype=torch.long), tokens,
                                        block, 1.0, TOP_K, torch.Generator().manual_seed(seed))
    return run


def worker(kind, framework, tokens, threads, batch, size):
    import torch
    torch.set_num_threads(threads)
    run = runner(kind, framework, tokens, threads, batch, size)
    t0 = time.perf_counter()
    run(1)  # warm-up (torch.compile compiles here)
    warm = time.perf_counter() - t0
    times = []
    for seed in (2, 3, 4):
        t0 = time.perf_counter()
        run(seed)
        times.append(time.perf_counter() - t0)
    times.sort()
    n = tokens * batch
    print(json.dumps({"tokens_per_s_median": n / times[1], "tokens_per_s_max":
                      n / times[0], "tokens_per_s_min": n / times[-1],
                      "warmup_s": warm,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--worker"]:
        return worker(argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]), argv[6])
    ap = Parser(prog="generate.py", description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="texts written at once")
    ap.add_argument("--model", default="gpt",
                    choices=("gpt", "hf-gpt2", "hf-llama", "hf-falcon"))
    ap.add_argument("--size", default="bench", choices=tuple(SIZES),
                    help="bench: the main job's sizes; gpt2: GPT-2 small's")
    ap.add_argument("--frameworks", default=None,
                    help=f"some of {','.join(FRAMEWORKS)} (with --model hf-*: of "
                         f"{','.join(HF_FRAMEWORKS)}); default: all")
    ap.add_argument("--note", default=None)
    args = ap.parse_args(argv)
    known = FRAMEWORKS if args.model == "gpt" else HF_FRAMEWORKS
    frameworks = args.frameworks.split(",") if args.frameworks else list(known)
    if any(f not in known for f in frameworks):
        ap.error(f"--frameworks takes some of {','.join(known)} with --model {args.model}")
    sizes, positions = SIZES[args.size]
    if args.model != "gpt" and args.tokens >= positions:
        ap.error(f"--tokens must be below {positions} with --model {args.model} --size "
                 f"{args.size}")
    if args.tokens < 1 or args.threads < 1 or not 1 <= args.batch <= 256:
        ap.error("--tokens and --threads must be at least 1, --batch from 1 to 256")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    results = {}
    for fw in frameworks:
        proc = subprocess.run([sys.executable, __file__, "--worker", args.model, fw,
                               str(args.tokens), str(args.threads), str(args.batch),
                               args.size],
                              capture_output=True, text=True, env=env)
        if proc.returncode:
            raise SystemExit(f"generate.py: {fw} failed: {proc.stderr.strip()[-500:]}")
        results[fw] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[fw]
        print(f"{fw:>14}: {r['tokens_per_s_median']:8.0f} tokens/s (median of 3; "
              f"{r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f}), warm-up "
              f"{r['warmup_s']:.1f} s, peak RSS {r['peak_rss_mib']:.0f} MiB", flush=True)
    model = sizes if args.model == "gpt" else dict(sizes, kind=args.model,
                                                   block_size=positions)
    settings = {"model": model, "tokens": args.tokens, "threads": args.threads,
                "temperature": 1.0, "top_k": TOP_K}
    if args.batch > 1:  # earlier records, all of one text, have no "batch"
        settings["batch"] = args.batch
    path = store.write_new(STORE, settings, results, args.note)
    print(f"generate: wrote {path}")

if __name__ == "__main__":
    main()
