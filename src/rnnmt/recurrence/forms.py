"""The recurrences by name (`train.recurrence`): each a Loops class of models/loops.py."""

from __future__ import annotations

from rnnmt.errors import UserError
from rnnmt.models.loops import Loops, Paths
from rnnmt.recurrence import RECURRENCES
from rnnmt.recurrence.fused import FusedLoops
from rnnmt.recurrence.kernels.loops import KernelLoops

FORMS: dict[str, type[Loops]] = {cls.name: cls for cls in (FusedLoops, Loops, KernelLoops)}
assert tuple(FORMS) == RECURRENCES, "recurrence/__init__.py names the forms this module maps"


def loops(recurrence: str, packed: bool = True) -> Loops:
    """The loops of `train.recurrence` (`packed`: an LSTM encoder may run torch's kernel over packed sequences)."""
    if recurrence not in FORMS:
        raise UserError(f"train.recurrence is {recurrence!r}; expected one of {', '.join(RECURRENCES)}.")
    return FORMS[recurrence](packed=packed)


def part_loops(paths: Paths, packed: bool = True) -> dict[str, Loops]:
    """The loops of a model's encoder and decoder by `paths` (build_model takes them by part)."""
    return {"encoder": loops(paths.encoder, packed), "decoder": loops(paths.decoder, packed)}
