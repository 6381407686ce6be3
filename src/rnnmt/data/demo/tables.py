"""Reading the demo lexicon's package data files (`lexicon/*.yaml`) and checking their shape."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def read_table(name: str) -> dict[str, Any]:
    """The mapping in `lexicon/{name}.yaml` (plain YAML: `safe_load` builds no objects)."""
    text = (resources.files(__package__) / "lexicon" / f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"demo lexicon file {name}.yaml must hold a mapping")
    return data


def words(value: Any, where: str) -> tuple[str, ...]:
    """A YAML list of strings (so a bare `no` or `on`, which YAML reads as a boolean, is caught)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where} must be a list of strings, not {value!r}")
    return tuple(value)


def rows(value: Any, where: str, fields: int | None = None, *, min_fields: int = 1) -> list[list[str]]:
    """A YAML list of strings, each split into whitespace-separated fields: exactly `fields` of them,
    or (`fields` None) at least `min_fields`."""
    out = [entry.split() for entry in words(value, where)]
    for entry in out:
        if len(entry) < min_fields or (fields is not None and len(entry) != fields):
            expected = f"{fields}" if fields is not None else f"at least {min_fields}"
            raise ValueError(f"{where}: entry {' '.join(entry)!r} must have {expected} fields")
    return out


def tuples(value: Any, where: str, size: int) -> list[tuple[str, ...]]:
    """A YAML list of lists of `size` strings."""
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list, not {value!r}")
    out = [words(item, where) for item in value]
    for item in out:
        if len(item) != size:
            raise ValueError(f"{where}: entry {list(item)!r} must have {size} items")
    return out


def unique(items: Iterable[tuple[str, T]], where: str) -> dict[str, T]:
    """A dict of (key, value) pairs that refuses a repeated key, which would silently shadow an entry."""
    out: dict[str, T] = {}
    for key, value in items:
        if key in out:
            raise ValueError(f"{where}: {key!r} is listed twice")
        out[key] = value
    return out
