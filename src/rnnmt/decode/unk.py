"""The 'No UNK' test subset of Bahdanau Table 1 (paper-spec §3.3)."""

from __future__ import annotations

from collections.abc import Sequence

from rnnmt.errors import UserError
from rnnmt.text.bpe import BpeSegmenter, units
from rnnmt.text.vocab import Vocab


def nounk_subset(
    src_lines: Sequence[str],
    ref_lines: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_bpe: BpeSegmenter | None = None,
    tgt_bpe: BpeSegmenter | None = None,
) -> list[int]:
    """0-based indices of the pairs whose every source token and every reference token is in vocabulary."""
    if len(src_lines) != len(ref_lines):
        raise UserError(f"the test source has {len(src_lines)} lines but the reference has {len(ref_lines)}; expected equal counts.")

    return [
        i
        for i, (s, r) in enumerate(zip(src_lines, ref_lines))
        if src_vocab.covers(units(s, src_bpe)) and tgt_vocab.covers(units(r, tgt_bpe))
    ]
