"""Assemble parallel corpora: raw per-corpus files from WMT members, then one cleaned pair of files."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
import sys
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from rnnmt.data.sgm import read_sgm
from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, iter_lines, split_lines

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


def mismatch_error(src: Path, tgt: Path, n_src: int, n_tgt: int) -> UserError:
    """The error for parallel files with different line counts."""
    return UserError(f"{src} has {n_src} lines but {tgt} has {n_tgt} lines; parallel files must have the same number of lines.")


def check_parallel(src: Path, tgt: Path) -> int:
    """Return the common line count of two parallel files, or raise UserError if they differ."""
    n, m = count_lines(src), count_lines(tgt)
    if n != m:
        raise mismatch_error(src, tgt, n, m)
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
    return {"src": str(src), "tgt": str(tgt), "pairs_in": pairs_in, "pairs_out": pairs_out, "dropped_empty": pairs_in - pairs_out}


def assemble(src_paths: Sequence[Path], tgt_paths: Sequence[Path], out_src: Path, out_tgt: Path) -> dict:
    """Concatenate parallel corpora in order into one cleaned pair of files; return counts.

    Every input pair is checked before anything is written, and both outputs appear only
    when the whole job succeeds.
    """
    if not src_paths or len(src_paths) != len(tgt_paths):
        raise UserError(f"assemble got {len(src_paths)} source and {len(tgt_paths)} target files; expected the same non-zero number of each.")
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


# --- raw per-corpus files -----------------------------------------------------------------------

FORMATS = ("text", "sgm")
# Raised by gzip and zlib when a ".gz" input is truncated or corrupt.
_GZIP_CORRUPT = (EOFError, zlib.error, gzip.BadGzipFile)
# Read buffer for the large training files: fewer system calls and decompression rounds per line.
_BUFFER = 1 << 20


def _open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing it while streaming when its name ends in ".gz"."""
    if path.name.endswith(".gz"):
        # GzipFile's own line iteration runs in Python; a BufferedReader on top splits lines in C.
        return io.BufferedReader(gzip.open(path, "rb"), buffer_size=_BUFFER)
    return open(path, "rb", buffering=_BUFFER)


def _text_lines(path: Path) -> Iterator[bytes]:
    """The lines of a text file as bytes, split as fileio.split_lines splits them (a leading BOM dropped)."""
    try:
        with _open_binary(path) as f:
            yield from split_lines(f)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected a text file, optionally gzip-compressed (.gz).") from None
    except _GZIP_CORRUPT:
        raise UserError(f"{path} is truncated or not a valid gzip file; expected a complete .gz file.") from None


def _raw_lines(path: Path, fmt: str) -> Iterator[bytes]:
    """The lines of one input as bytes: text lines, or the segments of an SGM file re-encoded."""
    if fmt == "sgm":
        # SGM sets are small; read_sgm decodes them strictly, and encoding again lets both formats
        # share the decoding, counting and writing below.
        return (segment.encode("utf-8") for segment in read_sgm(path))
    return _text_lines(path)


def _uneven_error(src: Path, tgt: Path, number: int, src_ended: bool, rest: Iterator) -> UserError:
    """The line-count error for a pair whose shorter file ended before line `number`; counts the rest."""
    longer = number + sum(1 for _ in rest)
    return mismatch_error(src, tgt, *((number - 1, longer) if src_ended else (longer, number - 1)))


