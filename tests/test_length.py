"""BLEU vs sentence length: windows, minimum counts, short/long split."""

import pytest

from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import tokenized_bleu
from rnnmt.evaluate.length import length_curve, length_groups, split_bleu, window_bounds

PERFECT = "one two three four five"
# Two short sentences translated perfectly, three long ones translated imperfectly.
HYPS = [PERFECT, PERFECT, "a b c d x f g", "a b c d e f x", "a b x d e f g"]
REFS = [PERFECT, PERFECT, "a b c d e f g", "a b c d e f g", "a b c d e f g"]
LENGTHS = [5, 8, 31, 40, 44]


@pytest.mark.parametrize("x, window, bounds", [(20, 10, (15, 25)), (20, 5, (18, 23)), (7, 1, (7, 8)), (1, 10, (-4, 6))])
def test_window_bounds(x, window, bounds):
    assert window_bounds(x, window) == bounds


def test_curve_windows_pick_the_right_sentences():
    curve = length_curve(HYPS, REFS, LENGTHS, window=10, xs=[5, 12, 20, 40])
    by_x = {p["x"]: p for p in curve}
    assert [p["x"] for p in curve] == [5, 12, 20, 40]
    assert by_x[5]["n"] == 2 and by_x[5]["bleu"] == pytest.approx(100.0)  # lengths 0..9
    assert by_x[12]["n"] == 1 and by_x[12]["bleu"] == pytest.approx(100.0)  # lengths 7..16: only length 8
    assert by_x[20] == {"x": 20, "bleu": None, "n": 0}  # lengths 15..24: none
    assert by_x[40]["n"] == 2 and 0 < by_x[40]["bleu"] < 100  # lengths 35..44: 40 and 44


def test_a_windows_bleu_is_the_corpus_bleu_of_its_sentences():
    """Summed per-sentence statistics give exactly what scoring the window's sentences as a corpus gives."""
    by_x = {p["x"]: p for p in length_curve(HYPS, REFS, LENGTHS, window=10, xs=[36, 40])}
    assert by_x[36]["bleu"] == tokenized_bleu(HYPS[2:4], REFS[2:4])  # lengths 31..40
    assert by_x[40]["bleu"] == tokenized_bleu(HYPS[3:], REFS[3:])  # lengths 35..44
    split = split_bleu(HYPS, REFS, LENGTHS, threshold=30)
    assert split["long"]["bleu"] == tokenized_bleu(HYPS[2:], REFS[2:])


def test_default_xs_cover_1_to_60():
    assert [p["x"] for p in length_curve(HYPS, REFS, LENGTHS)] == list(range(1, 61))


def test_min_sentences_marks_thin_windows_none_but_keeps_n():
    curve = length_curve(HYPS, REFS, LENGTHS, window=10, xs=[5, 40], min_sentences=3)
    assert curve == [{"x": 5, "bleu": None, "n": 2}, {"x": 40, "bleu": None, "n": 2}]


def test_curve_rejects_bad_arguments():
    with pytest.raises(UserError):
        length_curve(HYPS, REFS, LENGTHS[:-1])
    with pytest.raises(UserError):
        length_curve(HYPS, REFS, LENGTHS, window=0)


def test_split_bleu_counts_and_scores():
    split = split_bleu(HYPS, REFS, [5, 30, 31, 40, 44], threshold=30)
    assert split["threshold"] == 30
    assert split["short"]["n"] == 2 and split["short"]["bleu"] == pytest.approx(100.0)  # 30 is short
    assert split["long"]["n"] == 3 and 0 < split["long"]["bleu"] < 100


def test_split_bleu_empty_side_is_none():
    split = split_bleu(HYPS, REFS, LENGTHS, threshold=100)
    assert split["long"] == {"bleu": None, "n": 0}
    assert split["short"]["n"] == 5


def test_length_groups_follow_luongs_protocol():
    """Sorted by reference length (stable), consecutive groups; x = the group's longest reference."""
    refs = ["a b c", "a", "a b c d e", "a b", "a b c d"]
    hyps = ["a b c", "a", "x y z w v", "a b", "a b c d"]
    groups = length_groups(hyps, refs, group_size=2)
    # Order by length: "a"(1), "a b"(2) | "a b c"(3), "a b c d"(4) | "a b c d e"(5).
    assert [(g["x"], g["n"]) for g in groups] == [(2, 2), (4, 2), (5, 1)]
    assert [g["bleu"] for g in groups[1:]] == [pytest.approx(100.0), 0.0]
    with pytest.raises(UserError, match="group size"):
        length_groups(hyps, refs, group_size=0)
