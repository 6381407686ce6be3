"""`rnnmt bench train|translate|select`: throughput figures as JSON, for comparing commits (never asserted)."""

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
    from rnnmt.decode.translate import settings_from_args, translate_lines
    from rnnmt.models.artifact import load_model

    _need(a, "model", "input")
    tm = load_model(a.model, device)
    lines = read_lines(a.input)[: a.steps * a.batch_size]
    settings = settings_from_args(a)
    translate_lines(tm, lines[: a.batch_size], settings, batch_size=a.batch_size, device=device)  # warm-up
    _sync(device)
    start = time.perf_counter()
    out = translate_lines(tm, lines, settings, batch_size=a.batch_size, device=device)
    _sync(device)
    seconds = time.perf_counter() - start
    return {
        "system": tm.system["name"],
        "sentences": len(lines),
        "beam": vars(settings),
        "batch_size": a.batch_size,
        "seconds": seconds,
        "sentences_per_s": len(lines) / seconds,
        "target_tokens_per_s": sum(len(o.split()) + 1 for o in out) / seconds,
    }


def bench_select(a: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Time Axelrod scoring end to end (read, encode, four LMs, CED) over a tokenized pool, one core."""
    import numpy as np

    from rnnmt.select import axelrod as ax
    from rnnmt.select.ngram import Encoder, build_vocab

    _need(a, "src", "tgt", "indomain_src", "indomain_tgt")
    start = time.perf_counter()
    indomain = {"src": read_lines(a.indomain_src), "tgt": read_lines(a.indomain_tgt)}
    index = ax.shard_index(a.src, a.tgt, 1)
    tgt_lengths = ax.token_counts(a.tgt)
    sample = ax.ood_sample(tgt_lengths, int(sum(len(line.split()) for line in indomain["tgt"])), seed=1)
    keep = np.zeros(len(tgt_lengths), dtype=bool)
    keep[sample] = True
    words, lms = {}, {}
    for side, path in (("src", a.src), ("tgt", a.tgt)):
        words[side] = build_vocab(indomain[side])
        lms[f"in_{side}"] = ax.estimate_lm(indomain[side], words[side], a.order, str(path))
        ood = [line for line, k in zip(read_lines(path), keep) if k]
        lms[f"out_{side}"] = ax.estimate_lm(ood, words[side], a.order, "pool sample")
    prepare = time.perf_counter() - start
    parts = ax.score_shard(a.src, a.tgt, index, 0, lms, {side: Encoder(w) for side, w in words.items()}, a.chunk_lines)
    seconds = float(parts["seconds"])
    pairs = len(parts["n_src"])
    return {
        "pairs": pairs,
        "mean_tokens": {side: float(parts[f"n_{side}"].mean()) for side in ("src", "tgt")},
        "order": a.order,
        "chunk_lines": a.chunk_lines,
        "lm_ngrams": {key: int(sum(len(k) for k in lm.keys)) for key, lm in lms.items()},
        "prepare_seconds": prepare,
        "seconds": seconds,
        "pairs_per_s": pairs / seconds,
        "tokens_per_s": int(parts["n_src"].sum() + parts["n_tgt"].sum()) / seconds,
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_command(a: argparse.Namespace) -> None:
    device = pick_device(a.device, a.gpu_lock_dir)
    result = {"train": bench_train, "translate": bench_translate, "select": bench_select}[a.what](a, device)
    result.update(
        {"what": a.what, "device": str(device), "threads": torch.get_num_threads(), "peak_memory_mb": _peak_memory_mb(device), "torch": torch.__version__}
    )
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text, file=sys.stdout)
    if a.output:
        write_json(a.output, result)
