"""Paired bootstrap of BLEU differences, and the claims table built from it."""

from __future__ import annotations

import numpy as np
import pytest

from rnnmt.evaluate.bleu import bleu_from_statistics, detokenized_bleu, detokenized_metric, sentence_statistics, tokenized_bleu
from rnnmt.evaluate.significance import bootstrap, paired_bootstrap, seeded_bootstrap, two_sided_p
from rnnmt.evaluate.tables import build_claims_table, verdict

REFS = [
    f"the {adj} cat sat on the {noun} mat number {i} today ."
    for i, (adj, noun) in enumerate(zip(["old", "small", "black", "grey"] * 10, ["red", "blue", "warm", "flat"] * 10))
]
GOOD = list(REFS)
# Wrong on every other sentence: half the words replaced.
BAD = [r if i % 2 else " ".join(w if j % 2 else "dog" for j, w in enumerate(r.split())) for i, r in enumerate(REFS)]


def test_summed_sentence_statistics_give_the_corpus_bleu_of_any_resample():
    stats = sentence_statistics(BAD, REFS)
    assert bleu_from_statistics(stats.sum(axis=0)) == pytest.approx(tokenized_bleu(BAD, REFS), abs=1e-9)
    idx = np.random.default_rng(0).integers(0, len(REFS), size=len(REFS))
    resampled = tokenized_bleu([BAD[i] for i in idx], [REFS[i] for i in idx])
    assert bleu_from_statistics(stats[idx].sum(axis=0)) == pytest.approx(resampled, abs=1e-9)


def test_the_full_sample_difference_is_the_tables_difference_and_the_interval_holds_it():
    d = paired_bootstrap(GOOD, BAD, REFS, samples=200, seed=1)
    assert d.delta == pytest.approx(tokenized_bleu(GOOD, REFS) - tokenized_bleu(BAD, REFS), abs=1e-9)
    assert 0 < d.low <= d.delta <= d.high and d.p_not_better == 0.0 and d.samples == 200
    assert verdict(d.low, d.high) == "holds"
    reverse = paired_bootstrap(BAD, GOOD, REFS, samples=200, seed=1)
    assert (reverse.low, reverse.high) == pytest.approx((-d.high, -d.low)) and verdict(reverse.low, reverse.high) == "reversed"


def test_identical_systems_differ_by_nothing_and_resampling_is_seeded():
    same = paired_bootstrap(BAD, BAD, REFS, samples=50, seed=3)
    assert (same.delta, same.low, same.high, same.p_not_better) == (0.0, 0.0, 0.0, 1.0)
    assert verdict(same.low, same.high) == "not significant"
    assert paired_bootstrap(GOOD, BAD, REFS, samples=50, seed=3) == paired_bootstrap(GOOD, BAD, REFS, samples=50, seed=3)


def test_the_two_sided_p_value_is_twice_the_share_of_resamples_on_the_rarer_side_of_zero():
    # One of four resamples at or below 0: p = 2 · (1 + 1) / (4 + 1).
    assert two_sided_p([1.0, 2.0, 3.0, -1.0]) == pytest.approx(0.8)
    assert two_sided_p([0.0] * 9) == 1.0  # no difference at all: nothing is significant
    assert two_sided_p([-5.0, -5.5, -4.5, -6.0]) == pytest.approx(0.4)  # none above 0, either sign alike
    assert two_sided_p([0.1] * 39 + [-0.1]) == pytest.approx(4 / 41)  # p < 0.05 needs more than 40 resamples


def test_p_values_of_identical_better_and_seeded_systems():
    same = paired_bootstrap(BAD, BAD, REFS, samples=100, seed=3)
    assert same.p_value == 1.0
    better = paired_bootstrap(GOOD, BAD, REFS, samples=100, seed=3)
    assert better.p_value == pytest.approx(2 / 101)  # no resample at or below 0: the smallest p 100 resamples give
    seeded = bootstrap([GOOD, GOOD], [BAD, BAD], REFS, samples=100, seed=3)
    assert seeded.seeds_a == 2 and seeded.p_value == pytest.approx(2 / 101)
    assert bootstrap([GOOD], [BAD], REFS, samples=100, seed=3) == better  # one seed a side: the paired bootstrap


def test_the_detokenized_metric_gives_sacrebleus_difference():
    raw = [r.replace(" .", ".") for r in REFS]
    bad = [b.replace(" .", ".") for b in BAD]
    d = paired_bootstrap(raw, bad, raw, samples=50, seed=1, metric=detokenized_metric())
    assert d.delta == pytest.approx(detokenized_bleu(REFS, raw, "en")[0] - detokenized_bleu(BAD, raw, "en")[0], abs=1e-9)


