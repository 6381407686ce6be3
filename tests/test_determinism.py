"""train.deterministic: a GPU run repeats bit for bit (train/determinism.py). On a CPU: what the setting resolves to
and what it sets. On a GPU (`python -m pytest -m cuda`): the same system trained twice with default settings writes
identical parameters, at tiny sizes and at paper shape, and a run stopped by SIGTERM and resumed ends identical to
one that was not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rnnmt.text.vocab import Vocab
from rnnmt.train import determinism, device_choices
from rnnmt.train.defaults import TRAIN_DEFAULTS
from rnnmt.train.loop import Trainer, TrainingInterrupted

from test_graphs import make_trainer
from test_training import interrupt_at, stop_signal_handlers  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("device", "given", "value", "why"),
    [
        ("cuda", "auto", "on", "auto: deterministic algorithms and a fixed cuBLAS workspace"),
        ("cpu", "auto", "on", "auto: a CPU's kernels are deterministic at a fixed thread count"),
        ("cuda", "off", "off", "given in the config"),
    ],
)
def test_deterministic_is_on_unless_the_config_says_off(device, given, value, why):
    choice = device_choices.choose({**TRAIN_DEFAULTS, "deterministic": given}, torch.device(device))["deterministic"]
    assert choice.value == value and choice.why.startswith(why)


@pytest.fixture
def restore_torch_flags():
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    fill = torch.utils.deterministic.fill_uninitialized_memory
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
    torch.utils.deterministic.fill_uninitialized_memory = fill


def test_on_a_gpu_it_sets_torchs_deterministic_mode_and_cudnn_and_on_a_cpu_nothing(restore_torch_flags):
    torch.use_deterministic_algorithms(False)
    determinism.apply(True, torch.device("cpu"))
    assert not torch.are_deterministic_algorithms_enabled()
    determinism.apply(True, torch.device("cuda"))
    assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert not torch.utils.deterministic.fill_uninitialized_memory  # no fill kernel per allocation
    determinism.apply(False, torch.device("cuda"))
    assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark


def test_rnnmt_fixes_the_cublas_workspace_before_any_command_runs_and_keeps_a_users_value():
    probe = "import os, sys; from rnnmt import cli; cli.determinism.prepare_process(); print(os.environ['CUBLAS_WORKSPACE_CONFIG'])"
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    assert subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.strip() == ":4096:8"
    mine = subprocess.run([sys.executable, "-c", probe], env={**env, "CUBLAS_WORKSPACE_CONFIG": ":16:8"}, capture_output=True, text=True, check=True)
    assert mine.stdout.strip() == ":16:8"
    assert "determinism.prepare_process()" in (ROOT / "src/rnnmt/cli/__init__.py").read_text()


# --- on a GPU ---------------------------------------------------------------------------------------------

REPEATED = ["rnnsearch", "luong-global-feed", "luong-local-p-clipped"]


def parameters(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().cpu().clone() for name, p in trainer.model.named_parameters()}


def assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs by {float((a[name] - b[name]).abs().max()):.3g}"


@pytest.mark.cuda
@pytest.mark.parametrize("name", REPEATED)
def test_a_tiny_system_trained_twice_on_a_gpu_writes_identical_parameters(tiny_corpus, tmp_path, name):
    """Default settings on a GPU (bfloat16, captured graphs, recurrence kernels), 24 updates, twice."""
    runs = []
    for attempt in ("a", "b"):
        trainer = make_trainer(tiny_corpus, tmp_path / attempt, name, device="cuda", updates=24, valid_every=12, checkpoint_every=1000)
        assert trainer.choices["deterministic"].value == "on" and trainer.choices["graph"].value == "cuda"
        trainer.run()
        runs.append(parameters(trainer))
    assert_identical(*runs)


def paper_shape_trainer(name: str, out_dir: Path, updates: int) -> Trainer:
    """A paper system at its paper shape on random batches (`rnnmt bench train --paper-shape`'s), default settings."""
    from rnnmt.bench.paper_shape import _paper_shape

    shape = _paper_shape(ROOT / "config.yaml", name)
    system = {**shape["system"], "train": {**shape["system"]["train"], "updates": updates, "valid_every": 10**6, "log_every": 10, "checkpoint_every": 10**6}}
    vocab: Vocab = shape["vocab"]
    return Trainer(system, shape["data"], {}, vocab, vocab, out_dir, torch.device("cuda"), {"train": "random"})


PAPER = ["rnnsearch-50", "luong-global-general-feed", "luong-localp-general-feed"]


@pytest.mark.cuda
@pytest.mark.parametrize("name", PAPER)
def test_a_paper_system_trained_twice_on_a_gpu_writes_identical_parameters(tmp_path, name):
    runs = []
    for attempt in ("a", "b"):
        trainer = paper_shape_trainer(name, tmp_path / attempt, 24)
        trainer.run()
        runs.append(parameters(trainer))
        del trainer
        torch.cuda.empty_cache()
    assert_identical(*runs)


@pytest.mark.cuda
@pytest.mark.parametrize("name", PAPER)
def test_a_run_stopped_by_sigterm_and_resumed_on_a_gpu_ends_identical(tmp_path, name, stop_signal_handlers):  # noqa: F811
    """SIGTERM during update 10 of 20: a checkpoint, then a new process's worth of trainer resumes to the weights of
    a run that was not stopped."""
    straight = paper_shape_trainer(name, tmp_path / "straight", 20)
    straight.run()
    expected = parameters(straight)
    del straight
    stopped = paper_shape_trainer(name, tmp_path / "run", 20)
    interrupt_at(stopped, 9)
    with pytest.raises(TrainingInterrupted, match=f"{signal.SIGTERM.name} received; checkpoint at update 10"):
        stopped.run()
    del stopped
    resumed = paper_shape_trainer(name, tmp_path / "run", 20)
    resumed.run()
    assert resumed.state.update == 20
    assert_identical(expected, parameters(resumed))
