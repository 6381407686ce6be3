"""`rnnmt bench train|paper|batches|corpus|translate|select`: throughput figures as JSON (paper: a table of every
system too; corpus: the files to time a real run with)."""

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
    "batches": ("paper_shape",),
    "precision": ("data", "valid", "src_vocab", "tgt_vocab", "out_dir"),  # and --paper-shape or --system
    "corpus": ("paper_shape", "out_dir"),
}


def args_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "what",
        choices=list(NEEDS),
        help="paper: every system of --scale at its paper shape, one table (on a CPU: the kernels a GPU update launches); "
        "batches: the host's time to make a paper batch from a paper-size corpus; corpus: write such a corpus, its "
        "vocabularies and system.json, to time `rnnmt train` on; precision: train a system in float32 and in bfloat16 "
        "and compare their dev NLL at every validation",
    )
    p.add_argument("--system", type=Path, help="train: resolved system config (JSON)")
    p.add_argument(
        "--paper-shape", metavar="SYSTEM", help="train, batches, corpus: SYSTEM of --config at the paper scale's sizes, on random batches (no data needed)"
    )
    p.add_argument("--pairs", type=positive, help="batches, corpus: training pairs (default: the system's paper training set, config bench.paper_pairs)")
    p.add_argument("--dev-pairs", type=positive, default=6003, help="corpus: dev pairs (default 6003, newstest2012+2013)")
    p.add_argument("--updates", type=positive, help="corpus: the budget system.json gives training (default: the paper's)")
    p.add_argument("--out-dir", type=Path, help="corpus: where train.pt, dev.pt, the vocabularies and system.json go; precision: the runs, table and figure")
    p.add_argument("--valid", type=Path, help="precision: binarized dev data")
    p.add_argument("--valid-every", type=positive, default=100, help="precision: updates between validations (default 100)")
    p.add_argument("--settle", type=int, default=300, help="precision: the updates after which the gap is judged (default 300)")
    p.add_argument("--config", type=Path, default=Path("config.yaml"), help="train --paper-shape, paper: the workflow config (default ./config.yaml)")
    p.add_argument("--scale", default="paper", help="paper: whose systems to run (default paper); each at the paper scale's sizes")
    p.add_argument("--only", nargs="+", metavar="SYSTEM", help="paper: these systems of --scale instead of all")
    p.add_argument(
        "--concurrent",
        type=positive,
        metavar="N",
        help="paper: N training processes on the one device at once (process i trains the i-th of --only, cycling), "
        "timed together: each one's rate and the aggregate",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="paper --concurrent: how long the processes train together (default 60)")
    p.add_argument("--precision", choices=DEVICE_CHOICES["precision"], help="train: override the system's train.precision")
    p.add_argument("--recurrence", choices=DEVICE_CHOICES["recurrence"], help="train: override the system's train.recurrence")
    p.add_argument("--sync", choices=DEVICE_CHOICES["sync"], help="train: override the system's train.sync")
    p.add_argument("--deterministic", choices=DEVICE_CHOICES["deterministic"], help="train, paper: override the system's train.deterministic")
    p.add_argument("--graph", choices=DEVICE_CHOICES["graph"], help="train: override the system's train.graph")
    p.add_argument(
        "--settings-for",
        choices=["cuda"],
        help="train: resolve the auto settings as on this device (on a CPU: a GPU's update, uncaptured, whose kernels it counts)",
    )
    p.add_argument("--data", type=Path, help="train, precision, batches: binarized training data")
    p.add_argument("--src-vocab", type=Path, help="train: source vocabulary")
    p.add_argument("--tgt-vocab", type=Path, help="train: target vocabulary")
    p.add_argument("--model", type=Path, help="translate: a trained model")
    p.add_argument("--input", type=Path, help="translate: tokenized source sentences")
    p.add_argument("--steps", type=positive, default=20, help="updates (train, paper: per system) or batches (batches, translate) to time")
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
    if a.what == "precision" and not (a.paper_shape or a.system):
        missing.append("--paper-shape or --system")
    if missing:
        raise UserError(f"rnnmt bench {a.what} needs {', '.join(missing)}.")


def measurement(a: argparse.Namespace) -> Callable[[Any], dict[str, Any]]:
    """The benchmark function of `a.what` with its options bound; it takes the device."""
    from rnnmt import bench

    overrides = {key: getattr(a, key) for key in ("precision", "recurrence", "sync", "graph", "deterministic") if getattr(a, key)}
    if a.what == "paper" and a.concurrent:
        if not a.only:
            raise UserError("rnnmt bench paper --concurrent needs --only SYSTEM [SYSTEM ...]: the systems the processes train.")
        return partial(bench.bench_concurrent, config=a.config, systems=a.only, processes=a.concurrent, steps=a.steps, seconds=a.seconds, overrides=overrides)
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
    if a.what == "precision":
        return partial(
            bench.bench_precision,
            paper_shape=a.paper_shape,
            config=a.config,
            system_path=a.system,
            data_path=a.data,
            valid_path=a.valid,
            src_vocab=a.src_vocab,
            tgt_vocab=a.tgt_vocab,
            steps=a.steps,
            valid_every=a.valid_every,
            settle=a.settle,
            out_dir=a.out_dir,
            overrides=overrides,
        )
    if a.what == "batches":
        return partial(bench.bench_batches, paper_shape=a.paper_shape, config=a.config, pairs=a.pairs, data_path=a.data, steps=a.steps)
    if a.what == "translate":
        return partial(bench.bench_translate, model=a.model, source=a.input, steps=a.steps, batch_size=a.batch_size, settings=decode_settings(a))
    return partial(bench.bench_select, src=a.src, tgt=a.tgt, indomain_src=a.indomain_src, indomain_tgt=a.indomain_tgt, order=a.order, chunk_lines=a.chunk_lines)


def run_bench(a: argparse.Namespace) -> None:
    from rnnmt.bench import benchmark

    check_needed(a)
    if a.what == "corpus":
        from rnnmt.bench import write_paper_corpus

        written = write_paper_corpus(paper_shape=a.paper_shape, config=a.config, out_dir=a.out_dir, pairs=a.pairs, dev_pairs=a.dev_pairs, updates=a.updates)
        print(json.dumps(written, indent=2, sort_keys=True))
        return
    result = benchmark(a.what, measurement(a), device=a.device, gpu_lock_dir=a.gpu_lock_dir, output=a.output)
    if a.what == "paper" and not a.concurrent:
        from rnnmt.bench import paper_table

        print(paper_table(result), end="")
        return
    print(json.dumps(result, indent=2, sort_keys=True))


COMMANDS = [Command("bench", "measure training, translation or selection-scoring speed; prints JSON", args_bench, run_bench)]
