"""`rnnmt <command>`: one entry point, one subcommand per pipeline stage.

The stage modules are imported inside the commands, so that tokenizer worker processes, which import
this module again, do not pay for them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rnnmt.errors import UserError

COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], None], str]] = {}


def command(name: str, help_text: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    """Register a subcommand: its name, one-line help, argument builder and the decorated runner."""

    def register(run: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], None]:
        COMMANDS[name] = (add_arguments, run, help_text)
        return run

    return register


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def seed(text: str) -> int:
    """An argparse type: a random seed, 0 to 2^32 - 1 (what numpy's generators take)."""
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {2**32 - 1}, got {text}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """Parse NAME=VALUE arguments."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def add_vocab_arguments(p: argparse.ArgumentParser) -> None:
    """The two vocabularies of a language pair, and their BPE codes when the vocabulary is BPE."""
    p.add_argument("--src-vocab", type=Path, required=True)
    p.add_argument("--tgt-vocab", type=Path, required=True)
    p.add_argument("--src-bpe", type=Path, help="BPE codes of the source side (vocab.kind: bpe)")
    p.add_argument("--tgt-bpe", type=Path, help="BPE codes of the target side")


def ratio(text: str) -> float:
    """An argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def add_device_arguments(p: argparse.ArgumentParser) -> None:
    """Where a model runs; a GPU is claimed with a machine-wide lock so that parallel jobs never share one."""
    p.add_argument("--device", default="auto", help="auto (a free GPU, else the CPU), cpu, cuda (any free GPU) or cuda:N")
    p.add_argument("--gpu-lock-dir", type=Path, help="machine-wide GPU lock directory (default: $RNNMT_GPU_LOCK_DIR or /tmp/rnnmt-gpu-locks)")


def add_beam_arguments(p: argparse.ArgumentParser) -> None:
    """Beam-search settings: GroundHog's by default, Luong's with --constant-beam --max-ratio 1.5 --stack 100."""
    p.add_argument("--beam", type=positive, default=10)
    p.add_argument("--normalize", action="store_true", help="rank by log-probability per word")
    p.add_argument("--constant-beam", action="store_true",
                   help="keep the beam width as hypotheses finish (Luong) instead of shrinking it (GroundHog)")  # fmt: skip
    p.add_argument("--min-ratio", type=float, default=0.5, help="EOS only after this many words per source word, its EOS counted (|x| = n + 1)")
    p.add_argument("--max-ratio", type=ratio, default=3.0, help="at most this many steps per source word, its EOS counted")
    p.add_argument("--stack", type=positive, help="--constant-beam: stop after this many finished hypotheses (default: beam)")


def load_vocabs(a: argparse.Namespace) -> tuple:
    """(source vocab, target vocab, source BPE segmenter or None, target BPE segmenter or None)."""
    from rnnmt.text.bpe import BpeSegmenter
    from rnnmt.text.vocab import Vocab

    return (Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab), *(BpeSegmenter(p) if p else None for p in (a.src_bpe, a.tgt_bpe)))


# --- data ---------------------------------------------------------------------------------------


def args_demo_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=seed, default=1234)
    p.add_argument("--size", type=key_value, action="append", default=[], metavar="CORPUS=PAIRS")
    p.add_argument("--src-lang", default="en")
    p.add_argument("--tgt-lang", default="fr")


@command("demo-corpus", "generate the synthetic demo corpus (raw per-corpus files)", args_demo_corpus)
def run_demo_corpus(a: argparse.Namespace) -> None:
    from rnnmt.data.synthetic import generate_demo_corpus

    sizes = {name: int(n) for name, n in a.size} or None
    report = generate_demo_corpus(a.out_dir, seed=a.seed, sizes=sizes, src_lang=a.src_lang, tgt_lang=a.tgt_lang)
    print(json.dumps(report, indent=2, sort_keys=True))


