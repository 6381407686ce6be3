"""Early stopping on the held-out set's BLEU (`train.valid_metric: bleu`, nmtpy's valid_metric): what the BLEU is,
and that the stop and the published weights follow it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from rnnmt import config as cfg
from rnnmt.decode.settings import DecodeSettings
from rnnmt.decode.translate import translate_lines
from rnnmt.errors import UserError
from rnnmt.evaluate.bleu import tokenized_bleu
from rnnmt.models.artifact import TrainedModel
from rnnmt.models.source import SourceFormat
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train import loop
from rnnmt.train.heldout import heldout_bleu, target_line
from rnnmt.train.loop import Trainer

from conftest import tiny_system

ROOT = Path(__file__).resolve().parents[1]
# Dev NLL best at the first validation (update 3) and worse after it (test_training.py's DIVERGING).
DIVERGING = {"updates": 30, "patience": 2, "optimizer": {"name": "sgd", "lr": 5.0}, "checkpoint_every": 1000}


def make_trainer(corpus: dict[str, Path], out_dir: Path, dev: range = range(8), **train) -> Trainer:
    data = ParallelData.load(corpus["data"])
    src_vocab, tgt_vocab = Vocab.load(corpus["src_vocab"]), Vocab.load(corpus["tgt_vocab"])
    return Trainer(tiny_system(**train), data, {"dev": data.subset(dev)}, src_vocab, tgt_vocab, out_dir, torch.device("cpu"), {"train": "x"})


def test_the_heldout_bleu_is_the_bleu_of_what_translate_gives_for_the_same_sentences(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=120, max_len=None)
    trainer.run()
    settings = DecodeSettings(beam=3)
    dev = trainer.valid["dev"]
    bleu = heldout_bleu(trainer.model, dev, trainer.tgt_vocab, settings, torch.device("cpu"), SourceFormat.of(trainer.system["model"]), bpe=False)
    lines = (tiny_corpus["dir"] / "s.txt").read_text().splitlines()[:8]
    refs = (tiny_corpus["dir"] / "t.txt").read_text().splitlines()[:8]
    tm = TrainedModel(trainer.model, trainer.system, trainer.src_vocab, trainer.tgt_vocab, None, None)
    expected = tokenized_bleu(translate_lines(tm, lines, settings, batch_size=3), refs)
    assert bleu == expected > 10.0  # a trained model, so that a wrong order of the sentences would show
    assert trainer.model.training  # decoding switched dropout off only while it ran


def test_subword_units_are_joined_on_both_sides():
    vocab = Vocab(["ein@@", "hund", "läuft", "schn@@", "ell"], [1] * 5, kind="bpe")
    ids = vocab.encode("ein@@ hund läuft schn@@ ell".split())
    assert target_line(vocab, ids, bpe=True) == "einhund läuft schnell"
    assert target_line(vocab, ids, bpe=False) == "ein@@ hund läuft schn@@ ell"


def scripted_bleu(values: list[float]):
    """A stand-in for heldout_bleu that gives these values at the successive validations."""
    given = iter(values)
    return lambda *args, **kwargs: next(given)


def test_early_stopping_follows_the_bleu_and_publishes_its_best_weights(tiny_corpus, tmp_path, monkeypatch):
    at_six = make_trainer(tiny_corpus, tmp_path / "six", **{**DIVERGING, "updates": 6, "patience": None})
    at_six.run()
    # Perplexity would pick update 3; the BLEU is best at 6, then two validations without a gain end the run at 12.
    monkeypatch.setattr(loop, "heldout_bleu", scripted_bleu([10.0, 30.0, 20.0, 30.0, 5.0]))
    stopped = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING, valid_metric="bleu")
    meta = stopped.run()
    assert (meta["stopped"], meta["updates"], meta["best_update"], meta["model_update"]) == ("early_stopping", 12, 6, 6)
    for name, p in stopped.model.named_parameters():
        assert torch.equal(p, dict(at_six.model.named_parameters())[name]), name
    assert [h["dev_bleu"] for h in meta["history"]] == [10.0, 30.0, 20.0, 30.0]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["dev_bleu"] for r in rows if "dev_bleu" in r] == [10.0, 30.0, 20.0, 30.0]


def test_perplexity_stays_the_default_and_decodes_nothing(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "heldout_bleu", lambda *args, **kwargs: pytest.fail("decoded without valid_metric bleu"))
    meta = make_trainer(tiny_corpus, tmp_path, **DIVERGING).run()
    assert meta["best_update"] == 3 and "dev_bleu" not in meta["history"][0]


def test_the_metric_is_part_of_the_fingerprint(tiny_corpus, tmp_path):
    """A checkpoint's best validation is in one metric's terms: another metric must not resume from it."""
    assert make_trainer(tiny_corpus, tmp_path).fingerprint != make_trainer(tiny_corpus, tmp_path, valid_metric="bleu").fingerprint


def test_an_unknown_metric_is_one_clear_error(tiny_corpus, tmp_path):
    with pytest.raises(UserError, match=r"^train.valid_metric is 'meteor'; expected one of perplexity, bleu\.$"):
        make_trainer(tiny_corpus, tmp_path, valid_metric="meteor")


def test_the_heldout_set_is_decoded_as_the_system_is_unless_the_config_says_otherwise():
    c = cfg.validate(yaml.safe_load((ROOT / "config.yaml").read_text()), ROOT / "workflow" / "schemas" / "config.schema.yaml")
    c["scale"] = "multi30k"
    name = "multi30k-rnnsearch-de"
    assert "valid_decode" not in cfg.training_settings(c, name)["train"]  # perplexity: a new beam retrains nothing
    c["systems"][name].setdefault("train", {})["valid_metric"] = "bleu"
    assert cfg.training_settings(c, name)["train"]["valid_decode"] == cfg.resolve_system(c, name)["decode"]
    c["systems"][name]["train"]["valid_decode"] = {"beam": 5}
    assert cfg.training_settings(c, name)["train"]["valid_decode"] == {"beam": 5}
