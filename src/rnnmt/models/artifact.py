"""The trained-model file: weights plus everything needed to translate with it by hand."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rnnmt.errors import UserError
from rnnmt.fileio import atomic_path
from rnnmt.models.build import Seq2Seq, build_model
from rnnmt.text.bpe import BpeSegmenter
from rnnmt.text.vocab import Vocab

FORMAT = "rnnmt-model/1"


@dataclass
class TrainedModel:
    """A model ready to translate: network, system config, vocabularies and optional BPE segmenters."""

    model: Seq2Seq
    system: dict[str, Any]
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_bpe: BpeSegmenter | None
    tgt_bpe: BpeSegmenter | None


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


def save_model(
    path: Path, model: Seq2Seq, system: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab, bpe_codes: dict[str, str | None]
) -> None:
    """Write the model file atomically."""
    state = {
        "format": FORMAT,
        "system": system,
        "state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
        "src_vocab": _vocab_state(src_vocab),
        "tgt_vocab": _vocab_state(tgt_vocab),
        "bpe_codes": bpe_codes,
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_model(path: Path, device: torch.device) -> TrainedModel:
    """Read a model file written by `save_model`; anything else is a clear error."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise UserError(f"model file {path} does not exist; train the system first (rnnmt train).") from None
    except Exception as exc:
        raise UserError(f"model file {path} cannot be read ({exc.__class__.__name__}); expected an rnnmt model.") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"{path} is not an rnnmt model file (expected format {FORMAT}).")
    src_vocab, tgt_vocab = Vocab(**state["src_vocab"]), Vocab(**state["tgt_vocab"])
    model = build_model(state["system"]["model"], len(src_vocab), len(tgt_vocab))
    model.load_state_dict(state["state_dict"])
    model.to(device).eval()
    codes = state["bpe_codes"] or {}
    return TrainedModel(model, state["system"], src_vocab, tgt_vocab, _segmenter(codes.get("src")), _segmenter(codes.get("tgt")))
