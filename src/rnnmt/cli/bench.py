"""`rnnmt bench train|paper|translate|select`: throughput figures as JSON (paper: a table of every system too)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rnnmt.cli.arguments import Command, add_beam_arguments, add_device_arguments, decode_settings, positive
from rnnmt.errors import UserError
from rnnmt.train.defaults import DEVICE_CHOICES

# What each kind of benchmark needs besides the common options.
NEEDS = {
    "train": ("system", "data", "src_vocab", "tgt_vocab"),  # unless --paper-shape
    "translate": ("model", "input"),
    "select": ("src", "tgt", "indomain_src", "indomain_tgt"),
    "paper": (),
}


def args_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "what",
        choices=["train", "paper", "translate", "select"],
        help="paper: every system of --scale at its paper shape, one table (on a CPU: the kernels a GPU update launches)",
    )
    p.add_argument("--system", type=Path, help="train: resolved system config (JSON)")
    p.add_argument("--paper-shape", metavar="SYSTEM", help="train: SYSTEM of --config at the paper scale's sizes, on random batches (no data needed)")
    p.add_argument("--config", type=Path, default=Path("config.yaml"), help="train --paper-shape, paper: the workflow config (default ./config.yaml)")
    p.add_argument("--scale", default="paper", help="paper: whose systems to run (default paper); each at the paper scale's sizes")
    p.add_argument("--only", nargs="+", metavar="SYSTEM", help="paper: these systems of --scale instead of all")
    p.add_argument("--precision", choices=DEVICE_CHOICES["precision"], help="train: override the system's train.precision")
    p.add_argument("--recurrence", choices=DEVICE_CHOICES["recurrence"], help="train: override the system's train.recurrence")
    p.add_argument("--sync", choices=DEVICE_CHOICES["sync"], help="train: override the system's train.sync")
    p.add_argument("--graph", choices=DEVICE_CHOICES["graph"], help="train: override the system's train.graph")
    p.add_argument(
        "--settings-for",
        choices=["cuda"],
        help="train: resolve the auto settings as on this device (on a CPU: a GPU's update, uncaptured, whose kernels it counts)",
    )
    p.add_argument("--data", type=Path, help="train: binarized training data")
    p.add_argument("--src-vocab", type=Path, help="train: source vocabulary")
    p.add_argument("--tgt-vocab", type=Path, help="train: target vocabulary")
    p.add_argument("--model", type=Path, help="translate: a trained model")
    p.add_argument("--input", type=Path, help="translate: tokenized source sentences")
    p.add_argument("--steps", type=positive, default=20, help="updates (train, paper: per system) or batches (translate) to time")
    add_beam_arguments(p)
    p.add_argument("--batch-size", type=positive, default=32, help="translate: sentences per batch")
    p.add_argument("--src", type=Path, help="select: tokenized pool, source side")
    p.add_argument("--tgt", type=Path, help="select: tokenized pool, target side")
    p.add_argument("--indomain-src", type=Path, help="select: tokenized in-domain text, source side")
    p.add_argument("--indomain-tgt", type=Path, help="select: tokenized in-domain text, target side")
    p.add_argument("--order", type=positive, default=4, help="select: n-gram order")
    p.add_argument("--chunk-lines", type=positive, default=200_000, help="select: pairs scored at once")
    add_device_arguments(p)
    p.add_argument("--output", type=Path, help="also write the JSON here")


def check_needed(a: argparse.Namespace) -> None:
    """The options this kind of benchmark cannot run without."""
    needed = () if a.what == "train" and a.paper_shape else NEEDS[a.what]
    missing = [f"--{name.replace('_', '-')}" for name in needed if getattr(a, name) is None]
    if missing:
        raise UserError(f"rnnmt bench {a.what} needs {', '.join(missing)}.")


def measurement(a: argparse.Namespace) -> Callable[[Any], dict[str, Any]]:
    """The benchmark function of `a.what` with its options bound; it takes the device."""
    from rnnmt import bench

    overrides = {key: getattr(a, key) for key in ("precision", "recurrence", "sync", "graph") if getattr(a, key)}
    if a.what == "paper":
        return partial(bench.bench_paper, config=a.config, scale=a.scale, steps=a.steps, overrides=overrides, systems=a.only, keep=a.output)
    if a.what == "train":
        return partial(
            bench.bench_train,
            steps=a.steps,
            paper_shape=a.paper_shape,
            config=a.config,
            system_path=a.system,
            data_path=a.data,
            src_vocab=a.src_vocab,
            tgt_vocab=a.tgt_vocab,
            overrides=overrides,
            settings_for=a.settings_for,
        )
    if a.what == "translate":
        return partial(bench.bench_translate, model=a.model, source=a.input, steps=a.steps, batch_size=a.batch_size, settings=decode_settings(a))
    return partial(bench.bench_select, src=a.src, tgt=a.tgt, indomain_src=a.indomain_src, indomain_tgt=a.indomain_tgt, order=a.order, chunk_lines=a.chunk_lines)


def run_bench(a: argparse.Namespace) -> None:
    from rnnmt.bench import benchmark

    check_needed(a)
    result = benchmark(a.what, measurement(a), device=a.device, gpu_lock_dir=a.gpu_lock_dir, output=a.output)
    if a.what == "paper":
        from rnnmt.bench import paper_table

        print(paper_table(result), end="")
        return
    print(json.dumps(result, indent=2, sort_keys=True))


COMMANDS = [Command("bench", "measure training, translation or selection-scoring speed; prints JSON", args_bench, run_bench)]
