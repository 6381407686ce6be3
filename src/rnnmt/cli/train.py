"""`rnnmt train`: one system, from binarized data to model.pt and meta.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from rnnmt.cli.arguments import Command, add_device_arguments, add_vocab_arguments, key_value


def args_train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", type=Path, required=True, help="resolved system config (JSON)")
    p.add_argument("--train", type=Path, required=True, help="binarized training data")
    p.add_argument("--valid", type=key_value, action="append", default=[], metavar="NAME=FILE")
    add_vocab_arguments(p)
    p.add_argument("--out-dir", type=Path, required=True)
    add_device_arguments(p)
    p.add_argument(
        "--processes", type=int, default=1, metavar="N", help="data-parallel training processes, one per GPU (torchrun); the batch is split between them"
    )
    p.add_argument(
        "--stop-before-limit",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="under Slurm: checkpoint and exit 143 this long before the job's time limit (default 900, before the profile's USR1 at 600)",
    )


def run_train(a: argparse.Namespace) -> None:
    from rnnmt.train.run import train_system

    train_system(
        a.system,
        a.train,
        valid={name: Path(path) for name, path in a.valid},
        src_vocab=a.src_vocab,
        tgt_vocab=a.tgt_vocab,
        src_bpe=a.src_bpe,
        tgt_bpe=a.tgt_bpe,
        out_dir=a.out_dir,
        device=a.device,
        gpu_lock_dir=a.gpu_lock_dir,
        processes=a.processes,
        stop_before_limit=a.stop_before_limit,
        argv=a.argv,
    )


COMMANDS = [Command("train", "train one system; resumes from OUT_DIR/ckpt/last.pt when it matches", args_train, run_train)]