def checksum_arg(text: str):
    """ALGO:HEX, e.g. sha256:0224c7... or md5:c5240458..."""
    from rnnmt.data.download import Checksum

    algo, sep, value = text.partition(":")
    if not sep or algo not in ("sha256", "md5"):
        raise argparse.ArgumentTypeError(f"expected sha256:HEX or md5:HEX, got {text!r}")
    return Checksum(algo, value.lower())


def args_download(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--checksum", type=checksum_arg, help="published sha256:HEX or md5:HEX (without: recorded)")
    p.add_argument("--size", type=positive, help="expected bytes (free-disk check, size check)")
    p.add_argument("--mirror", help="URL prefix that replaces the statmt host")
    p.add_argument("--offline-dir", type=Path, help="a folder of archives already downloaded by hand")
    p.add_argument("--report", type=Path, help="write the result (sha256, bytes, source) as JSON here")


@command("download", "download an archive with resume, retries and checksum verification", args_download)
def run_download(a: argparse.Namespace) -> None:
    from rnnmt.data.download import download
    from rnnmt.fileio import write_json
    from rnnmt.runtime import log

    result = download(a.url, a.output, checksum=a.checksum, size=a.size, mirror=a.mirror, offline_dir=a.offline_dir, progress=log)
    if a.report:
        write_json(a.report, result)
    print(json.dumps(result, indent=2, sort_keys=True, default=str))


def args_extract(p: argparse.ArgumentParser) -> None:
    p.add_argument("--archive", type=Path, required=True)
    p.add_argument("--member", type=key_value, action="append", required=True, metavar="MEMBER=OUTPUT")


@command("extract", "extract named members of a tar/tgz safely (a .gz member to a non-.gz output is decompressed)", args_extract)
def run_extract(a: argparse.Namespace) -> None:
    from rnnmt.data.archives import extract_members

    written = extract_members(a.archive, {member: Path(out) for member, out in a.member})
    print(json.dumps(written, indent=2))


def args_sgm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)


@command("sgm", "plain text of a WMT SGM test/dev file (sacrebleu's extraction rule)", args_sgm)
def run_sgm(a: argparse.Namespace) -> None:
    from rnnmt.data.sgm import sgm_to_text

    print(f"{sgm_to_text(a.input, a.output)} segments -> {a.output}", file=sys.stderr)


def args_assemble(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, nargs="+", required=True)
    p.add_argument("--tgt", type=Path, nargs="+", required=True)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--report", type=Path, help="write the counts per input (JSON) here too")


@command("assemble", "concatenate and clean parallel corpora into one pair of files", args_assemble)
def run_assemble(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import assemble
    from rnnmt.fileio import write_json

    counts = assemble(a.src, a.tgt, a.out_src, a.out_tgt)
    if a.report:
        write_json(a.report, counts)
    print(json.dumps(counts, indent=2))


def args_raw_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, help="corpus name, as in the sources table (rnnmt/data/source_tables/wmt14.yaml)")
    p.add_argument("--src", type=Path, nargs="+", required=True, help="source files, concatenated in order (.gz: decompressed)")
    p.add_argument("--tgt", type=Path, nargs="+", required=True, help="target-side files, file i parallel to --src file i")
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--report", type=Path, required=True, help="write the corpus report (JSON) here")
    p.add_argument("--heldout", action="store_true", help="a dev/test set: invalid UTF-8 is an error, not repaired")
    p.add_argument("--format", choices=["text", "sgm"], default="text", help="one sentence per line, or WMT SGM segments")
    p.add_argument("--expected-lines", type=positive, help="published line count (a difference is a warning)")


