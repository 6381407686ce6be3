"""Figures: BLEU vs sentence length (Bahdanau Figure 2, Luong Figure 6), learning curves (Luong
Figure 5) and alignment heat maps (Bahdanau Figure 3, Luong Figure 7).

Figures are drawn on a bare Figure with the Agg canvas, so importing this module leaves pyplot and the
global matplotlib backend alone.
"""

from __future__ import annotations

import math
import os
import string
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path, read_json

MAX_PANELS = 4
# Distinct line styles and markers keep the curves apart in grayscale print, like the paper's figure.
LINE_STYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "x"]


def _literal(text: str) -> str:
    """Escape "$" so that matplotlib shows tokens such as "US$" as text instead of parsing math."""
    return text.replace("$", r"\$")


def _save_png(fig: Figure, out_png: str | os.PathLike) -> None:
    FigureCanvasAgg(fig)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")


def _bleu(points: list[dict]) -> np.ndarray:
    return np.array([math.nan if p["bleu"] is None else p["bleu"] for p in points], dtype=float)


def seed_curve(system: str, seeds: list[list[dict]]) -> tuple[list, list[float], tuple[np.ndarray, np.ndarray] | None]:
    """(x, BLEU) of one system's curve: a single seed's as is, several seeds' mean with their (min, max) band."""
    xs = [p["x"] for p in seeds[0]]
    if any([p["x"] for p in points] != xs for points in seeds):
        raise UserError(f"The curves of {system!r} have different x values; score every seed with the same settings.")
    ys = np.array([_bleu(points) for points in seeds])
    if len(seeds) == 1:
        return xs, list(ys[0]), None
    return xs, list(ys.mean(axis=0)), (ys.min(axis=0), ys.max(axis=0))


def plot_length_curves(
    curves: dict[str, list[list[dict]]],
    out_png: str | os.PathLike,
    *,
    title: str,
    xlabel: str = "Sentence length",
    banner: str | None = None,
    markevery: int = 10,
) -> None:
    """One BLEU-vs-length line per system from length_curve() or length_groups() points, one list of points per
    seed: the mean line, and the seeds' min–max as a band when there are several; "bleu": None is a gap."""
    if not curves:
        raise UserError("A length plot needs at least one system's curve.")
    lines, bands = {}, {}
    for system, seeds in curves.items():
        xs, mean, band = seed_curve(system, seeds)
        lines[system] = (xs, mean)
        if band is not None:
            bands[system] = band
    _line_plot(lines, out_png, title=title, xlabel=xlabel, ylabel="BLEU score", banner=banner, markevery=markevery, from_zero=True, bands=bands)


def plot_learning_curves(curves: dict[str, list[tuple[int, float]]], out_png: str | os.PathLike, *, title: str, ylabel: str, banner: str | None = None) -> None:
    """One held-out cost line per system against the number of updates (mini-batches)."""
    if not curves or not any(curves.values()):
        raise UserError("A learning-curve plot needs at least one system with validation points.")
    lines = {system: ([u for u, _ in points], [c for _, c in points]) for system, points in curves.items()}
    _line_plot(lines, out_png, title=title, xlabel="Mini-batches", ylabel=ylabel, banner=banner, markevery=1, from_zero=False)


