"""`rnnmt bench paper --concurrent N`: N training processes on one device at once, each one's rate over the same
window and their sum, with or without MPS."""

from __future__ import annotations

import os
import queue
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from rnnmt.bench.measure import WARMUP, _timed
from rnnmt.bench.paper_shape import _paper_shape
from rnnmt.errors import UserError
from rnnmt.runtime import synchronize


def _shared_gpu_worker(device: str, config: Path, name: str, steps: int, seconds: float, overrides: dict[str, str], barrier: Any, results: Any) -> None:
    """One process of `bench_concurrent`: system `name` at paper shape warms up and captures its window's shapes,
    waits for the others, then trains for `seconds` with them; puts its target tokens and seconds."""
    from rnnmt.runtime import set_threads
    from rnnmt.train.loop import Trainer

    set_threads(1)
    run_on = torch.device(device)
    shape = _paper_shape(config, name)
    system = {**shape["system"], "train": {**shape["system"]["train"], **overrides}}
    window = range(WARMUP, WARMUP + steps)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, shape["data"], {}, shape["vocab"], shape["vocab"], Path(tmp), run_on, {})
        for u in range(WARMUP):
            trainer.step(u)
        _timed(trainer, window, run_on)  # every shape of the window is met (and captured) before the clock starts
        barrier.wait()
        synchronize(run_on)
        start, tokens, updates = time.perf_counter(), 0, 0
        while time.perf_counter() - start < seconds:
            tokens += trainer.step(window[updates % steps]).tokens
            updates += 1
        synchronize(run_on)
        results.put(
            {
                "system": name,
                "updates": updates,
                "target_tokens": tokens,
                "seconds": time.perf_counter() - start,
                "settings": {key: c.value for key, c in trainer.setup.choices.items()},
            }
        )


def bench_concurrent(
    device: torch.device, *, config: Path, systems: list[str], processes: int, steps: int, seconds: float, overrides: dict[str, str]
) -> dict[str, Any]:
    """`processes` training processes on one device at once (process i trains systems[i mod len(systems)] at paper
    shape), each timed over the same `seconds` after all have warmed up: each one's target tokens/s and their sum.
    On a GPU without MPS their kernels take turns; with MPS (started outside) they run side by side."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    barrier, results = context.Barrier(processes), context.Queue()
    names = [systems[i % len(systems)] for i in range(processes)]
    workers = [
        context.Process(target=_shared_gpu_worker, args=(str(device), config, name, steps, seconds, overrides, barrier, results), daemon=True) for name in names
    ]
    for worker in workers:
        worker.start()
    rows = []
    while len(rows) < processes:
        try:
            rows.append(results.get(timeout=30))
        except queue.Empty:  # a worker that died never puts its row
            if dead := [w for w in workers if w.exitcode not in (None, 0)]:
                barrier.abort()
                raise UserError(
                    f"bench paper --concurrent {processes}: {len(dead)} of the training processes failed (exit {dead[0].exitcode}); see the messages above."
                ) from None
    for worker in workers:
        worker.join()
    for row in rows:
        row["target_tokens_per_s"] = row["target_tokens"] / row["seconds"]
    return {
        "processes": processes,
        "seconds": seconds,
        "systems": sorted(rows, key=lambda r: r["system"]),
        "aggregate_target_tokens_per_s": sum(r["target_tokens_per_s"] for r in rows),
        "mps": _mps_active(),
    }


def _mps_active() -> bool:
    """Whether an NVIDIA MPS control daemon serves this process's pipe directory (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps)."""
    return Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control").exists()
