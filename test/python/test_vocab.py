"""The main job's tokenizers and fertility report (python/gptc/apps/vocab.py)."""
import pytest

from gptc.apps.data import CharTokenizer
from gptc.apps.vocab import (BPETokenizer, fertility, fertility_warnings, format_fertility,
                             tokenizer_from_meta, tokenizer_meta)

pytest.importorskip("tokenizers")

ENGLISH = "The quick brown fox jumps over the lazy dog, and then it sleeps. " * 200
GERMAN = "Der schnelle braune Fuchs springt über den faulen Hund und schläft. " * 200
RUSSIAN = "Быстрая коричневая лиса прыгает через ленивую собаку и спит. " * 200


def test_bpe_round_trips_any_text_and_is_deterministic():
    tok = BPETokenizer.train([ENGLISH, GERMAN, RUSSIAN], vocab_size=400)
    assert tok.vocab_size == 400
    for text in ("The lazy dog", "Füchse", "лиса", "不在词表里的字 \U0001F600", "\n\t  x"):
        assert tok.decode(tok.encode(text)) == text
    again = BPETokenizer.train([ENGLISH, GERMAN, RUSSIAN], vocab_size=400)
    assert again.to_meta() == tok.to_meta()
    loaded = tokenizer_from_meta(tok.to_meta())
    assert loaded.encode(GERMAN[:200]) == tok.encode(GERMAN[:200])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([400])
    with pytest.raises(ValueError, match="at least 256"):
        BPETokenizer.train([ENGLISH], vocab_size=100)


def test_char_tokenizer_meta_round_trip_and_bad_meta():
    tok = CharTokenizer("hello")
    back = tokenizer_from_meta(tokenizer_meta(tok))
    assert back.chars == tok.chars
    for bad in ({}, {"kind": "char"}, {"kind": "bpe", "tokenizer": "{not json"}, [1]):
        with pytest.raises(ValueError):
            tokenizer_from_meta(bad)


def test_a_tokenizer_that_starves_one_script_is_named():
    """Trained on English and German only, a byte-level BPE leaves Cyrillic as two bytes a
    character: Russian's tokens a character are several times the median, which the
    report names with its shares and the fix. A tokenizer trained on all three does not
    warn."""
    langs = [("en", "English", ENGLISH), ("de", "German", GERMAN), ("ru", "Russian", RUSSIAN)]
    starving = BPETokenizer.train([ENGLISH, GERMAN], vocab_size=600)
    rows = fertility(starving, langs)
    by = {r["code"]: r for r in rows}
    assert by["ru"]["chars_per_token"] < 0.6 < 2 < by["en"]["chars_per_token"]
    assert by["ru"]["token_share"] > 2 * by["ru"]["char_share"]
    warnings = fertility_warnings(rows)
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: the tokenizer starves Russian (ru): ")
    assert "Use a larger vocabulary (--vocab-size) or train the tokenizer on a corpus " \
           "balanced across languages and scripts" in warnings[0]
    table = format_fertility(rows)
    assert table.splitlines()[0].split()[:3] == ["lang", "language", "chars"]
    assert len(table.splitlines()) == 4

    balanced = BPETokenizer.train([ENGLISH, GERMAN, RUSSIAN], vocab_size=600)
    assert fertility_warnings(fertility(balanced, langs)) == []
    # Characters, not bytes: a character tokenizer gives every language one token each.
    chars = CharTokenizer(ENGLISH + GERMAN + RUSSIAN)
    assert all(r["chars_per_token"] == 1 for r in fertility(chars, langs))
