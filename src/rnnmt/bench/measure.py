"""What the `rnnmt bench` modes share: the device a mode measures on and the fields its JSON carries (`benchmark`),
and the timing of training updates after a warm-up (`train`, `paper --concurrent`)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rnnmt.fileio import write_json
from rnnmt.runtime import cpu_info, pick_device, synchronize

WARMUP = 2


def device_name(device: torch.device) -> str:
    """The card's or the CPU's name, for a figure's label."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_info()[0] or "an unknown CPU"


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _timed(trainer: Any, updates: range, device: torch.device) -> dict[str, float]:
    """Run `updates` (their batches made inside the timing, as in training) between two device syncs."""
    synchronize(device)
    start, tokens, sentences = time.perf_counter(), 0, 0
    for u in updates:
        step = trainer.step(u)
        sentences, tokens = sentences + step.sentences, tokens + step.tokens
    synchronize(device)
    return {"seconds": time.perf_counter() - start, "tokens": tokens, "sentences": sentences}


def benchmark(what: str, measure: Callable[[torch.device], dict[str, Any]], *, device: str, gpu_lock_dir: Path | None, output: Path | None) -> dict[str, Any]:
    """`rnnmt bench WHAT`: `measure` on the picked device, with what was measured and where; written to `output` too."""
    run_on = pick_device(device, gpu_lock_dir)
    result = measure(run_on)
    result.update(
        {"what": what, "device": str(run_on), "device_name": device_name(run_on), "threads": torch.get_num_threads(), "peak_memory_mb": _peak_memory_mb(run_on)}
    )
    result["torch"] = torch.__version__
    if output:
        write_json(output, result)
    return result
