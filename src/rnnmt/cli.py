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


def load_vocabs(a: argparse.Namespace) -> tuple:
    """(source vocab, target vocab, source BPE segmenter or None, target BPE segmenter or None)."""
    from rnnmt.text.bpe import BpeSegmenter
    from rnnmt.text.vocab import Vocab

    return (Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab), *(BpeSegmenter(p) if p else None for p in (a.src_bpe, a.tgt_bpe)))


# --- data ---------------------------------------------------------------------------------------


def args_demo_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1234)
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


@command("assemble", "concatenate and clean parallel corpora into one pair of files", args_assemble)
def run_assemble(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import assemble

    print(json.dumps(assemble(a.src, a.tgt, a.out_src, a.out_tgt), indent=2))


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


def args_select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=["none", "lium"], required=True, help="none: keep all; lium: the pool is LIUM's selection")
    p.add_argument("--src", type=Path, required=True, help="tokenized pool, source side")
    p.add_argument("--tgt", type=Path, required=True)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)


@command("select", "data selection from the general pool (methods none and lium keep every pair)", args_select)
def run_select(a: argparse.Namespace) -> None:
    from rnnmt.select.selection import select

    print(json.dumps(select(a.method, a.src, a.tgt, a.out_src, a.out_tgt), indent=2))


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
    p.add_argument("--device", default="auto")


@command("train", "train one system; resumes from OUT_DIR/ckpt/last.pt when it matches", args_train)
def run_train(a: argparse.Namespace) -> None:
    from rnnmt.train.run import train_system

    train_system(a)


def args_translate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--input", type=Path, help="tokenized source, one sentence per line (default: stdin)")
    p.add_argument("--output", type=Path, help="default: stdout")
    p.add_argument("--lines", type=Path, help="translate only these 0-based line numbers (a file of integers)")
    p.add_argument("--raw", action="store_true", help="tokenize the input and detokenize the output")
    p.add_argument("--beam", type=positive, default=10)
    p.add_argument("--normalize", action="store_true", help="rank by log-probability per word")
    p.add_argument("--no-unk", action="store_true", help="never emit UNK (falls back when nothing finishes)")
    p.add_argument("--batch-size", type=positive, default=32)
    p.add_argument("--device", default="auto")


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
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--beam", type=positive, default=10)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--device", default="auto")


@command("align", "attention weights of translated sample sentences (Bahdanau Figure 3)", args_align)
def run_align(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.alignments import align_command

    align_command(a)


# --- evaluation ---------------------------------------------------------------------------------


def args_score(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hyps", type=Path, required=True)
    p.add_argument("--hyps-nounk", type=Path, required=True)
    p.add_argument("--nounk-ids", type=Path, required=True)
    p.add_argument("--refs-tok", type=Path, required=True)
    p.add_argument("--refs-raw", type=Path, required=True)
    p.add_argument("--src-tok", type=Path, required=True)
    p.add_argument("--lang", required=True)
    p.add_argument("--window", type=positive, default=10)
    p.add_argument("--max-length", type=positive, default=60)
    p.add_argument("--threshold", type=positive, default=30)
    p.add_argument("--length-by", choices=["source", "reference"], default="source")
    p.add_argument("--output", type=Path, required=True)


@command("score", "BLEU (tokenized multi-bleu and detokenized sacreBLEU), No-UNK and length curve", args_score)
def run_score(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.score import score_system
    from rnnmt.fileio import write_json

    scores = score_system(
        hyps_all=a.hyps, refs_tok=a.refs_tok, refs_raw=a.refs_raw, src_tok=a.src_tok, lang=a.lang, hyps_nounk=a.hyps_nounk,
        nounk_ids=a.nounk_ids, window=a.window, max_x=a.max_length, threshold=a.threshold, length_by=a.length_by,
    )  # fmt: skip
    write_json(a.output, scores)
    nounk = "n/a (empty subset)" if scores["bleu_nounk"] is None else f"{scores['bleu_nounk']:.2f}"
    print(f"BLEU all {scores['bleu_all']:.2f}, No-UNK {nounk}", file=sys.stderr)


def args_table(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, help="JSON: {kind, title, demo, rows: [...], check?}")
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)


@command("table", "render a paper table: reproduced next to published numbers", args_table)
def run_table(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import table_command

    table_command(json.loads(a.spec), a.csv, a.md)


def args_plot_length(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curve", type=key_value, action="append", required=True, metavar="LABEL=SCORES_JSON")
    p.add_argument("--title", required=True)
    p.add_argument("--xlabel", default="Sentence length (source tokens)")
    p.add_argument("--banner")
    p.add_argument("--output", type=Path, required=True)


@command("plot-length", "BLEU against sentence length (Bahdanau Figure 2)", args_plot_length)
def run_plot_length(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.plots import plot_length_curves
    from rnnmt.fileio import read_json

    curves = {label: read_json(path)["length_curve"] for label, path in a.curve}
    plot_length_curves(curves, a.output, title=a.title, xlabel=a.xlabel, banner=a.banner)


def args_plot_alignments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--output", type=Path, required=True)


@command("plot-alignments", "alignment heat maps (Bahdanau Figure 3)", args_plot_alignments)
def run_plot_alignments(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.plots import plot_alignments
    from rnnmt.fileio import read_json

    plot_alignments(read_json(a.input), a.output, title=a.title)


def args_provenance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the validated config as JSON")
    p.add_argument("--output", type=Path, required=True)


@command("provenance", "record config, package versions, git revision and hardware", args_provenance)
def run_provenance(a: argparse.Namespace) -> None:
    from rnnmt.provenance import write_provenance

    write_provenance(json.loads(a.config), a.output)


def args_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["train", "translate"])
    p.add_argument("--system", type=Path, help="train: resolved system config (JSON)")
    p.add_argument("--data", type=Path, help="train: binarized training data")
    p.add_argument("--src-vocab", type=Path, help="train: source vocabulary")
    p.add_argument("--tgt-vocab", type=Path, help="train: target vocabulary")
    p.add_argument("--model", type=Path, help="translate: a trained model")
    p.add_argument("--input", type=Path, help="translate: tokenized source sentences")
    p.add_argument("--steps", type=positive, default=20, help="updates (train) or batches (translate) to time")
    p.add_argument("--beam", type=positive, default=10)
    p.add_argument("--batch-size", type=positive, default=32, help="translate: sentences per batch")
    p.add_argument("--device", default="auto")
    p.add_argument("--output", type=Path, help="also write the JSON here")


@command("bench", "measure training or translation speed; prints JSON", args_bench)
def run_bench(a: argparse.Namespace) -> None:
    from rnnmt.bench import bench_command

    bench_command(a)


# --- entry point --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rnnmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add_args, run, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_args(p)
        p.add_argument("--threads", type=positive, default=1, help="torch threads / worker processes (default 1)")
        p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from rnnmt.runtime import set_threads

        set_threads(args.threads)
        args.run(args)
    except UserError as exc:
        print(f"rnnmt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
