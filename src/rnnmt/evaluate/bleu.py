"""Corpus BLEU: tokenized (identical to multi-bleu.perl) and detokenized sacreBLEU (13a), and the per-sentence
statistics whose sums give the BLEU of any subset or resample (length.py, significance.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from rnnmt.errors import UserError
from rnnmt.text.tokenize import detokenize_lines


def check_parallel(hyps: list[str], refs: list[str]) -> None:
    """Raise UserError unless hypotheses and references are non-empty and equally long."""
    if not hyps:
        raise UserError("Cannot compute BLEU on an empty set of sentences.")
    if len(hyps) != len(refs):
        raise UserError(f"BLEU needs one reference per hypothesis, got {len(hyps)} hypotheses and {len(refs)} references.")


# Aggressive hyphen splitting as sacremoses/tokenizer.perl -a write it, and as Stanford's En-De files do.
SPLIT_HYPHENS = (" @-@ ", " ##AT##-##AT## ")


def rejoin_hyphens(lines: list[str]) -> list[str]:
    """Undo aggressive hyphen splitting ("well @-@ known" -> "well-known"), as Luong et al. did before BLEU."""
    out = []
    for line in lines:
        for split in SPLIT_HYPHENS:
            line = line.replace(split, "-")
        out.append(line)
    return out


def tokenized_metric() -> BLEU:
    """Case-sensitive BLEU on already Moses-tokenized text, as multi-bleu.perl computes it."""
    # smooth_method='none': multi-bleu.perl gives 0.00 when an n-gram order has no match at all.
    return BLEU(tokenize="none", smooth_method="none", force=True)


def detokenized_metric(lowercase: bool = False) -> BLEU:
    """sacreBLEU with its defaults (13a), on detokenized hypotheses and raw references; case-insensitive (`-lc`, its
    signature says `case:lc`) where the text was lowercased before tokenization (Multi30k's preprocessing)."""
    return BLEU(lowercase=lowercase)


def tokenized_bleu(hyps: list[str], refs: list[str]) -> float:
    """Corpus BLEU of `tokenized_metric` (multi-bleu.perl's)."""
    check_parallel(hyps, refs)
    return tokenized_metric().corpus_score(hyps, [refs]).score


def detokenized_bleu(hyps_tok: list[str], refs_raw: list[str], lang: str, lowercase: bool = False) -> tuple[float, str]:
    """sacreBLEU with its defaults (13a) on detokenized hypotheses vs raw references; returns (score, signature)."""
    check_parallel(hyps_tok, refs_raw)
    metric = detokenized_metric(lowercase)
    score = metric.corpus_score(detokenize_lines(hyps_tok, lang), [refs_raw]).score
    return score, str(metric.get_signature())


def sentence_statistics(hyps: Sequence[str], refs: Sequence[str], metric: BLEU | None = None) -> np.ndarray:
    """Per-sentence BLEU statistics [n, 10] (`tokenized_metric` unless another is given): lengths, then n-gram matches
    and totals for n = 1..4. Their sum over any sentences gives those sentences' corpus BLEU (`bleu_from_statistics`)
    as sacrebleu computes it from the text."""
    check_parallel(list(hyps), list(refs))
    return np.asarray((metric or tokenized_metric())._extract_corpus_statistics(hyps, [refs]), dtype=np.int64)


def bleu_from_statistics(stats: np.ndarray, metric: BLEU | None = None) -> float:
    """Corpus BLEU of summed statistics."""
    return (metric or tokenized_metric())._compute_score_from_stats(stats.tolist()).score
