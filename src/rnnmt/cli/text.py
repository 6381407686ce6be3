"""Text commands: tokenization, BPE, vocabularies, binarized training data, the No-UNK test subset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rnnmt.cli.arguments import Command, add_vocab_arguments, load_vocabs, positive


def args_tokenize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", required=True)
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--no-escape", action="store_true", help="like tokenizer.perl -no-escape")
    p.add_argument("--aggressive-dash-splits", action="store_true", help="like tokenizer.perl -a")
    p.add_argument("--lowercase", action="store_true", help="lowercase first, like lowercase.perl")
    p.add_argument("--normalize-punctuation", action="store_true", help="then normalise punctuation, like normalize-punctuation.perl -l LANG")
    p.add_argument("--pretokenized", action="store_true", help="input already Moses-tokenized (Stanford files): copy it as is")


def run_tokenize(a: argparse.Namespace) -> None:
    from rnnmt.text.tokenize import tokenize_file

    n = tokenize_file(
        a.input,
        a.output,
        a.lang,
        escape=not a.no_escape,
        aggressive_dash_splits=a.aggressive_dash_splits,
        lowercase=a.lowercase,
        normalize_punctuation=a.normalize_punctuation,
        processes=a.threads,
        pretokenized=a.pretokenized,
    )
    verb = "copied already tokenized" if a.pretokenized else "tokenized"
    print(f"{verb} {n} lines of {a.input} -> {a.output}", file=sys.stderr)


def args_learn_bpe(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, nargs="+", required=True, help="tokenized text; several files are read as one (joint BPE)")
    p.add_argument("--merges", type=positive, required=True)
    p.add_argument("--output", type=Path, required=True)


def run_learn_bpe(a: argparse.Namespace) -> None:
    from rnnmt.text.bpe import learn_bpe

    learn_bpe(a.input, a.output, a.merges)


def args_vocab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True, help="tokenized training text")
    p.add_argument("--size", type=positive, required=True, help="shortlist size (words, specials not counted)")
    p.add_argument("--bpe", type=Path, help="BPE codes: build the vocabulary over subword units")
    p.add_argument("--output", type=Path, required=True)


def run_vocab(a: argparse.Namespace) -> None:
    from rnnmt.text.bpe import vocab_file

    vocab = vocab_file(a.input, a.size, a.output, bpe_codes=a.bpe)
    print(f"vocabulary of {len(vocab)} symbols -> {a.output}", file=sys.stderr)


def args_binarize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--tgt", type=Path, required=True)
    add_vocab_arguments(p)
    p.add_argument("--output", type=Path, required=True)


def run_binarize(a: argparse.Namespace) -> None:
    from rnnmt.text.binarize import binarize

    src_vocab, tgt_vocab, src_bpe, tgt_bpe = load_vocabs(a)
    stats = binarize(a.src, a.tgt, src_vocab, tgt_vocab, a.output, src_segmenter=src_bpe, tgt_segmenter=tgt_bpe)
    print(json.dumps(stats, indent=2))


def args_nounk_subset(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized test source")
    p.add_argument("--ref", type=Path, required=True, help="tokenized test reference")
    add_vocab_arguments(p)
    p.add_argument("--output", type=Path, required=True)


def run_nounk_subset(a: argparse.Namespace) -> None:
    from rnnmt.decode.unk import nounk_subset
    from rnnmt.fileio import read_lines, write_lines

    ids = nounk_subset(read_lines(a.src), read_lines(a.ref), *load_vocabs(a))
    write_lines(a.output, map(str, ids))
    print(f"{len(ids)} sentences without UNK -> {a.output}", file=sys.stderr)


COMMANDS = [
    Command("tokenize", "Moses-tokenize a file with sacremoses, sharded over --threads processes", args_tokenize, run_tokenize, torch=False),
    Command("learn-bpe", "learn subword-nmt BPE merges on tokenized text", args_learn_bpe, run_learn_bpe, torch=False),
    Command("vocab", "build a shortlist vocabulary of the most frequent words (or BPE units)", args_vocab, run_vocab, torch=False),
    Command("binarize", "encode tokenized parallel text as id tensors", args_binarize, run_binarize),
    Command("nounk-subset", "line numbers of test pairs with no UNK in source and reference (Table 1 'No UNK')", args_nounk_subset, run_nounk_subset),
]
