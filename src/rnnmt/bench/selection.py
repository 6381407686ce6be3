"""`rnnmt bench select`: Axelrod selection's scoring of a tokenized pool, end to end (read, encode, four LMs,
cross-entropy difference)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from rnnmt.fileio import read_lines


def bench_select(device: torch.device, *, src: Path, tgt: Path, indomain_src: Path, indomain_tgt: Path, order: int, chunk_lines: int) -> dict[str, Any]:
    """Time Axelrod scoring end to end (read, encode, four LMs, CED) over a tokenized pool, one core."""
    import numpy as np

    from rnnmt.select import axelrod as ax
    from rnnmt.select.ngram import Encoder, build_vocab

    start = time.perf_counter()
    indomain = {"src": read_lines(indomain_src), "tgt": read_lines(indomain_tgt)}
    index = ax.shard_index(src, tgt, 1)
    tgt_lengths = ax.token_counts(tgt)
    sample = ax.ood_sample(tgt_lengths, int(sum(len(line.split()) for line in indomain["tgt"])), seed=1)
    keep = np.zeros(len(tgt_lengths), dtype=bool)
    keep[sample] = True
    words, lms = {}, {}
    for side, path in (("src", src), ("tgt", tgt)):
        words[side] = build_vocab(indomain[side])
        lms[f"in_{side}"] = ax.estimate_lm(indomain[side], words[side], order, str(path))
        ood = [line for line, k in zip(read_lines(path), keep) if k]
        lms[f"out_{side}"] = ax.estimate_lm(ood, words[side], order, "pool sample")
    prepare = time.perf_counter() - start
    parts = ax.score_shard(src, tgt, index, 0, lms, {side: Encoder(w) for side, w in words.items()}, chunk_lines)
    seconds = float(parts["seconds"])
    pairs = len(parts["n_src"])
    return {
        "pairs": pairs,
        "mean_tokens": {side: float(parts[f"n_{side}"].mean()) for side in ("src", "tgt")},
        "order": order,
        "chunk_lines": chunk_lines,
        "lm_ngrams": {key: int(sum(len(k) for k in lm.keys)) for key, lm in lms.items()},
        "prepare_seconds": prepare,
        "seconds": seconds,
        "pairs_per_s": pairs / seconds,
        "tokens_per_s": int(parts["n_src"].sum() + parts["n_tgt"].sum()) / seconds,
    }
