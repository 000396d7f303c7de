"""The main job's recipe trained by gptc, by eager PyTorch and by torch.compile in one run:
the same corpus, tokenizer, initial weights, batches, learning rates, evaluation batches
and threads; each framework's validation loss at every evaluation, its training time
and peak memory. The record goes to the results store, bench/results/main_job/.

    python3 bench/main_job.py [--frameworks gptc,eager,compile] [-- train.py settings]

gptc runs the main job itself (examples/train.py, sampling off); eager and torch.compile
run the same loop with torch.optim.AdamW (nanoGPT's two decay groups) and
clip_grad_norm_, each framework in its own process so that its peak memory is its own.
The losses agree to rounding, not to the bit: the frameworks add in different orders.
"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import store  # noqa: E402 (beside this file)
from _cli import Parser  # noqa: E402

STORE = os.path.join(HERE, "results", "main_job")
FRAMEWORKS = ("gptc", "eager", "compile")


def load_job():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gptc_main_job",
                                                  os.path.join(REPO, "examples", "train.py"))
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def torch_worker(framework, settings):
    """Train the recipe with PyTorch (eager, or torch.compile'd), as examples/train.py does
    with gptc; one JSON line: the evaluations, loop seconds, peak RSS."""
    import torch
    from gptc.apps.data import get_batch
    from gptc.apps.model_file import build_model
    from gptc.parity import torch_adamw, torch_step
    job = load_job()
    with tempfile.TemporaryDirectory() as out:
        args = job.parse_args(settings + ["--out", out])
        torch.set_num_threads(args.threads)
        data = job.prepare_data(args)
    model_args = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                      block_size=args.block_size, bias=args.bias,
                      vocab_size=data.tok.vocab_size, dropout=args.dropout)
    torch.manual_seed(args.seed)
    model = build_model(os.path.abspath(args.model) if args.model else None, model_args)
    opt = torch_adamw(model, lr=args.lr, betas=(args.beta1, args.beta2), eps=1e-8,
                      weight_decay=args.weight_decay)
    run = torch.compile(model) if framework == "compile" else model

    @torch.no_grad()
    def evaluate():
        run.eval()
        losses = job.estimate_losses(lambda x, y: float(run(x, y)[1]), data.eval_sets)
        run.train()
        return losses

    gen = torch.Generator().manual_seed(args.seed)
    evals = [{"iter": 0, **evaluate()}]
    t0 = time.perf_counter()
    first_step_s = None
    for it in range(args.iters):
        x, y = get_batch(data.train_data, args.batch, args.block_size, gen)
        loss = torch_step(run, opt, x, y, lr=job.get_lr(it, args), grad_clip=args.grad_clip)
        if first_step_s is None:  # torch.compile compiles here
            first_step_s = time.perf_counter() - t0
        if (it + 1) % args.eval_interval == 0 or it + 1 == args.iters:
            evals.append({"iter": it + 1, "train_step_loss": loss, **evaluate()})
    seconds = time.perf_counter() - t0
    print(json.dumps({"evals": evals, "loop_s": seconds, "first_step_s": first_step_s,
                      "peak_rss_mib": peak_rss_mib()}))


def gptc_run(settings, env):
    """examples/train.py itself; its eval.csv and the loop time it prints."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "peak_rss_kib=%M", sys.executable,
             os.path.join(REPO, "examples", "train.py"), *settings, "--out", out,
             "--sample-chars", "0"], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(f"main_job.py: gptc's run failed: {proc.stderr.strip()[-500:]}")
        evals = {}
        with open(os.path.join(out, "eval.csv")) as f:
            next(f)
            for line in f:
                it, split, loss, twin = line.strip().split(",")
                evals.setdefault(int(it), {"iter": int(it)})[split] = float(loss)
                if split == "val":
                    evals[int(it)]["twin_val"] = float(twin)
    loop = re.search(r"trained \d+ iterations in ([0-9.]+) s", proc.stdout)
    rss = re.search(r"peak_rss_kib=(\d+)", proc.stderr)
    return {"evals": [evals[k] for k in sorted(evals)], "loop_s": float(loop.group(1)),
            "wall_s": wall, "peak_rss_mib": int(rss.group(1)) / 1024 if rss else None}


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--worker"]:
        return torch_worker(argv[1], argv[2:])
    settings = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = Parser(prog="main_job.py", description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--note", default=None, help="a remark kept with the record")
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    frameworks = args.frameworks.split(",")
    if not frameworks or any(f not in FRAMEWORKS for f in frameworks):
        ap.error(f"--frameworks takes some of {','.join(FRAMEWORKS)}")
    job = load_job()
    with tempfile.TemporaryDirectory() as out:
        recipe = vars(job.parse_args(settings + ["--out", out]))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    started = time.strftime(store.STAMP, time.gmtime())
    results = {}
    for fw in frameworks:
        print(f"main_job: {fw} ...", flush=True)
        if fw == "gptc":
            results[fw] = gptc_run(settings, env)
        else:
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--worker", fw, *settings],
                                  capture_output=True, text=True, env=env)
            if proc.returncode:
                raise SystemExit(f"main_job.py: the {fw} run failed: "
                                 f"{proc.stderr.strip()[-500:]}")
            results[fw] = json.loads(proc.stdout.strip().splitlines()[-1])
            results[fw]["wall_s"] = time.perf_counter() - t0
        last = results[fw]["evals"][-1]
        print(f"  {fw}: val loss {last['val']:.4f} (train {last['train']:.4f}) after "
              f"{last['iter']} steps; loop {results[fw]['loop_s']:.1f} s, whole run "
              f"{results[fw]['wall_s']:.1f} s, peak RSS {results[fw]['peak_rss_mib'] or 0:.0f} MiB",
              flush=True)
    settings = {k: recipe[k] for k in (
        "n_layer", "n_head", "n_embd", "block_size", "batch", "iters", "lr", "min_lr",
        "warmup_iters", "eval_interval", "eval_batches", "dropout", "bias", "seed", "threads",
        "corpus", "tokenizer", "data")}
    path = store.write_new(STORE, settings, results, args.note, date=started[:10])
    print(f"main_job: wrote {path}")

if __name__ == "__main__":
    main()
