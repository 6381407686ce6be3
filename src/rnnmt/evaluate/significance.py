"""Paired bootstrap resampling (Koehn 2004) of the BLEU difference between two systems.

Both systems' translations of one test set are resampled with the same sentence indices; each resample's
corpus BLEU comes from summed per-sentence statistics (sacrebleu's, so the full-sample difference equals
the tables' BLEU difference), and the 2.5th and 97.5th percentiles of the differences bound the 95%
interval. sacrebleu's own paired test reports a p-value and per-system intervals, not an interval for the
difference, which is what a claim "A beats B by x" needs; the same resamples give a two-sided p-value too
(`two_sided_p`). The metric is the tables' tokenized BLEU unless another (sacreBLEU 13a on detokenized text) is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from rnnmt.evaluate.bleu import bleu_from_statistics, sentence_statistics, tokenized_metric

# Resamples summed at once: bounds memory to chunk × sentences × 10 statistics.
CHUNK = 100


@dataclass(frozen=True)
class Difference:
    """BLEU(A) − BLEU(B) on the full test set, its 95% bootstrap interval, the share of resamples where A ≤ B, and the
    two-sided p-value of "A and B score the same" (`two_sided_p`)."""

    delta: float
    low: float
    high: float
    p_not_better: float
    samples: int
    p_value: float


def paired_bootstrap(
    hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], samples: int = 1000, seed: int = 12345, metric: BLEU | None = None
) -> Difference:
    """The difference BLEU(A) − BLEU(B) with its paired-bootstrap 95% interval."""
    metric = metric or tokenized_metric()
    a, b = sentence_statistics(hyps_a, refs, metric), sentence_statistics(hyps_b, refs, metric)
    rng = np.random.default_rng(seed)
    deltas = []
    for start in range(0, samples, CHUNK):
        idx = rng.integers(0, len(refs), size=(min(CHUNK, samples - start), len(refs)))
        for sum_a, sum_b in zip(a[idx].sum(axis=1), b[idx].sum(axis=1)):
            deltas.append(bleu_from_statistics(sum_a, metric) - bleu_from_statistics(sum_b, metric))
    full = bleu_from_statistics(a.sum(axis=0), metric) - bleu_from_statistics(b.sum(axis=0), metric)
    return Difference(full, *_interval(deltas), _share_not_better(deltas), samples, two_sided_p(deltas))


def _interval(values: Sequence[float]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles: a 95% bootstrap interval."""
    low, high = np.percentile(np.asarray(values), [2.5, 97.5])
    return float(low), float(high)


def _share_not_better(deltas: Sequence[float]) -> float:
    return float(np.mean(np.asarray(deltas) <= 0))


def two_sided_p(deltas: Sequence[float]) -> float:
    """The two-sided p-value of "no difference" that the percentile interval of the same resamples implies: twice the
    share of resamples on the side of 0 that has fewer (0 counted on both sides), one added to both counts, at most 1. So p < 0.05
    where the 95% interval (`_interval`) lies on one side of 0, up to the percentiles' interpolation."""
    values = np.asarray(deltas)
    fewer = min(np.sum(values <= 0), np.sum(values >= 0))
    return float(min(1.0, 2 * (fewer + 1) / (len(values) + 1)))


@dataclass(frozen=True)
class SeededDifference(Difference):
    """The difference of mean BLEU over seeds, mean(A) − mean(B), with three 95% intervals: seeds and sentences
    resampled together (the claim's interval: `low`, `high`), seeds only (the full test set), sentences only
    (every seed)."""

    seed_low: float
    seed_high: float
    sentence_low: float
    sentence_high: float
    seeds_a: int
    seeds_b: int


def seeded_bootstrap(
    hyps_a: Sequence[Sequence[str]], hyps_b: Sequence[Sequence[str]], refs: Sequence[str], samples: int = 1000, seed: int = 12345, metric: BLEU | None = None
) -> SeededDifference:
    """A two-level bootstrap over systems trained with several seeds (Clark et al. 2011, "Better hypothesis testing
    for statistical machine translation: controlling for optimizer instability"): each resample draws every
    system's seeds with replacement, then the test sentences (the same for both systems), and takes each
    system's mean BLEU over its drawn seeds. `hyps_a`/`hyps_b`: one list of translations per seed."""
    metric = metric or tokenized_metric()
    a = [sentence_statistics(h, refs, metric) for h in hyps_a]
    b = [sentence_statistics(h, refs, metric) for h in hyps_b]
    full_a = np.array([bleu_from_statistics(s.sum(axis=0), metric) for s in a])
    full_b = np.array([bleu_from_statistics(s.sum(axis=0), metric) for s in b])
    rng = np.random.default_rng(seed)
    combined, seeds_only, sentences_only = [], [], []
    for _ in range(samples):
        idx = rng.integers(0, len(refs), size=len(refs))
        bleu_a = np.array([bleu_from_statistics(s[idx].sum(axis=0), metric) for s in a])
        bleu_b = np.array([bleu_from_statistics(s[idx].sum(axis=0), metric) for s in b])
        draw_a, draw_b = rng.integers(0, len(a), size=len(a)), rng.integers(0, len(b), size=len(b))
        combined.append(bleu_a[draw_a].mean() - bleu_b[draw_b].mean())
        seeds_only.append(full_a[draw_a].mean() - full_b[draw_b].mean())
        sentences_only.append(bleu_a.mean() - bleu_b.mean())
    (low, high), (seed_low, seed_high), (sentence_low, sentence_high) = map(_interval, (combined, seeds_only, sentences_only))
    delta = float(full_a.mean() - full_b.mean())
    p = two_sided_p(combined)
    return SeededDifference(delta, low, high, _share_not_better(combined), samples, p, seed_low, seed_high, sentence_low, sentence_high, len(a), len(b))


def bootstrap(
    hyps_a: Sequence[Sequence[str]], hyps_b: Sequence[Sequence[str]], refs: Sequence[str], samples: int, seed: int, metric: BLEU | None = None
) -> Difference:
    """BLEU(A) − BLEU(B) from one list of translations per seed a side: the paired bootstrap of the test sentences with
    one seed each, the two-level bootstrap over seeds and sentences with more."""
    if len(hyps_a) == len(hyps_b) == 1:
        return paired_bootstrap(hyps_a[0], hyps_b[0], refs, samples, seed, metric)
    return seeded_bootstrap(hyps_a, hyps_b, refs, samples, seed, metric)
