"""BPE via subword-nmt: learned codes split rare words, and merge() undoes segment()."""

import pytest

from rnnmt.errors import UserError
from rnnmt.text.bpe import BpeSegmenter, build_bpe_vocab, learn_bpe

TEXT = ["the lower lowest newer newest wider widest the"] * 5 + ["the low new wide slow slower slowest"] * 5


@pytest.fixture(scope="module")
def codes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bpe")
    corpus = tmp / "train.tok"
    corpus.write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    path = tmp / "codes"
    learn_bpe(corpus, path, 20)
    return path


def test_segment_merge_round_trip(codes):
    seg = BpeSegmenter(codes)
    tokens = "the slowest newer widow lowers &apos;".split()
    units = seg.segment(tokens)
    assert len(units) > len(tokens)
    assert any(u.endswith("@@") for u in units)
    assert BpeSegmenter.merge(units) == tokens


def test_frequent_word_is_one_unit(codes):
    assert BpeSegmenter(codes).segment(["the"]) == ["the"]


def test_merge_keeps_a_dangling_prefix():
    assert BpeSegmenter.merge(["low@@", "er", "new@@"]) == ["lower", "new"]


def test_bpe_vocab_is_a_shortlist_of_units(codes):
    seg = BpeSegmenter(codes)
    segmented = [" ".join(seg.segment(line.split())) for line in TEXT]
    vocab = build_bpe_vocab(segmented, 1000)
    assert vocab.kind == "bpe"
    assert all(vocab.covers(line.split()) for line in segmented)


def test_missing_or_malformed_codes_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        BpeSegmenter(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.write_text("#version: 0.2\na b c\n", encoding="utf-8")
    with pytest.raises(UserError, match="malformed"):
        BpeSegmenter(bad)


def test_joint_codes_are_learned_on_both_files_as_one_text(tmp_path):
    """Joint BPE (vocab.joint): two files give the codes of their concatenation, as `cat a b | learn_bpe.py` (nmtpy's
    Multi30k set-up); a missing file is named."""
    first, second = tmp_path / "train.en", tmp_path / "train.de"
    first.write_text("\n".join(TEXT[:5]) + "\n", encoding="utf-8")
    second.write_text("\n".join(TEXT[5:]) + "\n", encoding="utf-8")
    both = tmp_path / "both"
    both.write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    learn_bpe([first, second], tmp_path / "joint.codes", 20)
    learn_bpe(both, tmp_path / "cat.codes", 20)
    assert (tmp_path / "joint.codes").read_text() == (tmp_path / "cat.codes").read_text()
    learn_bpe(first, tmp_path / "first.codes", 20)
    assert (tmp_path / "joint.codes").read_text() != (tmp_path / "first.codes").read_text()
    with pytest.raises(UserError, match=r"nowhere.de does not exist; expected tokenized text"):
        learn_bpe([first, tmp_path / "nowhere.de"], tmp_path / "x.codes", 20)