@command("raw-corpus", "one WMT corpus's extracted files to two raw parallel UTF-8 files and a report", args_raw_corpus)
def run_raw_corpus(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import assemble_raw
    from rnnmt.fileio import write_json

    r = assemble_raw(
        a.src, a.tgt, a.out_src, a.out_tgt, name=a.name, heldout=a.heldout, fmt=a.format, expected_lines=a.expected_lines
    )
    write_json(a.report, r)
    repaired = r["repaired_utf8"]
    print(
        f"{a.name}: {r['pairs']} of {r['lines']} pairs kept ({r['dropped_empty']} with an empty side dropped, "
        f"invalid UTF-8 repaired in {repaired['src']} source and {repaired['tgt']} target lines) -> {a.out_src}, {a.out_tgt}",
        file=sys.stderr,
    )


def args_corpus_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pair", required=True, help="language pair, e.g. fr-en")
    p.add_argument("--input", type=Path, nargs="+", required=True, help="reports written by rnnmt raw-corpus")
    p.add_argument("--output", type=Path, required=True)


@command("corpus-report", "merge the raw-corpus reports of one language pair into one summary", args_corpus_report)
def run_corpus_report(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import merge_reports, read_raw_report
    from rnnmt.fileio import write_json

    summary = merge_reports([read_raw_report(path) for path in a.input], a.pair)
    write_json(a.output, summary)
    for name in summary["mismatches"]:
        c = summary["corpora"][name]
        expected = f"expected {c['expected_lines']} (wmt14-sources.md §2)"
        print(f"warning: {a.pair}: {name} has {c['lines']} lines, {expected}.", file=sys.stderr)


# --- text ---------------------------------------------------------------------------------------


def args_tokenize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", required=True)
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--no-escape", action="store_true", help="like tokenizer.perl -no-escape")
    p.add_argument("--aggressive-dash-splits", action="store_true", help="like tokenizer.perl -a")
    p.add_argument("--pretokenized", action="store_true", help="input already Moses-tokenized (Stanford files): copy it as is")


@command("tokenize", "Moses-tokenize a file with sacremoses, sharded over --threads processes", args_tokenize)
def run_tokenize(a: argparse.Namespace) -> None:
    from rnnmt.text.tokenize import tokenize_file

    n = tokenize_file(
        a.input, a.output, a.lang, escape=not a.no_escape, aggressive_dash_splits=a.aggressive_dash_splits, processes=a.threads,
        pretokenized=a.pretokenized,
    )  # fmt: skip
    verb = "copied already tokenized" if a.pretokenized else "tokenized"
    print(f"{verb} {n} lines of {a.input} -> {a.output}", file=sys.stderr)


def args_select_vocab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True, help="tokenized in-domain text of one language")
    p.add_argument("--min-count", type=positive, default=1, help="1 = XenC/LIUM (default), 2 = Moore-Lewis")
    p.add_argument("--output", type=Path, required=True)


@command("select-vocab", "Axelrod selection: the closed LM vocabulary of one language, from the in-domain text", args_select_vocab)
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


@command("select-sample", "Axelrod selection: a seeded random pool sample of the in-domain size (out-of-domain LM text)", args_select_sample)
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


@command("select-lm", "Axelrod selection: estimate an interpolated modified Kneser-Ney LM (numpy)", args_select_lm)
def run_select_lm(a: argparse.Namespace) -> None:
    from rnnmt.select.axelrod import build_lm

    lm = build_lm(a.input, a.vocab, a.order, a.output)
    print(f"order {lm.order}, {sum(len(k) for k in lm.keys)} n-grams -> {a.output}", file=sys.stderr)


def args_select_index(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--shards", type=positive, required=True)
    p.add_argument("--output", type=Path, required=True)


@command("select-index", "Axelrod selection: byte offsets of equal-line shards of the pool", args_select_index)
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


@command("select-score", "Axelrod selection: cross-entropy components of one shard of the pool", args_select_score)
def run_select_score(a: argparse.Namespace) -> None:
    from rnnmt.fileio import read_json
    from rnnmt.select.axelrod import load_models, save_scores, score_shard

    lms, encoders = load_models(
        {"src": a.src_vocab, "tgt": a.tgt_vocab},
        {f"{d}_{s}": getattr(a, f"lm_{d}_{s}") for d in ("in", "out") for s in ("src", "tgt")},
    )
    index = read_json(a.index)
    if not 0 <= a.shard < index["shards"]:
        raise UserError(f"--shard {a.shard} is outside the {index['shards']} shards of {a.index}.")
    parts = score_shard(a.src, a.tgt, index, a.shard, lms, encoders, a.chunk_lines)
    save_scores(parts, a.output)
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
    p.add_argument("--normalise", choices=["words_plus_eos", "words"], default="words_plus_eos",
                   help="cross-entropy per word with </s> counted (SRILM, XenC v1) or without (Moses MML)")  # fmt: skip
    p.add_argument("--output", type=Path, required=True, help="selected pool ids (.npy)")
    p.add_argument("--report", type=Path, required=True)


@command("select-rank", "Axelrod selection: rank the pool by bilingual cross-entropy difference and cut", args_select_rank)
def run_select_rank(a: argparse.Namespace) -> None:
    import numpy as np

    from rnnmt.fileio import atomic_path, read_json, write_json
    from rnnmt.select.axelrod import combined, corpus_ranges, load_scores, rank_report, select_ids

    parts = load_scores(a.scores)
    corpus_of_line = corpus_ranges(read_json(a.pool_report), a.corpora)
    if len(corpus_of_line) != len(parts["n_src"]):
        raise UserError(f"{a.pool_report} counts {len(corpus_of_line)} pool pairs but the scores cover {len(parts['n_src'])}; rerun the scoring.")
    fractions = {name: float(value) for name, value in a.keep}
    settings = {"cut": a.cut, "target_words": a.target_words, "fraction": a.fraction, "fractions": fractions or None,
                "normalise": a.normalise}  # fmt: skip
    ids = select_ids(combined(parts, a.normalise), parts["n_tgt"], corpus_of_line, a.corpora, cut=a.cut, target_words=a.target_words,
                     fraction=a.fraction, fractions=fractions)  # fmt: skip
    with atomic_path(a.output) as tmp, open(tmp, "wb") as f:
        np.save(f, ids)
    report = rank_report(parts, corpus_of_line, a.corpora, ids, settings)
    write_json(a.report, report)
    print(json.dumps(report["total"], indent=2))


def args_select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=["none", "lium", "axelrod"], required=True,
                   help="none: keep all; lium: the pool is LIUM's selection; axelrod: keep --ids")  # fmt: skip
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--ids", type=Path, help="axelrod: selected pool ids (select-rank)")
    p.add_argument("--test-src", type=Path, help="tokenized test set: selected pairs identical to a test pair are counted")
    p.add_argument("--test-tgt", type=Path)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--rank-report", type=Path, help="axelrod: the select-rank report, merged into --report")
    p.add_argument("--report", type=Path, help="write the counts (JSON) here too")


@command("select", "write the training pairs the selection kept (all for none and lium), in pool order", args_select)
def run_select(a: argparse.Namespace) -> None:
    from rnnmt.fileio import read_json, write_json
    from rnnmt.select.selection import select

    if bool(a.test_src) != bool(a.test_tgt):
        raise UserError("--test-src and --test-tgt go together: give both sides of the test set or neither.")
    test = (a.test_src, a.test_tgt) if a.test_src else None
    result = select(a.method, a.src, a.tgt, a.out_src, a.out_tgt, ids=a.ids, test=test)
    if a.rank_report:
        result["ranking"] = read_json(a.rank_report)
    if a.report:
        write_json(a.report, result)
    print(json.dumps(result, indent=2))


def args_learn_bpe(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--merges", type=positive, required=True)
    p.add_argument("--output", type=Path, required=True)


@command("learn-bpe", "learn subword-nmt BPE merges on tokenized text", args_learn_bpe)
def run_learn_bpe(a: argparse.Namespace) -> None:
    from rnnmt.text.bpe import learn_bpe

    learn_bpe(a.input, a.output, a.merges)


def args_vocab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True, help="tokenized training text")
    p.add_argument("--size", type=positive, required=True, help="shortlist size (words, specials not counted)")
    p.add_argument("--bpe", type=Path, help="BPE codes: build the vocabulary over subword units")
    p.add_argument("--output", type=Path, required=True)


@command("vocab", "build a shortlist vocabulary of the most frequent words (or BPE units)", args_vocab)
def run_vocab(a: argparse.Namespace) -> None:
    from rnnmt.fileio import iter_lines
    from rnnmt.text.bpe import BpeSegmenter, build_bpe_vocab
    from rnnmt.text.vocab import build_shortlist

    if a.bpe is None:
        vocab = build_shortlist(iter_lines(a.input), a.size)
    else:
        seg = BpeSegmenter(a.bpe)
        vocab = build_bpe_vocab((" ".join(seg.segment(line.split())) for line in iter_lines(a.input)), a.size)
    vocab.save(a.output)
    print(f"vocabulary of {len(vocab)} symbols -> {a.output}", file=sys.stderr)


def args_binarize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--tgt", type=Path, required=True)
    add_vocab_arguments(p)
    p.add_argument("--output", type=Path, required=True)


@command("binarize", "encode tokenized parallel text as id tensors", args_binarize)
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


@command("nounk-subset", "line numbers of test pairs with no UNK in source and reference (Table 1 'No UNK')", args_nounk_subset)
def run_nounk_subset(a: argparse.Namespace) -> None:
    from rnnmt.decode.unk import nounk_subset
    from rnnmt.fileio import read_lines, write_lines

    ids = nounk_subset(read_lines(a.src), read_lines(a.ref), *load_vocabs(a))
    write_lines(a.output, map(str, ids))
    print(f"{len(ids)} sentences without UNK -> {a.output}", file=sys.stderr)


# --- model --------------------------------------------------------------------------------------


def args_train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", type=Path, required=True, help="resolved system config (JSON)")
    p.add_argument("--train", type=Path, required=True, help="binarized training data")
    p.add_argument("--valid", type=key_value, action="append", default=[], metavar="NAME=FILE")
    add_vocab_arguments(p)
    p.add_argument("--out-dir", type=Path, required=True)
    add_device_arguments(p)
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="data-parallel training processes, one per GPU (torchrun); the batch is split between them")
    p.add_argument("--stop-before-limit", type=float, default=900.0, metavar="SECONDS",
                   help="under Slurm: checkpoint and exit 143 this long before the job's time limit (default 900, "
                        "before the profile's USR1 at 600)")


