"""Minibatches as GroundHog and Luong make them (paper-spec §1.8–1.9, §4.5).

The training pairs longer than the system's max length (either side, EOS not counted) are dropped, not
truncated. The rest are shuffled once with the system's seed and walked cyclically; every k batches,
the next k·B pairs are sorted by length and cut into k batches. GroundHog sorts by max(source, target)
and keeps the batches in ascending order (k = 20); Luong sorts by target length and shuffles the
batch order (k = 100). The batch of update u is a pure function of u, so a resumed run sees exactly
the batches an uninterrupted one would.

How a source sentence is laid out depends on the model: GroundHog appends EOS, Luong does not and may
reverse the words (models/source.py). Targets always end in EOS.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rnnmt.errors import UserError
from rnnmt.models.source import SourceFormat, pad_flat
from rnnmt.text.binarize import ParallelData


@dataclass
class Batch:
    """Padded id matrices (targets end in EOS, sources as the model reads them); masks are True on real tokens."""

    src: Tensor  # [B, S]
    src_mask: Tensor
    tgt: Tensor  # [B, T]
    tgt_mask: Tensor
    indices: Tensor  # positions in the ParallelData
    # Flat positions of the real target tokens in tgt, found on the host where the batch is made: on a GPU,
    # finding them there (nonzero) would make the host wait for the device in every update.
    token_rows: Tensor | None = None

    def __post_init__(self) -> None:
        if self.token_rows is None:
            self.token_rows = self.tgt_mask.flatten().nonzero().squeeze(1)

    def to(self, device: torch.device) -> Batch:
        """The batch on `device`; to a GPU from pinned memory, without waiting for the copy."""
        fields = (self.src, self.src_mask, self.tgt, self.tgt_mask, self.indices, self.token_rows)
        if device.type != "cuda":
            return Batch(*(t.to(device) for t in fields))
        return Batch(*(t.pin_memory().to(device, non_blocking=True) for t in fields))

    @property
    def target_tokens(self) -> int:
        return len(self.token_rows)


def collate(data: ParallelData, indices: Tensor, source: SourceFormat = SourceFormat(), multiple: int = 1) -> Batch:
    """The batch of the given pair indices, its widths multiples of `multiple`, read straight from the corpus's ids."""
    src_starts, tgt_starts = data.src_offsets[indices], data.tgt_offsets[indices]
    src, src_mask = source.batch_flat(data.src_ids, data.src_offsets[indices + 1] - src_starts, multiple, src_starts)
    tgt, tgt_mask = pad_flat(data.tgt_ids, data.tgt_offsets[indices + 1] - tgt_starts, multiple=multiple, starts=tgt_starts)
    return Batch(src, src_mask, tgt, tgt_mask, indices)


def length_filter(data: ParallelData, max_len: int | None) -> Tensor:
    """Indices of the pairs whose both sides have at most max_len tokens (all pairs when None)."""
    keep = torch.ones(len(data), dtype=torch.bool)
    if max_len is not None:
        keep &= (data.src_lengths <= max_len) & (data.tgt_lengths <= max_len)
    keep &= (data.src_lengths > 0) & (data.tgt_lengths > 0)
    return keep.nonzero().squeeze(1)


class BatchStream:
    """The training batch of every update, deterministic in (data, batch settings, max length, seed)."""

    def __init__(
        self,
        data: ParallelData,
        batch_size: int,
        sort_k: int,
        max_len: int | None,
        seed: int,
        *,
        sort_by: str = "max",
        shuffle_batches: bool = False,
        source: SourceFormat = SourceFormat(),
        pad_to: int = 1,
    ) -> None:
        kept = length_filter(data, max_len)
        if len(kept) == 0:
            raise UserError(f"no training pair has both sides within max_len={max_len} tokens; expected at least one.")
        if sort_by not in SORT_KEYS:
            raise UserError(f"train.sort_by is {sort_by!r}; expected one of {', '.join(SORT_KEYS)}.")
        g = torch.Generator().manual_seed(seed)
        self.order = kept[torch.randperm(len(kept), generator=g)]
        self.data = data
        self.batch_size = batch_size
        self.sort_k = sort_k
        self.seed = seed
        self.sort_by = sort_by
        self.shuffle_batches = shuffle_batches
        self.source = source
        self.pad_to = pad_to
        self._group: tuple[int, list[Tensor]] | None = None

    @property
    def pairs(self) -> int:
        return len(self.order)

    def epochs(self, updates: int) -> float:
        """Passes over the length-filtered training data after this many updates."""
        return updates * self.batch_size / self.pairs

    def updates_for(self, epochs: float) -> int:
        """The number of updates that makes `epochs` passes over the training data."""
        return updates_for_epochs(epochs, self.pairs, self.batch_size)

    def _group_batches(self, group: int) -> list[Tensor]:
        size = self.batch_size * self.sort_k
        positions = torch.arange(group * size, (group + 1) * size) % self.pairs
        idx = self.order[positions]
        key = SORT_KEYS[self.sort_by](self.data.src_lengths[idx], self.data.tgt_lengths[idx])
        idx = idx[torch.sort(key, stable=True).indices]
        batches = list(idx.split(self.batch_size))
        if self.shuffle_batches:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + group)
            batches = [batches[i] for i in torch.randperm(len(batches), generator=g)]
        return batches

    def batch(self, update: int) -> Batch:
        """The batch for 0-based update number `update`."""
        group, within = divmod(update, self.sort_k)
        if self._group is None or self._group[0] != group:
            self._group = (group, self._group_batches(group))
        return collate(self.data, self._group[1][within], self.source, self.pad_to)


def updates_for_epochs(epochs: float, pairs: int, batch_size: int) -> int:
    """The number of updates of `batch_size` pairs that makes `epochs` passes over `pairs` pairs."""
    return max(1, round(epochs * pairs / batch_size))


SORT_KEYS = {"max": torch.maximum, "target": lambda src, tgt: tgt}


def eval_batches(data: ParallelData, batch_size: int, source: SourceFormat = SourceFormat()) -> list[Batch]:
    """All pairs (no length filter), sorted by length so padding is small; for held-out cost."""
    idx = torch.arange(len(data))
    key = torch.maximum(data.src_lengths, data.tgt_lengths)
    idx = idx[torch.sort(key, stable=True).indices]
    return [collate(data, chunk, source) for chunk in idx.split(batch_size)]
