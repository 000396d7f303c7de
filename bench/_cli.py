"""What the bench tools' command lines share: usage errors as one line (exit 2), and the
counts checked before anything runs."""
import argparse
import json
import os
import sys

from config import SIZES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors one `PROG: error: ...` line and exit 2 (argparse's
    own prints the usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def refuse_below(ap, args, **least):
    """ap.error for the first given count below its least (a count left unset, None, takes
    its default), then for --threads above gptc.MAX_THREADS, the runtime's limit (past it
    OpenMP ends the process). That one imports gptc, and torch with it: it comes last."""
    for name, low in least.items():
        value = getattr(args, name)
        if value is not None and value < low:
            ap.error(f"--{name} must be at least {low}, got {value}")
    if "threads" in least:
        sys.path.insert(0, os.path.join(REPO, "python"))
        from gptc import MAX_THREADS
        if args.threads > MAX_THREADS:
            ap.error(f"--threads must be at most {MAX_THREADS}, got {args.threads}")


def refuse_dropout(ap, dropout: float) -> None:
    """ap.error for a --dropout torch would refuse mid-run (above 1, NaN) or that drops
    everything (1)."""
    if not 0 <= dropout < 1:
        ap.error(f"--dropout must be in [0, 1), got {dropout:g}")


def refuse_past_memory(ap, what: str, nbytes: int) -> None:
    """ap.error when `nbytes`, the least that `what` needs, is more than the machine's memory
    (torch failed mid-run, or the kernel killed the process)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if nbytes > total:
        ap.error(f"{what} needs at least {nbytes / 2**30:.1f} GiB, more than this machine's "
                 f"{total / 2**30:.1f} GiB")


def model_arguments(ap):
    """--model and --attention: which model every framework times (run.py's and
    train_step.py's)."""
    ap.add_argument("--model", choices=["gpt", "llama", "hf-gpt2", "hf-llama"], default="gpt",
                    help="nanoGPT's GPT (the default), a LLaMA-style relative "
                    "(gptc.testing.llama_style: RMSNorm, rotary, grouped-query attention "
                    "with 2 key/value heads, SwiGLU), or Hugging Face's GPT2LMHeadModel or "
                    "LlamaForCausalLM of the same sizes (through gptc.hf.causal_lm), for "
                    "every framework")
    ap.add_argument("--attention", choices=["sdpa", "manual"], default="sdpa",
                    help="the GPT's attention, for every framework: "
                    "scaled_dot_product_attention (nanoGPT's flash path, the default) or "
                    "nanoGPT's attention spelled out (masked_fill of a tril buffer, softmax)")
    ap.add_argument("--padded", action="store_true",
                    help="--model hf-gpt2 or hf-llama: batches with an attention_mask, row i "
                    "right-padded by i sixteenths of the block (its labels -100 there), as a "
                    "fine-tuning batch of unequal texts, for every framework")


def refuse_model_options(ap, args):
    """ap.error for options the LLaMA-style model does not take."""
    if args.model in ("llama", "hf-llama") and (args.dropout or args.attention != "sdpa"):
        ap.error(f"--model {args.model}: no dropout, and SDPA attention only")
    if args.model == "hf-gpt2" and args.attention != "sdpa":
        ap.error("--model hf-gpt2: SDPA attention only")
    if args.padded and not args.model.startswith("hf-"):
        ap.error("--padded: a Hugging Face model only (--model hf-gpt2 or hf-llama)")


def refuse_huge_batch(ap, batch, sizes):
    """ap.error for a --batch whose step at one of `sizes` cannot fit in the machine's memory:
    its activations hold at least a float per token and channel."""
    for size in sizes:
        cfg = SIZES[size]
        refuse_past_memory(ap, f"--batch {batch} at {size} size",
                           4 * batch * cfg["block_size"] * cfg["n_embd"])


def fail(message: str):
    """Exit 1 with one line, `TOOL: message` (TOOL: the script's name without .py)."""
    sys.exit(f"{os.path.splitext(os.path.basename(sys.argv[0]))[0]}: {message}")


def read(path: str, as_json: bool = False):
    """The text of file `path`, or what it holds as JSON; else exit 1 with one line naming
    the file and what is wrong."""
    try:
        with open(path) as f:
            return json.load(f) if as_json else f.read()
    except OSError as e:  # missing, a directory, unreadable
        fail(f"cannot read {path}: {e.strerror or e}")
    except ValueError as e:  # not JSON, or not UTF-8 text
        fail(f"cannot read {path}: not {'JSON' if as_json else 'text'} ({e})")
