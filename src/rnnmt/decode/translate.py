"""Translate tokenized sentences with a trained model or an ensemble: encode, batch by length, beam
search, decode, and optionally replace each UNK by a dictionary translation of its aligned source word."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

from rnnmt.decode.beam import BeamSettings, Hypothesis, beam_search
from rnnmt.decode.ensemble import load_ensemble
from rnnmt.decode.unk import UnkReplacer, load_dictionary
from rnnmt.fileio import read_ids, read_lines, stdin_lines, write_lines, write_stdout_lines
from rnnmt.models.artifact import TrainedModel
from rnnmt.runtime import log, pick_device
from rnnmt.text.bpe import BpeSegmenter, units
from rnnmt.text.tokenize import detokenize_lines, tokenize_lines
from rnnmt.train.batching import SourceFormat


def source_ids(tm: TrainedModel, line: str) -> torch.Tensor:
    return torch.tensor(tm.src_vocab.encode(units(line, tm.src_bpe)), dtype=torch.long)


def target_text(tm: TrainedModel, hyp: Hypothesis, source: str, unk: UnkReplacer | None) -> str:
    """The hypothesis as text; with a replacer, each UNK becomes the translation of its aligned source word."""
    tokens = tm.tgt_vocab.decode(hyp.tokens)
    if unk is not None:
        tokens = unk.replace(tokens, hyp.align, source.split())
    return " ".join(BpeSegmenter.merge(tokens) if tm.tgt_bpe is not None else tokens)


def translate_lines(
    tm: TrainedModel,
    lines: Sequence[str],
    settings: BeamSettings,
    *,
    batch_size: int,
    forbid_unk: bool = False,
    unk: UnkReplacer | None = None,
    device: torch.device = torch.device("cpu"),
    aligns: list[str] | None = None,
) -> list[str]:
    """Translations of tokenized `lines`, in input order; progress goes to the log. If `aligns` is a
    list, it receives one line per sentence: the source position of highest weight at every step.

    An empty (or blank) line translates to an empty line, with every model: there is nothing to
    translate. (A GroundHog model would otherwise decode from its source EOS alone and invent a sentence.)
    """
    source = SourceFormat.of(tm.system["model"])
    ids = [source_ids(tm, line) for line in lines]
    order = sorted((i for i in range(len(ids)) if len(ids[i])), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(ids)
    if aligns is not None:
        aligns[:] = [""] * len(ids)
    start, done = time.perf_counter(), 0
    for first in range(0, len(order), batch_size):
        chunk = order[first : first + batch_size]
        src, mask = source.batch([ids[i] for i in chunk])
        for i, hyp in zip(chunk, beam_search(tm.model, src.to(device), mask.to(device), settings, src_words=source.words(mask), forbid_unk=forbid_unk)):
            out[i] = target_text(tm, hyp, lines[i], unk)
            if aligns is not None:
                aligns[i] = " ".join(map(str, hyp.align))
        done += len(chunk)
        elapsed = time.perf_counter() - start
        log(f"translated {done}/{len(order)} sentences ({done / elapsed:.1f} sent/s)")
    return out


def settings_from_args(a: argparse.Namespace) -> BeamSettings:
    """Beam settings from `rnnmt translate` options (GroundHog's by default)."""
    return BeamSettings(
        width=a.beam,
        shrink=not a.constant_beam,
        min_ratio=a.min_ratio,
        max_ratio=a.max_ratio,
        stack=a.stack,
        normalize=a.normalize,
    )


def translate_command(a: argparse.Namespace) -> None:
    """`rnnmt translate`: one model or an ensemble, files or stdin/stdout, optional line subset, raw-text mode."""
    device = pick_device(a.device, a.gpu_lock_dir)
    tm = load_ensemble(a.model, device, a.ensemble_average)
    lines = read_lines(a.input) if a.input else stdin_lines()
    if a.lines:
        lines = [lines[i] for i in read_ids(a.lines, len(lines))]
    pair = tm.system["pair"].split("-")
    if a.raw:
        lines = tokenize_lines(lines, pair[0])
    unk = UnkReplacer.for_model(tm, load_dictionary(a.unk_dict)) if a.unk_replace else None
    aligns: list[str] = []
    out = translate_lines(tm, lines, settings_from_args(a), batch_size=a.batch_size, forbid_unk=a.no_unk, unk=unk, device=device, aligns=aligns)
    if a.align_output:
        write_lines(a.align_output, aligns)
    if a.raw:
        out = detokenize_lines(out, pair[1])
    if a.output:
        write_lines(a.output, out)
    else:
        write_stdout_lines(out)
