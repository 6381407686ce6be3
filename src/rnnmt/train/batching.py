"""Minibatches as GroundHog makes them (paper-spec §1.8–1.9).

The training pairs longer than the system's max length (either side, EOS not counted) are dropped, not
truncated. The rest are shuffled once with the system's seed and walked cyclically; every k batches,
the next k·B pairs are sorted by max(source, target) length and cut into k batches in ascending order.
The batch of update u is therefore a pure function of u, so a resumed run sees exactly the batches an
uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rnnmt.errors import UserError
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab


@dataclass
class Batch:
    """Padded id matrices with EOS appended; masks are True on real tokens."""

    src: Tensor  # [B, S]
    src_mask: Tensor
    tgt: Tensor  # [B, T]
    tgt_mask: Tensor
    indices: Tensor  # positions in the ParallelData

    def to(self, device: torch.device) -> "Batch":
        return Batch(*(t.to(device) for t in (self.src, self.src_mask, self.tgt, self.tgt_mask, self.indices)))

    @property
    def target_tokens(self) -> int:
        return int(self.tgt_mask.sum())


def pad_with_eos(seqs: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Stack id sequences into [B, max_len + 1] with EOS after each and PAD after that."""
    width = max(len(s) for s in seqs) + 1
    ids = torch.full((len(seqs), width), Vocab.PAD, dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = s
        ids[row, len(s)] = Vocab.EOS
    return ids, ids != Vocab.PAD


def collate(data: ParallelData, indices: Tensor) -> Batch:
    """The batch of the given pair indices."""
    src, src_mask = pad_with_eos([data.src(int(i)) for i in indices])
    tgt, tgt_mask = pad_with_eos([data.tgt(int(i)) for i in indices])
    return Batch(src, src_mask, tgt, tgt_mask, indices)


def length_filter(data: ParallelData, max_len: int | None) -> Tensor:
    """Indices of the pairs whose both sides have at most max_len tokens (all pairs when None)."""
    keep = torch.ones(len(data), dtype=torch.bool)
    if max_len is not None:
        keep &= (data.src_lengths <= max_len) & (data.tgt_lengths <= max_len)
    keep &= (data.src_lengths > 0) & (data.tgt_lengths > 0)
    return keep.nonzero().squeeze(1)


class BatchStream:
    """The training batch of every update, deterministic in (data, batch size, k, max length, seed)."""

    def __init__(self, data: ParallelData, batch_size: int, sort_k: int, max_len: int | None, seed: int) -> None:
        kept = length_filter(data, max_len)
        if len(kept) == 0:
            raise UserError(f"no training pair has both sides within max_len={max_len} tokens; expected at least one.")
        g = torch.Generator().manual_seed(seed)
        self.order = kept[torch.randperm(len(kept), generator=g)]
        self.data = data
        self.batch_size = batch_size
        self.sort_k = sort_k
        self._group: tuple[int, list[Tensor]] | None = None

    @property
    def pairs(self) -> int:
        return len(self.order)

    def epochs(self, updates: int) -> float:
        """Passes over the length-filtered training data after this many updates."""
        return updates * self.batch_size / self.pairs

    def _group_batches(self, group: int) -> list[Tensor]:
        size = self.batch_size * self.sort_k
        positions = torch.arange(group * size, (group + 1) * size) % self.pairs
        idx = self.order[positions]
        key = torch.maximum(self.data.src_lengths[idx], self.data.tgt_lengths[idx])
        idx = idx[torch.sort(key, stable=True).indices]
        return list(idx.split(self.batch_size))

    def batch(self, update: int) -> Batch:
        """The batch for 0-based update number `update`."""
        group, within = divmod(update, self.sort_k)
        if self._group is None or self._group[0] != group:
            self._group = (group, self._group_batches(group))
        return collate(self.data, self._group[1][within])


def eval_batches(data: ParallelData, batch_size: int) -> list[Batch]:
    """All pairs (no length filter), sorted by length so padding is small; for held-out cost."""
    idx = torch.arange(len(data))
    key = torch.maximum(data.src_lengths, data.tgt_lengths)
    idx = idx[torch.sort(key, stable=True).indices]
    return [collate(data, chunk) for chunk in idx.split(batch_size)]
