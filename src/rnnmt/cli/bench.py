"""`rnnmt bench MODE`: throughput figures as JSON (paper: a table of every system too; corpus: the files to time a real
run with). Each mode is a command of its own, its options beside its runner, which binds them to its function of
rnnmt.bench."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rnnmt.cli.arguments import Command, Modes, add_beam_arguments, add_device_arguments, decode_settings, positive
from rnnmt.errors import UserError
from rnnmt.train.defaults import DEVICE_CHOICES

STEPS = 20
# The system's training settings a mode can override (DEVICE_CHOICES' keys, in the order of its help).
OVERRIDES = ("precision", "recurrence", "sync", "deterministic", "graph")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Where a mode measures, and a file for its JSON besides stdout."""
    add_device_arguments(p)
    p.add_argument("--output", type=Path, help="also write the JSON here")


def add_steps(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--steps", type=positive, default=STEPS, help=f"{what} (default {STEPS})")


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=Path("config.yaml"), help="the workflow config whose systems are named (default ./config.yaml)")


def add_paper_shape(p: argparse.ArgumentParser, meaning: str, required: bool = False) -> None:
    p.add_argument("--paper-shape", metavar="SYSTEM", required=required, help=meaning)
    add_config(p)


def add_training_files(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--data", type=Path, required=required, help="binarized training data")
    p.add_argument("--src-vocab", type=Path, required=required, help="source vocabulary")
    p.add_argument("--tgt-vocab", type=Path, required=required, help="target vocabulary")


def add_overrides(p: argparse.ArgumentParser, keys: tuple[str, ...] = OVERRIDES) -> None:
    for key in keys:
        p.add_argument(f"--{key}", choices=DEVICE_CHOICES[key], help=f"override the system's train.{key}")


def overrides(a: argparse.Namespace) -> dict[str, str]:
    """The training settings given on the command line."""
    return {key: value for key in OVERRIDES if (value := getattr(a, key, None))}


def measured(a: argparse.Namespace, measure: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """`measure` (a function of rnnmt.bench with the mode's options bound; it takes the device) on --device."""
    from rnnmt.bench.measure import benchmark

    return benchmark(a.mode, measure, device=a.device, gpu_lock_dir=a.gpu_lock_dir, output=a.output)


def print_json(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2, sort_keys=True))


def args_train(p: argparse.ArgumentParser) -> None:
    add_paper_shape(p, "SYSTEM of --config at the paper scale's sizes, on random batches (no --system, data or vocabularies needed)")
    p.add_argument("--system", type=Path, help="resolved system config (JSON)")
    add_training_files(p, required=False)
    add_steps(p, "updates to time")
    add_overrides(p)
    p.add_argument(
        "--settings-for", choices=["cuda"], help="resolve the auto settings as on this device (on a CPU: a GPU's update, uncaptured, whose kernels it counts)"
    )
    add_run_arguments(p)


def run_train(a: argparse.Namespace) -> None:
    from rnnmt.bench.training import bench_train

    missing = [] if a.paper_shape else [f"--{name.replace('_', '-')}" for name in ("system", "data", "src_vocab", "tgt_vocab") if getattr(a, name) is None]
    if missing:
        raise UserError(f"rnnmt bench train needs {', '.join(missing)} (or --paper-shape).")
    measure = partial(
        bench_train,
        steps=a.steps,
        paper_shape=a.paper_shape,
        config=a.config,
        system_path=a.system,
        data_path=a.data,
        src_vocab=a.src_vocab,
        tgt_vocab=a.tgt_vocab,
        overrides=overrides(a),
        settings_for=a.settings_for,
    )
    print_json(measured(a, measure))


def args_paper(p: argparse.ArgumentParser) -> None:
    add_config(p)
    p.add_argument("--scale", default="paper", help="whose systems to run (default paper); each at the paper scale's sizes")
    p.add_argument("--only", nargs="+", metavar="SYSTEM", help="these systems of --scale instead of all")
    p.add_argument(
        "--concurrent",
        type=positive,
        metavar="N",
        help="N training processes on the one device at once (process i trains the i-th of --only, cycling), timed together: each one's rate and the aggregate",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="--concurrent: how long the processes train together (default 60)")
    add_steps(p, "updates to time per system")
    add_overrides(p)
    add_run_arguments(p)


def run_paper(a: argparse.Namespace) -> None:
    from rnnmt.bench.paper import bench_paper, paper_table
    from rnnmt.bench.shared_gpu import bench_concurrent

    if not a.concurrent:
        measure = partial(bench_paper, config=a.config, scale=a.scale, steps=a.steps, overrides=overrides(a), systems=a.only, keep=a.output)
        print(paper_table(measured(a, measure)), end="")
        return
    if not a.only:
        raise UserError("rnnmt bench paper --concurrent needs --only SYSTEM [SYSTEM ...]: the systems the processes train.")
    measure = partial(bench_concurrent, config=a.config, systems=a.only, processes=a.concurrent, steps=a.steps, seconds=a.seconds, overrides=overrides(a))
    print_json(measured(a, measure))


def args_precision(p: argparse.ArgumentParser) -> None:
    add_paper_shape(p, "SYSTEM of --config at its paper settings (or --system)")
    p.add_argument("--system", type=Path, help="resolved system config (JSON), instead of --paper-shape")
    add_training_files(p, required=True)
    p.add_argument("--valid", type=Path, required=True, help="binarized dev data")
    add_steps(p, "updates each precision trains")
    p.add_argument("--valid-every", type=positive, default=100, help="updates between validations (default 100)")
    p.add_argument("--settle", type=int, default=300, help="the updates after which the gap is judged (default 300)")
    p.add_argument("--out-dir", type=Path, required=True, help="the runs, table and figure")
    add_overrides(p, tuple(key for key in OVERRIDES if key != "precision"))  # the mode sets train.precision itself
    add_run_arguments(p)


def run_precision(a: argparse.Namespace) -> None:
    from rnnmt.bench.precision import bench_precision

    if not (a.paper_shape or a.system):
        raise UserError("rnnmt bench precision needs --paper-shape or --system.")
    measure = partial(
        bench_precision,
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
        overrides=overrides(a),
    )
    print_json(measured(a, measure))


def args_batches(p: argparse.ArgumentParser) -> None:
    add_paper_shape(p, "SYSTEM of --config, its batches made at its paper settings", required=True)
    p.add_argument("--data", type=Path, help="a binarized corpus to batch, read as `rnnmt train` reads it (`bench corpus` writes one)")
    p.add_argument("--pairs", type=positive, help="without --data: random pairs to make (default: the system's paper training set, config bench.paper_pairs)")
    add_steps(p, "batches to make")
    add_run_arguments(p)


def run_batches(a: argparse.Namespace) -> None:
    from rnnmt.bench.batching import bench_batches

    print_json(measured(a, partial(bench_batches, paper_shape=a.paper_shape, config=a.config, pairs=a.pairs, data_path=a.data, steps=a.steps)))


def args_corpus(p: argparse.ArgumentParser) -> None:
    add_paper_shape(p, "SYSTEM of --config, whose corpus, vocabularies and system.json to write", required=True)
    p.add_argument("--out-dir", type=Path, required=True, help="where train.pt, dev.pt, the vocabularies and system.json go")
    p.add_argument("--pairs", type=positive, help="training pairs (default: the system's paper training set, config bench.paper_pairs)")
    p.add_argument("--dev-pairs", type=positive, default=6003, help="dev pairs (default 6003, newstest2012+2013)")
    p.add_argument("--updates", type=positive, help="the budget system.json gives training (default: the paper's)")


def run_corpus(a: argparse.Namespace) -> None:
    from rnnmt.bench.corpus import write_paper_corpus

    print_json(write_paper_corpus(paper_shape=a.paper_shape, config=a.config, out_dir=a.out_dir, pairs=a.pairs, dev_pairs=a.dev_pairs, updates=a.updates))


def args_translate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True, help="a trained model")
    p.add_argument("--input", type=Path, required=True, help="tokenized source sentences")
    add_steps(p, "batches to time")
    p.add_argument("--batch-size", type=positive, default=32, help="sentences per batch (default 32)")
    add_beam_arguments(p)
    add_run_arguments(p)


