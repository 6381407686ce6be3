"""Alignment figures (Bahdanau Figure 3, Luong Figure 7): translate sample sentences and read the
attention weights of the chosen translation, columns in the source's own word order."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from rnnmt.decode.settings import DecodeSettings
from rnnmt.decode.translate import translate_lines
from rnnmt.errors import UserError
from rnnmt.fileio import read_ids, read_lines, write_json
from rnnmt.models.artifact import LoopsOf, TrainedModel, load_model
from rnnmt.models.source import SourceFormat, pad
from rnnmt.runtime import log, pick_device
from rnnmt.text.bpe import units
from rnnmt.text.tokenize import detokenize_lines

EOS_LABEL = "<end>"  # as on the axes of the paper's Figure 3


def pick_samples(lines: list[str], candidates: list[int], k: int, min_len: int, max_len: int, seed: int) -> list[int]:
    """k random line numbers among `candidates` whose length is within [min_len, max_len] (paper: 10–20);
    all of them, with a log line, when there are fewer (a small shortlist leaves few sentences without UNK)."""
    eligible = [i for i in candidates if min_len <= len(lines[i].split()) <= max_len]
    if len(eligible) < k:
        log(f"only {len(eligible)} test sentences without UNK have {min_len}-{max_len} tokens; {k} were asked for, taking those")
        k = len(eligible)
    return sorted(random.Random(seed).sample(eligible, k))


@torch.no_grad()
def panel(tm: TrainedModel, source: str, translation: str, device: torch.device) -> dict:
    """α of the model force-decoding its own translation (one row per target symbol, the EOS row
    included; an EOS column for models that read one), with the symbols unescaped for display."""
    fmt = SourceFormat.of(tm.system["model"])
    src_units, tgt_units = units(source, tm.src_bpe), units(translation, tm.tgt_bpe)
    src, src_mask = fmt.batch([torch.tensor(tm.src_vocab.encode(src_units), dtype=torch.long)])
    tgt, _ = pad([torch.tensor(tm.tgt_vocab.encode(tgt_units), dtype=torch.long)])
    _, alpha = tm.model(src.to(device), src_mask.to(device), tgt.to(device))
    # Encoder positions back to source order (a reversed source reads its last word first).
    columns = [fmt.position(j, len(src_units)) for j in range(src.shape[1])]
    order = sorted(range(len(columns)), key=lambda j: len(src_units) if columns[j] is None else columns[j])
    src_lang, tgt_lang = tm.system["pair"].split("-")
    return {
        "source": detokenize_lines(src_units, src_lang) + ([EOS_LABEL] if fmt.eos else []),
        "target": detokenize_lines(tgt_units, tgt_lang) + [EOS_LABEL],
        "weights": alpha[0][:, order].cpu().tolist(),
    }


def align_samples(
    model: Path,
    test_src: Path,
    nounk_ids: Path,
    output: Path,
    *,
    fixed: list[str],
    samples: int,
    min_length: int,
    max_length: int,
    seed: int,
    settings: DecodeSettings,
    device: str,
    gpu_lock_dir: Path | None,
    loops: LoopsOf,
) -> None:
    """`rnnmt align`: the `fixed` raw sentences first, then `samples` random No-UNK test sentences of the
    given length; writes one panel per sentence. The model runs its loops as `loops` says."""
    run_on = pick_device(device, gpu_lock_dir)
    tm = load_model(model, run_on, loops)
    if tm.system["model"]["attention"] == "none":
        raise UserError(f"{model} is an encoder-decoder without attention; an alignment figure needs an attention model.")
    lines = read_lines(test_src)
    chosen = pick_samples(lines, read_ids(nounk_ids, len(lines)), samples, min_length, max_length, seed)
    sources = tm.tokenize(fixed) + [lines[i] for i in chosen]
    if not sources:
        raise UserError(
            "no sentence to align: no --fixed sentence and no test sentence without UNK in the length range; give --fixed sentences or widen --min-length/--max-length."
        )
    translations = translate_lines(tm, sources, settings, batch_size=len(sources), device=run_on)
    write_json(output, [panel(tm, s, t, run_on) for s, t in zip(sources, translations)])
