"""BLEU as a function of sentence length (Bahdanau Figure 2, Luong Figure 6) and on short vs long sentences.

`lengths[i]` is the length of sentence i in Moses tokens; the caller decides whether it is the
source or the reference length (the paper does not say, paper-spec.md §3.5).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import bleu_from_statistics, check_parallel, sentence_statistics


def window_bounds(x: int, window: int) -> tuple[int, int]:
    """Half-open length range [lo, hi) of the window of width `window` centred on x.

    lo = x - window // 2 and hi = lo + window, so window 10 at x = 20 covers lengths 15..24 and
    window 1 is a plain per-length bin.
    """
    lo = x - window // 2
    return lo, lo + window


def _check_lengths(hyps: list[str], refs: list[str], lengths: list[int]) -> None:
    check_parallel(hyps, refs)
    if len(lengths) != len(hyps):
        raise UserError(f"Need one length per sentence, got {len(lengths)} lengths for {len(hyps)} sentences.")


def _subset_bleu(stats: np.ndarray, picked: list[int], min_sentences: int) -> float | None:
    """Tokenized BLEU over the picked sentences (rows of `sentence_statistics`), or None when there are fewer than
    `min_sentences`."""
    # BLEU of no sentences is undefined, whatever the caller's minimum.
    if len(picked) < max(min_sentences, 1):
        return None
    return bleu_from_statistics(stats[picked].sum(axis=0))


def length_curve(
    hyps: list[str], refs: list[str], lengths: list[int], *, window: int = 10, xs: Iterable[int] = range(1, 61), min_sentences: int = 1
) -> list[dict]:
    """For each x, corpus BLEU over the sentences whose length lies in `window_bounds(x, window)`.

    Returns one {"x", "bleu", "n"} per x; "bleu" is None where fewer than `min_sentences` sentences fall
    in the window, so plots can leave a gap there.
    """
    _check_lengths(hyps, refs, lengths)
    if window < 1:
        raise UserError(f"The length window must be at least 1, got {window}.")
    stats, curve = sentence_statistics(hyps, refs), []
    for x in xs:
        lo, hi = window_bounds(x, window)
        picked = [i for i, n in enumerate(lengths) if lo <= n < hi]
        curve.append({"x": x, "bleu": _subset_bleu(stats, picked, min_sentences), "n": len(picked)})
    return curve


def split_bleu(hyps: list[str], refs: list[str], lengths: list[int], threshold: int = 30) -> dict:
    """BLEU on sentences of length <= threshold ("short") and > threshold ("long"), with counts.

    A side without sentences has "bleu": None.
    """
    _check_lengths(hyps, refs, lengths)
    stats = sentence_statistics(hyps, refs)
    short = [i for i, n in enumerate(lengths) if n <= threshold]
    long = [i for i, n in enumerate(lengths) if n > threshold]
    return {
        "threshold": threshold,
        "short": {"bleu": _subset_bleu(stats, short, 1), "n": len(short)},
        "long": {"bleu": _subset_bleu(stats, long, 1), "n": len(long)},
    }


def length_groups(hyps: list[str], refs: list[str], group_size: int = 200) -> list[dict]:
    """Luong's protocol (length_analysis.py): sort the sentences by reference length (stable), cut them
    into consecutive groups of `group_size` (the last may be smaller), and score each group.

    Returns one {"x": longest reference length in the group, "bleu", "n"} per group.
    """
    check_parallel(hyps, refs)
    if group_size < 1:
        raise UserError(f"The group size must be at least 1, got {group_size}.")
    lengths = [len(r.split()) for r in refs]
    order = sorted(range(len(refs)), key=lambda i: lengths[i])
    stats, groups = sentence_statistics(hyps, refs), []
    for start in range(0, len(order), group_size):
        picked = order[start : start + group_size]
        groups.append({"x": max(lengths[i] for i in picked), "bleu": _subset_bleu(stats, picked, 1), "n": len(picked)})
    return groups
