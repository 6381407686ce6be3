"""Does bfloat16 train as float32? One system trained twice on the same data, seed and batches, with float32 and with
bfloat16 products (`train.precision`), and its dev NLL per target token at every validation side by side.

`rnnmt bench precision` runs it: a table (CSV and Markdown: each validation's NLL in both precisions and their
relative gap) and a figure of both curves, and in its JSON the largest gap after the first `settle` updates, where
both runs still move fast and a gap says little.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from rnnmt.bench.paper_shape import paper_system
from rnnmt.errors import UserError
from rnnmt.evaluate.plots import plot_learning_curves
from rnnmt.evaluate.tables import write_table
from rnnmt.metrics_file import FILE, read_metrics
from rnnmt.runtime import log
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train.loop import Trainer

PRECISIONS = ("float32", "bfloat16")
HELDOUT = "dev"
NOTE = (
    "dev NLL per target token (EOS counted) at each validation; gap = |bfloat16 − float32| / float32. Both runs share "
    "the data, the seed and so the batches and the initial weights; they differ only in the dtype of the matrix products."
)


def dev_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(update, dev NLL per target token) at each validation of a run, from its metrics.jsonl (ln of the perplexity)."""
    return [(row["update"], math.log(row[f"{HELDOUT}_ppl"])) for row in read_metrics(run_dir / FILE) if f"{HELDOUT}_ppl" in row]


def compare(
    device: torch.device,
    *,
    system: dict[str, Any],
    data: ParallelData,
    dev: ParallelData,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    updates: int,
    valid_every: int,
    settle: int,
    out_dir: Path,
) -> dict[str, Any]:
    """Train `system` for `updates` updates in each precision under out_dir/<precision>/, validating every `valid_every`;
    write out_dir/precision.{csv,md,png}; return the curves and the largest gap after `settle` updates."""
    if updates < valid_every:
        raise UserError(f"--steps {updates} is below the validation interval {valid_every}; expected at least one validation.")
    curves = {}
    for precision in PRECISIONS:
        train = {**system["train"], "precision": precision, "updates": updates, "epochs": None, "valid_every": valid_every, "patience": None}
        run_dir = out_dir / precision
        log(f"training {system['name']} in {precision}: {updates} updates, dev NLL every {valid_every}")
        Trainer({**system, "train": train}, data, {HELDOUT: dev}, src_vocab, tgt_vocab, run_dir, device, {"train": "precision comparison"}).run()
        curves[precision] = dict(dev_curve(run_dir))
    points = sorted(curves["float32"])
    rows = [
        {
            "update": u,
            "float32": curves["float32"][u],
            "bfloat16": curves["bfloat16"][u],
            "gap": abs(curves["bfloat16"][u] - curves["float32"][u]) / curves["float32"][u],
        }
        for u in points
    ]
    settled = [r for r in rows if r["update"] > settle]
    worst = max(settled, key=lambda r: r["gap"]) if settled else None
    df = pd.DataFrame.from_records(rows).astype({"update": "Int64"})
    df.attrs["notes"] = [NOTE]
    title = f"{system['name']}: dev NLL per target token, float32 and bfloat16 products"
    write_table(df, out_dir / "precision.csv", out_dir / "precision.md", title=title, banner=None)
    plot_learning_curves({p: sorted(curves[p].items()) for p in PRECISIONS}, out_dir / "precision.png", title=title, ylabel="dev NLL per target token")
    return {
        "system": system["name"],
        "updates": updates,
        "valid_every": valid_every,
        "settle": settle,
        "curves": rows,
        "largest_gap_after_settle": None if worst is None else worst["gap"],
        "at_update": None if worst is None else worst["update"],
        "within_1_percent": None if worst is None else worst["gap"] <= 0.01,
        "table": str(out_dir / "precision.md"),
        "figure": str(out_dir / "precision.png"),
    }


def bench_precision(
    device: torch.device,
    *,
    paper_shape: str | None,
    config: Path,
    system_path: Path | None,
    data_path: Path,
    valid_path: Path,
    src_vocab: Path,
    tgt_vocab: Path,
    steps: int,
    valid_every: int,
    settle: int,
    out_dir: Path,
    overrides: dict[str, str],
) -> dict[str, Any]:
    """System `paper_shape` at its paper settings (or the system at `system_path`) trained on the given data in float32
    and in bfloat16 (`compare`): the dev-NLL curves, their table and figure under `out_dir`."""
    from rnnmt.train.run import load_data, read_system

    system = paper_system(config, paper_shape)[1] if paper_shape else read_system(system_path)
    system = {**system, "train": {**system["train"], **overrides}}
    source, target = Vocab.load(src_vocab), Vocab.load(tgt_vocab)
    data: ParallelData = load_data(data_path, source, target)
    return compare(
        device,
        system=system,
        data=data,
        dev=load_data(valid_path, source, target),
        src_vocab=source,
        tgt_vocab=target,
        updates=steps,
        valid_every=valid_every,
        settle=settle,
        out_dir=out_dir,
    )
