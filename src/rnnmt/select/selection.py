"""Data selection from the general pool; the available methods keep the whole pool.

`none` keeps every pair; `lium` means the pool already is LIUM's Axelrod selection (the bitext
Bahdanau et al. trained on), so it is kept as is. Running Axelrod selection ourselves is a later stage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rnnmt.data.corpus import check_parallel
from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

# Methods whose selection is the whole pool, so the pool is copied unchanged.
COPY_METHODS = ("none", "lium")


def select(method: str, src: Path, tgt: Path, out_src: Path, out_tgt: Path) -> dict:
    """Write the selected training pairs; returns {"method", "pairs_in", "pairs_out"}."""
    if method not in COPY_METHODS:
        raise UserError(f"selection method {method!r} is not available; expected one of {', '.join(COPY_METHODS)}.")
    pairs = check_parallel(src, tgt)
    with atomic_path(out_src) as tmp_src, atomic_path(out_tgt) as tmp_tgt:
        shutil.copyfile(src, tmp_src)
        shutil.copyfile(tgt, tmp_tgt)
    return {"method": method, "pairs_in": pairs, "pairs_out": pairs}
