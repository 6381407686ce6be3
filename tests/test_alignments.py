"""Figure 3 data: sample choice and attention rows of a forced decode."""

from __future__ import annotations

import torch

from rnnmt.evaluate.alignments import EOS_LABEL, panel, pick_samples
from rnnmt.models.artifact import load_model, save_model
from rnnmt.models.build import build_model
from rnnmt.text.vocab import Vocab

from conftest import tiny_model_config


def test_pick_samples_respects_length_and_candidates():
    lines = ["a " * n for n in range(1, 30)]
    chosen = pick_samples(lines, candidates=list(range(0, 29, 2)), k=3, min_len=10, max_len=20, seed=1)
    assert len(chosen) == 3 and all(i % 2 == 0 and 10 <= len(lines[i].split()) <= 20 for i in chosen)
    assert chosen == pick_samples(lines, list(range(0, 29, 2)), 3, 10, 20, seed=1)
    assert pick_samples(lines, [0, 9, 12], k=3, min_len=10, max_len=20, seed=1) == [9, 12]  # fewer: all of them


def test_panel_rows_are_distributions_over_source_and_eos(tmp_path):
    torch.manual_seed(0)
    vocab = Vocab(["the", "cat", "le", "chat", "l'"], [5, 4, 3, 2, 1])
    model = build_model(tiny_model_config(), len(vocab), len(vocab))
    system = {"name": "t", "pair": "en-fr", "model": tiny_model_config()}
    save_model(tmp_path / "m.pt", model, system, vocab, vocab, {"src": None, "tgt": None})
    tm = load_model(tmp_path / "m.pt", torch.device("cpu"))
    p = panel(tm, "the cat", "l&apos; chat", torch.device("cpu"))
    assert p["source"] == ["the", "cat", EOS_LABEL] and p["target"] == ["l'", "chat", EOS_LABEL]
    weights = torch.tensor(p["weights"])
    assert weights.shape == (3, 3)
    assert torch.allclose(weights.sum(dim=1), torch.ones(3), atol=1e-5)
