"""The per-update training record's file, `metrics.jsonl` beside meta.json: its name and how it is read.

train/metrics.py writes it (its docstring says what a row holds); the figures (evaluate/figures.py) and `rnnmt bench
precision` read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = "metrics.jsonl"


class WindowMean:
    """The training NLL per target token of each log window (the updates since the previous log point), from rows."""

    def __init__(self) -> None:
        self.summed, self.tokens = 0.0, 0

    def add(self, row: dict[str, Any]) -> float | None:
        """Take one row; at a log point's row (the one with the clock) return its window's mean."""
        self.summed += row["train_nll_per_token"] * row["target_tokens"]
        self.tokens += row["target_tokens"]
        if "wall_time_s" not in row:
            return None
        mean, self.summed, self.tokens = self.summed / self.tokens, 0.0, 0
        return mean


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics file; a last line cut short by a kill is left out."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows
