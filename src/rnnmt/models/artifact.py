"""The trained-model file: weights plus everything needed to translate with it by hand."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rnnmt import tensorfile
from rnnmt.errors import UserError
from rnnmt.models.build import Seq2Seq, build_model
from rnnmt.models.loops import PLAIN, Loops
from rnnmt.text.bpe import BpeSegmenter
from rnnmt.text.tokenize import tokenize_lines
from rnnmt.text.vocab import Vocab

# The loops a model of a given model config runs by (translation: the checked fast form, train/selfcheck.checked_loops).
LoopsOf = Callable[[dict[str, Any]], Loops | Mapping[str, Loops]]

# 2: loaded with weights_only and checked against the SHA-256 recorded inside (tensorfile.py).
FORMAT = "rnnmt-model/2"


@dataclass
class TrainedModel:
    """A model ready to translate: network, system config, vocabularies and optional BPE segmenters."""

    model: Seq2Seq
    system: dict[str, Any]
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_bpe: BpeSegmenter | None
    tgt_bpe: BpeSegmenter | None

    def tokenize(self, lines: list[str]) -> list[str]:
        """Raw source sentences as its training text was tokenized (the scale's settings, e.g. Multi30k's lowercasing;
        a model file written before they were recorded: tokenizer.perl's defaults)."""
        return tokenize_lines(lines, self.system["pair"].split("-")[0], **self.system.get("tokenizer", {}))


def _vocab_state(v: Vocab) -> dict[str, Any]:
    n = len(Vocab.SPECIALS)
    return {"words": v.symbols[n:], "counts": v.counts[n:], "kind": v.kind}


def _segmenter(codes: str | None) -> BpeSegmenter | None:
    if codes is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".codes", encoding="utf-8", delete=False) as f:
        f.write(codes)
    try:
        return BpeSegmenter(Path(f.name))
    finally:
        Path(f.name).unlink()


def save_model(path: Path, model: Seq2Seq, system: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab, bpe_codes: dict[str, str | None]) -> None:
    """Write the model file atomically, with the digest `load_model` checks."""
    state = {
        "system": system,
        "state_dict": model.state_dict(),
        "src_vocab": _vocab_state(src_vocab),
        "tgt_vocab": _vocab_state(tgt_vocab),
        "bpe_codes": bpe_codes,
    }
    tensorfile.save(path, FORMAT, state)


def load_model(path: Path, device: torch.device, loops: LoopsOf = lambda cfg: PLAIN) -> TrainedModel:
    """Read a model file written by `save_model`; anything else (foreign, unsafe, damaged) is a clear error. The
    model runs its loops as `loops(its model config)` says (translation: train/selfcheck.checked_loops)."""
    try:
        state = tensorfile.load(path, FORMAT, "model file", "train the system again to replace it (rnnmt train).")
    except FileNotFoundError:
        raise UserError(f"model file {path} does not exist; train the system first (rnnmt train).") from None
    src_vocab, tgt_vocab = Vocab(**state["src_vocab"]), Vocab(**state["tgt_vocab"])
    model = build_model(state["system"]["model"], len(src_vocab), len(tgt_vocab), loops(state["system"]["model"]))
    model.load_state_dict(state["state_dict"])
    model.to(device).eval()
    codes = state["bpe_codes"] or {}
    return TrainedModel(model, state["system"], src_vocab, tgt_vocab, _segmenter(codes.get("src")), _segmenter(codes.get("tgt")))
