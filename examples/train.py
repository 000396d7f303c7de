"""gptc's main job: nanoGPT's CPU recipe, trained by gptc's compiled steps.

    python3 examples/train.py                                  # the recipe, Debian's fortunes
    python3 examples/train.py config/train_shakespeare_char.py --max_iters=500
    python3 examples/train.py --model path/to/model.py --data input.txt
    python3 examples/train.py --corpus multilingual            # 12 languages, byte-level BPE

The default is nanoGPT's README recipe for a machine without a GPU: 4 layers, 4 heads,
128 wide, block 64, batch 12, 2000 iterations, dropout 0, no biases, learning rate 1e-3
with 100 warm-up steps and a cosine decay to 1e-4 (AdamW, betas 0.9/0.99, weight decay
0.1, gradient clipping at 1). The model is nanoGPT's architecture (gptc.testing.tiny_gpt),
or --model's own GPT; every training step is one call into kernels gptc generated.

The corpus is Debian's fortune collections (python/gptc/apps/data.py) in English, or
with --corpus multilingual eleven more languages, tokenized by a byte-level BPE trained on
them, with a fertility report before training; --data trains on any UTF-8 text file.
Every evaluation (mean loss over --eval-iters fixed batches a split) also shows the loss of
the same model at its initial weights, the untrained twin, and writes a checkpoint.
Ctrl-C stops at the end of the current step and saves it; --resume continues bit for bit.
--device cuda trains on an NVIDIA GPU with the CPU's bits, so a run resumes on either.

Writes into --out: train.csv (iter, lr, train_loss; at evaluations val_loss and the
twin's), eval.csv (every evaluation, per split and language, with the twin's loss),
loss.png, ckpt.safetensors (model + optimizer + step counter), meta.json (model config,
tokenizer), generate/ (the trained model's KV-cached decode step, for examples/generate.c)
and, with several languages, fertility.csv. examples/sample.py samples from it.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import signal
import sys
import time
import types

import torch

import gptc
from gptc.apps import config as configurator
from gptc.apps.data import CharTokenizer, get_batch, load_corpus, load_multilingual, split
from gptc.apps.model_file import ModelFileError, build_model, check_returns_loss
from gptc.apps.sampling import (RunError, default_prompt, make_generator, read_meta,
                                tokenizer_of)
from gptc.apps.vocab import (FERTILITY_COLUMNS, BPETokenizer, encode_all, fertility,
                             fertility_warnings, format_fertility, tokenizer_meta)
from gptc.compiler import check_device
from gptc.parity import nanogpt_lr

# The errors that become one `gptc: error: ...` line (GradientFlowError is a GptcError).
GPTC_ERRORS = (gptc.GptcError, gptc.CaptureError)
CSV_FIELDS = ("iter", "lr", "train_loss", "val_loss", "twin_val_loss")
EVAL_FIELDS = ("iter", "split", "loss", "twin_loss")
MAX_THREADS = gptc.MAX_THREADS  # the runtime refuses more


class UsageError(Exception):
    """A problem with the command line or its files: reported as one line, exit 1."""


def build_parser():
    ap = argparse.ArgumentParser(
        prog="train.py", usage="train.py [CONFIG.py ...] [--key=value ...]",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)

    def opt(group, *names, **kw):
        group.add_argument(*configurator.spellings(*names), **kw)

    io = ap.add_argument_group("data and output")
    opt(io, "--data", default=None, help="UTF-8 text file to train on (default: --corpus)")
    opt(io, "--corpus", choices=("fortunes", "multilingual"), default="fortunes",
        help="Debian's English fortunes, or those of twelve languages")
    opt(io, "--lang-chars", type=int, default=200_000,
        help="multilingual: about this many characters a language")
    opt(io, "--dataset", default=None,
        help="nanoGPT's dataset name: trains on data/DATASET/input.txt when it exists")
    opt(io, "--tokenizer", choices=("char", "bpe"), default=None,
        help="characters, or a byte-level BPE (default: bpe for the multilingual corpus)")
    opt(io, "--vocab-size", type=int, default=2048, help="the BPE's vocabulary")
    opt(io, "--out", "--out-dir", default="out", help="output folder")
    opt(io, "--resume", nargs="?", const="", default=None, metavar="CKPT",
        help="continue from a checkpoint (default: OUT/ckpt.safetensors)")
    opt(io, "--init-from", choices=("scratch", "resume"), default="scratch",
        help="nanoGPT's spelling of --resume")
    m = ap.add_argument_group("model")
    opt(m, "--model", default=None, metavar="MODEL.py",
        help="a nanoGPT-style model file (GPTConfig, GPT returning (logits, loss))")
    opt(m, "--n-layer", type=int, default=4)
    opt(m, "--n-head", type=int, default=4)
    opt(m, "--n-embd", type=int, default=128)
    opt(m, "--block-size", type=int, default=64)
    opt(m, "--dropout", type=float, default=0.0)
    opt(m, "--bias", type=configurator.parse_bool, default=False,
        help="biases in Linear and LayerNorm")
    m.add_argument("--no-bias", dest="bias", action="store_false", help=argparse.SUPPRESS)
    t = ap.add_argument_group("training")
    opt(t, "--batch", "--batch-size", type=int, default=12)
    opt(t, "--iters", "--max-iters", type=int, default=2000, help="total training iterations")
    opt(t, "--lr", "--learning-rate", type=float, default=1e-3, help="peak learning rate")
    opt(t, "--min-lr", type=float, default=1e-4)
    opt(t, "--warmup-iters", type=int, default=100)
    opt(t, "--lr-decay-iters", type=int, default=None,
        help="end of the cosine decay (default: --iters)")
    opt(t, "--decay-lr", type=configurator.parse_bool, default=True,
        help="false: a constant learning rate")
    opt(t, "--beta1", type=float, default=0.9)
    opt(t, "--beta2", type=float, default=0.99)
    opt(t, "--weight-decay", type=float, default=0.1)
    opt(t, "--grad-clip", type=float, default=1.0)
    opt(t, "--gradient-accumulation-steps", type=int, default=1,
        help="micro-batches of --batch a step, their gradients summed (nanoGPT's)")
    opt(t, "--device", default="cpu",
        help="where the training step and the evaluations run: cpu, cuda (an NVIDIA GPU, "
             "the CPU's bits; nanoGPT's cuda:0 too) or cuda-emulated (the GPU's kernels "
             "on the CPU); the sample is drawn on the CPU")
    opt(t, "--seed", type=int, default=1337)
    opt(t, "--threads", type=int, default=None,
        help="threads for gptc's kernels and torch's (default: every core this process may "
             "use; the thread count never changes a bit)")
    e = ap.add_argument_group("evaluation and sampling")
    opt(e, "--eval-interval", type=int, default=250)
    opt(e, "--eval-batches", "--eval-iters", type=int, default=200,
        help="fixed batches a split for the loss estimate (shared out among the languages)")
    opt(e, "--prompt", default=None,
        help="sampling prompt (default: a newline)")
    opt(e, "--sample-chars", "--sample-tokens", type=int, default=300,
        help="tokens to sample at the end (characters with the character tokenizer)")
    opt(e, "--temperature", type=float, default=0.8,
        help="0 always takes the likeliest token")
    opt(e, "--top-k", type=int, default=None)
    configurator.add_ignored(ap)
    return ap


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = build_parser()
    files, rest = configurator.split_argv(argv)
    try:
        for path in files:
            configurator.apply_config(ap, configurator.read_config_file(path), path)
    except configurator.ConfigError as e:
        ap.error(str(e))
    args = ap.parse_args(rest)
    args.notes = configurator.ignored_notes(args)
    if args.init_from == "resume" and args.resume is None:
        args.resume = ""
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.iters
    if args.threads is None:
        args.threads = min(len(os.sched_getaffinity(0)), MAX_THREADS)
    if args.tokenizer is None:
        args.tokenizer = "bpe" if args.corpus == "multilingual" and not args.data else "char"
    for name in ("n_layer", "n_head", "n_embd", "block_size", "batch", "eval_interval",
                 "eval_batches", "threads", "lang_chars", "gradient_accumulation_steps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    try:  # gptc's devices, and nanoGPT's spelling cuda:0
        args.device = check_device(args.device)
    except gptc.GptcError as e:
        ap.error(f"--{e}")
    if args.threads > MAX_THREADS:  # torch.set_num_threads(huge) crashed the process
        ap.error(f"--threads must be at most {MAX_THREADS}")
    if not -2**63 <= args.seed < 2**63:  # the training step's seed is an int64
        ap.error(f"--seed must be from {-2**63} to {2**63 - 1}")
    for name in ("iters", "sample_chars", "warmup_iters", "lr_decay_iters"):
        if getattr(args, name) < 0:
            ap.error(f"--{name.replace('_', '-')} must not be negative")
    # Finite (NaN fails every comparison); the optimizer's ranges are torch.optim.AdamW's.
    for name in ("lr", "min_lr", "weight_decay", "grad_clip", "temperature"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) >= 0):
            ap.error(f"--{name.replace('_', '-')} must be a finite number >= 0")
    for name in ("beta1", "beta2"):
        if not 0.0 <= getattr(args, name) < 1.0:
            ap.error(f"--{name} must be in [0, 1)")
    if args.n_embd % args.n_head:
        ap.error(f"--n-embd ({args.n_embd}) must be a multiple of --n-head ({args.n_head})")
    if not 0.0 <= args.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    if args.top_k is not None and args.top_k < 1:
        ap.error("--top-k must be at least 1")
    if args.tokenizer == "bpe" and not 256 <= args.vocab_size <= 1 << 20:
        ap.error("--vocab-size must be from 256 (the bytes) to 1048576")
    if args.dataset and not args.data:
        args.data, note = find_dataset(args.dataset, files)
        args.notes.append(note)
    return args


def find_dataset(name, config_files):
    """(path or None, a note line) for nanoGPT's data/NAME/input.txt, looked for beside
    the config files' folder (nanoGPT's layout: config/ and data/ side by side) and in the
    current folder."""
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(f))) for f in config_files]
    for root in roots + [os.getcwd()]:
        path = os.path.join(root, "data", name, "input.txt")
        if os.path.isfile(path):
            return path, f"note: dataset '{name}': training on {path}"
    return None, (f"note: dataset '{name}' has no data/{name}/input.txt here; training on "
                  "the default corpus (pass --data FILE to choose the text)")


def get_lr(it, args):
    """nanoGPT's schedule: linear warm-up, cosine decay to min_lr, then min_lr."""
    if not args.decay_lr:
        return args.lr
    return nanogpt_lr(it, lr=args.lr, min_lr=args.min_lr, warmup=args.warmup_iters,
                      decay_iters=args.lr_decay_iters)