def test_claims_table_shows_published_and_reproduced_differences():
    row = {
        "paper": "P",
        "claim": "A helps",
        "a": "A",
        "b": "B",
        "published": 1.3,
        "delta": 2.0,
        "low": 0.5,
        "high": 3.25,
        "p_not_better": 0.01,
        "samples": 1000,
        "tolerance": 1.0,
        "comparable": True,
    }
    df = build_claims_table([row, {**row, "published": None, "low": -0.5}])
    assert list(df["95% interval"]) == ["[+0.50, +3.25]", "[-0.50, +3.25]"]
    assert list(df["verdict"]) == ["holds", "not significant"]
    assert df["delta published"].isna().tolist() == [False, True]
    assert "1000 resamples" in df.attrs["notes"][0]
    assert list(df["reproduced"]) == ["reproduced", "not comparable"]  # no published Δ: nothing to reproduce


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({}, "reproduced"),  # 1.3 inside [0.5, 3.25]
        ({"published": 4.0}, "reproduced"),  # above the interval by less than the tolerance
        ({"published": 4.5}, "not reproduced"),  # above it by more
        ({"published": 0.2, "tolerance": 0.2}, "not reproduced"),
        ({"low": -0.5}, "not reproduced"),  # the claim does not hold
        ({"comparable": False}, "not comparable"),  # not the paper's data and sizes
    ],
)
def test_a_claim_is_reproduced_when_it_holds_and_the_published_difference_is_within_its_interval_and_tolerance(change, status):
    row = {"paper": "P", "claim": "A helps", "a": "A", "b": "B", "published": 1.3, "delta": 2.0, "low": 0.5, "high": 3.25}
    row |= {"p_not_better": 0.01, "samples": 1000, "tolerance": 1.0, "comparable": True}
    assert build_claims_table([{**row, **change}]).loc[0, "reproduced"] == status


def _damaged(every: int) -> list[str]:
    """Translations with half the words of every `every`-th sentence replaced (a smaller `every`: a worse seed)."""
    return [" ".join(w if j % 2 else "dog" for j, w in enumerate(r.split())) if i % every == 0 else r for i, r in enumerate(REFS)]


def test_two_level_bootstrap_averages_seeds_and_widens_the_interval_by_their_spread():
    seeds_a = [GOOD, _damaged(4), _damaged(2)]  # seeds that differ a lot
    seeds_b = [BAD, BAD]
    d = seeded_bootstrap(seeds_a, seeds_b, REFS, samples=300, seed=5)
    mean_a = np.mean([tokenized_bleu(h, REFS) for h in seeds_a])
    assert d.delta == pytest.approx(mean_a - tokenized_bleu(BAD, REFS), abs=1e-9) and (d.seeds_a, d.seeds_b) == (3, 2)
    assert d.high - d.low >= d.sentence_high - d.sentence_low  # seeds add variation on top of the test sentences
    assert d.seed_high - d.seed_low > 0 and d.low <= d.delta <= d.high
    single = seeded_bootstrap([BAD], [BAD], REFS, samples=50, seed=5)
    assert (single.seed_low, single.seed_high, single.delta) == (0.0, 0.0, 0.0)  # one seed a side: no seed variation
    assert seeded_bootstrap(seeds_a, seeds_b, REFS, samples=50, seed=5) == seeded_bootstrap(seeds_a, seeds_b, REFS, samples=50, seed=5)


def test_claims_table_with_seeds_shows_both_spreads_and_the_larger_source():
    row = {
        "paper": "P",
        "claim": "A helps",
        "a": "A",
        "b": "B",
        "published": 1.3,
        "delta": 2.0,
        "low": 0.5,
        "high": 3.25,
        "p_not_better": 0.01,
        "samples": 1000,
        "tolerance": 1.0,
        "comparable": True,
    }
    seeded = {**row, "seed_low": -1.0, "seed_high": 4.0, "sentence_low": 1.0, "sentence_high": 3.0, "seeds_a": 3, "seeds_b": 3}
    df = build_claims_table([seeded, row])
    assert df.loc[0, "seeds"] == "3/3" and df.loc[0, "seed-only 95%"] == "[-1.00, +4.00]" and df.loc[0, "larger source"] == "seeds"
    assert df["sentence-only 95%"].isna().tolist() == [False, True]  # a single-seed claim keeps the paired bootstrap
    assert "Clark et al. 2011" in df.attrs["notes"][1]
    assert "seeds" not in build_claims_table([row]).columns  # one seed everywhere: today's table
