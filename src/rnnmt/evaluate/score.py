"""Score one system's test translations: BLEU All (and No-UNK), sacreBLEU, the length curve, Luong's
length groups, and the short/long split."""

from __future__ import annotations

from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import detokenized_bleu, rejoin_hyphens, tokenized_bleu
from rnnmt.evaluate.length import length_curve, length_groups, split_bleu
from rnnmt.fileio import read_ids, read_lines

LENGTH_BY = ("source", "reference")


def _check_same_count(files: list[tuple[Path, list]]) -> None:
    if len({len(lines) for _, lines in files}) > 1:
        listing = ", ".join(f"{path} has {len(lines)}" for path, lines in files)
        raise UserError(f"These files must have the same number of lines: {listing}.")


def _lengths(src_tok: list[str], refs_tok: list[str], length_by: str) -> list[int]:
    if length_by not in LENGTH_BY:
        raise UserError(f"length_by must be one of {', '.join(LENGTH_BY)}, got {length_by!r}.")
    lines = src_tok if length_by == "source" else refs_tok
    return [len(line.split()) for line in lines]


def score_system(
    *,
    hyps_all: Path,
    refs_tok: Path,
    refs_raw: Path,
    src_tok: Path,
    lang: str,
    hyps_nounk: Path | None = None,
    nounk_ids: Path | None = None,
    window: int = 10,
    max_x: int = 60,
    threshold: int = 30,
    length_by: str = "source",
    group_size: int = 200,
    rejoin: bool = False,
    lowercase: bool = False,
) -> dict:
    """Read one system's files and return its scores as a JSON-ready dict.

    The length curve, the length groups and the short/long split use the full test set (paper Figure 2
    caption). "bleu_nounk" and "sacrebleu_nounk" are None when the No-UNK subset is empty or not
    translated. With `rejoin`, split hyphens are rejoined in hypotheses and references first (Luong); with `lowercase`,
    sacreBLEU is case-insensitive (the hypotheses are lowercased text).
    """
    if (hyps_nounk is None) != (nounk_ids is None):
        raise UserError("the No-UNK translations and the No-UNK line ids go together: give both or neither.")
    texts = [(Path(p), read_lines(Path(p))) for p in (hyps_all, refs_tok, refs_raw, src_tok)]
    _check_same_count(texts)
    hyps, refs, raws, srcs = (lines for _, lines in texts)
    if not hyps:
        raise UserError(f"{hyps_all}: the test set is empty.")
    ids: list[int] = []
    nounk: list[str] = []
    if nounk_ids is not None:
        ids = read_ids(Path(nounk_ids), len(refs))
        nounk = read_lines(Path(hyps_nounk))
        _check_same_count([(Path(nounk_ids), ids), (Path(hyps_nounk), nounk)])
    lengths = _lengths(srcs, refs, length_by)
    sacre_all, signature = detokenized_bleu(hyps, raws, lang, lowercase)
    if rejoin:
        hyps, refs, nounk = rejoin_hyphens(hyps), rejoin_hyphens(refs), rejoin_hyphens(nounk)
    return {
        "bleu_all": tokenized_bleu(hyps, refs),
        "bleu_nounk": tokenized_bleu(nounk, [refs[i] for i in ids]) if ids else None,
        "sacrebleu_all": sacre_all,
        "sacrebleu_nounk": detokenized_bleu(nounk, [raws[i] for i in ids], lang, lowercase)[0] if ids else None,
        "sacrebleu_signature": signature,
        "n_all": len(hyps),
        "n_nounk": len(ids) if nounk_ids is not None else None,
        "hyphens_rejoined": rejoin,
        "length_curve": length_curve(hyps, refs, lengths, window=window, xs=range(1, max_x + 1)),
        "length_groups": length_groups(hyps, refs, group_size),
        "split": split_bleu(hyps, refs, lengths, threshold),
        "length_by": length_by,
        "window": window,
        "group_size": group_size,
    }