@command("train", "train one system; resumes from OUT_DIR/ckpt/last.pt when it matches", args_train)
def run_train(a: argparse.Namespace) -> None:
    from rnnmt.train.run import train_system

    train_system(a)


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
    p.add_argument("--ensemble-average", choices=["logits", "log_probs"], default="logits",
                   help="several models: average their softmax inputs (nmt.matlab) or their log-probabilities")  # fmt: skip
    add_device_arguments(p)


@command("translate", "beam-search translation with a trained model (stdin to stdout by default)", args_translate)
def run_translate(a: argparse.Namespace) -> None:
    from rnnmt.decode.translate import translate_command

    translate_command(a)


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


def args_replace_unk(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True, help="the model (an ensemble's first member) that translated")
    p.add_argument("--hyps", type=Path, required=True, help="tokenized translations")
    p.add_argument("--align", type=Path, required=True, help="their alignments (rnnmt translate --align-output)")
    p.add_argument("--src", type=Path, required=True, help="the tokenized source they translate")
    p.add_argument("--unk-dict", type=Path, help="dictionary from rnnmt unk-dict (default: copy the source word)")
    p.add_argument("--output", type=Path, required=True)


@command("replace-unk", "replace each UNK of a translation by its aligned source word's translation (Luong)", args_replace_unk)
def run_replace_unk(a: argparse.Namespace) -> None:
    import torch

    from rnnmt.decode.unk import load_dictionary, replace_unknowns
    from rnnmt.fileio import read_lines, write_lines
    from rnnmt.models.artifact import load_model

    tm = load_model(a.model, torch.device("cpu"))
    out = replace_unknowns(tm, read_lines(a.hyps), read_lines(a.align), read_lines(a.src), load_dictionary(a.unk_dict))
    write_lines(a.output, out)
    print(f"{sum(line.split().count('<unk>') for line in read_lines(a.hyps))} UNK replaced in {len(out)} lines -> {a.output}", file=sys.stderr)


