"""`rnnmt bench batches`: the host's time to make a paper system's training batches from a corpus of the papers'
lengths, and the memory the corpus and the batching hold."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from rnnmt.bench.paper_shape import _paper_shape, paper_system


def _resident_mb() -> dict[str, float]:
    """This process's resident memory now, in MiB (Linux, /proc/self/status): its own (`anonymous`) and the pages of
    files it maps (`file`: a memory-mapped corpus, shared with other readers and given back under pressure)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"anonymous": int(fields["RssAnon"].split()[0]) / 1024, "file": int(fields["RssFile"].split()[0]) / 1024}


def bench_batches(device: torch.device, *, paper_shape: str, config: Path, pairs: int | None, data_path: Path | None, steps: int) -> dict[str, Any]:
    """The host's time to make each of `steps` training batches of system `paper_shape` at its paper settings (sorted
    groups, length filter, padding to `pad_to` as a GPU's captured updates take them) from a corpus with the papers'
    lengths: the binarized file `data_path` (read as training reads it, memory-mapped; `bench corpus` writes one), else
    `pairs` random pairs made here (default: its paper training set, `bench.paper_pairs`); and the memory the corpus
    and the batching hold. Nothing runs on `device`: a data loader's work happens on the host."""
    from rnnmt.models.source import SourceFormat
    from rnnmt.text.binarize import ParallelData
    from rnnmt.train.batching import BatchStream
    from rnnmt.train.defaults import TRAIN_DEFAULTS

    start = _resident_mb()
    if data_path is not None:
        data, system = ParallelData.load(data_path), paper_system(config, paper_shape)[1]
    else:
        shape = _paper_shape(config, paper_shape, pairs or 0)
        data, system = shape["data"], shape["system"]
    with_corpus = _resident_mb()
    train = {**TRAIN_DEFAULTS, **system["train"]}
    stream = BatchStream(
        data,
        train["batch_size"],
        train["sort_k_batches"],
        train["max_len"],
        system["seed"],
        sort_by=train["sort_by"],
        shuffle_batches=train["shuffle_batches"],
        source=SourceFormat.of(system["model"]),
        pad_to=train["pad_to"],
    )
    seconds = []
    for update in range(steps):
        began = time.perf_counter()
        stream.batch(update)
        seconds.append(time.perf_counter() - began)
    end = _resident_mb()
    ms = sorted(1000 * s for s in seconds)
    corpus_bytes = sum(t.numel() * t.element_size() for t in (data.src_ids, data.src_offsets, data.tgt_ids, data.tgt_offsets))
    return {
        "system": system["name"],
        "pairs": len(data),
        "batches": steps,
        "batch_size": train["batch_size"],
        "sort_k_batches": train["sort_k_batches"],
        "batch_ms_median": ms[len(ms) // 2],
        "batch_ms_mean": sum(ms) / len(ms),
        "batch_ms_max": ms[-1],
        "corpus": str(data_path) if data_path else "random, made here",
        "corpus_mb": corpus_bytes / 2**20,
        # What loading (or making) the corpus, then the batching, added to the process's resident memory.
        "resident_corpus_mb": {kind: with_corpus[kind] - start[kind] for kind in start},
        "resident_batching_mb": {kind: end[kind] - with_corpus[kind] for kind in start},
    }
