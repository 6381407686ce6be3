"""`rnnmt train`: load the inputs of one system, train it, write model.pt and meta.json."""

from __future__ import annotations

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
from rnnmt.train.stop import StopFlag, job_deadline


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


def train_system(
    system_path: Path,
    train: Path,
    *,
    valid: dict[str, Path],
    src_vocab: Path,
    tgt_vocab: Path,
    src_bpe: Path | None,
    tgt_bpe: Path | None,
    out_dir: Path,
    device: str,
    gpu_lock_dir: Path | None,
    processes: int,
    stop_before_limit: float,
    argv: list[str],
) -> None:
    """Train one system and write model.pt and meta.json; a stop signal or the job's time limit leaves a
    checkpoint, exit 143. With `processes` > 1 this process starts `rnnmt <argv>` again under torchrun."""
    stop = StopFlag()
    stop.install()  # first: a warning while squeue answers below must not end the process
    stop.deadline, why = job_deadline(stop_before_limit)
    system = read_system(system_path)
    if processes > 1 and not distributed.launched():
        log(f"starting {processes} training processes with torchrun")
        distributed.relaunch(processes, argv)
    world = distributed.from_environment()
    run_on = pick_device(device, gpu_lock_dir)
    codes = {"src": read_codes(src_bpe), "tgt": read_codes(tgt_bpe)}
    source_vocab, target_vocab = Vocab.load(src_vocab), Vocab.load(tgt_vocab)
    # Held-out sets only report progress, so they stay out of the checkpoint fingerprint.
    data_sha = {name: sha256_file(path) for name, path in (("train", train), ("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab))}
    trainer = Trainer(
        system,
        load_data(train, source_vocab, target_vocab),
        {name: load_data(path, source_vocab, target_vocab) for name, path in valid.items()} if world.main else {},
        source_vocab,
        target_vocab,
        out_dir,
        run_on,
        data_sha,
        world,
        stop,
        tgt_bpe=codes["tgt"] is not None,
    )
    if why:
        trainer.log(why)
    try:
        meta = trainer.run()
    except TrainingInterrupted as exc:
        trainer.log(str(exc))
        distributed.leave(world, 143)
    if world.main:
        save_model(out_dir / "model.pt", trainer.model, system, source_vocab, target_vocab, codes)
        write_json(out_dir / "meta.json", meta)
        log(f"wrote {out_dir / 'model.pt'} after {meta['updates']} updates; dev NLL/sent {meta['dev_nll']}")
    distributed.leave(world, 0)