def args_unk_dict(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, required=True, help="tokenized training source")
    p.add_argument("--tgt", type=Path, required=True, help="tokenized training target")
    add_vocab_arguments(p)
    p.add_argument("--min-count", type=positive, default=2, help="ignore word pairs seen in fewer sentence pairs")
    p.add_argument("--output", type=Path, required=True)


@command("unk-dict", "dictionary of rare-word translations for UNK replacement (Dice over the training bitext)", args_unk_dict)
def run_unk_dict(a: argparse.Namespace) -> None:
    from rnnmt.decode.unk import learn_dictionary, write_dictionary
    from rnnmt.fileio import iter_lines

    src_vocab, tgt_vocab, src_bpe, tgt_bpe = load_vocabs(a)
    if src_bpe or tgt_bpe:
        raise UserError("unk-dict needs word vocabularies (shortlists); BPE models write no UNK.")
    entries = learn_dictionary(iter_lines(a.src), iter_lines(a.tgt), src_vocab, tgt_vocab, a.min_count)
    write_dictionary(a.output, entries)
    print(f"{len(entries)} entries -> {a.output}", file=sys.stderr)


@command("align", "attention weights of translated sample sentences (Bahdanau Figure 3)", args_align)
def run_align(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.alignments import align_command

    align_command(a)


# --- evaluation ---------------------------------------------------------------------------------


def args_score(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hyps", type=Path, required=True)
    p.add_argument("--hyps-nounk", type=Path, help="translations of the No-UNK subset (Bahdanau Table 1)")
    p.add_argument("--nounk-ids", type=Path, help="the No-UNK subset's line numbers")
    p.add_argument("--refs-tok", type=Path, required=True)
    p.add_argument("--refs-raw", type=Path, required=True)
    p.add_argument("--src-tok", type=Path, required=True)
    p.add_argument("--lang", required=True)
    p.add_argument("--window", type=positive, default=10)
    p.add_argument("--max-length", type=positive, default=60)
    p.add_argument("--threshold", type=positive, default=30)
    p.add_argument("--length-by", choices=["source", "reference"], default="source")
    p.add_argument("--group-size", type=positive, default=200, help="Luong's length groups (Figure 6)")
    p.add_argument("--rejoin-hyphens", action="store_true", help="rejoin ' @-@ ' / ' ##AT##-##AT## ' before BLEU (Luong)")
    p.add_argument("--output", type=Path, required=True)


@command("score", "BLEU (tokenized multi-bleu and detokenized sacreBLEU), No-UNK and length curve", args_score)
def run_score(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.score import score_system
    from rnnmt.fileio import write_json

    scores = score_system(
        hyps_all=a.hyps, refs_tok=a.refs_tok, refs_raw=a.refs_raw, src_tok=a.src_tok, lang=a.lang, hyps_nounk=a.hyps_nounk,
        nounk_ids=a.nounk_ids, window=a.window, max_x=a.max_length, threshold=a.threshold, length_by=a.length_by,
        group_size=a.group_size, rejoin=a.rejoin_hyphens,
    )  # fmt: skip
    write_json(a.output, scores)
    nounk = "n/a" if scores["bleu_nounk"] is None else f"{scores['bleu_nounk']:.2f}"
    print(f"BLEU all {scores['bleu_all']:.2f}, No-UNK {nounk}", file=sys.stderr)


def add_table_arguments(p: argparse.ArgumentParser, spec_help: str) -> None:
    """A JSON spec in, the table out as CSV and Markdown."""
    p.add_argument("--spec", required=True, help=spec_help)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)


def args_table(p: argparse.ArgumentParser) -> None:
    add_table_arguments(p, "JSON: {kind, title, demo, rows: [...], check?}")


@command("table", "render a paper table: reproduced next to published numbers", args_table)
def run_table(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import table_command

    table_command(json.loads(a.spec), a.csv, a.md)


def args_claims(p: argparse.ArgumentParser) -> None:
    add_table_arguments(p, "JSON: {title, demo, samples, seed, claims: [{paper, claim, a, b, hyps_a, hyps_b, refs, rejoin}]}")


@command("claims", "paired-bootstrap 95% intervals for the BLEU differences the papers' claims rest on", args_claims)
def run_claims(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import claims_command

    claims_command(json.loads(a.spec), a.csv, a.md)


def args_plot_length(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curve", type=key_value, action="append", required=True, metavar="LABEL=SCORES_JSON")
    p.add_argument("--field", choices=["length_curve", "length_groups"], default="length_curve",
                   help="Bahdanau's sliding window (Figure 2) or Luong's groups by reference length (Figure 6)")  # fmt: skip
    p.add_argument("--title", required=True)
    p.add_argument("--xlabel", default="Sentence length (source tokens)")
    p.add_argument("--banner")
    p.add_argument("--output", type=Path, required=True)


@command("plot-length", "BLEU against sentence length (Bahdanau Figure 2, Luong Figure 6)", args_plot_length)
def run_plot_length(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.plots import plot_length_curves
    from rnnmt.fileio import read_json

    curves = {label: read_json(path)[a.field] for label, path in a.curve}
    plot_length_curves(curves, a.output, title=a.title, xlabel=a.xlabel, banner=a.banner, markevery=10 if a.field == "length_curve" else 1)


def args_plot_learning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curve", type=key_value, action="append", required=True, metavar="LABEL=META_JSON")
    p.add_argument("--heldout", default="test", help="the held-out set whose cost to plot")
    p.add_argument("--title", required=True)
    p.add_argument("--banner")
    p.add_argument("--output", type=Path, required=True)


@command("plot-learning", "held-out cost per word against updates, from meta.json histories (Luong Figure 5)", args_plot_learning)
def run_plot_learning(a: argparse.Namespace) -> None:
    import math

    from rnnmt.evaluate.plots import plot_learning_curves
    from rnnmt.fileio import read_json

    curves = {}
    for label, path in a.curve:
        history = read_json(path)["history"]
        if history and f"{a.heldout}_ppl" not in history[0]:
            raise UserError(f"{path} has no '{a.heldout}' cost in its history; train with heldout: [..., {a.heldout}].")
        curves[label] = [(h["update"], math.log(h[f"{a.heldout}_ppl"])) for h in history]
    plot_learning_curves(curves, a.output, title=a.title, ylabel=f"{a.heldout} cost (nats per word)", banner=a.banner)


def args_plot_alignments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, nargs="+", required=True, help="rnnmt align output(s)")
    p.add_argument("--label", action="append", default=[], help="with several inputs: one label per input")
    p.add_argument("--panel", type=int, default=0, help="with several inputs: which sentence of each")
    p.add_argument("--title", required=True)
    p.add_argument("--output", type=Path, required=True)


@command("plot-alignments", "alignment heat maps: one model's samples (Bahdanau Figure 3) or one sentence by several (Luong Figure 7)", args_plot_alignments)
def run_plot_alignments(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.plots import plot_alignments
    from rnnmt.fileio import read_json

    if len(a.input) == 1:
        plot_alignments(read_json(a.input[0]), a.output, title=a.title)
        return
    if len(a.label) != len(a.input):
        raise UserError(f"plot-alignments got {len(a.input)} inputs and {len(a.label)} labels; give one --label per input.")
    panels = []
    for path, label in zip(a.input, a.label):
        samples = read_json(path)
        if not 0 <= a.panel < len(samples):
            raise UserError(f"{path} has {len(samples)} sentences; --panel {a.panel} is not one of them.")
        panels.append({**samples[a.panel], "label": label})
    plot_alignments(panels, a.output, title=a.title)


def args_provenance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the validated config as JSON")
    p.add_argument("--output", type=Path, required=True)


@command("provenance", "record config, package versions, git revision and hardware", args_provenance)
def run_provenance(a: argparse.Namespace) -> None:
    from rnnmt.provenance import write_provenance

    write_provenance(json.loads(a.config), a.output)


def args_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["train", "translate", "select"])
    p.add_argument("--system", type=Path, help="train: resolved system config (JSON)")
    p.add_argument("--paper-shape", metavar="SYSTEM", help="train: SYSTEM of --config at the paper scale's sizes, on random batches (no data needed)")
    p.add_argument("--config", type=Path, default=Path("config.yaml"), help="train --paper-shape: the workflow config (default ./config.yaml)")
    p.add_argument("--precision", choices=["float32", "bfloat16"], help="train: override the system's train.precision")
    p.add_argument("--recurrence", choices=["fused", "plain"], help="train: override the system's train.recurrence")
    p.add_argument("--sync", choices=["auto", "update", "logging"], help="train: override the system's train.sync")
    p.add_argument("--data", type=Path, help="train: binarized training data")
    p.add_argument("--src-vocab", type=Path, help="train: source vocabulary")
    p.add_argument("--tgt-vocab", type=Path, help="train: target vocabulary")
    p.add_argument("--model", type=Path, help="translate: a trained model")
    p.add_argument("--input", type=Path, help="translate: tokenized source sentences")
    p.add_argument("--steps", type=positive, default=20, help="updates (train) or batches (translate) to time")
    add_beam_arguments(p)
    p.add_argument("--batch-size", type=positive, default=32, help="translate: sentences per batch")
    p.add_argument("--src", type=Path, help="select: tokenized pool, source side")
    p.add_argument("--tgt", type=Path, help="select: tokenized pool, target side")
    p.add_argument("--indomain-src", type=Path, help="select: tokenized in-domain text, source side")
    p.add_argument("--indomain-tgt", type=Path, help="select: tokenized in-domain text, target side")
    p.add_argument("--order", type=positive, default=4, help="select: n-gram order")
    p.add_argument("--chunk-lines", type=positive, default=200_000, help="select: pairs scored at once")
    add_device_arguments(p)
    p.add_argument("--output", type=Path, help="also write the JSON here")


@command("bench", "measure training, translation or selection-scoring speed; prints JSON", args_bench)
def run_bench(a: argparse.Namespace) -> None:
    from rnnmt.bench import bench_command

    bench_command(a)


# --- entry point --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rnnmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add_args, run, help_text) in COMMANDS.items():
        # argparse %-formats help strings (not descriptions): a literal "95%" must reach it as "95%%".
        p = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        add_args(p)
        p.add_argument("--threads", type=positive, default=1, help="torch threads / worker processes (default 1)")
        p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # `train --processes N` starts itself again under torchrun
    from rnnmt.fileio import disk_full_cause

    try:
        from rnnmt.runtime import set_threads

        set_threads(args.threads)
        args.run(args)
    except UserError as exc:
        print(f"rnnmt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if (full := disk_full_cause(exc)) is None:
            raise
        # A write outside atomic_path (which names its file itself): say "disk full", not a traceback.
        where = f" while writing {full.filename}" if full.filename else ""
        print(f"rnnmt {args.command}: error: the disk is full ({full.strerror}){where}; free some space and run again.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