def estimate_losses(loss_of, eval_sets):
    """{split: mean of loss_of(x, y) over its fixed batches}, and "val": the mean over every
    held-out batch, so that the languages weigh alike."""
    losses = {k: sum(loss_of(x, y) for x, y in b) / len(b) for k, b in eval_sets.items()}
    vals = [k for k in eval_sets if k != "train"]
    losses["val"] = (sum(losses[k] * len(eval_sets[k]) for k in vals)
                     / sum(len(eval_sets[k]) for k in vals))
    return losses


def read_csv_rows(path, before_iter, fields=CSV_FIELDS):
    """The rows of an earlier run's CSV for iterations before `before_iter` (on resume).
    Every row must have every field, iter a whole number and the losses numbers (or empty
    between evaluations): a short row would come back with its missing fields as None,
    and the plot fail at the end."""
    if not os.path.isfile(path):
        return []
    name = os.path.basename(path)

    def corrupt(why):
        return UsageError(f"{path} is not this script's {name} ({why})")

    with open(path, newline="") as f:
        lines = csv.reader(f)
        header = next(lines, None)
        if header != list(fields):
            raise corrupt(f"its header is {','.join(header or [])!r}, expected "
                          f"{','.join(fields)!r}")
        rows = []
        for values in lines:
            if len(values) != len(fields):
                raise corrupt(f"line {lines.line_num} has {len(values)} fields, expected "
                              f"{len(fields)}")
            row = dict(zip(fields, values))
            for key, text in row.items():
                if key == "split":
                    continue
                try:
                    int(text, 10) if key == "iter" else (text == "" or float(text))
                except ValueError:
                    raise corrupt(f"line {lines.line_num}: {key} {text!r} is not a "
                                  f"{'whole number' if key == 'iter' else 'number'}") from None
            if int(row["iter"]) < before_iter:
                rows.append(row)
        return rows


