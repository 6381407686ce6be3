"""`rnnmt figure`: the figure kinds (config `figures.<name>.kind`), what each reads, and how it is drawn.

`FIGURES` maps a kind to what the workflow gives it (which file of each run, every seed's or the first's,
whether only trained systems count, which settings travel in its spec) and to the function that draws it
from a spec: {kind, title, banner, curves: [{label, files: [one per seed]}], and the kind's options}. A new
figure of an existing kind is one entry in config.yaml; a new kind is one entry here and its drawing function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError
from rnnmt.fileio import read_json


@dataclass(frozen=True)
class FigureKind:
    draw: Callable[[dict[str, Any], Path], None]
    reads: str  # the file of each run it draws from: "scores", "meta" (meta.json, metrics.jsonl beside it) or "alignments"
    every_seed: bool = True  # False: the first seed's run only
    trained: bool = False  # only systems that are trained (not ensembles)
    max_curves: int | None = None
    options: tuple[str, ...] = ()  # settings of the figure's config entry that its spec carries
    evaluation: str | None = None  # the `evaluation` section whose settings made the curves (for the axis label)


def _curves(spec: dict[str, Any]) -> list[tuple[str, list[Path]]]:
    return [(c["label"], [Path(f) for f in c["files"]]) for c in spec["curves"]]


def _length(field: str, xlabel: Callable[[dict[str, Any]], str], markevery: int, bleu_in_legend: bool = False) -> Callable[[dict[str, Any], Path], None]:
    """A length figure's drawing; `bleu_in_legend`: each legend ends with the system's BLEU on the whole test set (the mean
    over seeds), as Luong's Figure 6 does."""

    def draw(spec: dict[str, Any], out: Path) -> None:
        from rnnmt.evaluate.plots import plot_length_curves

        curves = {}
        for label, paths in _curves(spec):
            scores = [read_json(path) for path in paths]
            legend = f"{label} (BLEU {sum(s['bleu_all'] for s in scores) / len(scores):.1f})" if bleu_in_legend else label
            curves[legend] = [s[field] for s in scores]
        plot_length_curves(curves, out, title=spec["title"], xlabel=xlabel(spec["evaluation"]), banner=spec["banner"], markevery=markevery)

    return draw


def draw_heldout_cost(spec: dict[str, Any], out: Path) -> None:
    """Luong's Figure 5: the `heldout` cost (nats per word) of each system's meta.json history."""
    from rnnmt.evaluate.plots import plot_learning_curves

    heldout, curves = spec["heldout"], {}
    for label, (path, *_) in _curves(spec):
        history = read_json(path)["history"]
        if history and f"{heldout}_ppl" not in history[0]:
            raise UserError(f"{path} has no '{heldout}' cost in its history; train with heldout: [..., {heldout}].")
        curves[label] = [(h["update"], math.log(h[f"{heldout}_ppl"])) for h in history]
    plot_learning_curves(curves, out, title=spec["title"], ylabel=f"{heldout} cost (nats per word)", banner=spec["banner"])


def training_points(meta: Path, heldout: str) -> dict[str, list[dict[str, float]]]:
    """From the metrics.jsonl beside `meta`: the training NLL per target token of each log window (at its last
    update) and the `heldout` set's NLL per target token (log perplexity) at each validation."""
    from rnnmt.metrics_file import FILE, WindowMean, read_metrics

    path = meta.parent / FILE
    if not path.is_file():
        raise UserError(f"{path} is missing: the model was trained before rnnmt wrote metrics.jsonl; delete {meta} to train it again.")
    rows, window = read_metrics(path), WindowMean()
    train = [{"x": row["update"], "nll": mean} for row in rows if (mean := window.add(row)) is not None]
    validated = [{"x": row["update"], "nll": math.log(row[f"{heldout}_ppl"])} for row in rows if f"{heldout}_ppl" in row]
    return {"train": train, "heldout": validated}


def draw_training(spec: dict[str, Any], out: Path) -> None:
    """Every system's training and held-out NLL per target token against updates, seeds as bands."""
    from rnnmt.evaluate.plots import plot_training_curves

    curves = {label: [training_points(path, spec["heldout"]) for path in paths] for label, paths in _curves(spec)}
    plot_training_curves(curves, out, title=spec["title"], heldout=spec["heldout"], banner=spec["banner"])


def draw_alignments(spec: dict[str, Any], out: Path) -> None:
    """Bahdanau's Figure 3: one system's sample sentences, a panel each."""
    from rnnmt.evaluate.plots import plot_alignments

    ((_, (path, *_)),) = _curves(spec)
    plot_alignments(read_json(path), out, title=spec["title"])


def draw_compared_alignments(spec: dict[str, Any], out: Path) -> None:
    """Luong's Figure 7: sentence `panel` of each system's samples, one panel per system."""
    from rnnmt.evaluate.plots import plot_alignments

    panels, panel = [], spec["panel"]
    for label, (path, *_) in _curves(spec):
        samples = read_json(path)
        if not 0 <= panel < len(samples):
            raise UserError(f"{path} has {len(samples)} sentences; panel {panel} is not one of them.")
        panels.append({**samples[panel], "label": label})
    plot_alignments(panels, out, title=spec["title"])


def _window_label(e: dict[str, Any]) -> str:
    return f"Sentence length ({e['by']} tokens, window {e['window']})"


def _group_label(e: dict[str, Any]) -> str:
    return f"Sentence length (longest reference in each group of {e['size']})"


FIGURES = {
    "length": FigureKind(_length("length_curve", _window_label, 10), "scores", evaluation="length_curve"),
    "length_groups": FigureKind(_length("length_groups", _group_label, 1, bleu_in_legend=True), "scores", evaluation="length_groups"),
    "heldout_cost": FigureKind(draw_heldout_cost, "meta", every_seed=False, trained=True, options=("heldout",)),
    "training": FigureKind(draw_training, "meta", trained=True, options=("heldout",)),
    "alignments": FigureKind(draw_alignments, "alignments", every_seed=False, trained=True, max_curves=1),
    "compared_alignments": FigureKind(draw_compared_alignments, "alignments", every_seed=False, trained=True, max_curves=4, options=("panel",)),
}
FIGURE_KINDS = tuple(FIGURES)


def figure_kind(kind: str) -> FigureKind:
    if kind not in FIGURES:
        raise UserError(f"Figure kind {kind!r} is unknown; expected one of {', '.join(FIGURE_KINDS)}.")
    return FIGURES[kind]


def figure_command(spec: dict[str, Any], out: Path) -> None:
    """Draw the figure a spec describes into `out` (a PNG, written whole or not at all)."""
    if not spec["curves"]:
        raise UserError(f"The figure spec of '{spec['title']}' has no curves; expected at least one system.")
    figure_kind(spec["kind"]).draw(spec, out)
