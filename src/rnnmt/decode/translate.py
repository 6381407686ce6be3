"""Translate tokenized sentences with a trained model: encode, batch by length, beam search, decode."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from rnnmt.decode.beam import Hypothesis, beam_search
from rnnmt.fileio import read_ids, read_lines, write_lines
from rnnmt.models.artifact import TrainedModel, load_model
from rnnmt.runtime import log, pick_device
from rnnmt.text.bpe import BpeSegmenter, units
from rnnmt.text.tokenize import detokenize_lines, tokenize_lines
from rnnmt.train.batching import pad_with_eos


def source_ids(tm: TrainedModel, line: str) -> torch.Tensor:
    return torch.tensor(tm.src_vocab.encode(units(line, tm.src_bpe)), dtype=torch.long)


def target_text(tm: TrainedModel, hyp: Hypothesis) -> str:
    tokens = tm.tgt_vocab.decode(hyp.tokens)
    return " ".join(BpeSegmenter.merge(tokens) if tm.tgt_bpe is not None else tokens)


def translate_lines(
    tm: TrainedModel,
    lines: Sequence[str],
    *,
    beam: int,
    batch_size: int,
    normalize: bool = False,
    forbid_unk: bool = False,
    device: torch.device = torch.device("cpu"),
) -> list[str]:
    """Translations of tokenized `lines`, in input order; progress goes to the log."""
    ids = [source_ids(tm, line) for line in lines]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(ids)
    start, done = time.perf_counter(), 0
    for first in range(0, len(order), batch_size):
        chunk = order[first : first + batch_size]
        src, mask = pad_with_eos([ids[i] for i in chunk])
        hyps = beam_search(tm.model, src.to(device), mask.to(device), beam=beam, normalize=normalize, forbid_unk=forbid_unk)
        for i, hyp in zip(chunk, hyps):
            out[i] = target_text(tm, hyp)
        done += len(chunk)
        elapsed = time.perf_counter() - start
        log(f"translated {done}/{len(ids)} sentences ({done / elapsed:.1f} sent/s)")
    return out


def stdin_lines() -> list[str]:
    """Standard input split on "\\n" only, like files (see fileio.iter_lines)."""
    text = sys.stdin.read()
    return text.removesuffix("\n").split("\n") if text else []


def translate_command(a: argparse.Namespace) -> None:
    """`rnnmt translate`: files or stdin/stdout, optional line subset, raw-text mode."""
    device = pick_device(a.device)
    tm = load_model(a.model, device)
    lines = read_lines(a.input) if a.input else stdin_lines()
    if a.lines:
        lines = [lines[i] for i in read_ids(a.lines, len(lines))]
    pair = tm.system["pair"].split("-")
    if a.raw:
        lines = tokenize_lines(lines, pair[0])
    out = translate_lines(
        tm, lines, beam=a.beam, batch_size=a.batch_size, normalize=a.normalize, forbid_unk=a.no_unk, device=device
    )
    if a.raw:
        out = detokenize_lines(out, pair[1])
    if a.output:
        write_lines(a.output, out)
    else:
        sys.stdout.write("".join(f"{line}\n" for line in out))
