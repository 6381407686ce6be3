"""`rnnmt bench train|translate`: throughput figures as JSON, for comparing commits (never asserted)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from rnnmt.errors import UserError
from rnnmt.fileio import read_lines, write_json
from rnnmt.runtime import pick_device

WARMUP = 2


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _need(a: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(a, n) is None]
    if missing:
        raise UserError(f"rnnmt bench {a.what} needs {', '.join(missing)}.")


def bench_train(a: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Time `steps` training updates after a warm-up, on the system's own batches."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.loop import Trainer
    from rnnmt.train.run import read_system

    _need(a, "system", "data", "src_vocab", "tgt_vocab")
    system = read_system(a.system)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, ParallelData.load(a.data), {}, Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab), Path(tmp), device, {})
        for u in range(WARMUP):
            trainer.step(u)
        _sync(device)
        start, tokens, sents = time.perf_counter(), 0, 0
        for u in range(WARMUP, WARMUP + a.steps):
            _, n, t = trainer.step(u)
            sents, tokens = sents + n, tokens + t
        _sync(device)
    seconds = time.perf_counter() - start
    return {
        "system": system["name"],
        "updates": a.steps,
        "batch_size": system["train"]["batch_size"],
        "seconds": seconds,
        "updates_per_s": a.steps / seconds,
        "target_tokens_per_s": tokens / seconds,
        "sentences_per_s": sents / seconds,
    }


def bench_translate(a: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Time beam search over the first steps·batch_size input sentences."""
    from rnnmt.decode.translate import translate_lines
    from rnnmt.models.artifact import load_model

    _need(a, "model", "input")
    tm = load_model(a.model, device)
    lines = read_lines(a.input)[: a.steps * a.batch_size]
    translate_lines(tm, lines[: a.batch_size], beam=a.beam, batch_size=a.batch_size, device=device)  # warm-up
    _sync(device)
    start = time.perf_counter()
    out = translate_lines(tm, lines, beam=a.beam, batch_size=a.batch_size, device=device)
    _sync(device)
    seconds = time.perf_counter() - start
    return {
        "system": tm.system["name"],
        "sentences": len(lines),
        "beam": a.beam,
        "batch_size": a.batch_size,
        "seconds": seconds,
        "sentences_per_s": len(lines) / seconds,
        "target_tokens_per_s": sum(len(o.split()) + 1 for o in out) / seconds,
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_command(a: argparse.Namespace) -> None:
    device = pick_device(a.device)
    result = (bench_train if a.what == "train" else bench_translate)(a, device)
    result.update(
        {"what": a.what, "device": str(device), "threads": torch.get_num_threads(), "peak_memory_mb": _peak_memory_mb(device), "torch": torch.__version__}
    )
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text, file=sys.stdout)
    if a.output:
        write_json(a.output, result)
