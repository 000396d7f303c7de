"""The default training corpus and the character-level data pipeline of examples/train.py.

The corpus is real English text that Debian already ships: the fortune cookie collections of
the ``fortunes-min`` and ``fortunes`` packages (/usr/share/games/fortunes). Nothing is
downloaded and no text lives in this repository.

    text = load_corpus()                  # or load_corpus("my.txt")
    tok = CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train, val = split(data)              # first 90% / last 10%
    x, y = get_batch(train, 8, 32, torch.Generator().manual_seed(1337))

Everything here is deterministic: the corpus is read in a fixed order, the split is by
position, and batches come from an explicit torch.Generator.
"""
import os
import re

import torch

FORTUNES_DIR = "/usr/share/games/fortunes"

# Collections that are not English prose: ASCII pictures, and the file of fortunes kept
# for translators (a copy of others). The offensive collections live in off/ (package
# fortunes-off) and are never read: only plain files directly in FORTUNES_DIR are.
EXCLUDED_COLLECTIONS = frozenset({"ascii-art", "translate-me"})

INSTALL_HINT = ("install the default corpus with `apt-get install fortunes-min` "
                "(or `fortunes` for the full ~2.7 MB collection), or pass a text file")

_OVERSTRIKE = re.compile(r"[^\n]\x08")
_NOT_PLAIN = re.compile(r"[^\n\t\x20-\x7e]")
_BLANK_RUNS = re.compile(r"\n{3,}")


def fortune_files(directory=None) -> list:
    """The fortune collections used for the default corpus, as paths in sorted name order.

    Plain text files directly in ``directory``: not the ``.dat`` indexes, not the ``.u8``
    symlinks, not sub-directories (off/), not EXCLUDED_COLLECTIONS. ``directory`` defaults
    to FORTUNES_DIR.
    """
    directory = FORTUNES_DIR if directory is None else directory
    if not os.path.isdir(directory):
        return []
    paths = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if (name.startswith(".") or "." in name or name in EXCLUDED_COLLECTIONS
                or os.path.islink(path) or not os.path.isfile(path)):
            continue
        paths.append(path)
    return paths


def _clean_fortune_text(raw: str) -> str:
    """Plain printable ASCII: overstrike sequences (``_\\bA``, ``A\\bA``) keep the struck
    character, bells and any other control or non-ASCII characters (a few accents and some
    mojibake) are dropped, CRLF becomes LF."""
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    while "\x08" in text:
        new = _OVERSTRIKE.sub("", text)
        if new == text:  # a backspace at the start of a line: drop it
            new = text.replace("\x08", "")
        text = new
    return _NOT_PLAIN.sub("", text)


def split_fortunes(raw: str) -> list:
    """The fortunes of one collection: pieces between lines holding only '%', with trailing
    whitespace removed from every line, blank lines trimmed at both ends and runs of blank
    lines inside made one; empty ones dropped."""
    fortunes, current = [], []
    for line in _clean_fortune_text(raw).split("\n"):
        if line.strip() == "%":
            fortunes.append(current)
            current = []
        else:
            current.append(line.rstrip())
    fortunes.append(current)
    out = []
    for lines in fortunes:
        body = _BLANK_RUNS.sub("\n\n", "\n".join(lines).strip("\n"))
        if body.strip():
            out.append(body)
    return out


def load_fortunes(directory=None) -> str:
    """Every fortune of fortune_files(directory), in that order, separated by blank lines."""
    directory = FORTUNES_DIR if directory is None else directory
    paths = fortune_files(directory)
    if not paths:
        raise FileNotFoundError(
            f"no default corpus: no fortune files in {directory}; {INSTALL_HINT}")
    fortunes = []
    for path in paths:
        with open(path, "rb") as f:
            fortunes.extend(split_fortunes(f.read().decode("utf-8", errors="replace")))
    if not fortunes:
        raise ValueError(f"no default corpus: the fortune files in {directory} hold no text; "
                         f"{INSTALL_HINT}")
    return "\n\n".join(fortunes) + "\n"


def load_corpus(path=None) -> str:
    """The training text: the UTF-8 text file at ``path``, or (``path=None``) the Debian
    fortunes concatenated in sorted file order, each fortune followed by a blank line.

    Raises FileNotFoundError (a missing file, or no fortunes installed: the message names
    the apt package) or ValueError (an empty file, or not UTF-8 text).
    """
    if path is None:
        return load_fortunes()
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"corpus file not found: {path}")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"corpus file {path} is not UTF-8 text ({e})") from None
    if not text:
        raise ValueError(f"corpus file {path} is empty")
    return text


class CharTokenizer:
    """Characters to ids: the vocabulary is the sorted set of the text's characters."""

    def __init__(self, text: str):
        if not text:
            raise ValueError("CharTokenizer needs a non-empty text to build its vocabulary")
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        try:
            return "".join(self.itos[int(i)] for i in ids)
        except KeyError as e:
            raise ValueError(f"token id {e.args[0]} is outside the vocabulary "
                             f"(size {self.vocab_size})") from None


def split(data: torch.Tensor, val_fraction: float = 0.1):
    """(train, val): the first (1 - val_fraction) of ``data`` and the rest, by position."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    n = int(len(data) * (1.0 - val_fraction))
    return data[:n], data[n:]


def get_batch(data: torch.Tensor, batch: int, block: int, generator: torch.Generator):
    """(x, y), each (batch, block) int64, as nanoGPT: ``batch`` random offsets drawn from
    ``generator``, x = data[i:i+block], y = data[i+1:i+1+block] (x shifted by one)."""
    if len(data) <= block:
        raise ValueError(f"the data ({len(data)} tokens) is too short for block size {block}; "
                         f"it needs at least {block + 1} tokens")
    ix = torch.randint(len(data) - block, (batch,), generator=generator)
    x = torch.stack([data[i:i + block] for i in ix.tolist()]).to(torch.long)
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix.tolist()]).to(torch.long)
    return x, y
