"""Encode tokenized parallel text into flat id tensors with offsets, and load them back."""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rnnmt import tensorfile
from rnnmt.data.corpus import check_parallel
from rnnmt.errors import UserError
from rnnmt.fileio import iter_lines, sha256_file
from rnnmt.text.bpe import BpeSegmenter
from rnnmt.text.vocab import Vocab

_FORMAT = "rnnmt-parallel"
_TENSORS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")


def _lengths(offsets: torch.Tensor) -> torch.Tensor:
    return offsets[1:] - offsets[:-1]


def _gather(ids: torch.Tensor, offsets: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the ids and offsets of the sentences idx, in that order, without a Python loop; it reads only their
    entries (a training batch of a 12M-pair corpus: not the corpus's every length)."""
    starts = offsets[idx]
    lengths = offsets[idx + 1] - starts
    new_offsets = torch.zeros(len(idx) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=new_offsets[1:])
    shift = torch.repeat_interleave(starts - new_offsets[:-1], lengths)
    positions = torch.arange(int(new_offsets[-1]), dtype=torch.int64) + shift
    return ids[positions], new_offsets


class ParallelData:
    """Parallel sentences as flat int64 id tensors; sentence i is ids[offsets[i]:offsets[i+1]]."""

    def __init__(self, src_ids: torch.Tensor, src_offsets: torch.Tensor, tgt_ids: torch.Tensor, tgt_offsets: torch.Tensor, meta: dict[str, Any]) -> None:
        self.src_ids, self.src_offsets = src_ids, src_offsets
        self.tgt_ids, self.tgt_offsets = tgt_ids, tgt_offsets
        self.meta = meta
        self.src_lengths = _lengths(src_offsets)
        self.tgt_lengths = _lengths(tgt_offsets)

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def _span(self, ids: torch.Tensor, offsets: torch.Tensor, i: int) -> torch.Tensor:
        if not 0 <= i < len(self):
            raise IndexError(f"sentence index {i} out of range for {len(self)} sentences")
        return ids[int(offsets[i]) : int(offsets[i + 1])]

    def src(self, i: int) -> torch.Tensor:
        """Source ids of sentence i (a view, without EOS)."""
        return self._span(self.src_ids, self.src_offsets, i)

    def tgt(self, i: int) -> torch.Tensor:
        """Target ids of sentence i (a view, without EOS)."""
        return self._span(self.tgt_ids, self.tgt_offsets, i)

    def subset(self, indices: Sequence[int] | torch.Tensor) -> ParallelData:
        """A new ParallelData holding the given sentences in the given order."""
        idx = torch.as_tensor(indices, dtype=torch.int64)
        src_ids, src_offsets = _gather(self.src_ids, self.src_offsets, idx)
        tgt_ids, tgt_offsets = _gather(self.tgt_ids, self.tgt_offsets, idx)
        return ParallelData(src_ids, src_offsets, tgt_ids, tgt_offsets, dict(self.meta))

    def save(self, path: Path) -> None:
        """Write the data with torch.save, atomically (no digest: its sha256 is part of the training fingerprint)."""
        tensors = {"src_ids": self.src_ids, "src_offsets": self.src_offsets, "tgt_ids": self.tgt_ids, "tgt_offsets": self.tgt_offsets}
        tensorfile.write(path, {"format": _FORMAT, **self.meta, **tensors})

    @classmethod
    def load(cls, path: Path) -> ParallelData:
        """Read a file written by save() (or binarize())."""
        expected = "expected a binarized parallel corpus written by rnnmt (rnnmt binarize)"
        try:
            # mmap: pages load on demand and are shared by processes that read the same corpus.
            data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except FileNotFoundError:
            raise UserError(f"binarized data file {path} does not exist; {expected}.") from None
        # Foreign bytes make torch.load raise almost anything (KeyError, UnpicklingError, RuntimeError...).
        except Exception:
            raise UserError(f"{path} cannot be read as a torch file; {expected}.") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT or not _valid_tensors(data):
            raise UserError(f"{path} is not a binarized parallel corpus; {expected}.")
        meta = {k: v for k, v in data.items() if k not in _TENSORS and k != "format"}
        return cls(*(data[k] for k in _TENSORS), meta)


def _valid_tensors(data: dict) -> bool:
    """True if the id and offset tensors are int64, 1-D and consistent with each other."""
    tensors = [data.get(k) for k in _TENSORS]
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.dim() == 1 for t in tensors):
        return False
    src_ids, src_offsets, tgt_ids, tgt_offsets = tensors
    return len(src_offsets) == len(tgt_offsets) >= 1 and int(src_offsets[-1]) == len(src_ids) and int(tgt_offsets[-1]) == len(tgt_ids)


_CHUNK = 1 << 20  # ids buffered before they go to disk: bounded memory whatever the corpus size


def _encode_side(path: Path, vocab: Vocab, segmenter: BpeSegmenter | None, ids_file: Path, offsets_file: Path) -> tuple[int, int]:
    """Encode one side of the corpus into raw int64 files of ids and offsets; return the number of ids and UNKs."""
    ids, offsets, total, unk = array("q"), array("q", [0]), 0, 0
    with open(ids_file, "wb") as ids_out, open(offsets_file, "wb") as offsets_out:
        for line in iter_lines(path):
            tokens = line.split()
            encoded = vocab.encode(segmenter.segment(tokens) if segmenter else tokens)
            unk += encoded.count(Vocab.UNK)
            ids.extend(encoded)
            total += len(encoded)
            offsets.append(total)
            if len(ids) >= _CHUNK or len(offsets) >= _CHUNK:
                ids.tofile(ids_out)
                offsets.tofile(offsets_out)
                ids, offsets = array("q"), array("q")
        ids.tofile(ids_out)
        offsets.tofile(offsets_out)
    return total, unk


def binarize(
    src_tok: Path,
    tgt_tok: Path,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    out_path: Path,
    *,
    src_segmenter: BpeSegmenter | None = None,
    tgt_segmenter: BpeSegmenter | None = None,
) -> dict:
    """Encode whitespace-tokenized parallel files into one torch file (no EOS stored); return stats.

    Line i of the inputs becomes sentence i, empty lines included, so test sets stay aligned
    with their references. The ids go to disk as they are encoded (scratch files beside `out_path`), so the
    memory this takes does not grow with the corpus.
    """
    n = check_parallel(src_tok, tgt_tok)
    meta = {"src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), "src_sha256": sha256_file(src_tok), "tgt_sha256": sha256_file(tgt_tok)}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=f".{out_path.name}.") as scratch:
        raw = {key: Path(scratch, key) for key in _TENSORS}
        src_tokens, src_unk = _encode_side(src_tok, src_vocab, src_segmenter, raw["src_ids"], raw["src_offsets"])
        tgt_tokens, tgt_unk = _encode_side(tgt_tok, tgt_vocab, tgt_segmenter, raw["tgt_ids"], raw["tgt_offsets"])
        tensorfile.write_int64_files(out_path, {"format": _FORMAT, **meta}, raw)
    return {"pairs": n, "src_tokens": src_tokens, "tgt_tokens": tgt_tokens, "src_unk": src_unk, "tgt_unk": tgt_unk, **meta}
