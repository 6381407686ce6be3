"""Byte-pair encoding with subword-nmt: an option beyond the paper's word shortlist."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

from subword_nmt.apply_bpe import BPE
from subword_nmt.learn_bpe import learn_bpe as _subword_learn_bpe

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, iter_lines
from rnnmt.text.vocab import Vocab, build_shortlist

SEPARATOR = "@@"


def learn_bpe(in_paths: Path | Sequence[Path], codes_path: Path, merges: int) -> None:
    """Learn `merges` BPE merge operations from whitespace-tokenized text into codes_path, atomically; several files are
    read as one text (joint BPE: both languages' training text, as `cat train.L1 train.L2 | learn_bpe.py`)."""
    if merges < 1:
        raise UserError(f"the number of BPE merges must be at least 1, got {merges}.")
    paths = [in_paths] if isinstance(in_paths, (str, Path)) else list(in_paths)
    if missing := [str(p) for p in paths if not Path(p).is_file()]:
        raise UserError(f"{', '.join(missing)} does not exist; expected tokenized text to learn BPE codes from.")
    with atomic_path(codes_path) as tmp, open(tmp, "w", encoding="utf-8") as outfile:
        # subword-nmt reads any iterable of lines (it strips each): the files one after the other.
        _subword_learn_bpe(itertools.chain.from_iterable(iter_lines(p) for p in paths), outfile, merges)


class BpeSegmenter:
    """Splits tokens into subword units; every unit but a word's last ends with "@@"."""

    def __init__(self, codes_path: Path) -> None:
        expected = "expected a BPE codes file written by rnnmt's learn_bpe (subword-nmt format)"
        try:
            with open(codes_path, encoding="utf-8") as codes:
                self._bpe = BPE(codes, separator=SEPARATOR)
        except FileNotFoundError:
            raise UserError(f"BPE codes file {codes_path} does not exist; {expected}.") from None
        # subword-nmt calls sys.exit on a malformed codes file (including one with no merges).
        except (SystemExit, ValueError, UnicodeDecodeError):
            raise UserError(f"BPE codes file {codes_path} is malformed; {expected}.") from None

    def segment(self, tokens: list[str]) -> list[str]:
        """Split each token into subword units."""
        return self._bpe.segment_tokens(tokens)

    @staticmethod
    def merge(units: list[str]) -> list[str]:
        """Join subword units back into tokens (the inverse of segment)."""
        tokens: list[str] = []
        pending = ""
        for unit in units:
            if unit.endswith(SEPARATOR):
                pending += unit[: -len(SEPARATOR)]
            else:
                tokens.append(pending + unit)
                pending = ""
        # A dangling prefix (a decoder may stop mid-word) is still shown, not lost.
        if pending:
            tokens.append(pending)
        return tokens


def build_bpe_vocab(segmented_lines: Iterable[str], size: int) -> Vocab:
    """A shortlist over subword units; with enough merges it leaves few or no UNKs."""
    return build_shortlist(segmented_lines, size, kind="bpe")


def units(line: str, bpe: BpeSegmenter | None) -> list[str]:
    """A model's symbols for whitespace-tokenized text: the tokens, or their BPE units."""
    tokens = line.split()
    return bpe.segment(tokens) if bpe is not None else tokens


def text_line(symbols: list[str], bpe: bool) -> str:
    """A model's symbols as whitespace-tokenized text, subword units joined where they are BPE units (the inverse of `units`)."""
    return " ".join(BpeSegmenter.merge(symbols) if bpe else symbols)


def vocab_file(text: Path, size: int, output: Path, bpe_codes: Path | None = None) -> Vocab:
    """The vocabulary of a tokenized training text, written to `output`: its `size` most frequent words, or
    units after segmenting with `bpe_codes`."""
    if bpe_codes is None:
        vocab = build_shortlist(iter_lines(text), size)
    else:
        seg = BpeSegmenter(bpe_codes)
        vocab = build_bpe_vocab((" ".join(seg.segment(line.split())) for line in iter_lines(text)), size)
    vocab.save(output)
    return vocab
