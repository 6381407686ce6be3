"""n-gram LMs for data selection: lmplz-identical modified KN, normalisation, ARPA/npz, packing limits, chunking."""

import numpy as np
import pytest

from rnnmt.errors import UserError
from rnnmt.select.ngram import BOS, EOS, SPECIALS, UNK, Encoder, NgramLM, build_vocab

# docs/data-selection.md §5.3 item 1; the expected values are lmplz -o 3 --discount_fallback plus KenLM query.
TOY = """the cat sat on the mat
the dog sat on the log
the cat ate the fish
a dog ate a bone
the cat sat on the dog
a cat sat on a mat
the dog ate the cat food
a fish sat in the sea
the bird sat on the cat
a bird ate the fish
the cat saw the bird
a dog saw a cat""".splitlines()


def toy_lm() -> tuple[Encoder, NgramLM]:
    """The encoder and the order-3 lmplz-mode LM of the toy corpus."""
    enc = Encoder(build_vocab(TOY))
    return enc, NgramLM.estimate(*enc.encode(TOY), len(enc.words), order=3, unk_is_word=False)


def entry(lm: NgramLM, enc: Encoder, gram: str) -> tuple[float, float]:
    """(log10 p, log10 backoff) of an n-gram given as a string."""
    key = 0
    for word in gram.split():
        key = key << 16 | enc.words.index(word)
    n = len(gram.split())
    i = int(np.searchsorted(lm.keys[n - 1], np.uint64(key)))
    assert lm.keys[n - 1][i] == key, gram
    return float(lm.logp[n - 1][i]), float(lm.backoff[n - 1][i])


