"""Data-parallel training (torchrun, DDP on gloo): two processes reach the parameters of one process
that trains on the same global batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rnnmt.models.artifact import load_model

from conftest import tiny_system


def train_command(system: Path, corpus: dict[str, Path], out: Path) -> list[str]:
    return [
        "train",
        "--system",
        str(system),
        "--train",
        str(corpus["data"]),
        "--valid",
        f"dev={corpus['data']}",
        "--src-vocab",
        str(corpus["src_vocab"]),
        "--tgt-vocab",
        str(corpus["tgt_vocab"]),
        "--out-dir",
        str(out),
        "--device",
        "cpu",
        "--threads",
        "1",
    ]


@pytest.mark.parametrize("loss", ["token_mean", "sentence_mean"])
def test_two_processes_reach_the_parameters_of_one(tiny_corpus, tmp_path: Path, loss: str):
    system = tmp_path / "system.json"
    system.write_text(
        json.dumps(
            tiny_system(updates=5, loss=loss, batch_size=6, valid_every=1000, checkpoint_every=1000, optimizer={"name": "sgd", "lr": 0.5}, clip_norm=1000.0)
        )
    )
    one, two = tmp_path / "one", tmp_path / "two"
    single = subprocess.run([sys.executable, "-m", "rnnmt.cli", *train_command(system, tiny_corpus, one)], capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    # What the workflow runs for a job with two GPUs: rnnmt starts itself again under torchrun.
    parallel = subprocess.run(
        [sys.executable, "-m", "rnnmt.cli", *train_command(system, tiny_corpus, two), "--processes", "2"], capture_output=True, text=True, timeout=300
    )
    assert parallel.returncode == 0, parallel.stderr[-3000:]
    assert "processes 2" in parallel.stderr and parallel.stderr.count("wrote ") == 1  # only rank 0 writes
    meta = json.loads((two / "meta.json").read_text())
    assert meta["processes"] == 2 and meta["updates"] == 5
    a = load_model(one / "model.pt", torch.device("cpu")).model.state_dict()
    b = load_model(two / "model.pt", torch.device("cpu")).model.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=1e-5, msg=name)
    # The logged training NLL is the whole batch's, not one process's share.
    assert meta["train_nll"] == pytest.approx(json.loads((one / "meta.json").read_text())["train_nll"], rel=1e-5)
