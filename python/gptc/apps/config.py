"""nanoGPT-style configuration for the main job: config files and `--key=value` overrides.

    python3 examples/train.py config/train_shakespeare_char.py --n_layer=4 --dropout=0.0

As nanoGPT's configurator: a config file is Python whose top-level assignments set the
settings (``n_layer = 4``), files are applied in order, then the command line's options,
so `--key=value` overrides a file. Every setting has its nanoGPT name (`batch_size`,
`learning_rate`, `max_iters`, `eval_iters`, `out_dir`) and gptc's own spelling
(`--batch`, `--lr`, `--iters`, `--eval-batches`, `--out`); dashes and underscores are
interchangeable. A key the job does not know is an error naming it, never ignored; the
keys of nanoGPT's train.py that mean nothing here (wandb logging, dtype, torch.compile)
are accepted with a note, so its own config files run unchanged.
"""
import argparse
import os

# nanoGPT train.py settings with no meaning for gptc's job: accepted, reported, unused.
IGNORED = {
    "wandb_log": "no wandb logging", "wandb_project": "no wandb logging",
    "wandb_run_name": "no wandb logging", "log_interval": "every step is shown",
    "always_save_checkpoint": "a checkpoint is written at every evaluation",
    "eval_only": "not supported",
    "dtype": "gptc trains in float32", "compile": "gptc compiles every step",
    "backend": "no distributed training",
}


class ConfigError(ValueError):
    """A bad config file or key: one line."""


def parse_bool(text):
    """`true`/`false` (any case), 1/0, yes/no, on/off; a bool stays itself."""
    if isinstance(text, bool):
        return text
    low = str(text).lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"'{text}' is not a boolean (true or false)")


def spellings(*names):
    """Each option name with dashes and with underscores: ("--n-layer", "--n_layer")."""
    out = []
    for name in names:
        for form in (name, "--" + name[2:].replace("_", "-"), "--" + name[2:].replace("-", "_")):
            if form not in out:
                out.append(form)
    return out


def add_ignored(parser):
    """The IGNORED keys as hidden options (their values are collected, then reported)."""
    for key in IGNORED:
        parser.add_argument(*spellings("--" + key), dest="ignored_" + key, default=None,
                            help=argparse.SUPPRESS)


def ignored_notes(args):
    """One note line per IGNORED key that was set."""
    return [f"note: {key} = {getattr(args, 'ignored_' + key)!r} is ignored ({why})"
            for key, why in IGNORED.items() if getattr(args, "ignored_" + key) is not None]


def split_argv(argv):
    """(config files, the other arguments): config files are the leading arguments that do
    not start with '-' (nanoGPT's convention: `train.py config/x.py --key=value`)."""
    files = []
    rest = list(argv)
    while rest and not rest[0].startswith("-"):
        files.append(rest.pop(0))
    return files, rest


def read_config_file(path):
    """{key: value} of a nanoGPT-style config file's top-level assignments."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    namespace = {}
    try:
        exec(compile(source, path, "exec"), namespace)
    except SyntaxError as e:
        raise ConfigError(f"{path}:{e.lineno}: {e.msg}") from None
    except Exception as e:  # the file's own code failing
        raise ConfigError(f"{path}: {type(e).__name__}: {e}") from None
    return {k: v for k, v in namespace.items()
            if not k.startswith("_") and not callable(v) and type(v).__name__ != "module"}


def _action_for(parser, key):
    option = "--" + key.replace("_", "-")
    for action in parser._actions:
        if option in action.option_strings or "--" + key in action.option_strings:
            return action
    return None


def apply_config(parser, values, source):
    """Make `values` (a config file's settings) the parser's defaults, each checked against
    its option's type; an unknown key is a ConfigError naming it."""
    defaults = {}
    for key, value in values.items():
        action = _action_for(parser, key)
        if action is None or action.dest == "help":
            raise ConfigError(f"{source}: unknown config key '{key}'")
        if action.dest.startswith("ignored_"):
            defaults[action.dest] = value
            continue
        kind = action.type
        if action.const is not None and action.nargs == 0:  # a flag (store_true/false)
            kind = parse_bool
        try:
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError
            if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError
            if kind is parse_bool and not isinstance(value, bool):
                raise TypeError
            if kind in (None, str) and value is not None and not isinstance(value, str):
                raise TypeError
            if kind is float:
                value = float(value)
        except TypeError:
            want = {int: "an int", float: "a number", parse_bool: "True or False"}.get(
                kind, "a string")
            raise ConfigError(f"{source}: {key} = {value!r} must be {want}") from None
        if action.choices is not None and value not in action.choices:
            raise ConfigError(f"{source}: {key} = {value!r} must be one of "
                              f"{', '.join(map(str, action.choices))}")
        defaults[action.dest] = value
    parser.set_defaults(**defaults)
