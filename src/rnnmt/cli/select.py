"""Data selection commands: Axelrod et al.'s bilingual cross-entropy difference, step by step, and the
training pairs a selection keeps."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rnnmt.cli.arguments import Command, key_value, positive, seed
from rnnmt.errors import UserError


def args_select_vocab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True, help="tokenized in-domain text of one language")
    p.add_argument("--min-count", type=positive, default=1, help="1 = XenC/LIUM (default), 2 = Moore-Lewis")
    p.add_argument("--output", type=Path, required=True)


def run_select_vocab(a: argparse.Namespace) -> None:
    from rnnmt.select.axelrod import write_vocab

    print(f"{write_vocab(a.input, a.min_count, a.output)} words -> {a.output}", file=sys.stderr)


def args_select_sample(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--indomain-tgt", type=Path, required=True, help="its target tokens set the sample size")
    p.add_argument("--seed", type=seed, required=True)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--report", type=Path, required=True)


def run_select_sample(a: argparse.Namespace) -> None:
    from rnnmt.fileio import write_json
    from rnnmt.select.axelrod import sample_pool

    report = sample_pool(a.src, a.tgt, a.indomain_tgt, a.seed, a.out_src, a.out_tgt)
    write_json(a.report, report)
    print(json.dumps(report, indent=2))


def args_select_lm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True, help="tokenized text, one sentence per line")
    p.add_argument("--vocab", type=Path, required=True, help="closed vocabulary (select-vocab)")
    p.add_argument("--order", type=positive, default=4)
    p.add_argument("--output", type=Path, required=True, help=".npz")


def run_select_lm(a: argparse.Namespace) -> None:
    from rnnmt.select.axelrod import build_lm

    lm = build_lm(a.input, a.vocab, a.order, a.output)
    print(f"order {lm.order}, {sum(len(k) for k in lm.keys)} n-grams -> {a.output}", file=sys.stderr)


def args_select_index(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--shards", type=positive, required=True)
    p.add_argument("--output", type=Path, required=True)


def run_select_index(a: argparse.Namespace) -> None:
    from rnnmt.fileio import write_json
    from rnnmt.select.axelrod import shard_index

    index = shard_index(a.src, a.tgt, a.shards)
    write_json(a.output, index)
    print(f"{index['lines']} pairs in {a.shards} shards -> {a.output}", file=sys.stderr)


def args_select_score(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True, help="select-index output")
    p.add_argument("--shard", type=int, required=True)
    for side in ("src", "tgt"):
        p.add_argument(f"--{side}-vocab", type=Path, required=True)
        for domain in ("in", "out"):
            p.add_argument(f"--lm-{domain}-{side}", type=Path, required=True)
    p.add_argument("--chunk-lines", type=positive, default=200_000, help="pairs scored at once (memory)")
    p.add_argument("--output", type=Path, required=True, help=".npz of the score components")


def run_select_score(a: argparse.Namespace) -> None:
    from rnnmt.select.axelrod import score_shard_file

    vocabs = {"src": a.src_vocab, "tgt": a.tgt_vocab}
    lms = {f"{d}_{s}": getattr(a, f"lm_{d}_{s}") for d in ("in", "out") for s in ("src", "tgt")}
    parts = score_shard_file(a.src, a.tgt, a.index, a.shard, vocabs, lms, a.output, chunk_lines=a.chunk_lines)
    n, seconds = len(parts["n_src"]), float(parts["seconds"])
    print(f"shard {a.shard}: {n} pairs in {seconds:.1f} s ({n / max(seconds, 1e-9):.0f} pairs/s) -> {a.output}", file=sys.stderr)


def args_select_rank(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scores", type=Path, nargs="+", required=True, help="select-score outputs, in shard order")
    p.add_argument("--pool-report", type=Path, required=True, help="the pool's assembly report (pairs per corpus)")
    p.add_argument("--corpora", nargs="+", required=True, help="the pool's corpora, in assembly order")
    p.add_argument("--cut", choices=["global", "per_corpus"], required=True)
    p.add_argument("--target-words", type=positive, help="global: budget of tokenized target words")
    p.add_argument("--fraction", type=float, help="global without --target-words: fraction of the pool's target words")
    p.add_argument("--keep", type=key_value, action="append", default=[], metavar="CORPUS=FRACTION", help="per_corpus")
    p.add_argument(
        "--normalise",
        choices=["words_plus_eos", "words"],
        default="words_plus_eos",
        help="cross-entropy per word with </s> counted (SRILM, XenC v1) or without (Moses MML)",
    )
    p.add_argument("--output", type=Path, required=True, help="selected pool ids (.npy)")
    p.add_argument("--report", type=Path, required=True)


def run_select_rank(a: argparse.Namespace) -> None:
    from rnnmt.fileio import write_json
    from rnnmt.select.axelrod import rank_and_cut

    report = rank_and_cut(
        a.scores,
        a.pool_report,
        a.corpora,
        a.output,
        cut=a.cut,
        target_words=a.target_words,
        fraction=a.fraction,
        fractions={name: float(value) for name, value in a.keep},
        normalise=a.normalise,
    )
    write_json(a.report, report)
    print(json.dumps(report["total"], indent=2))


def args_select(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method", choices=["none", "lium", "axelrod"], required=True, help="none: keep all; lium: the pool is LIUM's selection; axelrod: keep --ids"
    )
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--ids", type=Path, help="axelrod: selected pool ids (select-rank)")
    p.add_argument("--test-src", type=Path, help="tokenized test set: selected pairs identical to a test pair are counted")
    p.add_argument("--test-tgt", type=Path)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--rank-report", type=Path, help="axelrod: the select-rank report, merged into --report")
    p.add_argument("--report", type=Path, help="write the counts (JSON) here too")


def run_select(a: argparse.Namespace) -> None:
    from rnnmt.fileio import write_json
    from rnnmt.select.selection import select

    if bool(a.test_src) != bool(a.test_tgt):
        raise UserError("--test-src and --test-tgt go together: give both sides of the test set or neither.")
    test = (a.test_src, a.test_tgt) if a.test_src else None
    result = select(a.method, a.src, a.tgt, a.out_src, a.out_tgt, ids=a.ids, test=test, ranking=a.rank_report)
    if a.report:
        write_json(a.report, result)
    print(json.dumps(result, indent=2))


COMMANDS = [
    Command(
        "select-vocab", "Axelrod selection: the closed LM vocabulary of one language, from the in-domain text", args_select_vocab, run_select_vocab, torch=False
    ),
    Command(
        "select-sample",
        "Axelrod selection: a seeded random pool sample of the in-domain size (out-of-domain LM text)",
        args_select_sample,
        run_select_sample,
        torch=False,
    ),
    Command("select-lm", "Axelrod selection: estimate an interpolated modified Kneser-Ney LM (numpy)", args_select_lm, run_select_lm, torch=False),
    Command("select-index", "Axelrod selection: byte offsets of equal-line shards of the pool", args_select_index, run_select_index, torch=False),
    Command("select-score", "Axelrod selection: cross-entropy components of one shard of the pool", args_select_score, run_select_score, torch=False),
    Command("select-rank", "Axelrod selection: rank the pool by bilingual cross-entropy difference and cut", args_select_rank, run_select_rank, torch=False),
    Command("select", "write the training pairs the selection kept (all for none and lium), in pool order", args_select, run_select, torch=False),
]
