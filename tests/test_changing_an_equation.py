"""Changing an equation (docs/equations.md): an edit to a module's equation trains as written, whichever path runs.

The fast recurrences call the modules' equations in their forward passes, but their backward passes (and the
Triton kernels) are second forms, which an edit does not reach. train/selfcheck.py checks a fast path against
autograd through the modules before a run relies on it; these tests edit equations as a researcher would and
check that the run then trains the edited model, and that a new Luong score is one registry entry.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rnnmt import config as rnnmt_config
from rnnmt.models import attention, decoders, gru, lngru
from rnnmt.models.loops import Paths
from rnnmt.models.source import SourceFormat
from rnnmt.recurrence.kernels import stages
from rnnmt.train import selfcheck

from conftest import tiny_luong_config, tiny_model_config
from test_graphs import SYSTEMS, make_trainer

ROOT_CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"


@pytest.fixture(autouse=True)
def fresh_checks(monkeypatch):
    """Each test checks afresh: the guard keeps its verdicts for the life of a process, as a run's code does not change."""
    monkeypatch.setattr(selfcheck, "_verify", selfcheck._verify.__wrapped__)


def doubled_energies(original):
    """Bahdanau's additive energies e = 2 v_aᵀ tanh(·): an edit that every path's forward calls."""
    return lambda terms, v, out=None: original(terms, v, out).mul_(2.0)


def steeper_candidate(original):
    """GroundHog's candidate h̃ = tanh(1.25 (W x + b + U (r∘h))): an edit that every path's forward calls."""
    return lambda pre: original(pre.mul_(1.25))


def steeper_attentional_state(original):
    """Luong's h̃_t = tanh(1.25 W_c [c_t; h_t]): an edit that every path's forward calls."""
    return lambda pre, out=None: torch.tanh(1.25 * pre, out=out)


# Each edit: the system, the module and function edited, the edit, and the parts of the model whose fast form the edit
# does not reach (they fall back alone: the encoder's GRUs call the candidate as the decoder's do).
EDITS = {
    "additive energies": ("rnnsearch", attention, "additive_energies", doubled_energies, ("decoder",)),
    "GRU candidate": ("rnnsearch", gru, "candidate", steeper_candidate, ("encoder", "decoder")),
    "Luong's attentional state": ("luong-global-feed", decoders, "attentional_state", steeper_attentional_state, ("decoder",)),
}


def trained(trainer) -> tuple[dict[str, torch.Tensor], dict]:
    """The parameters after the trainer's run, and its meta.json."""
    meta = trainer.run()
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}, meta


def assert_equal_parameters(weights: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], share: float) -> None:
    """Every parameter within `share` of its norm of the reference's (of 1e-3 of all parameters' norm, at least: a
    parameter near 0, such as a bias whose gradient flows through a zero vector at first, moves by rounding alone)."""
    floor = 1e-3 * float(torch.cat([value.flatten() for value in reference.values()]).norm())
    for key, value in reference.items():
        assert float((weights[key] - value).norm()) <= share * max(float(value.norm()), floor), key


@pytest.mark.parametrize("edit", EDITS)
def test_an_edited_equation_trains_as_autograd_through_the_modules(tiny_corpus, tmp_path, monkeypatch, capsys, edit):
    """With default settings (fused on a CPU) the fast path's hand-written backward still differentiates the old
    equation: the guard finds the difference in the parts the edit reaches, one log line names them, those parts
    train on `plain` and the others keep `fused`, and the run ends with the parameters of a `plain` run with the
    same edit; meta.json records each part's path and why."""
    name, module, function, edited, parts = EDITS[edit]
    monkeypatch.setattr(module, function, edited(getattr(module, function)))
    fallen = make_trainer(tiny_corpus, tmp_path / "default", name, updates=4)
    lines = [line for line in capsys.readouterr().err.splitlines() if "recurrence fused for the" in line]
    assert len(lines) == 1 and "differs from autograd through the modules" in lines[0], lines
    assert all(f"recurrence fused for the {part}:" in lines[0] for part in parts) and lines[0].count("recurrence fused for the") == len(parts)
    expected = Paths.every("fused")
    for part in parts:
        expected = expected.with_part(part, "plain")
    assert lines[0].endswith(f"this run trains with recurrence {expected}") and "the gradient of " in lines[0]
    assert fallen.paths == expected and fallen.choices["recurrence"].value == str(expected)
    assert fallen.model.encoder.loops.name == expected.encoder and fallen.model.decoder.loops.name == expected.decoder
    weights, meta = trained(fallen)
    reference, _ = trained(make_trainer(tiny_corpus, tmp_path / "plain", name, updates=4, recurrence="plain"))
    # The parts that keep `fused` add in another order in float32, which Adam's first steps (±lr whatever the gradient's
    # size) carry into the weights at ~5e-6 of their norms; the edit, where a fast form missed it, at ~0.5.
    assert_equal_parameters(weights, reference, 2e-5)
    assert meta["recurrence_by_part"] == expected.by_part() and "differs from autograd through the modules" in meta["settings_why"]["recurrence"]


