"""Assemble parallel corpora into one cleaned pair of files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, iter_lines

# Every whitespace character except the no-break spaces: those carry meaning for French
# punctuation and are left to the tokenizer. Collapsing the rest also removes characters
# such as U+2028 that str.splitlines() would treat as line ends and so break alignment.
_COLLAPSIBLE = re.compile(r"[^\S\u00a0\u2007\u202f]+")


def count_lines(path: Path, chunk: int = 1 << 20) -> int:
    """Count lines the way iter_lines splits them (a final line without "\\n" counts)."""
    n = 0
    last = b"\n"
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                n += block.count(b"\n")
                last = block[-1:]
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected a UTF-8 text file.") from None
    return n + (last != b"\n")


def check_parallel(src: Path, tgt: Path) -> int:
    """Return the common line count of two parallel files, or raise UserError if they differ."""
    n, m = count_lines(src), count_lines(tgt)
    if n != m:
        raise UserError(
            f"{src} has {n} lines but {tgt} has {m} lines; parallel files must have the same number of lines."
        )
    return n


def clean(line: str) -> str:
    """Strip a line and collapse whitespace runs to one space, keeping no-break spaces."""
    return _COLLAPSIBLE.sub(" ", line).strip(" ")


def is_empty(text: str) -> bool:
    """True if the text has no visible character (a line of no-break spaces tokenizes to nothing)."""
    return not text or text.isspace()


def _copy_pair(src: Path, tgt: Path, out_src, out_tgt) -> dict:
    """Append the cleaned non-empty pairs of one input pair to the open outputs; return its counts."""
    pairs_in = pairs_out = 0
    for s, t in zip(iter_lines(src), iter_lines(tgt), strict=True):
        pairs_in += 1
        s, t = clean(s), clean(t)
        if is_empty(s) or is_empty(t):
            continue
        out_src.write(s + "\n")
        out_tgt.write(t + "\n")
        pairs_out += 1
    return {
        "src": str(src),
        "tgt": str(tgt),
        "pairs_in": pairs_in,
        "pairs_out": pairs_out,
        "dropped_empty": pairs_in - pairs_out,
    }


def assemble(src_paths: Sequence[Path], tgt_paths: Sequence[Path], out_src: Path, out_tgt: Path) -> dict:
    """Concatenate parallel corpora in order into one cleaned pair of files; return counts.

    Every input pair is checked before anything is written, and both outputs appear only
    when the whole job succeeds.
    """
    if not src_paths or len(src_paths) != len(tgt_paths):
        raise UserError(
            f"assemble got {len(src_paths)} source and {len(tgt_paths)} target files; "
            "expected the same non-zero number of each."
        )
    for src, tgt in zip(src_paths, tgt_paths):
        check_parallel(src, tgt)
    with (
        atomic_path(out_src) as tmp_src,
        atomic_path(out_tgt) as tmp_tgt,
        open(tmp_src, "w", encoding="utf-8") as f_src,
        open(tmp_tgt, "w", encoding="utf-8") as f_tgt,
    ):
        inputs = [_copy_pair(Path(s), Path(t), f_src, f_tgt) for s, t in zip(src_paths, tgt_paths)]
    totals = {key: sum(i[key] for i in inputs) for key in ("pairs_in", "pairs_out", "dropped_empty")}
    return {**totals, "inputs": inputs}
