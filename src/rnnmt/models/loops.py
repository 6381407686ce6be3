"""How a model runs its teacher-forced loops (`train.recurrence`), given to its modules when it is built.

`Loops` itself is `plain`: each loop as its module writes it, step by step, which autograd differentiates
(`GroundhogGRU.steps`, `BahdanauDecoder.steps`, `LSTMEncoder.steps`, `LuongDecoder.steps`). It is the
reference. The fast forms are subclasses that override the loops they have a form for: `fused`
(recurrence/fused.py, a hand-written backward, the CPU's default) and `kernels` (recurrence/kernels/, each
step's pointwise work as one kernel, the GPU's). A module calls its loops object and never asks which one it
has; train/selfcheck.py compares a fast form with this one on the model's own configuration before a run
relies on it, part by part (`PARTS`): a part whose fast form differs falls back alone (`Paths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from torch import Tensor


@dataclass(frozen=True)
class Loops:
    """The reference loops (`plain`); `packed`: an LSTM encoder may run torch's kernel over packed sequences,
    whose lengths the host reads (a captured CUDA graph cannot: train/graphs.py)."""

    name: ClassVar[str] = "plain"
    packed: bool = True

    def unsupported(self, model_cfg: dict[str, Any], part: str) -> str | None:
        """What in `part` (PARTS) of a model of `model_cfg` this form cannot run, in words; None where it runs it."""
        return None

    def gru_scans(self, grus: Sequence[Any], inputs: Sequence[Tensor], mask: Tensor | None, reverse: Sequence[bool], h0: Sequence[Tensor]) -> list[Tensor]:
        """The states [B, T, H] of GRUs (models/gru.py) over the same positions, each from its projected inputs
        [B, T, 3H], in its direction, from its h0 [B, H]."""
        return [gru.steps(x, mask, r, h) for gru, x, r, h in zip(grus, inputs, reverse, h0)]

    def bahdanau_decoder(self, decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Any) -> tuple[Tensor, Tensor, Tensor]:
        """A BahdanauDecoder's teacher-forced loop from s_0 over projected inputs [B, T, 3H]: queries, contexts, weights."""
        return decoder.steps(s0, x_proj, keys, enc)

    def lstm_encoder(self, encoder: Any, x: Tensor, mask: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """An LSTMEncoder's layers over its inputs [B, T, E]: the top layer's states and every layer's final (h, c)."""
        return encoder.steps(x, mask, self.packed)

    def luong_decoder(self, decoder: Any, ctx: dict[str, Any], words: Tensor, steps: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """A LuongDecoder's teacher-forced loop over its input words [B, T]: h̃ [B, T, H] and the weights [B, T, S]."""
        return decoder.steps(ctx, words, steps, state)


PLAIN = Loops()


# The parts of a model that run by a recurrence, each checked and falling back on its own: the encoder's loops, the
# decoder's loop, and the output layer's NLL (train/nll.py).
PARTS = ("encoder", "decoder", "output")


@dataclass(frozen=True)
class Paths:
    """The recurrence each part of a model runs by (train/selfcheck.py decides them)."""

    encoder: str = "plain"
    decoder: str = "plain"
    output: str = "plain"

    @classmethod
    def every(cls, recurrence: str) -> Paths:
        """Every part by `recurrence`."""
        return cls(recurrence, recurrence, recurrence)

    def with_part(self, part: str, recurrence: str) -> Paths:
        return replace(self, **{part: recurrence})

    def by_part(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __str__(self) -> str:
        """The recurrence where every part runs by the same, else each part's ("encoder fused, decoder plain, ...")."""
        names = self.by_part()
        if len(set(names.values())) == 1:
            return self.encoder
        return ", ".join(f"{part} {name}" for part, name in names.items())
