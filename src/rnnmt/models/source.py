"""How a model reads its source sentences: padded id matrices with a final EOS (GroundHog) or not (Luong), reversed
or not (`SourceFormat`). Training (train/batching.py), beam search (decode/) and the alignment figures (evaluate/)
all lay sentences out here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rnnmt.models.build import model_settings
from rnnmt.text.vocab import Vocab


def round_up(n: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is at least n."""
    return n + -n % multiple


def pad(seqs: list[Tensor], eos: bool = True, multiple: int = 1, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """Stack id sequences into [B, width] with EOS after each (when `eos`) and PAD after that; the width is
    rounded up to a multiple of `multiple` (static shapes: train/graphs.py)."""
    return pad_flat(torch.cat(seqs), torch.tensor([len(s) for s in seqs], dtype=torch.long), eos, multiple, reverse)


def pad_flat(ids: Tensor, lengths: Tensor, eos: bool = True, multiple: int = 1, reverse: bool = False, starts: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """`pad` of the sequences in the flat `ids` with `lengths` (each reversed where `reverse`), laid end to end or
    beginning at `starts` (a corpus's offsets: no copy of the sentences first); a few tensor operations, not one
    per sentence: on a GPU the host makes every update's batch."""
    width = round_up(max(int(lengths.max()) + eos, 1), multiple)
    cols = torch.arange(width)
    rows = lengths.unsqueeze(1)
    within = rows - 1 - cols if reverse else cols
    if starts is None:
        starts = torch.cumsum(lengths, 0) - lengths
    positions = (starts.unsqueeze(1) + within).clamp_(0, max(len(ids) - 1, 0))
    # A gather and a select: indexing with the [B, width] mask of real positions costs several times more.
    words = ids[positions] if len(ids) else positions
    out = torch.where(cols < rows, words, Vocab.PAD)
    if eos:
        out = torch.where(cols == rows, Vocab.EOS, out)
    return out, out != Vocab.PAD


@dataclass(frozen=True)
class SourceFormat:
    """How a model reads its source: with a final EOS (GroundHog) or not (Luong), reversed or not."""

    eos: bool = True
    reverse: bool = False

    @classmethod
    def of(cls, model_cfg: dict[str, Any]) -> SourceFormat:
        settings = model_settings(model_cfg)
        return cls(settings["source_eos"], settings["reverse_source"])

    def batch(self, seqs: list[Tensor], multiple: int = 1) -> tuple[Tensor, Tensor]:
        """Padded source ids [B, S] and mask, in the model's layout (S a multiple of `multiple`)."""
        return pad(seqs, self.eos, multiple, self.reverse)

    def batch_flat(self, ids: Tensor, lengths: Tensor, multiple: int = 1, starts: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """`batch` of the sentences in `ids` with `lengths`, laid end to end or beginning at `starts`."""
        return pad_flat(ids, lengths, self.eos, multiple, self.reverse, starts)

    def words(self, mask: Tensor) -> Tensor:
        """The number of source words [B] in a batch laid out this way (its EOS not counted)."""
        return mask.sum(dim=1) - int(self.eos)

    def position(self, j: int, length: int) -> int | None:
        """The index of the source word at encoder position j of a sentence of `length` words (None: EOS)."""
        if j >= length:
            return None
        return length - 1 - j if self.reverse else j
