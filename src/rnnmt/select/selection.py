"""The training data of a pair: the selected pool pairs, written in pool order, with a report.

`none` keeps the whole pool; `lium` means the pool already is LIUM's Axelrod selection (the bitext
Bahdanau et al. trained on); `axelrod` keeps the ids our own selection ranked and cut (axelrod.py).
Every method counts the kept pairs identical to a test pair, which should be 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rnnmt.data.corpus import check_parallel
from rnnmt.errors import UserError
from rnnmt.fileio import iter_lines, read_json
from rnnmt.select.axelrod import extract_lines

METHODS = ("none", "lium", "axelrod")


def select(
    method: str,
    src: Path,
    tgt: Path,
    out_src: Path,
    out_tgt: Path,
    *,
    ids: Path | None = None,
    test: tuple[Path, Path] | None = None,
    ranking: Path | None = None,
) -> dict:
    """Write the selected training pairs; returns {"method", "pairs_in", "pairs_out", "identical_to_test"},
    and "ranking": the select-rank report read from `ranking`, if given."""
    if method not in METHODS:
        raise UserError(f"selection method {method!r} is not available; expected one of {', '.join(METHODS)}.")
    if (method == "axelrod") != (ids is not None):
        raise UserError(f"selection method {method!r} {'needs' if method == 'axelrod' else 'takes no'} --ids (the ranked and cut pool ids).")
    pairs = check_parallel(src, tgt)
    kept_ids = _read_ids(ids, pairs) if ids is not None else None
    test_pairs = frozenset(zip(iter_lines(test[0]), iter_lines(test[1]), strict=True)) if test else frozenset()
    written, leaked = extract_lines(src, tgt, kept_ids, out_src, out_tgt, test_pairs)
    result = {"method": method, "pairs_in": pairs, "pairs_out": written, "identical_to_test": leaked if test else None}
    if ranking:
        result["ranking"] = read_json(ranking)
    return result


def _read_ids(path: Path, pairs: int) -> np.ndarray:
    """Selected pool ids from the rank step; they must be sorted, distinct and inside the pool."""
    try:
        ids = np.load(path)
    except (OSError, ValueError):
        raise UserError(f"{path} cannot be read as a numpy array of pool ids; rerun the selection's rank step.") from None
    if ids.ndim != 1 or (len(ids) and (ids.min() < 0 or ids.max() >= pairs or np.any(np.diff(ids) <= 0))):
        raise UserError(f"{path} must hold sorted, distinct pool ids below {pairs}; rerun the selection's rank step.")
    return ids