def generated(n_sent: int, n_words: int, seed: int, unk_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """A Markov chain over ids 3..n_words+2 with few likely successors; 2% rare ids up to 2*n_words+2 instead.

    The repeats and the rare words give every order non-degenerate counts-of-counts (no discount fallback).
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, n_sent)
    tokens = np.empty(int(lengths.sum()), dtype=np.int32)
    word = 0
    for t in range(len(tokens)):
        word = (word * 7 + int(rng.geometric(0.3))) % n_words
        rare = int(rng.integers(n_words, 2 * n_words))
        tokens[t] = UNK if rng.random() < unk_rate else 3 + (rare if rng.random() < 0.02 else word)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return tokens, offsets


def test_golden_toy_corpus_matches_lmplz():
    enc, lm = toy_lm()
    expected_discounts = [(0.333333, 1.833333, 0.333333), (0.688889, 1.114286, 3.0), (0.5, 1.0, 1.5)]
    np.testing.assert_allclose(lm.discounts(), expected_discounts, atol=1e-5)
    expected_entries = {
        "<unk>": (-1.7224096, 0.0),
        "<s>": (0.0, -0.30103),
        "<s> the": (-0.40113127, -0.36797678),
        "the cat": (-1.7807517, -0.30103),
        "<s> the cat": (-0.43860868, 0.0),
    }
    for gram, values in expected_entries.items():
        np.testing.assert_allclose(entry(lm, enc, gram), values, atol=1e-5, err_msg=gram)
    scores = lm.score(*enc.encode(["the cat sat on the mat", "a dog sat on the fish", "the zebra ate"]))
    np.testing.assert_allclose(scores, [-2.870559, -4.836050, -4.414144], atol=1e-5)


@pytest.mark.parametrize("unk_is_word", [True, False])
def test_conditional_probabilities_sum_to_one(unk_is_word):
    n_words = 100
    vocab_size = 3 + 2 * n_words + 5  # the last five ids never occur in training
    tokens, offsets = generated(2000, n_words, seed=1, unk_rate=0.03 if unk_is_word else 0.0)
    lm = NgramLM.estimate(tokens, offsets, vocab_size, order=4, unk_is_word=unk_is_word)
    assert (0.5, 1.0, 1.5) not in lm.discounts()
    # Predictable words are the LM's unigrams but <s>: V ∪ {</s>, <unk>} in SRILM mode, the seen words in lmplz mode.
    predictable = lm.keys[0].astype(np.int64)
    assert len(predictable) == (vocab_size if unk_is_word else len(np.union1d(tokens, [UNK, BOS, EOS])))
    following = predictable[(predictable != BOS) & (predictable != EOS)]
    rng = np.random.default_rng(2)
    for trial in range(100):
        if trial % 2:
            start = int(rng.integers(0, len(tokens) - 3))
            history = tokens[start : start + int(rng.integers(0, 4))]  # mostly seen contexts
        else:
            history = rng.choice(following, int(rng.integers(0, 4)))  # mostly unseen ones
        h = len(history)
        # One sentence per following word w ("history w") plus "history" itself for </s>.
        pairs = np.column_stack([np.tile(history, (len(following), 1)), following])
        sent_tokens = np.concatenate([pairs.ravel(), history])
        sent_offsets = np.concatenate([np.arange(len(following) + 1) * (h + 1), [len(following) * (h + 1) + h]])
        logp = lm.token_logprobs(sent_tokens.astype(np.int32), sent_offsets)
        at = np.concatenate([np.arange(len(following)) * (h + 2) + h, [len(following) * (h + 2) + h]])
        assert abs(np.sum(10.0 ** logp[at]) - 1.0) < 1e-9, history


def test_srilm_mode_keeps_unk_counts_and_gives_every_id_a_unigram():
    tokens, offsets = generated(500, 30, seed=3, unk_rate=0.1)
    srilm = NgramLM.estimate(tokens, offsets, 3 + 60 + 2, order=3, unk_is_word=True)
    assert np.array_equal(srilm.keys[0], np.arange(65, dtype=np.uint64))
    # <unk> is seen in training, so it is a context with a real backoff.
    assert srilm.backoff[0][UNK] != 0.0


def test_lmplz_mode_refuses_unk_in_training():
    tokens, offsets = generated(50, 10, seed=4, unk_rate=0.2)
    with pytest.raises(UserError, match="outside the vocabulary"):
        NgramLM.estimate(tokens, offsets, 3 + 20, order=3, unk_is_word=False)


def test_arpa_round_trip(tmp_path):
    tokens, offsets = generated(800, 30, seed=5, unk_rate=0.02)
    lm = NgramLM.estimate(tokens, offsets, 3 + 60, order=4)
    words = [*SPECIALS, *(f"w{i}" for i in range(60))]
    lm.write_arpa(tmp_path / "lm.arpa", words)
    back = NgramLM.read_arpa(tmp_path / "lm.arpa", words)
    assert back.order == 4 and back.vocab_size == lm.vocab_size
    for n in range(4):
        assert np.array_equal(back.keys[n], lm.keys[n])
        # The writer prints shortest round-trip float64 text, so values come back exactly.
        assert np.array_equal(back.logp[n], lm.logp[n])
        assert np.array_equal(back.backoff[n], lm.backoff[n])
    assert np.array_equal(back.score(tokens, offsets), lm.score(tokens, offsets))


def test_arpa_with_unknown_word_is_refused(tmp_path):
    enc, lm = toy_lm()
    lm.write_arpa(tmp_path / "lm.arpa", enc.words)
    with pytest.raises(UserError, match="lm.arpa:"):
        NgramLM.read_arpa(tmp_path / "lm.arpa", [w for w in enc.words if w != "mat"])


def test_npz_round_trip_is_exact(tmp_path):
    enc, lm = toy_lm()
    lm.save(tmp_path / "lm.npz")
    back = NgramLM.load(tmp_path / "lm.npz")
    assert (back.order, back.vocab_size) == (lm.order, lm.vocab_size)
    assert back.discounts() == lm.discounts()
    for name in ("keys", "logp", "backoff"):
        for mine, theirs in zip(getattr(lm, name), getattr(back, name)):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.npz"]


def test_vocabulary_too_large_for_key_packing():
    tokens, offsets = np.array([3, 4], dtype=np.int32), np.array([0, 2])
    NgramLM.estimate(tokens, offsets, 65_536, order=2)
    with pytest.raises(UserError, match="65,534 words.*at most 65,533"):
        NgramLM.estimate(tokens, offsets, 65_537, order=2)
    with pytest.raises(UserError, match="order is 5"):
        NgramLM.estimate(tokens, offsets, 10, order=5)


def test_build_vocab_and_encoder():
    assert build_vocab(["b a b", "c <s> </s> <unk> a"], min_count=2) == ["a", "b"]
    enc = Encoder(["a", "b"])
    assert enc.words == ["<unk>", "<s>", "</s>", "a", "b"]
    tokens, offsets = enc.encode(["a zebra b", "", "<s> </s> b"])
    assert tokens.dtype == np.int32 and offsets.dtype == np.int64
    assert tokens.tolist() == [3, UNK, 4, UNK, UNK, 4]
    assert offsets.tolist() == [0, 3, 3, 6]
    with pytest.raises(UserError, match="special symbols"):
        Encoder(["a", "<unk>"])


def test_empty_sentence_scores_only_end_of_sentence():
    enc, lm = toy_lm()
    # "<s> </s>" is no bigram of the toy LM, so p(</s> | <s>) backs off to the unigram.
    expected = entry(lm, enc, "<s>")[1] + entry(lm, enc, "</s>")[0]
    scores = lm.score(*enc.encode(["the cat", "", "a dog"]))
    np.testing.assert_allclose(scores[1], expected, rtol=0, atol=1e-12)
    assert scores[0] == lm.score(*enc.encode(["the cat"]))[0]
    assert scores[2] == lm.score(*enc.encode(["a dog"]))[0]
    assert lm.score(np.zeros(0, np.int32), np.zeros(1, np.int64)).shape == (0,)


def test_ids_without_unigram_score_as_unk():
    enc, lm = toy_lm()
    unk = lm.score(np.array([3, UNK], np.int32), np.array([0, 2]))
    for odd in (BOS, EOS, lm.vocab_size, 60_000):
        assert np.array_equal(lm.score(np.array([3, odd], np.int32), np.array([0, 2])), unk)


def test_scores_identical_in_chunks():
    tokens, offsets = generated(2000, 50, seed=6, unk_rate=0.02)
    lm = NgramLM.estimate(tokens, offsets, 3 + 100, order=4)
    whole = lm.score(tokens, offsets)
    cuts = [0, 1, 2, 37, 500, 1333, 1999, 2000]
    parts = [lm.score(tokens[offsets[a] : offsets[b]], offsets[a : b + 1] - offsets[a]) for a, b in zip(cuts[:-1], cuts[1:])]
    assert np.array_equal(np.concatenate(parts), whole)


def test_kenlm_reads_our_arpa_and_agrees(tmp_path):
    kenlm = pytest.importorskip("kenlm")
    train_tokens, train_offsets = generated(3000, 100, seed=7, unk_rate=0.02)
    lm = NgramLM.estimate(train_tokens, train_offsets, 3 + 200 + 5, order=4)
    words = [*SPECIALS, *(f"w{i}" for i in range(205))]
    lm.write_arpa(tmp_path / "lm.arpa", words)
    tokens, offsets = generated(10_000, 100, seed=8, unk_rate=0.02)
    lines = [" ".join(words[i] for i in tokens[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    model = kenlm.Model(str(tmp_path / "lm.arpa"))
    theirs = np.array([model.score(line, bos=True, eos=True) for line in lines])
    # KenLM accumulates in float32 (docs/data-selection.md §5.3 item 3).
    assert np.abs(theirs - lm.score(tokens, offsets)).max() <= 1e-3
