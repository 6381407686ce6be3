"""Changing the optimiser or a module's parameters, as a researcher would: the run trains what the code says.

train/update.py checks the `kernels` path's fast optimiser step against the optimiser build_optimizer builds, and
train/selfcheck.py checks each part of the model (encoder, decoder, output layer) against autograd through the
modules; a part or a step that an edit does not reach falls back alone, with one log line, and meta.json says so.
"""

from __future__ import annotations

import pytest
import torch
from test_changing_an_equation import assert_equal_parameters, trained
from torch import nn

from rnnmt.models import attention
from rnnmt.models.loops import Paths
from rnnmt.train import optim, selfcheck, update
from rnnmt.train.defaults import TRAIN_DEFAULTS

from conftest import tiny_system
from test_graphs import SYSTEMS, make_trainer


@pytest.fixture(autouse=True)
def fresh_checks(monkeypatch):
    """Each test checks afresh: the guard keeps its verdicts for the life of a process, as a run's code does not change."""
    monkeypatch.setattr(selfcheck, "_verify", selfcheck._verify.__wrapped__)


def with_momentum(original):
    """build_optimizer with SGD's momentum at 0.9."""

    def build(params, cfg):
        if cfg["name"] == "sgd":
            return torch.optim.SGD(params, lr=cfg.get("lr", optim.DEFAULT_LR["sgd"]), momentum=0.9)
        return original(params, cfg)

    return build


def with_weight_decay(original):
    """build_optimizer with Adadelta's weight decay at 0.01."""

    def build(params, cfg):
        if cfg["name"] == "adadelta":
            return torch.optim.Adadelta(params, lr=cfg.get("lr", 1.0), rho=cfg.get("rho", 0.95), eps=cfg.get("eps", 1e-6), weight_decay=0.01)
        return original(params, cfg)

    return build


# Each edit of the optimiser: the system and its training settings, the edit, and what the check finds differing.
OPTIMISER_EDITS = {
    "SGD with momentum": ("luong-global-feed", {"optimizer": {"name": "sgd", "lr": 0.5}}, with_momentum, "the optimiser's state 'momentum_buffer'"),
    "Adadelta with weight decay": ("rnnsearch-adadelta", {}, with_weight_decay, "the optimiser's state 'acc_delta'"),
}


@pytest.mark.parametrize("edit", OPTIMISER_EDITS)
def test_an_edited_optimiser_trains_as_written_on_the_kernels_path(tiny_corpus, tmp_path, monkeypatch, capsys, edit):
    """The kernel step knows Adadelta and SGD only from lr, rho and eps: the start-of-run check finds that it does
    not take the edit, one log line says so, the run updates with torch's step and ends where a `plain` run with the
    same edit ends; meta.json records the step. The loops keep their kernels."""
    name, train, edited, differing = OPTIMISER_EDITS[edit]
    monkeypatch.setattr(optim, "build_optimizer", edited(optim.build_optimizer))
    kernels = make_trainer(tiny_corpus, tmp_path / "kernels", name, updates=10, recurrence="kernels", **train)
    lines = [line for line in capsys.readouterr().err.splitlines() if "update kernels:" in line]
    assert len(lines) == 1 and differing in lines[0] and lines[0].endswith("this run updates with torch's step"), lines
    assert kernels.choices["update"].value == "torch" and kernels.paths == Paths.every("kernels")
    weights, meta = trained(kernels)
    assert meta["settings"]["update"] == "torch" and differing in meta["settings_why"]["update"]
    reference, _ = trained(make_trainer(tiny_corpus, tmp_path / "plain", name, updates=10, recurrence="plain", **train))
    assert_equal_parameters(weights, reference, 1e-6)


@pytest.mark.parametrize("name, train", [(name, train) for name, train, _, _ in OPTIMISER_EDITS.values()])
def test_the_papers_optimisers_keep_the_kernel_step(tiny_corpus, tmp_path, capsys, name, train):
    trainer = make_trainer(tiny_corpus, tmp_path, name, updates=1, recurrence="kernels", **train)
    assert trainer.choices["update"].value == "kernels" and "checked against torch's step" in trainer.choices["update"].why
    assert "update kernels:" not in capsys.readouterr().err


