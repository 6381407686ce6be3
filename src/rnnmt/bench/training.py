"""`rnnmt bench train`: one system's training updates timed after a warm-up, at its paper shape on random batches or
on its own data, with the kernels an update launches and, at its paper shape, the hours its budget takes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from rnnmt.bench.kernel_count import kernels_per_update
from rnnmt.bench.measure import WARMUP, _timed
from rnnmt.bench.paper_shape import _paper_shape


def bench_train(
    device: torch.device,
    *,
    steps: int,
    paper_shape: str | None = None,
    config: Path | None = None,
    system_path: Path | None = None,
    data_path: Path | None = None,
    src_vocab: Path | None = None,
    tgt_vocab: Path | None = None,
    overrides: dict[str, str],
    settings_for: str | None = None,
    timed: bool = True,
) -> dict[str, Any]:
    """Time `steps` training updates after a warm-up: system `paper_shape` of `config` on random batches,
    or the system at `system_path` on its data; `overrides` replace values of its `train` section, and with
    `settings_for` ('cuda') the `auto` ones take the values that device would choose. Without `timed`, only the
    kernels of an update are counted (the rates are None)."""
    from rnnmt.train.loop import Trainer

    system, data, source_vocab, target_vocab, budget = _bench_inputs(paper_shape, config, system_path, data_path, src_vocab, tgt_vocab)
    system = {**system, "train": {**system["train"], **overrides}}
    if settings_for:
        system["train"].update(settings_as_on(system["train"], torch.device(settings_for), device))
    window = range(WARMUP, WARMUP + steps)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, data, {}, source_vocab, target_vocab, Path(tmp), device, {})
        for u in range(WARMUP):
            trainer.step(u)
        sizes = {u: trainer.stream.batch(u) for u in window}  # outside the timing
        tokens = sum(batch.target_tokens for batch in sizes.values())
        positions = sum(batch.tgt.numel() for batch in sizes.values())
        median = sorted(window, key=lambda u: sizes[u].tgt.numel())[len(window) // 2]
        if timed:
            first = _timed(trainer, window, device)  # every shape of the window is met (and, with graph cuda, captured) here
            shapes = trainer.setup.captured_shapes()
            steady = _timed(trainer, window, device)  # the same batches again: what the rest of a run sees
        counted = kernels_per_update(trainer, median)  # at the window's median batch: kernels grow with its widths
    result = {
        "system": system["name"],
        "data": "random, paper sizes" if paper_shape else str(data_path),
        "updates": steps,
        "batch_size": system["train"]["batch_size"],
        "target_tokens_per_update": tokens / steps,
        "batch_fill": tokens / positions,
        "kernels_per_update": counted["kernels"],
        "kernels_in_graph": counted["in_graph"],
        "kernels_counted_at_width": counted["width"],
        **{key: choice.value for key, choice in trainer.setup.choices.items()},
    }
    if budget is not None:
        result["paper_budget_updates"] = budget
    if not timed:
        return result
    one_off = max(0.0, first["seconds"] - steady["seconds"])
    result |= {
        "seconds": steady["seconds"],
        "updates_per_s": steps / steady["seconds"],
        "target_tokens_per_s": steady["tokens"] / steady["seconds"],
        "sentences_per_s": steady["sentences"] / steady["seconds"],
        # The window's first pass: the same updates with each new shape's one-off work (a capture on a GPU).
        "first_pass_seconds": first["seconds"],
        "first_pass_target_tokens_per_s": first["tokens"] / first["seconds"],
        "graphs_captured": shapes,
        "capture_seconds": one_off,
    }
    if budget is not None:
        hours = budget / result["updates_per_s"] / 3600
        if shapes:
            # Every padded shape a run can meet is captured once: the window's cost per shape, for all of them.
            result["shapes_possible"] = possible = _padded_shapes(trainer.cfg)
            hours += one_off / shapes * possible / 3600
        result["projected_hours"] = hours
    return result


def _bench_inputs(
    paper_shape: str | None, config: Path | None, system_path: Path | None, data_path: Path | None, src_vocab: Path | None, tgt_vocab: Path | None
) -> tuple[dict[str, Any], Any, Any, Any, int | None]:
    """The system, its data, its vocabularies and its paper budget (None but for a paper shape) that `bench_train` times."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.run import read_system

    if paper_shape:
        shape = _paper_shape(config, paper_shape)
        return shape["system"], shape["data"], shape["vocab"], shape["vocab"], shape["budget"]
    return read_system(system_path), ParallelData.load(data_path), Vocab.load(src_vocab), Vocab.load(tgt_vocab), None


def settings_as_on(train: dict[str, Any], chooser: torch.device, device: torch.device) -> dict[str, str]:
    """The `auto` training settings as `chooser` would resolve them, to run on `device`: a CPU runs a capture's
    update uncaptured (graph static), so that it counts the kernels a GPU would launch."""
    from rnnmt.train.defaults import TRAIN_DEFAULTS
    from rnnmt.train.device_choices import choose

    chosen = {key: c.value for key, c in choose({**TRAIN_DEFAULTS, **train}, chooser).items()}
    if chosen["graph"] == "cuda" and device.type != "cuda":
        chosen["graph"] = "static"
    return chosen


def _padded_shapes(cfg: dict[str, Any]) -> int:
    """Source × target widths a run at static shapes can meet: multiples of pad_to up to max_len + EOS."""
    from rnnmt.models.source import round_up

    widths = round_up(cfg["max_len"] + 1, cfg["pad_to"]) // cfg["pad_to"]
    return widths * widths
