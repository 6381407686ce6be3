"""Shortlist vocabulary: specials, frequency order, deterministic ties, UNK mapping, persistence."""

import json

import pytest

from rnnmt.errors import UserError
from rnnmt.text.vocab import Vocab, build_shortlist

LINES = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "zebra"]
# counts: the 3, cat 2, sat 2, dog 2, a 2, on 1, mat 1, and 1, zebra 1


def test_special_ids_are_fixed():
    v = build_shortlist(LINES, 3)
    assert (Vocab.PAD, Vocab.UNK, Vocab.EOS, Vocab.BOS) == (0, 1, 2, 3)
    assert v.symbols[:4] == ["<pad>", "<unk>", "</s>", "<s>"]


def test_shortlist_keeps_most_frequent_with_ties_by_string():
    v = build_shortlist(LINES, 3)
    assert len(v) == 3 + 4
    assert v.symbols[4:] == ["the", "a", "cat"]
    assert v.encode("the cat and a zebra".split()) == [4, 6, Vocab.UNK, 5, Vocab.UNK]


def test_shortlist_is_independent_of_line_order():
    assert build_shortlist(list(reversed(LINES)), 5) == build_shortlist(LINES, 5)


def test_small_corpus_gives_fewer_words_than_size():
    assert len(build_shortlist(["a b a"], 100)) == 2 + 4


def test_literal_special_strings_are_unknown_words():
    v = build_shortlist(["</s> <unk> x"], 10)
    assert v.symbols[4:] == ["x"]
    assert v.encode(["</s>", "x"]) == [Vocab.UNK, 4]


def test_covers():
    v = build_shortlist(LINES, 3)
    assert v.covers(["the", "cat"])
    assert not v.covers(["the", "zebra"])
    assert not v.covers(["<unk>"])
    assert v.covers([])


def test_decode_skips_pad_and_bos_and_stops_at_eos():
    v = build_shortlist(LINES, 3)
    assert v.decode([Vocab.BOS, 4, Vocab.UNK, 6, Vocab.EOS, 5, Vocab.PAD]) == ["the", "<unk>", "cat"]
    assert v.decode([4, Vocab.PAD, 5]) == ["the", "a"]


def test_save_load_round_trip(tmp_path):
    v = build_shortlist(LINES, 5)
    path = tmp_path / "vocab.json"
    v.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["kind"] == "shortlist"
    assert data["words"][0] == ["the", 3]
    assert Vocab.load(path) == v


@pytest.mark.parametrize("content", ["not json", "[]", '{"format": "rnnmt-vocab"}', '{"words": 3}'])
def test_load_corrupt_file_is_a_user_error(tmp_path, content):
    path = tmp_path / "vocab.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=f"{path}.*expected a JSON vocabulary"):
        Vocab.load(path)


def test_load_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        Vocab.load(tmp_path / "nope.json")


def test_size_must_be_positive():
    with pytest.raises(UserError, match="positive"):
        build_shortlist(LINES, 0)
