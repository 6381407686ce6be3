"""`rnnmt bench corpus`: a paper-size corpus of random ids with the papers' lengths, its vocabularies and
system.json, for timing a real `rnnmt train`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnmt.bench.paper_shape import _paper_shape, synthetic_data
from rnnmt.fileio import write_json
from rnnmt.runtime import log


def write_paper_corpus(*, paper_shape: str, config: Path, out_dir: Path, pairs: int | None, dev_pairs: int, updates: int | None) -> dict[str, Any]:
    """A paper-size corpus of random ids with the papers' lengths for timing a real `rnnmt train` of system
    `paper_shape` at its paper settings (validation, checkpoints, logging): train.pt (`pairs`, default its paper
    training set), dev.pt, both vocabularies and system.json (its budget cut to `updates` when given)."""
    shape = _paper_shape(config, paper_shape, pairs or 0)
    system, vocab = shape["system"], shape["vocab"]
    if updates is not None:
        system = {**system, "train": {**system["train"], "updates": updates, "epochs": None}}
    size = len(vocab)
    dev = synthetic_data(shape["lengths"], dev_pairs, size, size, None, system["seed"] + 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    shape["data"].save(out_dir / "train.pt")
    dev.save(out_dir / "dev.pt")
    vocab.save(out_dir / "vocab.src.json")
    vocab.save(out_dir / "vocab.tgt.json")
    write_json(out_dir / "system.json", system)
    log(f"wrote {out_dir}: {len(shape['data']):,} training pairs, {len(dev):,} dev pairs, vocabularies of {size:,}, system.json")
    return {
        "system": system["name"],
        "pairs": len(shape["data"]),
        "dev_pairs": len(dev),
        "vocab": size,
        "out_dir": str(out_dir),
        "updates": system["train"].get("updates"),
    }
