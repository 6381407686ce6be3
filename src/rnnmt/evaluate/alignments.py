"""Figure 3: translate sample sentences and read the attention weights α_ij of the chosen translation."""

from __future__ import annotations

import argparse
import random

import torch

from rnnmt.decode.translate import translate_lines
from rnnmt.errors import UserError
from rnnmt.fileio import read_ids, read_lines, write_json
from rnnmt.models.artifact import TrainedModel, load_model
from rnnmt.runtime import pick_device
from rnnmt.text.bpe import units
from rnnmt.text.tokenize import detokenize_lines, tokenize_lines
from rnnmt.train.batching import pad_with_eos

EOS_LABEL = "<end>"  # as on the axes of the paper's Figure 3


def pick_samples(lines: list[str], candidates: list[int], k: int, min_len: int, max_len: int, seed: int) -> list[int]:
    """k random line numbers among `candidates` whose length is within [min_len, max_len] (paper: 10–20)."""
    eligible = [i for i in candidates if min_len <= len(lines[i].split()) <= max_len]
    if len(eligible) < k:
        raise UserError(f"only {len(eligible)} test sentences without UNK have {min_len}-{max_len} tokens; {k} were asked for.")
    return sorted(random.Random(seed).sample(eligible, k))


@torch.no_grad()
def panel(tm: TrainedModel, source: str, translation: str, device: torch.device) -> dict:
    """α of the model force-decoding its own translation (one row per target symbol, EOS row and column
    included), with the symbols unescaped for display."""
    src_units, tgt_units = units(source, tm.src_bpe), units(translation, tm.tgt_bpe)
    src, src_mask = pad_with_eos([torch.tensor(tm.src_vocab.encode(src_units), dtype=torch.long)])
    tgt, _ = pad_with_eos([torch.tensor(tm.tgt_vocab.encode(tgt_units), dtype=torch.long)])
    _, alpha = tm.model(src.to(device), src_mask.to(device), tgt.to(device))
    src_lang, tgt_lang = tm.system["pair"].split("-")
    return {
        "source": detokenize_lines(src_units, src_lang) + [EOS_LABEL],
        "target": detokenize_lines(tgt_units, tgt_lang) + [EOS_LABEL],
        "weights": alpha[0].cpu().tolist(),
    }


def align_command(a: argparse.Namespace) -> None:
    """`rnnmt align`: fixed sentences first, then random No-UNK test sentences of the given length."""
    device = pick_device(a.device)
    tm = load_model(a.model, device)
    if tm.system["model"]["attention"] == "none":
        raise UserError(f"{a.model} is an encoder-decoder without attention; Figure 3 needs an attention model.")
    lines = read_lines(a.test_src)
    chosen = pick_samples(lines, read_ids(a.nounk_ids, len(lines)), a.random, a.min_length, a.max_length, a.seed)
    sources = tokenize_lines(a.fixed, tm.system["pair"].split("-")[0]) + [lines[i] for i in chosen]
    if not sources:
        raise UserError("no sentence to align: give --fixed sentences or --random above 0.")
    translations = translate_lines(tm, sources, beam=a.beam, batch_size=len(sources), device=device)
    write_json(a.output, [panel(tm, s, t, device) for s, t in zip(sources, translations)])
