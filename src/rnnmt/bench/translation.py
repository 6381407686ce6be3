"""`rnnmt bench translate`: beam search over tokenized sentences, timed after a warm-up batch."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch

from rnnmt.decode.settings import DecodeSettings
from rnnmt.fileio import read_lines
from rnnmt.runtime import synchronize


def bench_translate(device: torch.device, *, model: Path, source: Path, steps: int, batch_size: int, settings: DecodeSettings) -> dict[str, Any]:
    """Time beam search over the first steps·batch_size sentences of `source`."""
    from rnnmt.decode.translate import translate_lines
    from rnnmt.models.artifact import load_model
    from rnnmt.train.selfcheck import checked_loops

    tm = load_model(model, device, checked_loops)
    lines = read_lines(source)[: steps * batch_size]
    translate_lines(tm, lines[:batch_size], settings, batch_size=batch_size, device=device)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    out = translate_lines(tm, lines, settings, batch_size=batch_size, device=device)
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "system": tm.system["name"],
        "sentences": len(lines),
        "beam": dataclasses.asdict(settings),
        "batch_size": batch_size,
        "seconds": seconds,
        "sentences_per_s": len(lines) / seconds,
        "target_tokens_per_s": sum(len(o.split()) + 1 for o in out) / seconds,
    }
