"""Drawing: BLEU vs sentence length (Bahdanau Figure 2, Luong Figure 6), learning curves (Luong Figure 5,
and every system's training and dev NLL) and alignment heat maps (Bahdanau Figure 3, Luong Figure 7).
evaluate/figures.py reads the files a figure draws.

Figures are drawn on a bare Figure with the Agg canvas, so importing this module leaves pyplot and the
global matplotlib backend alone.
"""

from __future__ import annotations

import math
import os
import string
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path

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


def _values(points: list[dict], key: str) -> np.ndarray:
    return np.array([math.nan if p[key] is None else p[key] for p in points], dtype=float)


def seed_curve(system: str, seeds: list[list[dict]], key: str = "bleu") -> tuple[list, list[float], tuple[np.ndarray, np.ndarray] | None]:
    """(x, `key`) of one system's curve: a single seed's as is, several seeds' mean with their (min, max) band."""
    xs = [p["x"] for p in seeds[0]]
    if any([p["x"] for p in points] != xs for points in seeds):
        raise UserError(f"The curves of {system!r} have different x values; run every seed with the same settings.")
    ys = np.array([_values(points, key) for points in seeds])
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
    lines, bands = _over_seeds(curves, "bleu")
    fig, ax = _figure(title, banner)
    _draw_lines(ax, lines, bands, xlabel=xlabel, ylabel="BLEU score", markevery=markevery, from_zero=True)
    _save_png(fig, out_png)


def _over_seeds(curves: dict[str, list[list[dict]]], key: str) -> tuple[dict[str, tuple[list, list]], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Each system's mean line over its seeds, and the (min, max) band of those with several."""
    lines, bands = {}, {}
    for system, seeds in curves.items():
        xs, mean, band = seed_curve(system, seeds, key)
        lines[system] = (xs, mean)
        if band is not None:
            bands[system] = band
    return lines, bands


def plot_learning_curves(curves: dict[str, list[tuple[int, float]]], out_png: str | os.PathLike, *, title: str, ylabel: str, banner: str | None = None) -> None:
    """One held-out cost line per system against the number of updates (mini-batches)."""
    if not curves or not any(curves.values()):
        raise UserError("A learning-curve plot needs at least one system with validation points.")
    lines = {system: ([u for u, _ in points], [c for _, c in points]) for system, points in curves.items()}
    fig, ax = _figure(title, banner)
    _draw_lines(ax, lines, {}, xlabel="Mini-batches", ylabel=ylabel, markevery=1, from_zero=False)
    _save_png(fig, out_png)


def plot_training_curves(
    curves: dict[str, list[dict[str, list[dict]]]], out_png: str | os.PathLike, *, title: str, heldout: str, banner: str | None = None
) -> None:
    """Two panels against updates: training NLL per target token (one point per log window) and the `heldout` set's
    NLL per target token (one per validation). `curves`: per system, one {"train": points, "heldout": points} per
    seed, each point {"x": update, "nll": value}; several seeds are drawn as their mean over a min–max band."""
    if not curves:
        raise UserError("A training-curve plot needs at least one system.")
    fig = Figure(figsize=(12.8, 4.8))
    panels = fig.subplots(1, 2)
    for ax, part, ylabel in ((panels[0], "train", "training NLL per target token"), (panels[1], "heldout", f"{heldout} NLL per target token")):
        lines, bands = _over_seeds({system: [seed[part] for seed in seeds] for system, seeds in curves.items()}, "nll")
        _draw_lines(ax, lines, bands, xlabel="Updates", ylabel=ylabel, markevery=max(1, max(len(xs) for xs, _ in lines.values()) // 10), from_zero=False)
    fig.suptitle(_literal(title))
    if banner:
        panels[0].set_title(_literal(banner), fontsize=8, style="italic", color="darkred")
    _save_png(fig, out_png)


def _figure(title: str, banner: str | None) -> tuple[Figure, Any]:
    """A one-panel figure with its title, and the banner (the demo's) above the panel."""
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    fig.suptitle(_literal(title))
    if banner:
        ax.set_title(_literal(banner), fontsize=8, style="italic", color="darkred")
    return fig, ax


def _draw_lines(
    ax: Any, lines: dict[str, tuple[list, list]], bands: dict[str, tuple[np.ndarray, np.ndarray]], *, xlabel: str, ylabel: str, markevery: int, from_zero: bool
) -> None:
    """Lines in distinct styles; a line with a band (min, max per x) is a mean over seeds, drawn over its band."""
    for k, (system, (xs, ys)) in enumerate(lines.items()):
        (line,) = ax.plot(
            xs, ys, label=_literal(system), linestyle=LINE_STYLES[k % len(LINE_STYLES)], marker=MARKERS[k % len(MARKERS)], markevery=markevery, markersize=4
        )
        if system in bands:
            ax.fill_between(xs, *bands[system], color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(_literal(xlabel))
    ax.set_ylabel(_literal(ylabel))
    if from_zero:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()


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
