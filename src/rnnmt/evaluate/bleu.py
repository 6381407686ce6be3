"""Corpus BLEU: tokenized (identical to multi-bleu.perl) and detokenized sacreBLEU (13a)."""

from __future__ import annotations

import sacrebleu
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


def tokenized_bleu(hyps: list[str], refs: list[str]) -> float:
    """Case-sensitive corpus BLEU on already Moses-tokenized text, as multi-bleu.perl computes it."""
    check_parallel(hyps, refs)
    # smooth_method='none': multi-bleu.perl gives 0.00 when an n-gram order has no match at all.
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", smooth_method="none", force=True).score


def detokenized_bleu(hyps_tok: list[str], refs_raw: list[str], lang: str) -> tuple[float, str]:
    """sacreBLEU with its defaults (13a) on detokenized hypotheses vs raw references; returns (score, signature)."""
    check_parallel(hyps_tok, refs_raw)
    metric = BLEU()
    score = metric.corpus_score(detokenize_lines(hyps_tok, lang), [refs_raw]).score
    return score, str(metric.get_signature())
