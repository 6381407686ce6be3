"""Paired bootstrap resampling (Koehn 2004) of the tokenized-BLEU difference between two systems.

Both systems' translations of one test set are resampled with the same sentence indices; each resample's
corpus BLEU comes from summed per-sentence statistics (sacrebleu's, so the full-sample difference equals
the tables' BLEU difference), and the 2.5th and 97.5th percentiles of the differences bound the 95%
interval. sacrebleu's own paired test reports a p-value and per-system intervals, not an interval for the
difference, which is what a claim "A beats B by x" needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from rnnmt.evaluate.bleu import check_parallel

# Resamples summed at once: bounds memory to chunk × sentences × 10 statistics.
CHUNK = 100


@dataclass(frozen=True)
class Difference:
    """BLEU(A) − BLEU(B) on the full test set, its 95% bootstrap interval, and the share of resamples where A ≤ B."""

    delta: float
    low: float
    high: float
    p_not_better: float
    samples: int


def _metric() -> BLEU:
    # The tables' tokenized BLEU (bleu.tokenized_bleu): multi-bleu.perl identical.
    return BLEU(tokenize="none", smooth_method="none", force=True)


def sentence_statistics(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence BLEU statistics [n, 10]: lengths, then n-gram matches and totals for n = 1..4."""
    check_parallel(list(hyps), list(refs))
    return np.asarray(_metric()._extract_corpus_statistics(hyps, [refs]), dtype=np.int64)


def bleu_from_statistics(stats: np.ndarray) -> float:
    """Corpus BLEU of summed statistics."""
    return _metric()._compute_score_from_stats(stats.tolist()).score


def paired_bootstrap(hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], samples: int = 1000, seed: int = 12345) -> Difference:
    """The difference BLEU(A) − BLEU(B) with its paired-bootstrap 95% interval."""
    a, b = sentence_statistics(hyps_a, refs), sentence_statistics(hyps_b, refs)
    rng = np.random.default_rng(seed)
    deltas = []
    for start in range(0, samples, CHUNK):
        idx = rng.integers(0, len(refs), size=(min(CHUNK, samples - start), len(refs)))
        for sum_a, sum_b in zip(a[idx].sum(axis=1), b[idx].sum(axis=1)):
            deltas.append(bleu_from_statistics(sum_a) - bleu_from_statistics(sum_b))
    d = np.asarray(deltas)
    low, high = np.percentile(d, [2.5, 97.5])
    full = bleu_from_statistics(a.sum(axis=0)) - bleu_from_statistics(b.sum(axis=0))
    return Difference(full, float(low), float(high), float(np.mean(d <= 0)), samples)
