"""`rnnmt train`: load the inputs of one system, train it, write model.pt and meta.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import read_json, sha256_file, write_json
from rnnmt.models.artifact import save_model
from rnnmt.runtime import log, pick_device
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train.loop import Trainer, TrainingInterrupted


def read_system(path: Path) -> dict:
    """A resolved system config as written by the workflow."""
    try:
        system = read_json(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"system config {path} cannot be read as JSON ({exc.__class__.__name__}).") from exc
    for key in ("name", "seed", "model", "train"):
        if key not in system:
            raise UserError(f"system config {path} has no '{key}'; expected a file written by the workflow.")
    return system


def train_system(a: argparse.Namespace) -> None:
    """Train from CLI arguments; a SIGTERM leaves a checkpoint and exits with status 143."""
    system = read_system(a.system)
    device = pick_device(a.device)
    inputs = {"train": a.train, "src_vocab": a.src_vocab, "tgt_vocab": a.tgt_vocab}
    inputs.update({f"valid:{name}": Path(path) for name, path in a.valid})
    data_sha = {name: sha256_file(path) for name, path in inputs.items() if Path(path).exists()}
    src_vocab, tgt_vocab = Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab)
    trainer = Trainer(
        system,
        ParallelData.load(a.train),
        {name: ParallelData.load(Path(path)) for name, path in a.valid},
        src_vocab,
        tgt_vocab,
        a.out_dir,
        device,
        data_sha,
    )
    try:
        meta = trainer.run()
    except TrainingInterrupted as exc:
        log(str(exc))
        sys.exit(143)
    codes = {side: Path(p).read_text(encoding="utf-8") if p else None for side, p in (("src", a.src_bpe), ("tgt", a.tgt_bpe))}
    save_model(a.out_dir / "model.pt", trainer.model, system, src_vocab, tgt_vocab, codes)
    write_json(a.out_dir / "meta.json", meta)
    log(f"wrote {a.out_dir / 'model.pt'} after {meta['updates']} updates; dev NLL/sent {meta['dev_nll']}")