@pytest.mark.parametrize("edit", EDITS)
def test_the_unedited_model_keeps_its_fast_path(tiny_corpus, tmp_path, edit):
    name = EDITS[edit][0]
    assert make_trainer(tiny_corpus, tmp_path, name, updates=1).choices["recurrence"].value == "fused"


def test_an_edit_only_the_plain_loop_sees_is_found_in_the_forward_pass(monkeypatch):
    """An edit to the module's own loop (here, the GRU's steps), which the fast loops do not call, shows in the NLL."""
    original = gru.GroundhogGRU.steps
    monkeypatch.setattr(gru.GroundhogGRU, "steps", lambda self, x, mask, reverse, h0: original(self, x, mask, reverse, 0.5 + h0))
    found = selfcheck.path_differences(SYSTEMS["rnnsearch"]["model"], "fused")
    assert not found.passed and found.reason().startswith("the NLL differs")


def test_an_edit_of_the_layer_normalised_gru_falls_back_for_the_encoder_alone(monkeypatch):
    """nmtpy's candidate h̃ = tanh(1.25 (LN₄(U h) ∘ r + LN₂(W x + b))): the fused scan's forward calls it, its backward does
    not, so the check sends the encoder to the plain path and keeps the decoder's fused loop."""
    original = lngru.candidate
    monkeypatch.setattr(lngru, "candidate", lambda rec, r, x_cand: original(1.25 * rec, r, 1.25 * x_cand))
    verdict = selfcheck.verify({**tiny_model_config(), "encoder_norm": "layer"}, "fused", torch.device("cpu"), "float32")
    assert verdict.paths.encoder == "plain" and verdict.paths.decoder == "fused"
    assert len(verdict.left) == 1 and "differs from autograd through the modules" in verdict.left[0]


def configured_systems(scales: tuple[str, ...]) -> list[tuple[str, str, dict]]:
    """(scale, system, model config) of every system the scales train (config.yaml)."""
    found = []
    for scale in scales:
        config = rnnmt_config.load_files([ROOT_CONFIG], scale)
        found += [(scale, name, rnnmt_config.resolve_system(config, name)["model"]) for name in rnnmt_config.active_systems(config)]
    return found


# The multi30k scale's layer-normalised encoder GRU has a fused form, not a kernel one.
@pytest.mark.parametrize("recurrence,scales", [("fused", ("demo", "paper", "multi30k")), ("kernels", ("demo", "paper"))])
def test_every_configured_system_keeps_its_fast_path(recurrence, scales):
    """Unedited, every system of the scales passes its check on a CPU and trains on the path asked for."""
    for scale, name, model in configured_systems(scales):
        verdict = selfcheck.verify(model, recurrence, torch.device("cpu"), "float32")
        assert verdict.recurrence == recurrence and not verdict.left, (scale, name, verdict)


