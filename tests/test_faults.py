"""Fault injection that must keep working: a SIGKILLed workflow resumes to the same parameters, a full disk
leaves nothing partial and says so in one line, and outputs are readable by collaborators."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rnnmt.metrics_file import read_metrics
from rnnmt.models.artifact import load_model

from conftest import tiny_system

ROOT = Path(__file__).resolve().parents[1]
TRAINED = "results/models/rnnsearch-50"
# The tiny workflow config, with one system training long enough to be killed in the middle.
LONG_TRAINING = "systems:\n  rnnsearch-50: {overrides: {demo: {train: {updates: 400, checkpoint_every: 50, valid_every: 1000, log_every: 50}}}}\n"


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    overlay = workdir / "long.yaml"
    overlay.write_text(LONG_TRAINING)
    configs = ("--configfile", str(ROOT / "tests" / "config" / "tiny.yaml"), str(overlay))
    return [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir), *configs, *args]


def run_snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_command(workdir, *args), capture_output=True, text=True, timeout=900, preexec_fn=lambda: os.umask(0o022))


def parameters(model_file: Path) -> dict[str, torch.Tensor]:
    return dict(load_model(model_file, torch.device("cpu")).model.state_dict())


@pytest.mark.integration
def test_sigkill_of_the_whole_workflow_then_unlock_and_rerun_gives_the_same_parameters(tmp_path: Path):
    target = f"{TRAINED}/model.pt"
    run = subprocess.Popen(
        snakemake_command(tmp_path, "--cores", "2", target),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(0o022),
    )
    checkpoint = tmp_path / TRAINED / "ckpt" / "last.pt"
    deadline = time.monotonic() + 600
    while not checkpoint.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert checkpoint.exists(), "training never wrote a checkpoint"
    os.killpg(run.pid, signal.SIGKILL)  # snakemake, its job shell and rnnmt train: a node failure, an OOM kill
    run.wait(timeout=60)
    assert not (tmp_path / target).exists(), "training ended before the kill; make it longer"

    locked = run_snakemake(tmp_path, "--cores", "2", target)
    # Snakemake's lock outlives a SIGKILL: the README says to run `snakemake --unlock`, then the same command.
    assert locked.returncode != 0 and "cannot be locked" in locked.stderr and "--unlock" in locked.stderr
    assert run_snakemake(tmp_path, "--unlock").returncode == 0
    resumed = run_snakemake(tmp_path, "--cores", "2", target)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = (tmp_path / "results/logs/train/rnnsearch-50.log").read_text()
    assert "resumed from" in log and json.loads((tmp_path / TRAINED / "meta.json").read_text())["updates"] == 400
    after_kill = parameters(tmp_path / target)

    # Every output is readable by the group and others under umask 022 (atomic writes made them 0600).
    private = [str(p.relative_to(tmp_path)) for p in (tmp_path / "results").rglob("*") if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o044 != 0o044]
    assert not private, private

    for path in sorted((tmp_path / TRAINED).rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    straight = run_snakemake(tmp_path, "--cores", "2", target)
    assert straight.returncode == 0, straight.stderr[-3000:]
    assert "resumed from" not in (tmp_path / "results/logs/train/rnnsearch-50.log").read_text()
    uninterrupted = parameters(tmp_path / target)
    assert after_kill.keys() == uninterrupted.keys()
    for name, value in uninterrupted.items():
        assert torch.equal(after_kill[name], value), name


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs of the test's own; skipped where mounting is not allowed (it needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the disk-full test ({done.stderr.strip() or 'mount failed'}); it needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill `disk` up to `leave` free bytes with one file; deleting it frees the space again."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * (free - leave))
    return filler


def train_args(corpus: dict[str, Path], system: Path, out: Path) -> list[str]:
    return [
        "train",
        "--system",
        str(system),
        "--train",
        str(corpus["data"]),
        "--src-vocab",
        str(corpus["src_vocab"]),
        "--tgt-vocab",
        str(corpus["tgt_vocab"]),
        "--out-dir",
        str(out),
        "--device",
        "cpu",
    ]


def test_a_full_disk_stops_training_in_one_line_and_leaves_nothing_partial(tiny_corpus, tmp_path: Path, small_disk: Path):
    from rnnmt.cli import main

    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=6)))
    assert main(train_args(tiny_corpus, system, tmp_path / "reference")) == 0
    out = small_disk / "model"
    filler = fill(small_disk, leave=8192)  # less than a checkpoint of the tiny model
    run = subprocess.run([sys.executable, "-m", "rnnmt.cli", *train_args(tiny_corpus, system, out)], capture_output=True, text=True, timeout=300)
    errors = [line for line in run.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert run.returncode == 2 and len(errors) == 1, run.stderr
    assert errors[0].startswith("rnnmt train: error: the disk is full: cannot write") and "nothing partial was kept" in errors[0]
    # The run's record (metrics.jsonl, TensorBoard events) may stay, as a log does: a rerun starts it again.
    leftovers = [p.name for p in out.rglob("*") if p.is_file() and p.name != "metrics.jsonl" and p.parent.name != "tensorboard"]
    assert leftovers == [], leftovers  # no .part file, no model.pt, no meta.json
    filler.unlink()
    assert main(train_args(tiny_corpus, system, out)) == 0
    assert [row["update"] for row in read_metrics(out / "metrics.jsonl")] == list(range(1, 7))
    expected = parameters(tmp_path / "reference" / "model.pt")
    for name, value in parameters(out / "model.pt").items():
        assert torch.equal(value, expected[name]), name


def test_a_full_disk_while_writing_text_names_the_file(tmp_path: Path, small_disk: Path, capsys):
    from rnnmt.cli import main

    src = tmp_path / "in.en"
    src.write_text("A sentence, long enough to fill a few blocks of the small disk.\n" * 2000)
    fill(small_disk, leave=4096)
    assert main(["tokenize", "--lang", "en", "--input", str(src), "--output", str(small_disk / "out.en")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1]
        == f"rnnmt tokenize: error: the disk is full: cannot write {small_disk / 'out.en'} (No space left on device); nothing partial was kept — free some space and run again."
    )
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