def _decode(raw: bytes, path: Path, number: int, heldout: bool) -> tuple[str, bool]:
    """Decode one line strictly; return (text, repaired), repairing training text and refusing held-out text."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        if heldout:
            raise UserError(
                f"{path} line {number} is not valid UTF-8; dev and test sets must be valid UTF-8 as released, since repairing them would change what is scored."
            ) from None
        return raw.decode("utf-8", errors="replace"), True


def _copy_raw_pair(src: Path, tgt: Path, out_src: BinaryIO, out_tgt: BinaryIO, counts: dict, *, fmt: str, heldout: bool) -> None:
    """Append the non-empty pairs of one parallel file pair to the open outputs, adding to `counts`."""
    # zip_longest, not zip: zip swallows a line of the longer file, and the error must count it.
    pairs = itertools.zip_longest(_raw_lines(src, fmt), _raw_lines(tgt, fmt))
    number = 0
    for number, (s_raw, t_raw) in enumerate(pairs, start=1):
        if s_raw is None or t_raw is None:
            raise _uneven_error(src, tgt, number, s_raw is None, pairs)
        s, s_repaired = _decode(s_raw, src, number, heldout)
        t, t_repaired = _decode(t_raw, tgt, number, heldout)
        counts["repaired_src"] += s_repaired
        counts["repaired_tgt"] += t_repaired
        # clean() rewrites only whitespace, so is_empty(clean(x)) == is_empty(x); skipping the
        # regex saves a pass over every line of the large corpora.
        if is_empty(s) or is_empty(t):
            counts["dropped_empty"] += 1
            continue
        out_src.write(s.encode("utf-8") if s_repaired else s_raw)
        out_src.write(b"\n")
        out_tgt.write(t.encode("utf-8") if t_repaired else t_raw)
        out_tgt.write(b"\n")
        counts["pairs"] += 1
        counts["words_src"] += len(s.split())
        counts["words_tgt"] += len(t.split())
    counts["lines"] += number


def _check_raw_arguments(src_files: Sequence[Path], tgt_files: Sequence[Path], name: str, fmt: str) -> None:
    """Refuse an unknown format or unequal file lists before anything is read."""
    if fmt not in FORMATS:
        raise UserError(f"{name}: unknown corpus format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    if not src_files or len(src_files) != len(tgt_files):
        raise UserError(
            f"{name}: got {len(src_files)} source and {len(tgt_files)} target files; "
            "expected the same non-zero number of each, file i of each side forming a parallel pair."
        )


def assemble_raw(
    src_files: Sequence[Path],
    tgt_files: Sequence[Path],
    out_src: Path,
    out_tgt: Path,
    *,
    name: str,
    heldout: bool,
    fmt: str = "text",
    expected_lines: int | None = None,
) -> dict:
    """Concatenate the parallel file pairs of one corpus into two raw UTF-8 files; return a report.

    Lines keep their content; invalid UTF-8 is repaired (U+FFFD) in training corpora and refused in
    held-out ones, and pairs with an empty side are dropped. Both outputs appear only on success.
    """
    _check_raw_arguments(src_files, tgt_files, name, fmt)
    src_files, tgt_files = [Path(p) for p in src_files], [Path(p) for p in tgt_files]
    counts = dict.fromkeys(("lines", "pairs", "dropped_empty", "repaired_src", "repaired_tgt", "words_src", "words_tgt"), 0)
    with (
        atomic_path(out_src) as tmp_src,
        atomic_path(out_tgt) as tmp_tgt,
        open(tmp_src, "wb", buffering=_BUFFER) as f_src,
        open(tmp_tgt, "wb", buffering=_BUFFER) as f_tgt,
    ):
        for src, tgt in zip(src_files, tgt_files):
            _copy_raw_pair(src, tgt, f_src, f_tgt, counts, fmt=fmt, heldout=heldout)
        if not counts["pairs"]:
            files = ", ".join(str(p) for p in (*src_files, *tgt_files))
            raise UserError(
                f"{name}: {files} hold no sentence pair ({counts['lines']} lines, {counts['dropped_empty']} with an empty side); "
                "expected at least one line with text on both sides."
            )
    matches = None if expected_lines is None else counts["lines"] == expected_lines
    if matches is False:
        print(
            f"warning: {name}: {counts['lines']} lines, expected {expected_lines} (the sources table's `lines`); "
            "the archive may be another release than the one the papers used.",
            file=sys.stderr,
        )
    return {
        "corpus": name,
        "heldout": heldout,
        "format": fmt,
        "files": {"src": [str(p) for p in src_files], "tgt": [str(p) for p in tgt_files]},
        "lines": counts["lines"],
        "pairs": counts["pairs"],
        "dropped_empty": counts["dropped_empty"],
        "repaired_utf8": {"src": counts["repaired_src"], "tgt": counts["repaired_tgt"]},
        "words": {"src": counts["words_src"], "tgt": counts["words_tgt"]},
        "expected_lines": expected_lines,
        "matches_expected": matches,
    }


# Keys of a raw-corpus report that merge_reports and `rnnmt corpus-report` read.
_REPORT_KEYS = ("corpus", "lines", "pairs", "dropped_empty", "repaired_utf8", "expected_lines", "matches_expected")


def read_raw_report(path: Path) -> dict:
    """Read a report written by `rnnmt raw-corpus`, or raise UserError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; expected a report written by rnnmt raw-corpus.") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{path} is not valid JSON; expected a report written by rnnmt raw-corpus.") from None
    if not isinstance(report, dict) or any(key not in report for key in _REPORT_KEYS):
        raise UserError(f"{path} lacks the keys {', '.join(_REPORT_KEYS)}; expected a report written by rnnmt raw-corpus.")
    return report


def merge_reports(reports: list[dict], pair: str) -> dict:
    """The summary of one language pair over its per-corpus raw reports."""
    corpora: dict[str, dict] = {}
    for report in reports:
        if report["corpus"] in corpora:
            raise UserError(f"{pair}: two reports are for corpus {report['corpus']!r}; expected one report per corpus.")
        corpora[report["corpus"]] = report
    return {
        "pair": pair,
        "corpora": corpora,
        "total_pairs": sum(r["pairs"] for r in reports),
        "mismatches": [r["corpus"] for r in reports if r["matches_expected"] is False],
        "repaired_utf8": sum(r["repaired_utf8"]["src"] + r["repaired_utf8"]["tgt"] for r in reports),
        "dropped_empty": sum(r["dropped_empty"] for r in reports),
    }


def merge_report_files(paths: Sequence[Path], pair: str) -> dict:
    """`rnnmt corpus-report`: the summary of one language pair from the reports `rnnmt raw-corpus` wrote."""
    return merge_reports([read_raw_report(path) for path in paths], pair)


def mismatch_warnings(summary: dict) -> list[str]:
    """One warning per corpus whose line count is not the published one."""
    pair, corpora = summary["pair"], summary["corpora"]
    return [
        f"warning: {pair}: {name} has {corpora[name]['lines']} lines, expected {corpora[name]['expected_lines']} (the sources table's `lines`)."
        for name in summary["mismatches"]
    ]
