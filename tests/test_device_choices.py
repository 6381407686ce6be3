"""`auto` training settings: the captured bfloat16 path on a CUDA device, float32 without graphs on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from rnnmt import config as rnnmt_config
from rnnmt.errors import UserError
from rnnmt.runtime import cpu_multiplies_bfloat16
from rnnmt.train import device_choices
from rnnmt.train.defaults import DEVICE_CHOICES, TRAIN_DEFAULTS
from rnnmt.train.device_choices import choose

ROOT = Path(__file__).resolve().parents[1]
CUDA, CPU = torch.device("cuda"), torch.device("cpu")


def paper_train(name: str) -> dict:
    """A system's train settings at the paper scale, with the defaults training fills in."""
    config = rnnmt_config.load(ROOT / "config.yaml", rnnmt_config.schema_beside(ROOT / "config.yaml"))
    config["scale"] = "paper"
    return {**TRAIN_DEFAULTS, **rnnmt_config.training_settings(config, name)["train"]}


@pytest.mark.parametrize("name", ["rnnsearch-50", "rnnencdec-30", "luong-global-general-feed"])
def test_the_paper_scale_on_a_cuda_device_takes_the_captured_bfloat16_path(name, monkeypatch):
    """No GPU needed: the decision reads the device's type (and, where one is visible, its compute capability)."""
    monkeypatch.setattr(device_choices, "cuda_multiplies_bfloat16", lambda device: True)
    monkeypatch.setattr(device_choices.importlib.util, "find_spec", lambda name: object())  # Triton, as torch's CUDA builds bring it
    chosen = choose(paper_train(name), CUDA)
    assert {k: c.value for k, c in chosen.items()} == {
        "precision": "bfloat16",
        "graph": "cuda",
        "sync": "logging",
        "recurrence": "kernels",
        "deterministic": "on",
    }
    assert all(c.why.startswith("auto: ") for c in chosen.values())


def test_the_paper_scale_on_a_cpu_stays_float32_without_graphs():
    chosen = choose(paper_train("rnnsearch-50"), CPU)
    assert {k: c.value for k, c in chosen.items()} == {"precision": "float32", "graph": "none", "sync": "update", "recurrence": "fused", "deterministic": "on"}


def test_without_triton_a_gpu_runs_the_fused_loops(monkeypatch):
    monkeypatch.setattr(device_choices.importlib.util, "find_spec", lambda name: None)
    chosen = choose(paper_train("rnnsearch-50"), CUDA)["recurrence"]
    assert chosen.value == "fused" and "Triton is not installed" in chosen.why


def test_auto_leaves_a_gpu_without_bfloat16_in_float32_and_several_processes_uncaptured(monkeypatch):
    monkeypatch.setattr(device_choices, "cuda_multiplies_bfloat16", lambda device: False)
    chosen = choose(paper_train("rnnsearch-50"), CUDA, processes=2)
    assert chosen["precision"].value == "float32" and "without bfloat16" in chosen["precision"].why
    assert chosen["graph"].value == "none" and "2 data-parallel processes" in chosen["graph"].why


def test_without_max_len_nothing_is_captured():
    chosen = choose({**paper_train("rnnsearch-50"), "max_len": None}, CUDA)
    assert chosen["graph"].value == "none" and "max_len" in chosen["graph"].why


def test_a_value_given_in_the_config_wins_over_auto():
    train = {**paper_train("rnnsearch-50"), "precision": "float32", "graph": "static", "sync": "update", "recurrence": "plain", "deterministic": "off"}
    chosen = choose(train, CUDA)
    assert {k: (c.value, c.why) for k, c in chosen.items()} == {k: (train[k], "given in the config") for k in chosen}


@pytest.mark.parametrize("key", ["precision", "graph", "sync", "recurrence", "deterministic"])
def test_an_unknown_value_is_one_clear_sentence(key):
    with pytest.raises(UserError, match=rf"^train\.{key} is 'fast'; expected one of auto, "):
        choose({**paper_train("rnnsearch-50"), key: "fast"}, CPU)


@pytest.mark.parametrize("cap,native", [("AVX512_CORE_BF16", False), ("AVX2", False), ("AVX512_CORE_AMX", None), ("ALL", None)])
def test_a_onednn_cap_below_amx_means_no_native_bfloat16(monkeypatch, cap, native):
    """ONEDNN_MAX_CPU_ISA emulates an older CPU; without a cap (or with AMX allowed) the CPU's flags decide."""
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    has_amx = "amx_bf16" in Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else False
    assert cpu_multiplies_bfloat16() is (has_amx if native is None else native)


def test_the_schema_offers_exactly_the_choices():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    train = schema["$defs"]["train"]["properties"]
    for key, known in DEVICE_CHOICES.items():
        assert train[key]["enum"] == list(known)


def test_show_system_prints_what_a_cuda_device_would_choose_and_why(capsys, monkeypatch):
    import json

    from rnnmt.cli import main

    monkeypatch.setattr(device_choices, "cuda_multiplies_bfloat16", lambda device: True)
    main(["show-system", "rnnsearch-50", "--scale", "paper", "--config", str(ROOT / "config.yaml"), "--device", "cuda"])
    shown = json.loads(capsys.readouterr().out)
    assert shown["train"]["graph"] == "auto" and shown["train"]["precision"] == "auto"
    chosen = shown["chosen for the device"]
    assert chosen["device"] == "cuda" and chosen["graph"]["value"] == "cuda" and chosen["precision"]["value"] == "bfloat16"
    assert "max_len" in chosen["graph"]["why"]


LSTM_UNDER_AUTOCAST = """
import torch
from conftest import tiny_luong_config
from rnnmt.models.build import build_model
from rnnmt.models.source import SourceFormat
cfg = tiny_luong_config(feed_input=False)
model = build_model(cfg, 20, 22)  # plain: torch's LSTM for the encoder too
src, mask = SourceFormat.of(cfg).batch([torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10])])
with torch.autocast("cpu", dtype=torch.bfloat16):
    hidden, _ = model.features(src, mask, torch.tensor([[9, 10, 2], [11, 2, 0]]))
hidden.float().sum().backward()
print("trained", torch.isfinite(model.encoder.lstm.weight_hh_l0.grad).all().item())
"""


@pytest.mark.parametrize("cap", ["AVX2", "AVX512_CORE_BF16"])
def test_torch_lstm_under_bfloat16_autocast_runs_on_a_cpu_with_or_without_bfloat16_instructions(cap):
    """oneDNN has no bfloat16 LSTM without AVX512_BF16 or AMX ('could not create a primitive descriptor'):
    rnnmt runs torch's LSTM in float32 there (lstm.call), and in bfloat16 where it can."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": cap, "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "tests"))}
    run = subprocess.run([sys.executable, "-c", LSTM_UNDER_AUTOCAST], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "trained True", run.stderr[-2000:]
