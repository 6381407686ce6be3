"""Shared fixtures: single-threaded torch, tiny models and a tiny parallel corpus."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from rnnmt.models.build import build_model
from rnnmt.text.binarize import binarize
from rnnmt.text.vocab import build_shortlist

torch.set_num_threads(1)

NO_CUDA = "no CUDA device here: the GPU suite (`python -m pytest -m cuda`) runs on a machine with one"

# Whether the long tests may change this machine: install packages with apt-get, start daemons (a test Slurm's
# munged, slurmctld and slurmd). Only where asked, as CI does (.ci/run); tests/slurm/cluster.sh reads the same variable.
SYSTEM_CHANGES = "RNNMT_TEST_SYSTEM_CHANGES"


def system_changes_allowed() -> bool:
    return os.environ.get(SYSTEM_CHANGES) == "1"


def system_changes_needed(what: str) -> str:
    """The one skip line of a test that would change this machine: `what` it would need, then how to allow it."""
    return f"{what}: set {SYSTEM_CHANGES}=1 to allow it"


# `-n auto`'s workers (pyproject.toml): two, at most the cores. The default run's tests are single-threaded, so two
# cores halve its time; the long tests (-m integration) leave a core idle while Slurm schedules their jobs, so a
# second worker runs other modules meanwhile. The GPU suite (-m cuda: one device) takes one process, unless it asks
# for workers itself (-n N, PYTEST_XDIST_AUTO_NUM_WORKERS).
DEFAULT_WORKERS = 2
SELECTS = r"(?<!not )\b{}\b"  # a -m expression that selects the marker, not one that leaves it out


def selects(config: pytest.Config, marker: str) -> bool:
    return re.search(SELECTS.format(marker), config.getoption("markexpr")) is not None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers `-n auto` starts: DEFAULT_WORKERS (at most the cores), or none for the GPU suite."""
    if "PYTEST_XDIST_AUTO_NUM_WORKERS" in os.environ:
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    cores = len(os.sched_getaffinity(0))
    return 0 if selects(config, "cuda") or cores < 2 else min(DEFAULT_WORKERS, cores)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The long tests go to the workers a module at a time, so that a module's fixtures (a Slurm cluster, a workflow's
    run) start once; other runs as pytest-xdist spreads them by default."""
    if not selects(config, "integration"):
        return None
    from xdist.scheduler import LoadFileScheduling

    return LoadFileScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `cuda` skip, with one line saying why, where torch sees no CUDA device."""
    if torch.cuda.is_available():
        return
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=NO_CUDA))


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "wmt14"


def tiny_model_config(encoder: str = "bigru", attention: str = "additive", init: str = "uniform") -> dict:
    return {"encoder": encoder, "attention": attention, "emb": 8, "hidden": 12, "align_hidden": 10, "maxout": 6, "output_rank": None, "init": init}


def assert_padding_does_not_change_a_sentence(model: torch.nn.Module) -> None:
    """A sentence's logits are the same alone and in a batch beside a longer one (source and target padded)."""
    alone = torch.tensor([[3, 4, 2]])
    padded = torch.tensor([[3, 4, 2, 0, 0], [5, 6, 7, 8, 2]])
    tgt = torch.tensor([[5, 6, 2], [7, 2, 0]])
    with torch.no_grad():
        a, _ = model(alone, alone != 0, tgt[:1])
        b, _ = model(padded, padded != 0, tgt)
    torch.testing.assert_close(a[0], b[0])


def tiny_luong_config(attention: str = "global", score: str = "general", **changes) -> dict:
    """A 2-layer Luong model: reversed source without EOS, input feeding, no biases."""
    return {
        "encoder": "lstm",
        "decoder": "lstm",
        "attention": attention,
        "score": score,
        "emb": 8,
        "hidden": 12,
        "layers": 2,
        "dropout": 0.0,
        "bias": False,
        "state_clip": None,
        "feed_input": True,
        "window": 2,
        "max_positions": 10,
        "source_eos": False,
        "reverse_source": True,
        "init": "luong",
        "init_range": 0.3,
        **changes,
    }


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return build_model(tiny_model_config(), 20, 20).eval()


def tiny_system(name: str = "tiny", updates: int = 6, **train) -> dict:
    return {
        "name": name,
        "label": name,
        "pair": "en-fr",
        "seed": 3,
        "model": tiny_model_config(),
        "train": {
            "optimizer": {"name": "adam", "lr": 0.01},
            "loss": "sum",
            "clip_norm": 1.0,
            "batch_size": 4,
            "sort_k_batches": 2,
            "max_len": 6,
            "updates": updates,
            "valid_every": 3,
            "log_every": 2,
            "checkpoint_every": 2,
            "patience": None,
            **train,
        },
    }


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> dict[str, Path]:
    """A 40-pair toy corpus (the target copies the source, reversed), binarized with its vocabularies."""
    words = "a b c d e f g h".split()
    src, tgt = [], []
    for i in range(40):
        n = 2 + i % 7
        sent = [words[(i * 3 + k) % len(words)] for k in range(n)]
        src.append(" ".join(sent))
        tgt.append(" ".join(w.upper() for w in reversed(sent)))
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n")
    (tmp_path / "t.txt").write_text("\n".join(tgt) + "\n")
    sv, tv = build_shortlist(src, 100), build_shortlist(tgt, 100)
    sv.save(tmp_path / "sv.json")
    tv.save(tmp_path / "tv.json")
    binarize(tmp_path / "s.txt", tmp_path / "t.txt", sv, tv, tmp_path / "data.pt")
    return {"data": tmp_path / "data.pt", "src_vocab": tmp_path / "sv.json", "tgt_vocab": tmp_path / "tv.json", "dir": tmp_path}


def corrupt_bytes(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite the first occurrence of `old` in a file by `new` (same length), as a disk fault would."""
    at = path.read_bytes().index(old)
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(new)
        os.fsync(f.fileno())
