"""Training checkpoints: written atomically beside (not as) the declared outputs, matched by fingerprint,
loaded without running code and checked against the digest written inside (tensorfile.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from rnnmt import tensorfile

# 2: one self-contained file (the best weights of early stopping inside), with a digest.
FORMAT = "rnnmt-checkpoint/2"
# Keys that only say how long, how verbosely or by which code path (same equations) to train: changing
# them must not discard progress.
_BUDGET_KEYS = ("updates", "epochs", "patience", "valid_every", "log_every", "checkpoint_every", "recurrence", "sync", "graph", "pad_to", "deterministic")


def fingerprint(system: dict[str, Any], data_sha256: dict[str, str]) -> str:
    """Hash of everything that determines the training trajectory: model, optimisation, seed and data."""
    train = {k: v for k, v in system["train"].items() if k not in _BUDGET_KEYS}
    core = {"model": system["model"], "train": train, "seed": system["seed"], "data": data_sha256}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:16]


def save(path: Path, state: dict[str, Any]) -> None:
    """Write a checkpoint so that a reader sees either the old file or the complete new one."""
    tensorfile.save(path, FORMAT, state)


def load_matching(path: Path, expected: str, log) -> dict[str, Any] | None:
    """The checkpoint at `path` if its fingerprint matches; a stale one (another system, data or format) is logged and removed.

    A damaged or unsafe file is an error: deleting the checkpoint directory, as the message says,
    restarts the system from update 0, which gives the same result as an uninterrupted run.
    """
    if not path.exists():
        return None
    advice = f"delete {path.parent} to train this system again from the start."
    try:
        state = tensorfile.load(path, FORMAT, "training checkpoint", advice)
    except tensorfile.FormatMismatch as exc:
        log(f"discarding checkpoint {path}: format {exc.found!r}, not {FORMAT!r} (written by another rnnmt version)")
        os.unlink(path)
        return None
    if state.get("fingerprint") != expected:
        log(f"discarding stale checkpoint {path}: fingerprint {state.get('fingerprint')} does not match this system/data ({expected})")
        os.unlink(path)
        return None
    return state
