"""Ensembles (Luong et al. 2015, Tables 1 and 2): several models decode together.

How their predictions combine is a switch (`decode.ensemble` in config.yaml, `--ensemble-average`):
`logits` averages the members' softmax inputs and applies the softmax to the mean, as nmt.matlab does
(`lstmDecoder.m`, `nextBeamStep`: `softmax_input = Σ W_soft·softmax_h / numModels`, then `softmaxDecode`);
`log_probs` averages the members' log-probabilities (a geometric mean of their distributions, not
renormalised). The attention weights passed on for UNK replacement are averaged over the members that
attend (an RNNencdec or a Luong model without attention has no alignment to contribute), as
`getAlignWeights.m` sums them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rnnmt.errors import UserError
from rnnmt.models.artifact import LoopsOf, TrainedModel, load_model
from rnnmt.models.build import Seq2Seq
from rnnmt.models.source import SourceFormat

AVERAGES: dict[str, Callable[[Tensor], Tensor]] = {
    "logits": lambda logits: torch.log_softmax(logits.mean(dim=0), dim=-1),
    "log_probs": lambda logits: torch.log_softmax(logits, dim=-1).mean(dim=0),
}


class Ensemble:
    """The beam-search step interface (see decode/beam.py) over several models; states are per member."""

    def __init__(self, members: Sequence[Seq2Seq], average: str) -> None:
        if average not in AVERAGES:
            raise UserError(f"An ensemble averages {' or '.join(AVERAGES)}, not {average!r}.")
        self.members = list(members)
        self.combine = AVERAGES[average]

    def begin(self, src: Tensor, src_mask: Tensor) -> tuple[list[Any], list[Any]]:
        starts = [m.begin(src, src_mask) for m in self.members]
        return [c for c, _ in starts], [s for _, s in starts]

    def predict(self, ctx: list[Any], state: list[Any], step: int) -> tuple[Tensor, Tensor, list[Any]]:
        outs = [m.predict_logits(c, s, step) for m, c, s in zip(self.members, ctx, state)]
        logp = self.combine(torch.stack([o[0].float() for o in outs]))
        aligned = [o[1] for m, o in zip(self.members, outs) if m.attends] or [outs[0][1]]
        alpha = torch.stack(aligned).mean(dim=0)
        return logp, alpha, [o[2] for o in outs]

    def advance(self, ctx: list[Any], state: list[Any], words: Tensor) -> list[Any]:
        return [m.advance(c, s, words) for m, c, s in zip(self.members, ctx, state)]


def _check_compatible(paths: Sequence[Path], models: Sequence[TrainedModel]) -> None:
    """Members must read and write the same symbols in the same layout."""
    first = models[0]
    for path, tm in zip(paths[1:], models[1:]):
        same = (
            tm.src_vocab == first.src_vocab
            and tm.tgt_vocab == first.tgt_vocab
            and tm.system["pair"] == first.system["pair"]
            and SourceFormat.of(tm.system["model"]) == SourceFormat.of(first.system["model"])
            and (tm.src_bpe is None) == (first.src_bpe is None)
        )
        if not same:
            raise UserError(f"{path} cannot join an ensemble with {paths[0]}: members need the same pair, vocabularies, BPE and source layout (EOS, reversal).")


def load_ensemble(paths: Sequence[Path], device: torch.device, average: str, loops: LoopsOf) -> TrainedModel:
    """One model as it is, or several as an ensemble (averaging `average`) that presents itself as one trained model;
    each runs its loops as `loops` of its model config says."""
    models = [load_model(path, device, loops) for path in paths]
    if len(models) == 1:
        return models[0]
    _check_compatible(paths, models)
    first = models[0]
    system = {**first.system, "name": "+".join(tm.system["name"] for tm in models), "members": [tm.system for tm in models]}
    return TrainedModel(Ensemble([tm.model for tm in models], average), system, first.src_vocab, first.tgt_vocab, first.src_bpe, first.tgt_bpe)
