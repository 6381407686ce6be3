"""Tokenized BLEU (multi-bleu.perl semantics) and detokenized sacreBLEU."""

import math

import pytest

from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import detokenized_bleu, rejoin_hyphens, tokenized_bleu


def test_identical_text_scores_100():
    lines = ["the cat sat on the mat .", "a b c d e"]
    assert tokenized_bleu(lines, lines) == pytest.approx(100.0)


def test_hand_computed_corpus_with_brevity_penalty():
    hyps = ["the cat sat on the mat today", "good morning"]
    refs = ["the cat sat on a mat today", "good morning everyone"]
    # Clipped n-gram matches / hypothesis n-grams, summed over the corpus:
    #   1-grams: 6/7 ("the" clipped to 1) + 2/2 = 8/9
    #   2-grams: 4/6 (the cat, cat sat, sat on, mat today) + 1/1 = 5/7
    #   3-grams: 2/5 (the cat sat, cat sat on) + 0/0 = 2/5
    #   4-grams: 1/4 (the cat sat on) + 0/0 = 1/4
    # Hypothesis length c = 9, reference length r = 10, so BP = exp(1 - 10/9).
    # BLEU = 100 * BP * (8/9 * 5/7 * 2/5 * 1/4) ** (1/4) = 44.92
    expected = 100 * math.exp(1 - 10 / 9) * (8 / 9 * 5 / 7 * 2 / 5 * 1 / 4) ** 0.25
    assert round(expected, 2) == 44.92
    assert round(tokenized_bleu(hyps, refs), 2) == 44.92


def test_case_sensitive_and_no_retokenization():
    # "Cat" != "cat", and "mat." stays one token: only "the" matches, no bigram matches -> 0 without smoothing.
    assert tokenized_bleu(["the Cat mat."], ["the cat mat ."]) == 0.0


def test_no_smoothing_zero_4gram_matches_gives_zero():
    # 1- to 3-gram precisions are 5/6, 3/5, 1/4 but no 4-gram matches: multi-bleu.perl prints 0.00.
    assert tokenized_bleu(["the cat sat on the mat"], ["the cat is on the mat"]) == 0.0


def test_empty_hypothesis_line_is_allowed():
    assert tokenized_bleu(["a b c d", ""], ["a b c d", "e f"]) < 100.0


@pytest.mark.parametrize("hyps, refs", [([], []), (["a"], ["a", "b"])])
def test_bad_input_is_a_user_error(hyps, refs):
    with pytest.raises(UserError):
        tokenized_bleu(hyps, refs)
    with pytest.raises(UserError):
        detokenized_bleu(hyps, refs, "en")


def test_detokenized_bleu_scores_against_raw_text_with_13a_signature():
    score, signature = detokenized_bleu(["Hello , world !", "l&apos; homme"], ["Hello, world!", "l'homme"], "fr")
    assert score == pytest.approx(100.0)
    assert "tok:13a" in signature
    assert "nrefs:1" in signature


def test_rejoined_hyphens_count_as_one_token():
    """Luong's post-processing: ' @-@ ' and Stanford's ' ##AT##-##AT## ' become '-' before BLEU."""
    assert rejoin_hyphens(["ein gut @-@ bekanntes Haus", "a well ##AT##-##AT## known house", "x - y"]) == [
        "ein gut-bekanntes Haus",
        "a well-known house",
        "x - y",
    ]
    hyp, ref = ["ein gut @-@ bekanntes Haus ."], ["ein gut ##AT##-##AT## bekanntes Haus ."]
    assert tokenized_bleu(rejoin_hyphens(hyp), rejoin_hyphens(ref)) == pytest.approx(100.0)
    assert tokenized_bleu(hyp, ref) < 100
