"""The default corpus and the character-level data pipeline (python/gptc/apps/data.py)."""
import os
import re

import pytest
import torch

from gptc.apps import data
from gptc.apps.data import CharTokenizer, get_batch, load_corpus, split

needs_fortunes = pytest.mark.skipif(
    not data.fortune_files(),
    reason=f"no fortune files in {data.FORTUNES_DIR} (apt-get install fortunes-min fortunes)")


@pytest.fixture(scope="module")
def corpus():
    if not data.fortune_files():
        pytest.skip(f"no fortune files in {data.FORTUNES_DIR}")
    return load_corpus()


# -- the default corpus ------------------------------------------------------------------

@needs_fortunes
def test_default_corpus_is_sizeable_english_text(corpus):
    # fortunes-min alone gives ~24 KB; with the fortunes package ~2.5 MB.
    assert len(corpus) > 20_000
    words = re.findall(r"[a-z]+", corpus.lower())
    assert len(words) > 3_000
    common = {"the", "and", "of", "to", "a", "is", "in", "you", "that", "it"}
    assert sum(w in common for w in words) / len(words) > 0.15
    letters = sum(c.isalpha() for c in corpus)
    assert letters / len(corpus) > 0.6
    assert corpus.count(" ") / len(corpus) > 0.1


@needs_fortunes
def test_default_corpus_is_clean_and_deterministic(corpus):
    assert set(corpus) <= set("\n\t" + "".join(chr(c) for c in range(0x20, 0x7f)))
    assert "\x08" not in corpus and "\r" not in corpus
    assert not re.search(r"(?m)^%$", corpus), "a fortune separator line survived"
    assert "\n\n\n" not in corpus
    assert corpus.endswith("\n") and not corpus.startswith("\n")
    assert load_corpus() == corpus


@needs_fortunes
def test_fortune_files_are_plain_collections():
    files = data.fortune_files()
    assert files == sorted(files)
    for path in files:
        name = os.path.basename(path)
        assert not name.endswith((".dat", ".u8")) and "." not in name
        assert not os.path.islink(path) and os.path.isfile(path)
        assert name not in data.EXCLUDED_COLLECTIONS
        assert os.path.dirname(path) == data.FORTUNES_DIR  # never off/


def test_fortunes_from_a_directory(tmp_path):
    (tmp_path / "b").write_bytes(b"Second file.\n%\n")
    (tmp_path / "a").write_bytes(
        b"First fortune,\r\n  two lines.   \n%\n\n%\nB\x08Bold and _\x08u_\x08l.\x07\n\n"
        b"\n\nPara two.\n%\n   \n%\nLast\xc3\xa9 one\n")
    (tmp_path / "a.dat").write_bytes(b"\x00\x00\x00\x02binary")
    os.symlink("a", tmp_path / "a.u8")
    (tmp_path / "off").mkdir()
    (tmp_path / "off" / "rude").write_text("Never read.\n%\n")
    (tmp_path / "ascii-art").write_text("  /\\_/\\\n%\n")
    assert [os.path.basename(p) for p in data.fortune_files(str(tmp_path))] == ["a", "b"]
    text = data.load_fortunes(str(tmp_path))
    assert text == ("First fortune,\n  two lines.\n\n"
                    "Bold and ul.\n\nPara two.\n\n"
                    "Last one\n\n"
                    "Second file.\n")
    assert data.load_fortunes(str(tmp_path)) == text


# -- errors ----------------------------------------------------------------------------

def test_missing_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_corpus(missing)


def test_empty_or_binary_file_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(str(empty))
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_corpus(str(binary))
    late = tmp_path / "late.txt"
    late.write_bytes("h\u00e9llo ".encode() * 100 + b"\xc3(")
    with pytest.raises(ValueError, match=r"not UTF-8 text: byte 0xc3 at offset 700 "
                                         r"\(invalid continuation byte\)"):
        load_corpus(str(late))


def test_no_fortunes_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "FORTUNES_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="apt-get install fortunes-min"):
        load_corpus()
    (tmp_path / "absent").mkdir()
    with pytest.raises(FileNotFoundError, match="fortunes-min"):
        load_corpus()