def write_csv(path, rows, fields=CSV_FIELDS):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def plot_losses(path, rows, eval_rows, title, unit):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path}", file=sys.stderr)
        return False
    it = [int(r["iter"]) for r in rows]
    train = [float(r["train_loss"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=100)
    ax.plot(it, train, lw=0.8, alpha=0.5, label="train (per step)")
    splits = sorted({r["split"] for r in eval_rows}, key=lambda s: (s != "val", s))
    for s in splits:
        pts = [(int(r["iter"]), float(r["loss"])) for r in eval_rows if r["split"] == s]
        if s == "train" or not pts:
            continue
        main = s == "val"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if main else "-",
                lw=2 if main else 0.8, ms=4, label="val (held out)" if main else s[4:])
    twin = [float(r["twin_loss"]) for r in eval_rows if r["split"] == "val"]
    if twin:
        ax.axhline(twin[0], ls="--", color="gray", label="val, untrained twin")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"cross-entropy loss (nats/{unit})")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def progress(total, initial):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc="train", unit="it", dynamic_ncols=True)


def log(bar, msg):
    if bar is not None:
        bar.write(msg)
        sys.stdout.flush()
    else:
        print(msg, flush=True)


class StopRequest:
    """SIGINT (Ctrl-C) asks the loop to stop after the current step; a second one stops at
    once (Python's default)."""

    def __init__(self):
        self.requested = False
        self._old = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self._old)

    def restore(self):
        signal.signal(signal.SIGINT, self._old)