def test_an_optimiser_without_a_kernel_form_takes_torchs_step_and_says_why(tiny_corpus, tmp_path, capsys):
    """Adam has no kernel step: torch's step, as always, with the reason in meta.json's settings_why (no fallback line:
    nothing was left behind)."""
    trainer = make_trainer(tiny_corpus, tmp_path, "rnnsearch", updates=1, recurrence="kernels")  # Adam
    assert "update kernels:" not in capsys.readouterr().err
    assert trainer.choices["update"].value == "torch"
    assert trainer.choices["update"].why == "the optimiser is Adam, and the kernel step has a form of Adadelta and SGD only"


SGD = {"optimizer": {"name": "sgd", "lr": 0.5}}


class BiasedAdditive(attention.AdditiveAttention):
    """Bahdanau's alignment model with a bias in W_a s_{i−1}, initialised as a bias."""

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__(query_size, key_size, hidden)
        self.W_a = nn.Linear(query_size, hidden, bias=True)

    def init_rules(self, scheme):
        return {**super().init_rules(scheme), "W_a.bias": scheme.bias}


class RenamedAdditive(attention.AdditiveAttention):
    """A copy of the alignment model whose W_a is called W_align (its forward reads the new name)."""

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__(query_size, key_size, hidden)
        self.W_align = self.W_a
        del self.W_a

    def init_rules(self, scheme):
        rules = super().init_rules(scheme)
        return {**{k: v for k, v in rules.items() if not k.startswith("W_a.")}, "W_align.weight": rules["W_a.weight"]}

    def forward(self, query, keys, enc):
        batch, _, width = keys.shape
        energy = attention.tanh_energies(keys, self.W_align(query).view(batch, -1, width), self.v_a)
        alpha = attention.attention_weights(energy, enc.mask.unsqueeze(1))
        return attention.attention_context(alpha, enc.annotations).flatten(0, 1), alpha.flatten(0, 1)


@pytest.mark.parametrize(
    "module, why",
    [
        (BiasedAdditive, "the NLL differs from autograd through the modules"),
        (RenamedAdditive, "it failed to run (AttributeError: 'RenamedAdditive' object has no attribute 'W_a')"),
    ],
)
def test_a_decoder_its_fast_loop_cannot_read_falls_back_alone(tiny_corpus, tmp_path, monkeypatch, capsys, module, why):
    """An added or a renamed parameter of the attention: the decoder's loop trains on `plain` (one line, no
    traceback), the BiGRU encoder and the output layer keep `fused`, and the weights are those of a `plain` run (by
    SGD, which carries the fused parts' float32 rounding into the weights at its own size, where Adam's first steps
    would magnify it)."""
    monkeypatch.setitem(attention.ATTENTIONS, "additive", module)
    fallen = make_trainer(tiny_corpus, tmp_path / "default", "rnnsearch", updates=4, **SGD)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "recurrence fused for the" in line]
    assert len(lines) == 1 and lines[0].count("recurrence fused for the decoder: " + why) == 1 and "Traceback" not in err, lines
    assert lines[0].endswith("this run trains with recurrence encoder fused, decoder plain, output fused")
    assert fallen.paths == Paths("fused", "plain", "fused")
    assert fallen.model.encoder.loops.name == "fused" and fallen.model.decoder.loops.name == "plain"
    weights, meta = trained(fallen)
    assert meta["recurrence_by_part"] == {"encoder": "fused", "decoder": "plain", "output": "fused"}
    reference, _ = trained(make_trainer(tiny_corpus, tmp_path / "plain", "rnnsearch", updates=4, recurrence="plain", **SGD))
    assert_equal_parameters(weights, reference, 1e-6)


def test_a_kernel_step_that_misses_the_nonfinite_rule_is_found(monkeypatch):
    """GroundHog's rule for a NaN or infinite norm (0.1·p) is one of the updates the check runs: a kernel step whose
    reference forgot it differs from torch's step."""
    monkeypatch.setattr(optim.Clipping, "clip", lambda clipping, param, grad: grad * clipping.factor)
    model, train = SYSTEMS["rnnsearch-adadelta"]["model"], {**TRAIN_DEFAULTS, **tiny_system(**SYSTEMS["rnnsearch-adadelta"]["train"])["train"]}
    check = update.step_differences(model, train)
    assert not check.passed and "differs from torch's step" in check.reason()
