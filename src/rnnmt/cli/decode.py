"""Decoding commands: translation (one model or an ensemble), UNK replacement and its dictionary, and
the attention weights of sample translations."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnmt.cli.arguments import Command, add_beam_arguments, add_device_arguments, add_ensemble_argument, add_vocab_arguments, decode_settings, positive, seed
from rnnmt.errors import UserError


def args_translate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, nargs="+", required=True, help="a trained model, or several: an ensemble")
    p.add_argument("--input", type=Path, help="tokenized source, one UTF-8 sentence per line (default: stdin); an empty line gives an empty line")
    p.add_argument("--output", type=Path, help="default: stdout")
    p.add_argument("--lines", type=Path, help="translate only these 0-based line numbers (a file of integers)")
    p.add_argument("--raw", action="store_true", help="tokenize the input and detokenize the output")
    add_beam_arguments(p)
    p.add_argument("--no-unk", action="store_true", help="never emit UNK (falls back when nothing finishes)")
    p.add_argument("--unk-replace", action="store_true", help="replace each UNK by its aligned source word's translation")
    p.add_argument("--unk-dict", type=Path, help="--unk-replace: dictionary from rnnmt unk-dict (default: copy the word)")
    p.add_argument("--align-output", type=Path, help="also write, per sentence, the most attended source position of each step")
    p.add_argument("--batch-size", type=positive, default=32)
    add_ensemble_argument(p)
    add_device_arguments(p)


def run_translate(a: argparse.Namespace) -> None:
    from rnnmt.decode.translate import translate_file
    from rnnmt.train.selfcheck import checked_loops

    translate_file(
        a.model,
        decode_settings(a),
        source=a.input,
        output=a.output,
        lines=a.lines,
        raw=a.raw,
        forbid_unk=a.no_unk,
        unk_replace=a.unk_replace,
        unk_dict=a.unk_dict,
        align_output=a.align_output,
        batch_size=a.batch_size,
        device=a.device,
        gpu_lock_dir=a.gpu_lock_dir,
        loops=checked_loops,
    )


def args_replace_unk(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True, help="the model (an ensemble's first member) that translated")
    p.add_argument("--hyps", type=Path, required=True, help="tokenized translations")
    p.add_argument("--align", type=Path, required=True, help="their alignments (rnnmt translate --align-output)")
    p.add_argument("--src", type=Path, required=True, help="the tokenized source they translate")
    p.add_argument("--unk-dict", type=Path, help="dictionary from rnnmt unk-dict (default: copy the source word)")
    p.add_argument("--output", type=Path, required=True)


def run_replace_unk(a: argparse.Namespace) -> None:
    from rnnmt.decode.translate import replace_unk_file

    replaced, lines = replace_unk_file(a.model, a.hyps, a.align, a.src, a.unk_dict, a.output)
    print(f"{replaced} UNK replaced in {lines} lines -> {a.output}", file=sys.stderr)


def args_unk_dict(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized training source")
    p.add_argument("--tgt", type=Path, required=True, help="tokenized training target")
    add_vocab_arguments(p)
    p.add_argument("--min-count", type=positive, default=2, help="ignore word pairs seen in fewer sentence pairs")
    p.add_argument("--output", type=Path, required=True)


def run_unk_dict(a: argparse.Namespace) -> None:
    from rnnmt.decode.unk import dictionary_file

    if a.src_bpe or a.tgt_bpe:
        raise UserError("unk-dict needs word vocabularies (shortlists); BPE models write no UNK.")
    entries = dictionary_file(a.src, a.tgt, a.src_vocab, a.tgt_vocab, a.output, a.min_count)
    print(f"{entries} entries -> {a.output}", file=sys.stderr)


def args_align(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--test-src", type=Path, required=True, help="tokenized test source")
    p.add_argument("--nounk-ids", type=Path, required=True)
    p.add_argument("--fixed", action="append", default=[], help="a raw source sentence to include (repeatable)")
    p.add_argument("--random", type=int, default=3, help="how many random No-UNK test sentences")
    p.add_argument("--min-length", type=positive, default=10)
    p.add_argument("--max-length", type=positive, default=20)
    p.add_argument("--seed", type=seed, default=1)
    add_beam_arguments(p)
    p.add_argument("--output", type=Path, required=True)
    add_device_arguments(p)


def run_align(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.alignments import align_samples
    from rnnmt.train.selfcheck import checked_loops

    align_samples(
        a.model,
        a.test_src,
        a.nounk_ids,
        a.output,
        fixed=a.fixed,
        samples=a.random,
        min_length=a.min_length,
        max_length=a.max_length,
        seed=a.seed,
        settings=decode_settings(a),
        device=a.device,
        gpu_lock_dir=a.gpu_lock_dir,
        loops=checked_loops,
    )


COMMANDS = [
    Command("translate", "beam-search translation with a trained model (stdin to stdout by default)", args_translate, run_translate),
    Command("replace-unk", "replace each UNK of a translation by its aligned source word's translation (Luong)", args_replace_unk, run_replace_unk),
    Command("unk-dict", "dictionary of rare-word translations for UNK replacement (Dice over the training bitext)", args_unk_dict, run_unk_dict),
    Command("align", "attention weights of translated sample sentences (Bahdanau Figure 3)", args_align, run_align),
]
