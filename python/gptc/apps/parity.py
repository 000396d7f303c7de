"""The parity report's command line: `gptc check --against-torch`.

    gptc check --against-torch [MODEL.py] [--steps N] [--config KEY=VALUE ...]
    python3 -m gptc.parity [the same arguments]

MODEL.py is a nanoGPT-style model file: it defines GPTConfig and GPT, GPT(GPTConfig(...))
builds the model and model(idx, targets) returns (logits, loss). Without it, the report
runs gptc's test GPT (gptc.testing.tiny_gpt). Dropout is set to 0: the two frameworks
draw different random numbers, so only a deterministic step can be compared. The report
(gptc.parity.report) fails (exit 1) when a loss or a parameter is further from PyTorch's
than the tolerances (by default those of gptc's tests: 1e-5 relative for the loss, 1e-4
absolute for the parameters).
"""
import argparse
import ast
import dataclasses
import math
import sys

import torch

from ..compiler import MAX_THREADS  # the runtime refuses more threads
from ..errors import GptcError, ParityError
from ..parity import report, verdict
from . import model_file


def _parse_value(text, kind):
    """`text` as a config field of type `kind` (int, float, bool or str; else a literal)."""
    if kind is bool or kind == "bool":
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"'{text}' is not a boolean (true or false)")
    for t in (int, float, str):
        if kind is t or kind == t.__name__:
            return t(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def make_config(config_cls, overrides):
    """config_cls(**overrides), the KEY=VALUE strings converted to the fields' types."""
    fields = {f.name: f.type for f in dataclasses.fields(config_cls)} \
        if dataclasses.is_dataclass(config_cls) else None
    kwargs = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ParityError(f"--config takes KEY=VALUE, got '{item}'")
        if fields is not None and key not in fields:
            raise ParityError(f"{config_cls.__name__} has no field '{key}' "
                              f"(it has {', '.join(fields)})")
        try:
            kwargs[key] = _parse_value(text, fields[key] if fields else None)
        except ValueError as e:
            raise ParityError(f"--config {key}: {e}") from None
    if kwargs.get("dropout", 0.0) != 0.0:
        raise ParityError("the parity report needs dropout 0: gptc and PyTorch draw "
                          "different random numbers")
    try:
        cfg = config_cls(**kwargs)
    except Exception as e:  # the user's constructor: its message is the error
        raise ParityError(f"{config_cls.__name__}(...) failed: {e}") from None
    if hasattr(cfg, "dropout"):
        cfg.dropout = 0.0
    return cfg


def load_model_file(path):
    """GPTConfig and GPT from a nanoGPT-style model file."""
    try:
        return model_file.load_model_file(path)
    except model_file.ModelFileError as e:
        raise ParityError(str(e)) from None


def build_model(path, overrides, seed, dropout=0.0):
    """(model, cfg): `path`'s GPT, or gptc's test GPT without one, seeded, with `dropout`
    (0 unless a check that compares like with like asks: --against-cpu)."""
    if path:
        config_cls, model_cls = load_model_file(path)
    else:
        from ..testing.tiny_gpt import TinyGPT as model_cls, TinyGPTConfig as config_cls
    cfg = make_config(config_cls, overrides)
    for field in ("vocab_size", "block_size"):
        if not isinstance(getattr(cfg, field, None), int):
            raise ParityError(f"the config has no integer {field}: the report draws "
                              "random token batches of that size")
    if hasattr(cfg, "dropout"):
        cfg.dropout = dropout
    torch.manual_seed(seed)
    try:
        model = model_cls(cfg)
    except Exception as e:
        raise ParityError(f"{model_cls.__name__}(config) failed: {type(e).__name__}: {e}") from None
    return model.train(), cfg


# torch.manual_seed's range; the batches' generator takes --seed + 1.
SEEDS = (-2**63, 2**64 - 2)


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one `gptc: error: ...` line (argparse's own adds the usage)."""

    def error(self, message):
        self.exit(2, f"gptc: error: {self.prog}: {message}\n")


def model_arguments(ap):
    """MODEL.py and --config: the model a check trains (gptc's test GPT by default)."""
    ap.add_argument("model", nargs="?", metavar="MODEL.py",
                    help="a nanoGPT-style model file defining GPTConfig and GPT "
                         "(default: gptc's test GPT)")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a GPTConfig field, e.g. --config n_layer=2 --config bias=false")


def parse_args(argv=None):
    ap = _OneLineErrors(
        prog="gptc check --against-torch",
        description="N training steps by gptc and by eager PyTorch from the same weights "
                    "and batches; per step, both losses and the worst parameter difference.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    model_arguments(ap)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0, help="the weights' and batches' seed")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    ap.add_argument("--threads", type=int, default=1, help="for gptc and for PyTorch")
    ap.add_argument("--loss-tolerance", type=float, default=1e-5, help="relative")
    ap.add_argument("--param-tolerance", type=float, default=1e-4, help="absolute")
    args = ap.parse_args(argv)
    # Up front, before torch or the model is touched: a NaN tolerance failed and an
    # infinite one passed everything; a NaN or negative --min-lr failed mid-run.
    for name in ("steps", "batch", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if args.threads > MAX_THREADS:  # torch.set_num_threads(huge) crashed the process
        ap.error(f"--threads must be at most {MAX_THREADS}")
    if args.warmup < 0:
        ap.error("--warmup must not be negative")
    if not SEEDS[0] <= args.seed <= SEEDS[1]:
        ap.error(f"--seed must be from {SEEDS[0]} to {SEEDS[1]}")
    for name in ("lr", "min_lr", "weight_decay", "eps", "grad_clip", "loss_tolerance",
                 "param_tolerance"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) >= 0):
            ap.error(f"--{name.replace('_', '-')} must be a finite number >= 0")
    for name in ("beta1", "beta2"):
        if not 0.0 <= getattr(args, name) < 1.0:
            ap.error(f"--{name} must be in [0, 1)")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    model, cfg = build_model(args.model, args.config, args.seed)
    g = torch.Generator().manual_seed(args.seed + 1)
    shape = (args.batch, cfg.block_size)
    batches = [(torch.randint(0, cfg.vocab_size, shape, generator=g),
                torch.randint(0, cfg.vocab_size, shape, generator=g))
               for _ in range(args.steps)]
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.model or 'gptc test GPT'}: {n_params:,} parameters, config "
          + ", ".join(f"{k}={v}" for k, v in (dataclasses.asdict(cfg).items()
                                               if dataclasses.is_dataclass(cfg) else ())))
    rows = report(model, batches, lr=args.lr, min_lr=args.min_lr, warmup=args.warmup,
                  betas=(args.beta1, args.beta2), weight_decay=args.weight_decay,
                  eps=args.eps, grad_clip=args.grad_clip or None, threads=args.threads)
    summary, failure = verdict(rows, args.loss_tolerance, args.param_tolerance)
    print(summary)
    if failure:
        raise ParityError(failure)
    print(f"parity: within {args.loss_tolerance:g} relative (loss) and "
          f"{args.param_tolerance:g} absolute (parameters) at every step")


def cli(argv=None, main=main):
    """main() with gptc's errors as one `gptc: error: ...` line and exit status 1 (`main`:
    the check's own, gptc.apps.against_cpu's say)."""
    try:
        main(argv)
    except (ParityError, GptcError) as e:  # a CaptureError is a GptcError
        sys.stdout.flush()
        message = str(e)  # the compiler's own line already reads "gptc: FILE:LINE: error: ..."
        raise SystemExit(message if message.startswith("gptc: ") else f"gptc: error: {message}")
    except KeyboardInterrupt:
        raise SystemExit("gptc: error: interrupted")
    except Exception as e:  # the model's own code failing (a shape error, say): one line too
        sys.stdout.flush()
        raise SystemExit(f"gptc: error: {type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
