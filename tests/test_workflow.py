"""The Snakemake workflow: lint, dry run, config errors before any job, and a tiny end-to-end run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


def snakemake(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_dry_run_of_the_demo_plans_every_stage(tmp_path):
    run = snakemake("-n", "--directory", str(tmp_path))
    assert run.returncode == 0, run.stderr
    for rule in ("generate_demo_corpus", "tokenize", "select_data", "build_vocab", "train", "translate", "score", "table"):
        assert rule in run.stdout, rule
    assert "rnnsearch-50star" not in run.stdout  # a paper-only system


def test_lint_has_only_the_documented_environment_lint():
    run = snakemake("--lint")
    text = run.stdout + run.stderr
    lints = [line.strip() for line in text.splitlines() if line.strip().startswith("* ")]
    assert lints and set(lints) == {"* Specify a conda environment or container for each rule.:"}


def test_unknown_config_key_stops_before_any_job(tmp_path):
    run = snakemake("--cores", "1", "--directory", str(tmp_path), "--config", "evalution=3")
    assert run.returncode != 0
    assert "unknown key 'evalution'" in run.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_tiny_end_to_end_then_nothing_to_do(tmp_path):
    args = ("--cores", "2", "--directory", str(tmp_path), "--configfile", str(ROOT / "tests" / "config" / "tiny.yaml"))
    run = snakemake(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results"
    for name in ("tables/bahdanau2014_table1.md", "tables/bahdanau2014_table2.csv", "figures/bahdanau2014_fig2.png",
                 "figures/bahdanau2014_fig3.png", "provenance.json", "models/rnnsearch-50/meta.json"):  # fmt: skip
        assert (results / name).stat().st_size > 0, name
    assert "Synthetic demo data" in (results / "tables/bahdanau2014_table1.md").read_text()
    again = snakemake(*args, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