def test_given_file_is_read_as_is(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("héllo\r\nworld\n%\n", encoding="utf-8")
    assert load_corpus(str(path)) == "héllo\r\nworld\n%\n"


# -- tokenizer -------------------------------------------------------------------------

def test_tokenizer_round_trip():
    text = "To be, or not to be:\n\tthat is the question.\n"
    tok = CharTokenizer(text)
    assert tok.chars == sorted(set(text))
    assert tok.vocab_size == len(set(text))
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(ids)) == text
    assert tok.encode("\t") == [0]  # sorted: '\t' < '\n' < ' ' < ...
    with pytest.raises(ValueError, match="'Z'"):
        tok.encode("Z")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError):
        CharTokenizer("")


@needs_fortunes
def test_tokenizer_round_trip_on_corpus(corpus):
    tok = CharTokenizer(corpus)
    assert 60 <= tok.vocab_size <= 100
    assert tok.decode(tok.encode(corpus)) == corpus


# -- split and batches ------------------------------------------------------------------

def test_split_is_first_90_last_10():
    d = torch.arange(1000)
    train, val = split(d)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), d)
    assert torch.equal(train, torch.arange(900))
    t2, v2 = split(d, 0.25)
    assert len(t2) == 750 and torch.equal(v2, torch.arange(750, 1000))
    with pytest.raises(ValueError):
        split(d, 1.0)


def test_batches_are_deterministic_and_shifted():
    d = torch.arange(10_000, dtype=torch.long)
    x, y = get_batch(d, 8, 32, torch.Generator().manual_seed(1337))
    assert x.shape == y.shape == (8, 32)
    assert x.dtype == y.dtype == torch.int64
    # with arange data every row is a contiguous window and y is x shifted by one
    assert torch.equal(y, x + 1)
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(x - x[:, :1], torch.arange(32).expand(8, 32))
    assert int(x.max()) + 1 < len(d) + 1 and int(y.max()) < len(d)
    x2, y2 = get_batch(d, 8, 32, torch.Generator().manual_seed(1337))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    g = torch.Generator().manual_seed(1337)
    first, second = get_batch(d, 8, 32, g), get_batch(d, 8, 32, g)
    assert torch.equal(first[0], x) and not torch.equal(second[0], x)
    x3, _ = get_batch(d, 8, 32, torch.Generator().manual_seed(7))
    assert not torch.equal(x, x3)


def test_batches_cover_the_last_window_and_reject_short_data():
    d = torch.arange(33)  # exactly one window of 32 (+1 target)
    x, y = get_batch(d, 4, 32, torch.Generator().manual_seed(0))
    assert torch.equal(x, torch.arange(32).expand(4, 32))
    assert torch.equal(y, torch.arange(1, 33).expand(4, 32))
    with pytest.raises(ValueError, match="too short"):
        get_batch(torch.arange(32), 4, 32, torch.Generator().manual_seed(0))


@needs_fortunes
def test_corpus_batches_decode_to_text(corpus):
    tok = CharTokenizer(corpus)
    enc = torch.tensor(tok.encode(corpus), dtype=torch.long)
    train, val = split(enc)
    x, y = get_batch(val, 4, 64, torch.Generator().manual_seed(0))
    for row_x, row_y in zip(x, y):
        sx, sy = tok.decode(row_x), tok.decode(row_y)
        assert sx[1:] == sy[:-1]
        assert sx in corpus[len(train):]


# -- the multilingual corpus -----------------------------------------------------------

def test_multilingual_corpus_has_each_language_in_its_script():
    try:
        langs = data.load_multilingual(max_chars=30_000)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    assert [c for c, _, _ in langs] == [c for c, *_ in data.LANGUAGES]
    by = {c: t for c, _, t in langs}
    for code, text in by.items():
        assert 1_000 < len(text) < 40_000 or code == "ga", (code, len(text))
    def share(text, lo, hi):
        return sum(lo <= ord(c) <= hi for c in text) / len(text)
    assert share(by["ru"], 0x400, 0x4FF) > 0.5 and share(by["bg"], 0x400, 0x4FF) > 0.5
    assert share(by["zh"], 0x4E00, 0x9FFF) > 0.3 and "[33m" not in by["zh"]
    assert "ß" in by["de"] or "ä" in by["de"]
    assert data.load_multilingual(max_chars=30_000) == langs
    # The other languages' packages put collections beside the English ones: the
    # English corpus never reads them.
    assert not {"chinese", "song100", "tang300", "brasil"} & {
        os.path.basename(p) for p in data.fortune_files()}


def test_multilingual_corpus_names_missing_packages(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install fortunes .*fortunes-zh"):
        data.load_multilingual(directory=str(tmp_path))
