"""Sample text from a model the main job (examples/train.py) trained: `gptc sample`.

    gptc sample out --prompt "The " --length 300 --seed 7
    gptc sample out --num-samples 4                     # four at once, seeds 1337..1340
    python3 examples/sample.py out/ckpt.safetensors --prompt-file prompt.txt --top-k 20
    python3 -m gptc.apps.sample out                     # what both run

Reads the run's meta.json (model config, tokenizer, model file) and checkpoint, compiles
the model's KV-cached decode step with gptc (gptc.compile_generate) and draws with gptc's
sampler (temperature, top-k, top-p; a Philox stream keyed by --seed). The logits' bits do
not depend on the thread count, so a seed gives the same text on any number of threads;
a C program running the same decode step with gptc_sample writes the same text.
"""
import argparse
import math
import os
import sys

import torch

from ..compiler import MAX_THREADS
from ..errors import GptcError
from .model_file import ModelFileError
from .sampling import RunError, default_prompt, load_trained, read_meta, run_paths


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="gptc sample", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("run", nargs="?", default="out",
                    help="the main job's --out folder, or a checkpoint file in one")
    p = ap.add_mutually_exclusive_group()
    p.add_argument("--prompt", default=None, help="text to continue (default: a newline)")
    p.add_argument("--prompt-file", default=None, help="a UTF-8 file holding the prompt")
    ap.add_argument("--length", type=int, default=300, help="tokens to generate")
    ap.add_argument("--temperature", type=float, default=0.8,
                    help="0 always takes the likeliest token")
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--top-p", type=float, default=1.0,
                    help="nucleus sampling: the likeliest tokens whose probability reaches it")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--num-samples", type=int, default=1,
                    help="samples of the prompt written side by side (sample i drawn with "
                         "seed + i: the text --seed SEED+i writes alone), each followed by "
                         "a line of dashes")
    ap.add_argument("--threads", type=int, default=None,
                    help="default: every core this process may use")
    args = ap.parse_args(argv)
    if args.length < 0:
        ap.error("--length must not be negative")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        ap.error("--temperature must be a finite number >= 0")
    if args.top_k is not None and args.top_k < 1:
        ap.error("--top-k must be at least 1")
    if not 0 < args.top_p <= 1:
        ap.error("--top-p must be in (0, 1]")
    if not -2**63 <= args.seed < 2**64:  # the sampler's seed: 64 bits
        ap.error(f"--seed must be from {-2**63} to {2**64 - 1}")
    if not 1 <= args.num_samples <= 4096:
        ap.error("--num-samples must be from 1 to 4096")
    if args.threads is None:
        args.threads = min(len(os.sched_getaffinity(0)), MAX_THREADS)
    if not 1 <= args.threads <= MAX_THREADS:
        ap.error(f"--threads must be from 1 to {MAX_THREADS}")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    meta_path, ckpt_path = run_paths(args.run)
    if not os.path.isfile(ckpt_path):
        raise RunError(f"no checkpoint at {ckpt_path}")
    meta = read_meta(meta_path)
    tok, gen = load_trained(ckpt_path, meta, args.threads, args.num_samples)
    if args.prompt_file is not None:
        try:
            with open(args.prompt_file, encoding="utf-8") as f:
                prompt = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise RunError(f"cannot read --prompt-file {args.prompt_file}: {e}") from None
    else:
        prompt = args.prompt if args.prompt is not None else default_prompt(tok)
    if prompt == "":
        raise RunError("the prompt is empty")
    try:
        ids = tok.encode(prompt)
    except ValueError as e:
        raise RunError(f"the prompt: {e}") from None
    many = args.num_samples > 1
    rows = gen.generate([ids] * args.num_samples if many else ids, args.length,
                        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                        seed=args.seed, vocab=tok.vocab_size)
    for out in rows if many else [rows]:
        sys.stdout.write(prompt + tok.decode(out) + ("\n---------------\n" if many else "\n"))
    return 0


def cli(argv=None):
    """main() with errors as one `gptc: error: ...` line and exit status 1."""
    try:
        return main(argv)
    except (RunError, ModelFileError, GptcError) as e:
        raise SystemExit(f"gptc: error: {e}")
    except KeyboardInterrupt:
        raise SystemExit("gptc: error: interrupted")


if __name__ == "__main__":
    sys.exit(cli())
