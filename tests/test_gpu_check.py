"""scripts/gpu_check.py, the prepared GPU run, checked without a GPU: its dry run prints every command, each of which
rnnmt's command line accepts, and names the prepared inputs that are missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def dry_run(gpu_dir: Path, out: Path, *parts: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(SCRIPT), "run", "--dry-run", "--gpu-dir", str(gpu_dir), "--out", str(out), *(["--parts", *parts] if parts else [])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_the_dry_run_lists_every_part_and_each_command_parses(tmp_path):
    for pair in ("en-fr", "en-de"):
        for name in ("train.pt", "dev.pt", "vocab.src.json", "vocab.tgt.json"):
            (tmp_path / "gpu" / "data" / pair).mkdir(parents=True, exist_ok=True)
            (tmp_path / "gpu" / "data" / pair / name).touch()
    multi30k = tmp_path / "gpu" / "data" / "multi30k-en-de"
    multi30k.mkdir(parents=True)
    for name in (
        "train.pt",
        "dev.pt",
        "vocab.en.json",
        "vocab.de.json",
        "bpe.joint.codes",
        "test.en",
        "test.de",
        "test.raw.de",
        "decode.json",
        "system-auto.json",
        "system-float32.json",
    ):
        (multi30k / name).touch()
    run = dry_run(tmp_path / "gpu", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    parts = [line.split("]")[0].strip("[") for line in run.stdout.splitlines() if line.startswith("[")]
    assert sorted(set(parts)) == ["concurrent", "determinism", "multi30k", "precision", "realrun", "suite"]
    assert "-m cuda" in run.stdout and "tests/test_determinism.py" in run.stdout  # the suite includes the repeatability tests
    assert "--deterministic on" in run.stdout and "--deterministic off" in run.stdout
    assert "bench precision --paper-shape rnnsearch-50" in run.stdout and "bench precision --paper-shape luong-localp-general-feed" in run.stdout
    assert "bench corpus --paper-shape rnnsearch-50" in run.stdout and " train --system " in run.stdout and "bench batches" in run.stdout
    assert "--concurrent 3" in run.stdout and "under MPS" in run.stdout
    assert "--system " + str(tmp_path / "gpu" / "data" / "multi30k-en-de" / "system-float32.json") in run.stdout  # the multi30k scale in float32 too
    assert "score --hyps" in run.stdout and "--lowercase" in run.stdout
    assert "22 commands" in run.stdout


def test_the_dry_run_names_what_prepare_must_make_and_a_wrong_option_fails(tmp_path, monkeypatch):
    run = dry_run(tmp_path / "nothing", tmp_path / "out", "precision")
    assert run.returncode == 1
    assert "missing inputs (run `python3 scripts/gpu_check.py prepare` beside ../shared first)" in run.stdout
    assert str(tmp_path / "nothing" / "data" / "en-fr" / "train.pt") in run.stdout
    unknown = dry_run(tmp_path / "nothing", tmp_path / "out", "speed")
    assert unknown.returncode == 2 and "unknown parts speed" in unknown.stderr
