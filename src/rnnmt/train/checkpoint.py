"""Training checkpoints: written atomically beside (not as) the declared outputs, matched by fingerprint."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

# Keys that only say how long or how verbosely to train: changing them must not discard progress.
_BUDGET_KEYS = ("updates", "epochs", "patience", "valid_every", "log_every", "checkpoint_every")


def fingerprint(system: dict[str, Any], data_sha256: dict[str, str]) -> str:
    """Hash of everything that determines the training trajectory: model, optimisation, seed and data."""
    train = {k: v for k, v in system["train"].items() if k not in _BUDGET_KEYS}
    core = {"model": system["model"], "train": train, "seed": system["seed"], "data": data_sha256}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:16]


def save(path: Path, state: dict[str, Any]) -> None:
    """Write a checkpoint so that a reader sees either the old file or the complete new one."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_matching(path: Path, expected: str, log) -> dict[str, Any] | None:
    """The checkpoint at `path` if its fingerprint matches; a stale one is logged and removed."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for a damaged file
        raise UserError(f"checkpoint {path} cannot be read ({exc.__class__.__name__}); delete it to start afresh.") from exc
    if not isinstance(state, dict) or state.get("fingerprint") != expected:
        found = state.get("fingerprint") if isinstance(state, dict) else None
        log(f"discarding stale checkpoint {path}: fingerprint {found} does not match this system/data ({expected})")
        os.unlink(path)
        return None
    return state
