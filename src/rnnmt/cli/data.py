"""Data commands: the synthetic demo corpus, WMT downloads and extraction, raw parallel corpora."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rnnmt.cli.arguments import Command, key_value, positive, seed


def demo_corpus_arg(text: str) -> tuple[str, object]:
    """NAME:PAIRS:ROLE:DOMAIN, e.g. demo-test:1000:eval:news."""
    from rnnmt.data.demo import DemoCorpus

    parts = text.split(":")
    if len(parts) != 4 or not parts[1].isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME:PAIRS:ROLE:DOMAIN (e.g. demo-test:1000:eval:news), got {text!r}")
    name, pairs, role, domain = parts
    return name, DemoCorpus(int(pairs), role, domain)


def args_demo_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=seed, required=True)
    p.add_argument(
        "--corpus",
        type=demo_corpus_arg,
        action="append",
        required=True,
        metavar="NAME:PAIRS:ROLE:DOMAIN",
        help="a corpus to write (repeatable): role train or eval (dev/test), domain news or pool",
    )


def run_demo_corpus(a: argparse.Namespace) -> None:
    from rnnmt.data.demo import generate_demo_corpus

    report = generate_demo_corpus(a.out_dir, dict(a.corpus), seed=a.seed)
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


def run_extract(a: argparse.Namespace) -> None:
    from rnnmt.data.archives import extract_members

    written = extract_members(a.archive, {member: Path(out) for member, out in a.member})
    print(json.dumps(written, indent=2))


def args_sgm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)


def run_sgm(a: argparse.Namespace) -> None:
    from rnnmt.data.sgm import sgm_to_text

    print(f"{sgm_to_text(a.input, a.output)} segments -> {a.output}", file=sys.stderr)


def args_assemble(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", type=Path, nargs="+", required=True)
    p.add_argument("--tgt", type=Path, nargs="+", required=True)
    p.add_argument("--out-src", type=Path, required=True)
    p.add_argument("--out-tgt", type=Path, required=True)
    p.add_argument("--report", type=Path, help="write the counts per input (JSON) here too")


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


def run_raw_corpus(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import assemble_raw
    from rnnmt.fileio import write_json

    r = assemble_raw(a.src, a.tgt, a.out_src, a.out_tgt, name=a.name, heldout=a.heldout, fmt=a.format, expected_lines=a.expected_lines)
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


def run_corpus_report(a: argparse.Namespace) -> None:
    from rnnmt.data.corpus import merge_report_files, mismatch_warnings
    from rnnmt.fileio import write_json

    summary = merge_report_files(a.input, a.pair)
    write_json(a.output, summary)
    for warning in mismatch_warnings(summary):
        print(warning, file=sys.stderr)


COMMANDS = [
    Command("demo-corpus", "generate the synthetic demo corpus (raw per-corpus files)", args_demo_corpus, run_demo_corpus, torch=False),
    Command("download", "download an archive with resume, retries and checksum verification", args_download, run_download, torch=False),
    Command("extract", "extract named members of a tar/tgz safely (a .gz member to a non-.gz output is decompressed)", args_extract, run_extract, torch=False),
    Command("sgm", "plain text of a WMT SGM test/dev file (sacrebleu's extraction rule)", args_sgm, run_sgm, torch=False),
    Command("assemble", "concatenate and clean parallel corpora into one pair of files", args_assemble, run_assemble, torch=False),
    Command("raw-corpus", "one WMT corpus's extracted files to two raw parallel UTF-8 files and a report", args_raw_corpus, run_raw_corpus, torch=False),
    Command("corpus-report", "merge the raw-corpus reports of one language pair into one summary", args_corpus_report, run_corpus_report, torch=False),
]
