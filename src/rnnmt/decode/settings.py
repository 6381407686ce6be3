"""Decoding settings, the one place their defaults (GroundHog's beam search) are written.

`rnnmt translate --decode FILE` reads them from a JSON object (a system's resolved `decode` section);
keys left out take these defaults, and command-line flags override single values.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError
from rnnmt.fileio import read_json_file

ENSEMBLE_AVERAGES = ("logits", "log_probs")  # what an ensemble averages (decode/ensemble.py)


@dataclass(frozen=True)
class DecodeSettings:
    """How beam search runs (decode/beam.py) and how an ensemble combines its members."""

    beam: int = 10
    normalize: bool = False  # rank finished hypotheses by log-probability per symbol
    shrink: bool = True  # GroundHog: a finished hypothesis takes a slot out of the beam; Luong: constant width
    min_ratio: float = 0.5  # EOS only after this many words per source word, its EOS counted
    max_ratio: float = 3.0  # at most this many steps per source word, its EOS counted
    stack: int | None = None  # constant width: stop after this many finished hypotheses (None: beam)
    ensemble: str = "logits"

    def __post_init__(self) -> None:
        problems = [
            (self.beam < 1, f"beam must be at least 1, got {self.beam}"),
            (self.stack is not None and self.stack < 1, f"stack must be at least 1 or null, got {self.stack}"),
            (not self.min_ratio >= 0, f"min_ratio must be at least 0, got {self.min_ratio}"),
            (not self.max_ratio > 0, f"max_ratio must be above 0, got {self.max_ratio}"),
            (self.ensemble not in ENSEMBLE_AVERAGES, f"ensemble must be {' or '.join(ENSEMBLE_AVERAGES)}, got {self.ensemble!r}"),
        ]
        for bad, message in problems:
            if bad:
                raise UserError(f"decoding setting {message}.")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "decoding settings") -> DecodeSettings:
        """Settings from a mapping of some of the fields; an unknown key or a value of the wrong type is a UserError."""
        if not isinstance(values, Mapping):
            raise UserError(f"{source} must be a JSON object of decoding settings, not {type(values).__name__}.")
        hints = typing.get_type_hints(cls)
        for key, value in values.items():
            if key not in hints:
                raise UserError(f"{source} has an unknown decoding setting {key!r}; expected some of {', '.join(hints)}.")
            if not _fits(value, hints[key]):
                raise UserError(f"{source}: decoding setting {key!r} must be {_describe(hints[key])}, got {value!r}.")
        return cls(**{key: float(value) if hints[key] is float else value for key, value in values.items()})

    @classmethod
    def read(cls, path: Path | None, **overrides: Any) -> DecodeSettings:
        """The settings of a JSON file (None: the defaults), with the `overrides` that are not None."""
        settings = cls() if path is None else cls.from_dict(read_json_file(path, "decoding settings"), str(path))
        return dataclasses.replace(settings, **{key: value for key, value in overrides.items() if value is not None})


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type: an int for a float, but a bool never for a number."""
    allowed = typing.get_args(hint) or (hint,)
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed) or (float in allowed and isinstance(value, int))


def _describe(hint: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "null"}
    return " or ".join(names[t] for t in typing.get_args(hint) or (hint,))