# docs/equations.md's worked example: a new Luong score, scaled dot, as one registry entry and its equation.
def scaled_dot(att: attention.LuongAttention, queries: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """score(h_t, h̄_s) = h_tᵀ h̄_s / √d."""
    return attention.dot_energies(queries, keys) / math.sqrt(keys.shape[-1])


def test_a_new_luong_score_is_one_registry_entry(tiny_corpus, tmp_path, monkeypatch, capsys):
    """Training with default settings and beam search both compute the new equation: the fused loop runs it by
    autograd at each step (it has no written-out form), matching the plain path; the kernels, which have no form of
    it, leave the decoder's loop alone to the fused loop with a log line; beam search's weights are the scaled dot's softmax."""
    used = []

    def counted(*args: torch.Tensor) -> torch.Tensor:
        used.append(torch.is_grad_enabled())
        return scaled_dot(*args)

    monkeypatch.setitem(attention.LUONG_SCORES, "scaled-dot", attention.Score(counted))
    model_cfg = tiny_luong_config("global", "scaled-dot")
    monkeypatch.setitem(SYSTEMS, "luong-scaled-dot", {"model": model_cfg, "train": {"loss": "sentence_mean"}})

    fused = make_trainer(tiny_corpus, tmp_path / "fused", "luong-scaled-dot", updates=4)
    assert fused.choices["recurrence"].value == "fused" and "recurrence" not in capsys.readouterr().err
    used.clear()
    weights, _ = trained(fused)
    assert used, "training never computed the new score"
    reference, _ = trained(make_trainer(tiny_corpus, tmp_path / "plain", "luong-scaled-dot", updates=4, recurrence="plain"))
    for key, value in reference.items():
        assert torch.allclose(weights[key], value, rtol=0, atol=1e-5), key

    kernels = make_trainer(tiny_corpus, tmp_path / "kernels", "luong-scaled-dot", updates=1, recurrence="kernels")
    line = next(line for line in capsys.readouterr().err.splitlines() if "recurrence kernels for the decoder:" in line)
    assert "score 'scaled-dot' has no kernel form" in line and line.endswith("this run trains with recurrence encoder kernels, decoder fused, output kernels")
    assert kernels.paths == Paths("kernels", "fused", "kernels")

    model = fused.model.eval()
    src, mask = SourceFormat.of(model_cfg).batch([torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10])])
    used.clear()
    with torch.no_grad():
        ctx, state = model.begin(src, mask)
        _, alpha, _ = model.predict(ctx, state, 0)
        enc = ctx["enc"]
        by_hand = torch.softmax((state["top"].unsqueeze(1) @ enc.annotations.transpose(1, 2)).squeeze(1) / math.sqrt(12.0) + (~enc.mask) * -1e9, -1)
    assert used and torch.allclose(alpha, by_hand, atol=1e-6)


# docs/equations.md's second example: a score with a fast form. Scaled dot prepares its keys h̄_s / √d once per batch,
# so that its energies are keys·h_t, the equation the "dot" kernel form computes: one registry entry.
SCALED_DOT_FAST = attention.Score(
    lambda att, queries, keys, mask: attention.dot_energies(queries, keys),
    keys=lambda att, annotations: annotations / math.sqrt(annotations.shape[-1]),
    form="dot",
)


@pytest.mark.integration
def test_a_new_luong_score_with_a_fast_form_trains_on_the_triton_kernels_as_on_plain(tiny_corpus, tmp_path, monkeypatch):
    """The entry, added to the registry of a fresh process that runs the Triton kernels by Triton's interpreter: the run
    keeps `kernels` for every part (each stage checked against its reference on the CPU first), the attention's kernels
    compute the new score, and four updates end where `plain`'s end. Half a minute of Triton's interpreter on a CPU:
    one of the long tests.

    A score whose fast form is a new branch of the kernels cannot be added by a test: Triton compiles a kernel from its
    function's source text, so the branch is code in recurrence/kernels/luong_attention.py (with its ScoreForm), which
    tests/triton_stages.py checks form by form."""
    pytest.importorskip("triton", reason="Triton is not installed (pip install -e '.[test]' brings it)")
    if os.environ.get("TRITON_INTERPRET") != "1":  # Triton reads it when the kernels are declared, at import
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        test = f"{__file__}::{test_a_new_luong_score_with_a_fast_form_trains_on_the_triton_kernels_as_on_plain.__name__}"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "", "-p", "no:cacheprovider", test], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:]
        return
    monkeypatch.setitem(attention.LUONG_SCORES, "scaled-dot", SCALED_DOT_FAST)
    monkeypatch.setitem(SYSTEMS, "luong-scaled-dot", {"model": tiny_luong_config("global", "scaled-dot"), "train": {"loss": "sentence_mean"}})
    launched = []
    monkeypatch.setattr(stages, "start", lambda kernel, grid, arguments: launched.append(kernel.__name__) or kernel[grid](**arguments))
    with stages.implementation("triton"):
        kernels = make_trainer(tiny_corpus, tmp_path / "kernels", "luong-scaled-dot", updates=4, recurrence="kernels")
        assert kernels.paths == Paths.every("kernels") and "each Triton stage against its torch reference on cpu" in kernels.choices["recurrence"].why
        launched.clear()
        weights, _ = trained(kernels)
    assert {"_luong_attention", "_luong_attention_back"} <= set(launched)
    reference, _ = trained(make_trainer(tiny_corpus, tmp_path / "plain", "luong-scaled-dot", updates=4, recurrence="plain"))
    assert_equal_parameters(weights, reference, 1e-5)