def _line_plot(
    lines: dict[str, tuple[list, list]],
    out_png,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    banner: str | None,
    markevery: int,
    from_zero: bool,
    bands: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> None:
    """Lines in distinct styles; a line with a band (min, max per x) is a mean over seeds, drawn over its band."""
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    for k, (system, (xs, ys)) in enumerate(lines.items()):
        (line,) = ax.plot(
            xs, ys, label=_literal(system), linestyle=LINE_STYLES[k % len(LINE_STYLES)], marker=MARKERS[k % len(MARKERS)], markevery=markevery, markersize=4
        )
        if bands and system in bands:
            ax.fill_between(xs, *bands[system], color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(_literal(xlabel))
    ax.set_ylabel(_literal(ylabel))
    if from_zero:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.suptitle(_literal(title))
    if banner:
        ax.set_title(_literal(banner), fontsize=8, style="italic", color="darkred")
    _save_png(fig, out_png)


def _weights(panel: dict, index: int) -> np.ndarray:
    """The panel's weights as a (target × source) array, or a UserError saying how the shapes disagree."""
    label = f"Alignment panel {index + 1}"
    for key in ("source", "target", "weights"):
        if key not in panel:
            raise UserError(f"{label} has no {key!r} entry.")
    source, target = panel["source"], panel["target"]
    if not source or not target:
        raise UserError(f"{label} needs at least one source and one target token.")
    expected = f"one row of {len(source)} source weights per target token ({len(target)} rows)"
    try:
        weights = np.asarray(panel["weights"], dtype=float)
    except (TypeError, ValueError):
        raise UserError(f"{label} needs {expected}, but its weights are not a rectangular table of numbers.") from None
    if weights.shape != (len(target), len(source)):
        raise UserError(f"{label} needs {expected}, got shape {weights.shape}.")
    if not np.isfinite(weights).all():
        raise UserError(f"{label} has weights that are not finite numbers.")
    return weights


def _draw_alignment(ax, panel: dict, weights: np.ndarray, letter: str) -> None:
    # 0 black, 1 white, as in the paper's caption.
    ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.xaxis.tick_top()
    ax.set_xticks(range(len(panel["source"])), [_literal(t) for t in panel["source"]], rotation=90)
    ax.set_yticks(range(len(panel["target"])), [_literal(t) for t in panel["target"]])
    ax.tick_params(length=0, labelsize=8)
    ax.set_xlabel(f"({letter}) {_literal(panel['label'])}" if panel.get("label") else f"({letter})")


def plot_alignments(panels: list[dict], out_png: str | os.PathLike, *, title: str) -> None:
    """Up to four grayscale attention heat maps in a 2×2 grid: source tokens on top, target tokens down the side."""
    if not 1 <= len(panels) <= MAX_PANELS:
        raise UserError(f"An alignment figure takes 1 to {MAX_PANELS} panels, got {len(panels)}.")
    arrays = [_weights(panel, i) for i, panel in enumerate(panels)]
    n_rows, n_cols = (1, len(panels)) if len(panels) <= 2 else (2, 2)
    # Cells of about 0.25 in keep the token labels readable for sentences of Figure 3's length.
    side = max(4.0, 0.25 * max(max(a.shape) for a in arrays) + 1.5)
    fig = Figure(figsize=(side * n_cols, side * n_rows))
    axes = fig.subplots(n_rows, n_cols, squeeze=False).ravel()
    for ax, panel, weights, letter in zip(axes, panels, arrays, string.ascii_lowercase):
        _draw_alignment(ax, panel, weights, letter)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    fig.suptitle(_literal(title))
    _save_png(fig, out_png)


# --- from the files the workflow writes -----------------------------------------------------------


def plot_length_files(scores: dict[str, list[Path]], out_png: str | os.PathLike, *, field: str, title: str, xlabel: str, banner: str | None) -> None:
    """`rnnmt plot-length`: the `field` curve (length_curve or length_groups) of each label's scores JSON files
    (one per seed: their mean, with a band)."""
    curves = {label: [read_json(path)[field] for path in paths] for label, paths in scores.items()}
    # The sliding window has a point per length: a marker on each would hide the line.
    plot_length_curves(curves, out_png, title=title, xlabel=xlabel, banner=banner, markevery=10 if field == "length_curve" else 1)


def plot_learning_files(metas: dict[str, Path], out_png: str | os.PathLike, *, heldout: str, title: str, banner: str | None) -> None:
    """`rnnmt plot-learning`: the `heldout` cost (nats per word) of each label's meta.json history."""
    curves = {}
    for label, path in metas.items():
        history = read_json(path)["history"]
        if history and f"{heldout}_ppl" not in history[0]:
            raise UserError(f"{path} has no '{heldout}' cost in its history; train with heldout: [..., {heldout}].")
        curves[label] = [(h["update"], math.log(h[f"{heldout}_ppl"])) for h in history]
    plot_learning_curves(curves, out_png, title=title, ylabel=f"{heldout} cost (nats per word)", banner=banner)


def plot_alignment_files(inputs: list[Path], out_png: str | os.PathLike, *, labels: list[str], panel: int, title: str) -> None:
    """`rnnmt plot-alignments`: one `rnnmt align` output's panels, or sentence `panel` of each of several
    outputs, labelled."""
    if len(inputs) == 1:
        plot_alignments(read_json(inputs[0]), out_png, title=title)
        return
    if len(labels) != len(inputs):
        raise UserError(f"plot-alignments got {len(inputs)} inputs and {len(labels)} labels; give one --label per input.")
    panels = []
    for path, label in zip(inputs, labels):
        samples = read_json(path)
        if not 0 <= panel < len(samples):
            raise UserError(f"{path} has {len(samples)} sentences; --panel {panel} is not one of them.")
        panels.append({**samples[panel], "label": label})
    plot_alignments(panels, out_png, title=title)
