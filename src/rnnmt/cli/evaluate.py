"""Evaluation commands: BLEU scores, the paper tables and claims, figures, provenance."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnmt.cli.arguments import Command, positive


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
    p.add_argument("--lowercase", action="store_true", help="case-insensitive sacreBLEU (text lowercased before tokenization)")
    p.add_argument("--output", type=Path, required=True)


def run_score(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.score import score_system
    from rnnmt.fileio import write_json

    scores = score_system(
        hyps_all=a.hyps,
        refs_tok=a.refs_tok,
        refs_raw=a.refs_raw,
        src_tok=a.src_tok,
        lang=a.lang,
        hyps_nounk=a.hyps_nounk,
        nounk_ids=a.nounk_ids,
        window=a.window,
        max_x=a.max_length,
        threshold=a.threshold,
        length_by=a.length_by,
        group_size=a.group_size,
        rejoin=a.rejoin_hyphens,
        lowercase=a.lowercase,
    )
    write_json(a.output, scores)
    nounk = "n/a" if scores["bleu_nounk"] is None else f"{scores['bleu_nounk']:.2f}"
    print(f"BLEU all {scores['bleu_all']:.2f}, No-UNK {nounk}", file=sys.stderr)


def add_table_arguments(p: argparse.ArgumentParser, spec_help: str) -> None:
    """A JSON spec file in (the workflow writes it under results/config/), the table out as CSV and Markdown."""
    p.add_argument("--spec", type=Path, required=True, help=spec_help)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)


def args_table(p: argparse.ArgumentParser) -> None:
    add_table_arguments(p, "JSON file: {kind, title, demo, rows: [...], check?}")


def run_table(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import table_command
    from rnnmt.fileio import read_json_file

    table_command(read_json_file(a.spec, "the table spec"), a.csv, a.md)


def args_claims(p: argparse.ArgumentParser) -> None:
    add_table_arguments(
        p,
        "JSON file: {title, demo, comparable, samples, seed, claims: [{paper, claim, a, b, runs_a: [{seed, hyps}], runs_b, refs, rejoin, published, tolerance}]}",
    )


def run_claims(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import claims_command
    from rnnmt.fileio import read_json_file

    claims_command(read_json_file(a.spec, "the claims spec"), a.csv, a.md)


def args_variants(p: argparse.ArgumentParser) -> None:
    add_table_arguments(
        p,
        "JSON file: {title, demo, samples, seed, groups: [{baseline: {label, runs: [{seed, hyps, scores, meta}]}, variants, refs_tok, refs_raw, lang, rejoin, lowercase}]}",
    )


def run_variants(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import variants_command
    from rnnmt.fileio import read_json_file

    variants_command(read_json_file(a.spec, "the variants spec"), a.csv, a.md)


def args_coverage(p: argparse.ArgumentParser) -> None:
    add_table_arguments(p, "JSON file: {title, rows: [{paper, item, status, output, note, this run}]}")


def run_coverage(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.report import coverage_command
    from rnnmt.fileio import read_json_file

    coverage_command(read_json_file(a.spec, "the coverage spec"), a.csv, a.md)


def args_figure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", type=Path, required=True, help="JSON file: {kind, title, banner, curves: [{label, files}], ...} (evaluate/figures.py)")
    p.add_argument("--output", type=Path, required=True, help="the PNG to write")


def run_figure(a: argparse.Namespace) -> None:
    from rnnmt.evaluate.figures import figure_command
    from rnnmt.fileio import read_json_file

    figure_command(read_json_file(a.spec, "the figure spec"), a.output)


def args_provenance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, required=True, help="the validated config as a JSON file")
    p.add_argument("--output", type=Path, required=True)


def run_provenance(a: argparse.Namespace) -> None:
    from rnnmt.fileio import read_json_file
    from rnnmt.provenance import write_provenance

    write_provenance(read_json_file(a.config, "the config"), a.output)


COMMANDS = [
    Command("score", "BLEU (tokenized multi-bleu and detokenized sacreBLEU), No-UNK and length curve", args_score, run_score, torch=False),
    Command("table", "render a paper table: reproduced next to published numbers", args_table, run_table, torch=False),
    Command("claims", "paired-bootstrap 95% intervals for the BLEU differences the papers' claims rest on", args_claims, run_claims, torch=False),
    Command(
        "variants",
        "each variant against its baseline: BLEU and sacreBLEU with paired bootstrap p-values, perplexity, BLEU by length",
        args_variants,
        run_variants,
        torch=False,
    ),
    Command("coverage", "the list of the papers' tables and figures, and which this run regenerates", args_coverage, run_coverage, torch=False),
    Command("figure", "draw a figure: BLEU by length, learning curves or alignments (evaluate/figures.py)", args_figure, run_figure, torch=False),
    Command("provenance", "record config, installed packages against the lock, git revision and hardware", args_provenance, run_provenance),
]
