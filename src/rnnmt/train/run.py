"""`rnnmt train`: load the inputs of one system, train it, write model.pt and meta.json."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rnnmt.errors import UserError
from rnnmt.fileio import read_json, sha256_file, write_json
from rnnmt.models.artifact import save_model
from rnnmt.runtime import log, pick_device
from rnnmt.text.binarize import ParallelData
from rnnmt.text.bpe import BpeSegmenter
from rnnmt.text.vocab import Vocab
from rnnmt.train import distributed
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


def load_data(path: Path, src_vocab: Vocab, tgt_vocab: Vocab) -> ParallelData:
    """Binarized data, checked to have been made with these vocabularies."""
    data = ParallelData.load(path)
    made_with = (data.meta.get("src_vocab_size"), data.meta.get("tgt_vocab_size"))
    if made_with != (len(src_vocab), len(tgt_vocab)):
        raise UserError(
            f"{path} was binarized with vocabularies of {made_with[0]}/{made_with[1]} symbols, but the given "
            f"vocabularies have {len(src_vocab)}/{len(tgt_vocab)}; binarize again with the same vocabularies."
        )
    return data


def read_codes(path: Path | None) -> str | None:
    """BPE codes to embed in the model file, read (and checked) before training starts."""
    if path is None:
        return None
    BpeSegmenter(path)
    return path.read_text(encoding="utf-8")


def job_deadline(margin_s: float) -> float | None:
    """When to checkpoint and stop under Slurm: the job's end (SLURM_JOB_END_TIME, epoch seconds) minus `margin_s`.

    Slurm sends SIGTERM at the time limit and SIGKILL 30 s later, too little to be sure a large model's
    checkpoint is written; stopping early by the clock needs no signal to reach this process.
    """
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    return float(end) - margin_s if end.isdigit() else None


def train_system(a: argparse.Namespace) -> None:
    """Train from CLI arguments and write model.pt and meta.json; a stop signal or the job's time limit leaves a checkpoint, exit 143."""
    system = read_system(a.system)
    if a.processes > 1 and not distributed.launched():
        log(f"starting {a.processes} training processes with torchrun")
        distributed.relaunch(a.processes, a.argv)
    world = distributed.from_environment()
    device = pick_device(a.device, a.gpu_lock_dir)
    codes = {"src": read_codes(a.src_bpe), "tgt": read_codes(a.tgt_bpe)}
    src_vocab, tgt_vocab = Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab)
    # Held-out sets only report progress, so they stay out of the checkpoint fingerprint.
    data_sha = {name: sha256_file(path) for name, path in (("train", a.train), ("src_vocab", a.src_vocab), ("tgt_vocab", a.tgt_vocab))}
    trainer = Trainer(
        system,
        load_data(a.train, src_vocab, tgt_vocab),
        {name: load_data(Path(path), src_vocab, tgt_vocab) for name, path in a.valid} if world.main else {},
        src_vocab,
        tgt_vocab,
        a.out_dir,
        device,
        data_sha,
        world,
    )
    trainer.stop.deadline = job_deadline(a.stop_before_limit)
    if trainer.stop.deadline is not None:
        trainer.log(f"Slurm job ends at {os.environ['SLURM_JOB_END_TIME']}: will checkpoint and stop {a.stop_before_limit:.0f} s before")
    try:
        meta = trainer.run()
    except TrainingInterrupted as exc:
        trainer.log(str(exc))
        distributed.stop(world)
        sys.exit(143)
    distributed.stop(world)
    if world.main:
        save_model(a.out_dir / "model.pt", trainer.model, system, src_vocab, tgt_vocab, codes)
        write_json(a.out_dir / "meta.json", meta)
        log(f"wrote {a.out_dir / 'model.pt'} after {meta['updates']} updates; dev NLL/sent {meta['dev_nll']}")
