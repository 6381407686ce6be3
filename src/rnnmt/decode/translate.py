"""Translate tokenized sentences with a trained model or an ensemble: encode, batch by length, beam
search, decode, and optionally replace each UNK by a dictionary translation of its aligned source word."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from rnnmt.decode.beam import Hypothesis, StepModel, beam_search
from rnnmt.decode.ensemble import load_ensemble
from rnnmt.decode.settings import DecodeSettings
from rnnmt.decode.unk import UnkReplacer, load_dictionary, replace_unknowns
from rnnmt.fileio import read_ids, read_lines, stdin_lines, write_lines, write_stdout_lines
from rnnmt.models.artifact import LoopsOf, TrainedModel, load_model
from rnnmt.models.source import SourceFormat
from rnnmt.runtime import log, pick_device
from rnnmt.text.bpe import text_line, units
from rnnmt.text.tokenize import detokenize_lines


def source_ids(tm: TrainedModel, line: str) -> torch.Tensor:
    return torch.tensor(tm.src_vocab.encode(units(line, tm.src_bpe)), dtype=torch.long)


def target_text(tm: TrainedModel, hyp: Hypothesis, source: str, unk: UnkReplacer | None) -> str:
    """The hypothesis as text; with a replacer, each UNK becomes the translation of its aligned source word."""
    tokens = tm.tgt_vocab.decode(hyp.tokens)
    if unk is not None:
        tokens = unk.replace(tokens, hyp.align, source.split())
    return text_line(tokens, tm.tgt_bpe is not None)


def search_batches(
    model: StepModel,
    ids: Sequence[torch.Tensor],
    source: SourceFormat,
    settings: DecodeSettings,
    *,
    batch_size: int,
    forbid_unk: bool = False,
    device: torch.device = torch.device("cpu"),
) -> Iterator[tuple[list[int], list[Hypothesis]]]:
    """Beam search over source id sequences, in batches of similar length: each batch's sentence indices
    and best hypotheses. Empty sources are left out (nothing to translate)."""
    order = sorted((i for i in range(len(ids)) if len(ids[i])), key=lambda i: len(ids[i]))
    for first in range(0, len(order), batch_size):
        chunk = order[first : first + batch_size]
        src, mask = source.batch([ids[i] for i in chunk])
        yield chunk, beam_search(model, src.to(device), mask.to(device), settings, src_words=source.words(mask), forbid_unk=forbid_unk)


def translate_lines(
    tm: TrainedModel,
    lines: Sequence[str],
    settings: DecodeSettings,
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
    ids = [source_ids(tm, line) for line in lines]
    out: list[str] = [""] * len(ids)
    if aligns is not None:
        aligns[:] = [""] * len(ids)
    start, done, total = time.perf_counter(), 0, sum(1 for i in ids if len(i))
    batches = search_batches(tm.model, ids, SourceFormat.of(tm.system["model"]), settings, batch_size=batch_size, forbid_unk=forbid_unk, device=device)
    for chunk, hyps in batches:
        for i, hyp in zip(chunk, hyps):
            out[i] = target_text(tm, hyp, lines[i], unk)
            if aligns is not None:
                aligns[i] = " ".join(map(str, hyp.align))
        done += len(chunk)
        elapsed = time.perf_counter() - start
        log(f"translated {done}/{total} sentences ({done / elapsed:.1f} sent/s)")
    return out


def translate_file(
    models: Sequence[Path],
    settings: DecodeSettings,
    *,
    source: Path | None,
    output: Path | None,
    lines: Path | None,
    raw: bool,
    forbid_unk: bool,
    unk_replace: bool,
    unk_dict: Path | None,
    align_output: Path | None,
    batch_size: int,
    device: str,
    gpu_lock_dir: Path | None,
    loops: LoopsOf,
) -> None:
    """`rnnmt translate`: one model or an ensemble, a file or stdin to a file or stdout, optionally only
    some `lines`; `raw` text is tokenized first and detokenized after. The models run their loops as `loops` says."""
    run_on = pick_device(device, gpu_lock_dir)
    tm = load_ensemble(models, run_on, settings.ensemble, loops)
    text = read_lines(source) if source else stdin_lines()
    if lines:
        text = [text[i] for i in read_ids(lines, len(text))]
    src_lang, tgt_lang = tm.system["pair"].split("-")
    if raw:
        text = tm.tokenize(text)
    unk = UnkReplacer.for_model(tm, load_dictionary(unk_dict)) if unk_replace else None
    aligns: list[str] = []
    out = translate_lines(tm, text, settings, batch_size=batch_size, forbid_unk=forbid_unk, unk=unk, device=run_on, aligns=aligns)
    if align_output:
        write_lines(align_output, aligns)
    if raw:
        out = detokenize_lines(out, tgt_lang)
    if output:
        write_lines(output, out)
    else:
        write_stdout_lines(out)


def replace_unk_file(model: Path, hyps: Path, align: Path, source: Path, unk_dict: Path | None, output: Path) -> tuple[int, int]:
    """`rnnmt replace-unk`: write the translations `hyps` with each UNK replaced by way of its alignment;
    returns (UNK replaced, lines)."""
    tm = load_model(model, torch.device("cpu"))
    hyp_lines = read_lines(hyps)
    out = replace_unknowns(tm, hyp_lines, read_lines(align), read_lines(source), load_dictionary(unk_dict))
    write_lines(output, out)
    return sum(line.split().count("<unk>") for line in hyp_lines), len(out)
