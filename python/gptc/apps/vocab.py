"""The main job's tokenizers and the fertility report that shows what a tokenizer does to a
multilingual corpus.

    tok = CharTokenizer(text)                     # one id per character (data.py)
    tok = BPETokenizer.train(texts, vocab_size=2048)   # byte-level BPE, HF `tokenizers`
    rows = fertility(tok, [("en", "English", text_en), ("zh", "Chinese", text_zh)])
    print(format_fertility(rows)); for line in fertility_warnings(rows): print(line)

A byte-level BPE trained on a corpus where one script is rare or costs more bytes a
character compresses that script poorly: its text becomes more tokens a character, so a
model trained on the token stream sees it more often than its share of the text, and a
fixed context holds less of it. The report prints both shares, characters and tokens, and
warns about a language whose tokens a character are far above the median.

Both tokenizers save to a JSON-compatible dict (`to_meta`) and come back with
`tokenizer_from_meta`, so a checkpoint's meta.json carries its tokenizer.
"""
import statistics

from .data import CharTokenizer

# A language is starved when its tokens a character exceed the median by this factor.
STARVED_FACTOR = 2.0


class BPETokenizer:
    """Byte-level BPE (GPT-2's pre-tokenization and byte alphabet) from HF `tokenizers`:
    every string encodes, and decoding the ids of a string gives it back exactly."""

    def __init__(self, tokenizer):
        self._tok = tokenizer

    @classmethod
    def train(cls, texts, vocab_size):
        """A tokenizer trained on `texts` (strings) with at most `vocab_size` tokens (the
        256 bytes among them). The trainer is deterministic: the same texts and size give
        the same merges."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        if vocab_size < 256:
            raise ValueError(f"a byte-level BPE needs a vocabulary of at least 256 (the "
                             f"bytes), got {vocab_size}")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, show_progress=False, special_tokens=[],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def encode(self, text: str) -> list:
        return self._tok.encode(text).ids

    def encode_batch(self, texts) -> list:
        return [e.ids for e in self._tok.encode_batch(list(texts))]

    def decode(self, ids) -> str:
        ids = [int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary "
                             f"(size {self.vocab_size})")
        return self._tok.decode(ids)

    def to_meta(self) -> dict:
        return {"kind": "bpe", "tokenizer": self._tok.to_str()}


def char_meta(tok: CharTokenizer) -> dict:
    return {"kind": "char", "vocab": "".join(tok.chars)}


def tokenizer_meta(tok) -> dict:
    return tok.to_meta() if isinstance(tok, BPETokenizer) else char_meta(tok)


def tokenizer_from_meta(meta: dict):
    """The tokenizer that tokenizer_meta() described; ValueError for anything else."""
    kind = meta.get("kind") if isinstance(meta, dict) else None
    if kind == "char" and isinstance(meta.get("vocab"), str) and meta["vocab"]:
        return CharTokenizer(meta["vocab"])
    if kind == "bpe" and isinstance(meta.get("tokenizer"), str):
        from tokenizers import Tokenizer
        try:
            return BPETokenizer(Tokenizer.from_str(meta["tokenizer"]))
        except Exception as e:  # the library's own parse error
            raise ValueError(f"the saved BPE tokenizer does not load: {e}") from None
    raise ValueError("not a tokenizer description (expected kind 'char' with a vocab, or "
                     "'bpe' with a tokenizer)")


def encode_all(tok, text: str) -> list:
    """The ids of `text`. A BPE encodes it in pieces of about a megabyte cut at blank
    lines (the library's cost grows with a piece's length); a blank line never merges
    with its neighbours, so the ids are those of the whole text."""
    if not isinstance(tok, BPETokenizer) or len(text) < 1 << 20:
        return tok.encode(text)
    pieces, start = [], 0
    while start < len(text):
        cut = text.find("\n\n", start + (1 << 20))
        end = len(text) if cut < 0 else cut + 2
        pieces.append(text[start:end])
        start = end
    return [i for ids in tok.encode_batch(pieces) for i in ids]


def fertility(tok, languages, token_counts=None) -> list:
    """One row a language of `languages` [(code, name, text)]: characters, words (runs of
    non-space), tokens, characters a token, tokens a word, and the language's share of all
    characters and of all tokens. `token_counts`: each text's token count where the caller
    has encoded them already (else they are encoded here)."""
    if token_counts is None:
        token_counts = [len(encode_all(tok, text)) for _, _, text in languages]
    rows = []
    for (code, name, text), tokens in zip(languages, token_counts):
        rows.append({"code": code, "language": name, "chars": len(text),
                     "words": len(text.split()), "tokens": tokens})
    all_chars = sum(r["chars"] for r in rows) or 1
    all_tokens = sum(r["tokens"] for r in rows) or 1
    for r in rows:
        r["chars_per_token"] = r["chars"] / max(r["tokens"], 1)
        r["tokens_per_word"] = r["tokens"] / max(r["words"], 1)
        r["char_share"] = r["chars"] / all_chars
        r["token_share"] = r["tokens"] / all_tokens
    return rows


def fertility_warnings(rows, factor=STARVED_FACTOR) -> list:
    """A warning line for each language whose tokens a character exceed `factor` times the
    median over the languages, naming it and the fix."""
    if len(rows) < 2:
        return []
    per_char = {r["code"]: r["tokens"] / max(r["chars"], 1) for r in rows}
    median = statistics.median(per_char.values())
    out = []
    for r in rows:
        ratio = per_char[r["code"]] / median if median > 0 else 0.0
        if ratio > factor:
            out.append(
                f"warning: the tokenizer starves {r['language']} ({r['code']}): "
                f"{per_char[r['code']]:.2f} tokens a character, {ratio:.1f}x the median "
                f"{median:.2f}; it is {r['char_share']:.1%} of the characters but "
                f"{r['token_share']:.1%} of the tokens. Use a larger vocabulary "
                f"(--vocab-size) or train the tokenizer on a corpus balanced across "
                f"languages and scripts")
    return out


FERTILITY_COLUMNS = ("code", "language", "chars", "words", "tokens", "chars_per_token",
                     "tokens_per_word", "char_share", "token_share")


def format_fertility(rows) -> str:
    """The rows as an aligned table."""
    head = (f"{'lang':<4} {'language':<11} {'chars':>9} {'tokens':>9} {'chars/tok':>9} "
            f"{'tok/word':>8} {'% chars':>7} {'% tokens':>8}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['code']:<4} {r['language']:<11} {r['chars']:>9,} {r['tokens']:>9,} "
                     f"{r['chars_per_token']:>9.2f} {r['tokens_per_word']:>8.2f} "
                     f"{100 * r['char_share']:>7.1f} {100 * r['token_share']:>8.1f}")
    return "\n".join(lines)
