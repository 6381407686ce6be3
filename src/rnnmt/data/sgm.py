"""WMT "fake SGML" dev/test sets to one segment per line, with the text sacrebleu extracts."""

from __future__ import annotations

import re
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import iter_lines, write_lines

# Copied from sacrebleu 2.6 so that our references match its wmt14/wmt14-full text byte for byte:
# FakeSGMLDataset._convert_format (sacrebleu/dataset/fake_sgml.py) keeps lines starting "<seg ",
# applies re.sub(r"<seg.*?>(.*)</seg>.*?", "\\1", line), then Dataset._clean
# (sacrebleu/dataset/base.py) does re.sub(r"\s+", " ", s.strip()). No entity unescaping.
_SEG_LINE_START = "<seg "
_SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")
_WHITESPACE = re.compile(r"\s+")


def segment_text(line: str) -> str:
    """The cleaned text of one "<seg ...>...</seg>" line."""
    return _WHITESPACE.sub(" ", _SEG.sub(r"\1", line).strip())


def read_sgm(path: Path) -> list[str]:
    """The text of every segment of a WMT SGM file, in file order."""
    # iter_lines splits only at "\n", as sacrebleu's smart_open(newline="\n") does.
    segments = [segment_text(line) for line in iter_lines(path) if line.startswith(_SEG_LINE_START)]
    if not segments:
        raise UserError(f"{path} has no '<seg ...>' lines; expected a WMT SGM dev/test file.")
    return segments


def sgm_to_text(path: Path, out: Path) -> int:
    """Write the segments of an SGM file to `out` atomically, one per line; return the line count."""
    return write_lines(out, read_sgm(path))
