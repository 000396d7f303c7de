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

# Collections that are not English prose: ASCII pictures, the file of fortunes kept for
# translators (a copy of others), and the collections that other languages' packages put
# beside the English ones (fortunes-zh: chinese, song100, tang300; fortunes-br: brasil),
# which the multilingual corpus reads as their languages. The offensive collections live
# in off/ (package fortunes-off) and are never read: only plain files directly in
# FORTUNES_DIR are.
EXCLUDED_COLLECTIONS = frozenset({"ascii-art", "translate-me",
                                  "chinese", "song100", "tang300", "brasil"})

INSTALL_HINT = ("install the default corpus with `apt-get install fortunes-min` "
                "(or `fortunes` for the full ~2.7 MB collection), or pass a text file")

_OVERSTRIKE = re.compile(r"[^\n]\x08")
_NOT_PLAIN = re.compile(r"[^\n\t\x20-\x7e]")
_BLANK_RUNS = re.compile(r"\n{3,}")
_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # fortunes-zh colours its poems' titles


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


def _clean_fortune_text(raw: str, ascii_only: bool = True) -> str:
    """Overstrike sequences (``_\\bA``, ``A\\bA``) keep the struck character, CRLF becomes
    LF, and terminal colour codes, bells and other control characters are dropped.
    ``ascii_only`` (the English corpus) also drops every non-ASCII character (a few accents
    and some mojibake); otherwise every printable character stays."""
    text = _ANSI_COLOUR.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))
    while "\x08" in text:
        new = _OVERSTRIKE.sub("", text)
        if new == text:  # a backspace at the start of a line: drop it
            new = text.replace("\x08", "")
        text = new
    if ascii_only:
        return _NOT_PLAIN.sub("", text)
    return "".join(c for c in text if c.isprintable() or c in "\n\t")


def split_fortunes(raw: str, ascii_only: bool = True) -> list:
    """The fortunes of one collection: pieces between lines holding only '%', with trailing
    whitespace removed from every line, blank lines trimmed at both ends and runs of blank
    lines inside made one; empty ones dropped."""
    fortunes, current = [], []
    for line in _clean_fortune_text(raw, ascii_only).split("\n"):
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


# The multilingual corpus: the languages Debian packages fortunes in, with their package
# and where it puts its collections (a folder of FORTUNES_DIR, or named collections in it).
# English is the default corpus above.
LANGUAGES = (
    ("en", "English", "fortunes", None),
    ("de", "German", "fortunes-de", "de"),
    ("es", "Spanish", "fortunes-es", "es"),
    ("it", "Italian", "fortunes-it", "it"),
    ("pt", "Portuguese", "fortunes-br", ("brasil",)),
    ("pl", "Polish", "fortunes-pl", "pl"),
    ("cs", "Czech", "fortunes-cs", "cs"),
    ("eo", "Esperanto", "fortunes-eo", "eo"),
    ("ga", "Irish", "fortunes-ga", "ga"),
    ("ru", "Russian", "fortunes-ru", "ru"),
    ("bg", "Bulgarian", "fortunes-bg", "bg"),
    ("zh", "Chinese", "fortunes-zh", ("chinese", "song100", "tang300")),
)
# Pictures rather than prose, in the language folders.
_FOREIGN_PICTURES = frozenset({"asciiart", "banner"})
MULTILINGUAL_PACKAGES = tuple(p for _, _, p, _ in LANGUAGES)


def _language_files(where, directory):
    """The collection files of one language: named ones, or a folder's plain files (names
    without a dot, or ending in .fortunes as fortunes-es names them; no links, no off/)."""
    if isinstance(where, tuple):
        return [os.path.join(directory, n) for n in where
                if os.path.isfile(os.path.join(directory, n))]
    folder = os.path.join(directory, where)
    if not os.path.isdir(folder):
        return []
    paths = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        stem = name[:-len(".fortunes")] if name.endswith(".fortunes") else name
        if ("." in stem or stem in _FOREIGN_PICTURES or os.path.islink(path)
                or not os.path.isfile(path)):
            continue
        paths.append(path)
    return paths


def _thin(fortunes, max_chars):
    """Whole fortunes spread evenly over the collection (every k-th), about max_chars."""
    total = sum(len(f) + 2 for f in fortunes)
    if max_chars is None or total <= max_chars:
        return fortunes
    stride = -(-total // max_chars)
    return fortunes[::stride]


def load_multilingual(max_chars=200_000, directory=None) -> list:
    """[(code, language, text)] for every language of LANGUAGES: its fortunes (printable
    Unicode kept), thinned to about ``max_chars`` characters by taking every k-th fortune
    so that every collection is represented. Raises FileNotFoundError naming the packages
    to install when a language has no collections."""
    directory = FORTUNES_DIR if directory is None else directory
    out, missing = [], []
    for code, name, package, where in LANGUAGES:
        if where is None:
            paths, ascii_only = fortune_files(directory), True
        else:
            paths, ascii_only = _language_files(where, directory), False
        fortunes = []
        for path in paths:
            with open(path, "rb") as f:
                fortunes.extend(split_fortunes(f.read().decode("utf-8", errors="replace"),
                                               ascii_only))
        if not fortunes:
            missing.append(package)
            continue
        out.append((code, name, "\n\n".join(_thin(fortunes, max_chars)) + "\n"))
    if missing:
        raise FileNotFoundError(
            f"the multilingual corpus needs {', '.join(missing)}: install with `apt-get "
            f"install {' '.join(missing)}` (scripts/setup.sh installs them)")
    return out


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
        raise ValueError(f"corpus file {path} is not UTF-8 text: byte 0x{raw[e.start]:02x} "
                         f"at offset {e.start} ({e.reason})") from None
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