def run_translate(a: argparse.Namespace) -> None:
    from rnnmt.bench.translation import bench_translate

    measure = partial(bench_translate, model=a.model, source=a.input, steps=a.steps, batch_size=a.batch_size, settings=decode_settings(a))
    print_json(measured(a, measure))


def args_select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True, help="tokenized pool, target side")
    p.add_argument("--indomain-src", type=Path, required=True, help="tokenized in-domain text, source side")
    p.add_argument("--indomain-tgt", type=Path, required=True, help="tokenized in-domain text, target side")
    p.add_argument("--order", type=positive, default=4, help="n-gram order (default 4)")
    p.add_argument("--chunk-lines", type=positive, default=200_000, help="pairs scored at once (default 200000)")
    add_run_arguments(p)


def run_select(a: argparse.Namespace) -> None:
    from rnnmt.bench.selection import bench_select

    measure = partial(bench_select, src=a.src, tgt=a.tgt, indomain_src=a.indomain_src, indomain_tgt=a.indomain_tgt, order=a.order, chunk_lines=a.chunk_lines)
    print_json(measured(a, measure))


MODES = [
    Command("train", "time training updates of one system, at its paper shape on random batches or on its data", args_train, run_train),
    Command(
        "paper",
        "every system of --scale at its paper shape, one table (on a CPU: the kernels a GPU update launches); --concurrent: processes sharing the device",
        args_paper,
        run_paper,
    ),
    Command("precision", "train a system in float32 and in bfloat16 and compare their dev NLL at every validation", args_precision, run_precision),
    Command("batches", "the host's time to make a paper batch from a paper-size corpus", args_batches, run_batches),
    Command("corpus", "write a paper-size corpus, its vocabularies and system.json, to time `rnnmt train` on", args_corpus, run_corpus),
    Command("translate", "time beam search over tokenized sentences", args_translate, run_translate),
    Command("select", "time Axelrod selection's scoring of a tokenized pool, end to end", args_select, run_select),
]

COMMANDS = [Modes("bench", "measure training, batching, translation or selection-scoring speed; prints JSON", MODES)]
