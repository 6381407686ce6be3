"""Figure 2 / Figure 3 style plots: valid PNG files, shape checks."""

import json
import math
import struct
from pathlib import Path

import matplotlib
import pytest

from rnnmt.errors import UserError
from rnnmt.evaluate.figures import figure_command, training_points
from rnnmt.evaluate.plots import plot_alignments, plot_length_curves, seed_curve

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) from the IHDR chunk that follows the PNG signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _panel(n_src, n_tgt):
    source = [f"s{i}" for i in range(n_src - 1)] + ["</s>"]
    target = [f"t{j}" for j in range(n_tgt - 1)] + ["</s>"]
    weights = [[1.0 if i == min(j, n_src - 1) else 0.0 for i in range(n_src)] for j in range(n_tgt)]
    return {"source": source, "target": target, "weights": weights}


def _sane(size):
    width, height = size
    return 200 <= width <= 8000 and 200 <= height <= 8000


def test_length_curves_png(tmp_path):
    backend = matplotlib.get_backend()
    curves = {
        "RNNsearch-50": [[{"x": x, "bleu": 25.0, "n": 10} for x in range(1, 61)]],
        "RNNencdec-50": [[{"x": x, "bleu": None if x > 55 else 30.0 - x / 3, "n": 10} for x in range(1, 61)]],
    }
    out = tmp_path / "fig" / "length.png"
    plot_length_curves(curves, out, title="BLEU vs length", banner="Synthetic demo data (US$ 0)")
    assert _sane(_png_size(out))
    assert not list(out.parent.glob(".*part"))
    assert matplotlib.get_backend() == backend


def test_length_curves_need_a_curve(tmp_path):
    with pytest.raises(UserError):
        plot_length_curves({}, tmp_path / "x.png", title="t")


@pytest.mark.parametrize("n_panels", [1, 2, 4])
def test_alignments_png(tmp_path, n_panels):
    panels = [_panel(12 + k, 10 + k) for k in range(n_panels)]
    panels[0]["source"][0] = "$"  # a lone dollar sign must not be parsed as math text
    out = tmp_path / "align.png"
    plot_alignments(panels, out, title="Alignments")
    assert _sane(_png_size(out))


@pytest.mark.parametrize(
    "panel",
    [
        {**_panel(4, 3), "weights": _panel(4, 3)["weights"][:2]},  # a target row missing
        {**_panel(4, 3), "weights": [row[:3] for row in _panel(4, 3)["weights"]]},  # a source column missing
        {**_panel(4, 3), "weights": [[0.1, 0.2, 0.3, 0.4], [0.1], [0.1, 0.2, 0.3, 0.4]]},  # ragged
        {**_panel(4, 3), "weights": [[float("nan")] * 4] * 3},
        {"source": ["</s>"], "target": ["</s>"]},
        {"source": [], "target": ["</s>"], "weights": []},
    ],
)
def test_alignments_reject_bad_panels(tmp_path, panel):
    out = tmp_path / "bad.png"
    with pytest.raises(UserError):
        plot_alignments([panel], out, title="t")
    assert not list(tmp_path.iterdir())


def test_alignments_panel_count(tmp_path):
    with pytest.raises(UserError):
        plot_alignments([], tmp_path / "x.png", title="t")
    with pytest.raises(UserError):
        plot_alignments([_panel(3, 3)] * 5, tmp_path / "x.png", title="t")


def test_several_seeds_draw_their_mean_with_a_min_max_band(tmp_path):
    seeds = [[{"x": x, "bleu": b, "n": 5} for x, b in zip((1, 2, 3), bleus)] for bleus in ((10.0, 20.0, None), (14.0, 26.0, None), (12.0, 29.0, None))]
    xs, mean, (low, high) = seed_curve("RNNsearch-50", seeds)
    assert xs == [1, 2, 3] and mean[:2] == [12.0, 25.0] and math.isnan(mean[2])
    assert list(low[:2]) == [10.0, 20.0] and list(high[:2]) == [14.0, 29.0]
    assert seed_curve("one", seeds[:1])[2] is None  # a single seed: its own curve, no band
    out = tmp_path / "bands.png"
    plot_length_curves({"RNNsearch-50": seeds, "RNNencdec-50": seeds[:1]}, out, title="t")
    assert _sane(_png_size(out))
    shifted = [[{**p, "x": p["x"] + 1} for p in seeds[0]], seeds[1]]
    with pytest.raises(UserError, match="different x values"):
        seed_curve("RNNsearch-50", shifted)


def test_figure_kinds_are_the_schemas():
    import yaml

    from rnnmt.evaluate.figures import FIGURE_KINDS

    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml").read_text())
    assert list(FIGURE_KINDS) == schema["properties"]["figures"]["additionalProperties"]["properties"]["kind"]["enum"]


def _metrics(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "meta.json").write_text("{}")
    return folder / "meta.json"


def test_training_curves_are_log_window_means_and_validations(tmp_path):
    row = lambda u, nll, tokens, **more: {"update": u, "train_nll_per_token": nll, "target_tokens": tokens, **more}
    rows = [row(1, 4.0, 10), row(2, 2.0, 30, wall_time_s=1.0), row(3, 1.0, 20), row(4, 3.0, 20, wall_time_s=2.0, dev_ppl=math.e**2, dev_nll=9.0)]
    points = training_points(_metrics(tmp_path / "a", rows), "dev")
    assert points == {"train": [{"x": 2, "nll": (40 + 60) / 40}, {"x": 4, "nll": 2.0}], "heldout": [{"x": 4, "nll": pytest.approx(2.0)}]}
    other = [{**r, "train_nll_per_token": r["train_nll_per_token"] + 1} for r in rows]
    spec = {
        "kind": "training",
        "title": "Training curves",
        "banner": None,
        "heldout": "dev",
        "curves": [{"label": "A", "files": [str(tmp_path / "a/meta.json"), str(_metrics(tmp_path / "b", other))]}],
    }
    figure_command(spec, tmp_path / "training.png")
    assert _sane(_png_size(tmp_path / "training.png"))


def test_a_training_curve_without_its_metrics_file_names_it(tmp_path):
    (tmp_path / "meta.json").write_text("{}")
    with pytest.raises(UserError, match=r"metrics.jsonl is missing: the model was trained before rnnmt wrote metrics.jsonl; delete .*meta.json"):
        training_points(tmp_path / "meta.json", "dev")


def test_figure_6_legends_end_with_each_systems_bleu_the_mean_over_seeds(tmp_path, monkeypatch):
    import rnnmt.evaluate.plots as plots

    drawn = {}
    monkeypatch.setattr(plots, "plot_length_curves", lambda curves, out, **kw: drawn.update(curves))
    groups = [{"x": 10, "bleu": 20.0, "n": 200}]
    files = []
    for seed, bleu in enumerate((20.0, 21.0, 22.5)):
        files.append(tmp_path / f"s{seed}.json")
        files[-1].write_text(json.dumps({"bleu_all": bleu, "length_groups": groups}))
    spec = {
        "kind": "length_groups",
        "title": "t",
        "banner": None,
        "evaluation": {"size": 200},
        "curves": [{"label": "ours, local-p attn", "files": [str(f) for f in files]}],
    }
    figure_command(spec, tmp_path / "fig6.png")
    assert list(drawn) == ["ours, local-p attn (BLEU 21.2)"] and len(drawn["ours, local-p attn (BLEU 21.2)"]) == 3