def load_text(args):
    """[(code, language, text)]: one entry for a file or the English fortunes."""
    try:
        if args.data:
            return [("", os.path.basename(args.data), load_corpus(args.data))]
        if args.corpus == "multilingual":
            return load_multilingual(args.lang_chars)
        return [("", "Debian fortunes", load_corpus())]
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None


def make_tokenizer(args, languages, old_meta):
    if old_meta is not None:  # a resumed run keeps its tokenizer
        tok = tokenizer_of(old_meta)
        if args.tokenizer == "char" and isinstance(tok, CharTokenizer):
            fresh = CharTokenizer("".join(t for _, _, t in languages))
            if fresh.chars != tok.chars:
                raise UsageError("the corpus's characters differ from those of the run "
                                 "being resumed (see its meta.json)")
        return tok
    if args.tokenizer == "char":
        return CharTokenizer("".join(t for _, _, t in languages))
    t0 = time.perf_counter()
    tok = BPETokenizer.train([t for _, _, t in languages], args.vocab_size)
    print(f"tokenizer: byte-level BPE, {tok.vocab_size} tokens, trained on the corpus in "
          f"{time.perf_counter() - t0:.1f} s")
    return tok


def prepare_data(args, old_meta=None):
    """The corpus as the job trains on it: read, tokenized (a resumed run keeps its
    tokenizer), each language split 90/10, what the tokenizer does reported, and the fixed
    evaluation batches drawn: --eval-batches from the train split, and as many from the
    held-out split shared out among the languages. A namespace of tok, unit ("char" or
    "token"), languages, parts [(code, language, train ids, val ids)], train_data,
    val_parts [(code, language, ids)] and eval_sets."""
    languages = load_text(args)
    tok = make_tokenizer(args, languages, old_meta)
    unit = "char" if isinstance(tok, CharTokenizer) else "token"
    parts = []  # (code, language, train ids, val ids)
    for code, name, text in languages:
        try:
            ids = torch.tensor(encode_all(tok, text), dtype=torch.long)
        except ValueError as e:
            raise UsageError(f"{name}: {e}") from None
        parts.append((code, name) + split(ids, 0.1))
    train_data = torch.cat([p[2] for p in parts])
    total_chars = sum(len(t) for _, _, t in languages)
    source = args.data or ("Debian fortunes" + (f" in {len(languages)} languages"
                                                 if len(languages) > 1 else ""))
    n_val = sum(len(p[3]) for p in parts)
    tokens = (f"{len(train_data) + n_val:,} tokens, " if unit == "token" else "")
    print(f"corpus: {source}: {total_chars:,} characters, {tokens}vocabulary {tok.vocab_size}; "
          f"train {len(train_data):,} {unit}s, val {n_val:,}")
    if len(languages) > 1:
        rows = fertility(tok, languages, [len(t) + len(v) for _, _, t, v in parts])
        print("fertility (words: runs of non-space characters; Chinese has no spaces):")
        print(format_fertility(rows))
        for line in fertility_warnings(rows):
            print(line)
        write_csv(os.path.join(args.out, "fertility.csv"),
                  [{k: (f"{r[k]:.4f}" if isinstance(r[k], float) else r[k])
                    for k in FERTILITY_COLUMNS} for r in rows], FERTILITY_COLUMNS)
    if len(train_data) <= args.block_size:
        raise UsageError(f"the train split has {len(train_data)} {unit}s, too few for "
                         f"--block-size {args.block_size}; use a longer text")
    val_parts = [(code, name, v) for code, name, _, v in parts if len(v) > args.block_size]
    for code, name, _, v in parts:
        if len(v) <= args.block_size:
            print(f"note: the held-out part of {name} has {len(v)} {unit}s, too few for "
                  f"--block-size {args.block_size}: no validation loss for it")
    if not val_parts:
        raise UsageError(f"the val split has too few {unit}s for --block-size "
                         f"{args.block_size}; use a longer text")
    if isinstance(tok, CharTokenizer):
        # Characters that only the held-out tenth holds: the model is never trained to
        # produce them (a script at the end of the file, say), which a loss curve hides.
        counts = torch.bincount(train_data, minlength=tok.vocab_size).tolist()
        unseen = [c for c, n in zip(tok.chars, counts) if n == 0]
        if unseen:
            shown = " ".join(repr(c) for c in unseen[:10]) + (" ..." if len(unseen) > 10 else "")
            print(f"note: {len(unseen)} of the {tok.vocab_size} characters occur only in the "
                  f"held-out split, never in training: {shown}")
    val_gen = torch.Generator().manual_seed(args.seed + 1)   # fixed evaluation batches
    eval_sets = {"train": [get_batch(train_data, args.batch, args.block_size, val_gen)
                           for _ in range(args.eval_batches)]}
    per_lang = max(1, -(-args.eval_batches // len(val_parts)))
    for code, name, v in val_parts:
        n = args.eval_batches if len(val_parts) == 1 else per_lang
        eval_sets["val:" + (code or "all")] = [
            get_batch(v, args.batch, args.block_size, val_gen) for _ in range(n)]
    return types.SimpleNamespace(tok=tok, unit=unit, languages=languages, parts=parts,
                                 train_data=train_data, val_parts=val_parts,
                                 eval_sets=eval_sets)


def main(argv=None):
    args = parse_args(argv)
    for note in args.notes:
        print(note)
    torch.set_num_threads(args.threads)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create --out {args.out}: {e.strerror}") from None
    meta_path = os.path.join(args.out, "meta.json")
    ckpt_path = os.path.join(args.out, "ckpt.safetensors")
    csv_path = os.path.join(args.out, "train.csv")
    eval_path = os.path.join(args.out, "eval.csv")

    # --- the run being resumed ------------------------------------------------------
    resume_path, old_meta = None, None
    if args.resume is not None:
        resume_path = args.resume or ckpt_path
        if not os.path.isfile(resume_path):
            raise UsageError(f"checkpoint to resume from not found: {resume_path}")
        old_meta_path = os.path.join(os.path.dirname(resume_path) or ".", "meta.json")
        if os.path.isfile(old_meta_path):
            try:
                old_meta = read_meta(old_meta_path)
            except RunError as e:
                raise UsageError(str(e)) from None

    # --- data ---------------------------------------------------------------------------
    data = prepare_data(args, old_meta)
    tok, languages, train_data, val_parts, unit = (
        data.tok, data.languages, data.train_data, data.val_parts, data.unit)
    prompt = args.prompt if args.prompt is not None else default_prompt(tok)
    if prompt == "":
        raise UsageError("--prompt must not be empty")
    try:
        prompt_ids = tok.encode(prompt)
    except ValueError as e:
        raise UsageError(f"--prompt: {e}") from None

    # --- model and compiled programs ------------------------------------------------------
    model_args = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                      block_size=args.block_size, bias=args.bias, vocab_size=tok.vocab_size,
                      dropout=args.dropout)
    model_file = os.path.abspath(args.model) if args.model else None
    torch.manual_seed(args.seed)
    try:
        model = build_model(model_file, model_args)
    except ModelFileError as e:
        raise UsageError(str(e)) from None
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {args.model or 'nanoGPT (gptc.testing.tiny_gpt)'}, {args.n_layer} layers, "
          f"{args.n_head} heads, {args.n_embd} wide, block {args.block_size}, dropout "
          f"{args.dropout}, bias {args.bias}: {n_params:,} parameters")
    meta = {"config": model_args, "model": model_file,
            "model_sha256": (hashlib.sha256(open(model_file, "rb").read()).hexdigest()
                             if model_file else None),
            "tokenizer": tokenizer_meta(tok), "data": args.data,
            "languages": [code for code, _, _ in languages if code]}
    if old_meta is not None:
        def shape(c):  # dropout may change between runs, the rest may not
            return {k: v for k, v in c.items() if k != "dropout"}
        if (shape(old_meta["config"]) != shape(model_args)
                or old_meta.get("model_sha256") != meta["model_sha256"]):
            raise UsageError(f"checkpoint {resume_path} was trained with another model or "
                             f"model configuration (see its meta.json)")

    gen = torch.Generator().manual_seed(args.seed)           # training batches
    eval_sets = data.eval_sets
    x0, y0 = get_batch(train_data, args.batch, args.block_size,
                       torch.Generator().manual_seed(args.seed))
    try:
        check_returns_loss(model, x0, y0, args.model)
    except ModelFileError as e:
        raise UsageError(str(e)) from None
    t0 = time.perf_counter()
    step = gptc.compile_train_step(
        model.train(), (x0, y0),
        optimizer=gptc.AdamW(lr=args.lr, betas=(args.beta1, args.beta2),
                             weight_decay=args.weight_decay, eps=1e-8),
        grad_clip=args.grad_clip, seed=args.seed,
        accumulation_steps=args.gradient_accumulation_steps, device=args.device)
    t1 = time.perf_counter()
    eval_fwd = gptc.compile(model.eval(), eval_sets["train"][0], device=args.device)
    for compiled in (step, eval_fwd):
        compiled.set_num_threads(args.threads)
    t2 = time.perf_counter()
    print(f"compiled: training step in {t1 - t0:.1f} s, eval forward in {t2 - t1:.1f} s; "
          + (f"{args.threads} threads" if args.device == "cpu" else f"device {args.device}"))

    def evaluate(state):
        eval_fwd.load_state_dict(state)
        return estimate_losses(lambda x, y: float(eval_fwd(x, y)[1]), eval_sets)

    # The untrained twin: the same model at its initial weights, on the same batches.
    twin = evaluate(step.state_dict())
    if resume_path is not None:
        step.load(resume_path)
        print(f"resumed from {resume_path} at iteration {step.num_steps}")
    start = step.num_steps
    # Replay the batch generator so a resumed run sees the batches of an uninterrupted one.
    accum = args.gradient_accumulation_steps
    for _ in range(min(start, args.iters) * accum):
        get_batch(train_data, args.batch, args.block_size, gen)

    rows = read_csv_rows(csv_path, start) if resume_path is not None else []
    eval_rows = (read_csv_rows(eval_path, start + 1, EVAL_FIELDS)
                 if resume_path is not None else [])
    meta_tmp = meta_path + ".tmp"
    with open(meta_tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(meta_tmp, meta_path)

    # Tokens a character of each language: a loss in nats a token times it is in nats a
    # character, which compares across languages whatever the tokenizer does to each.
    per_char = {"val:" + code: (len(t) + len(v)) / max(len(text), 1)
                for (code, _, text), (_, _, t, v) in zip(languages, data.parts)}

    def describe(losses, it, lr=None):
        out = (f"after {it} steps: train loss {losses['train']:.4f}, val loss "
               f"{losses['val']:.4f} (untrained twin {twin['val']:.4f})")
        if len(val_parts) > 1:
            out += "\n  val by language, nats a character (untrained twin): " + ", ".join(
                f"{k[4:]} {losses[k] * per_char[k]:.2f} ({twin[k] * per_char[k]:.2f})"
                for k in eval_sets if k != "train")
        return out + (f", lr {lr:.2e}" if lr is not None else "")

    def record(losses, it):
        for k in list(eval_sets) + ["val"]:
            if k != "val:all":
                eval_rows.append({"iter": it, "split": k, "loss": f"{losses[k]:.6f}",
                                  "twin_loss": f"{twin[k]:.6f}"})

    def checkpoint():
        step.save(ckpt_path)
        write_csv(csv_path, rows)
        write_csv(eval_path, eval_rows, EVAL_FIELDS)

    losses = twin if start == 0 else evaluate(step.state_dict())
    print(describe(losses, start))
    if start == 0:
        record(losses, start)

    # --- training loop ------------------------------------------------------------------
    tokens_per_step = args.batch * args.block_size * accum
    stop = StopRequest()
    bar = progress(args.iters, start)
    t_train = time.perf_counter()
    ema_tps, it = None, start
    try:
        for it in range(start, args.iters):
            lr = get_lr(it, args)
            x, y = get_batch(train_data, args.batch, args.block_size, gen)
            if accum > 1:  # the step takes its micro-batches stacked, each drawn in turn
                micro = [(x, y)] + [get_batch(train_data, args.batch, args.block_size, gen)
                                    for _ in range(accum - 1)]
                x, y = torch.stack([m[0] for m in micro]), torch.stack([m[1] for m in micro])
            ts = time.perf_counter()
            loss = float(step(x, y, lr=lr))
            dt = time.perf_counter() - ts
            if not math.isfinite(loss):
                raise gptc.GptcError(f"the training loss is {loss} at iteration {it}")
            tps = tokens_per_step / max(dt, 1e-9)
            ema_tps = tps if ema_tps is None else 0.9 * ema_tps + 0.1 * tps
            row = {"iter": it, "lr": f"{lr:.6g}", "train_loss": f"{loss:.6f}", "val_loss": "",
                   "twin_val_loss": ""}
            rows.append(row)
            if (it + 1) % args.eval_interval == 0 or it + 1 == args.iters:
                losses = evaluate(step.state_dict())
                row["val_loss"] = f"{losses['val']:.6f}"
                row["twin_val_loss"] = f"{twin['val']:.6f}"
                record(losses, it + 1)
                checkpoint()
                log(bar, describe(losses, it + 1, lr))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.1e}", tok_s=f"{ema_tps:,.0f}")
            elif (it + 1) % 50 == 0:
                print(f"iter {it + 1}/{args.iters}: loss {loss:.4f}, {ema_tps:,.0f} tokens/s",
                      flush=True)
            if stop.requested:
                break
    finally:
        stop.restore()
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - t_train
    done = step.num_steps - start
    if done:
        print(f"trained {done} iterations in {elapsed:.1f} s "
              f"({done * tokens_per_step / elapsed:,.0f} tokens/s)")
    if stop.requested:
        checkpoint()
        print(f"interrupted: saved iteration {step.num_steps} to {ckpt_path}; continue "
              f"with --resume", file=sys.stderr)
        return 130

    # --- outputs ------------------------------------------------------------------------
    checkpoint()
    plotted = rows and plot_losses(
        os.path.join(args.out, "loss.png"), rows, eval_rows,
        f"gptc: nanoGPT {args.n_layer}x{args.n_embd}, block {args.block_size}, "
        f"on {os.path.basename(args.data) if args.data else 'Debian fortunes'}", unit)
    print(f"wrote {csv_path}, {eval_path}"
          + (f", {os.path.join(args.out, 'loss.png')}" if plotted else "") + f", {ckpt_path}")

    # --- sample -----------------------------------------------------------------------------
    if args.sample_chars:
        gen = make_generator(model.eval(), args.block_size, step.state_dict(), args.threads)
        if isinstance(gen, gptc.Generator):  # the decode step, for C (examples/generate.c)
            gen.save(os.path.join(args.out, "generate"),
                     [c.encode() for c in tok.chars] if unit == "char" else None)
        sample = gen.generate(prompt_ids, args.sample_chars, temperature=args.temperature,
                              top_k=args.top_k, seed=args.seed, vocab=tok.vocab_size)
        print(f"sample (temperature {args.temperature}, top-k {args.top_k}, seed {args.seed}; "
              f"examples/sample.py samples more):")
        print("-" * 60)
        print(prompt + tok.decode(sample))
        print("-" * 60)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GPTC_ERRORS as e:
        raise SystemExit(f"gptc: error: {e}")
    except (UsageError, RunError) as e:
        raise SystemExit(f"gptc: error: {e}")
    except KeyboardInterrupt:  # a second Ctrl-C: the last evaluation's checkpoint stays
        raise SystemExit("gptc: error: interrupted; the checkpoint of the last evaluation "
                         "is kept")
    except OSError as e:  # writing the outputs (a full disk, say): one line, not a traceback
        raise SystemExit(f"gptc: error: {e}")
