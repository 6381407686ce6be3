"""The lock (constraints.txt) against the installed environment: provenance.json's record and reproducible mode's warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnnmt import environment
from rnnmt import reproducible as reproducible_mode
from rnnmt.cli import main
from rnnmt.environment import Pin, differences, read_lock
from rnnmt.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def test_the_lock_pins_every_dependency_and_torch_without_its_build_label():
    pins = read_lock(ROOT / "constraints.txt")
    assert {"torch", "numpy", "snakemake", "sacremoses", "sacrebleu", "subword-nmt", "pandas", "matplotlib", "jsonschema", "pyyaml"} <= set(pins)
    assert "+" not in pins["torch"].version and not pins["torch"].test_only
    assert pins["pytest"].test_only and not pins["numpy"].test_only
    assert "rnnmt" not in pins


def test_a_lock_line_that_is_not_a_pin_is_named(tmp_path: Path):
    (tmp_path / "lock.txt").write_text("numpy==2.4.6\ntorch>=2.11\n")
    with pytest.raises(UserError, match=r"lock.txt, line 2: 'torch>=2.11' is not a 'name==version' pin"):
        read_lock(tmp_path / "lock.txt")


def test_differences_ignore_build_labels_and_absent_test_tools():
    pins = {"torch": Pin("2.13.0", False), "numpy": Pin("2.4.6", False), "pytest": Pin("9.2.0", True), "pandas": Pin("3.1.1", False)}
    have = {"torch": "2.13.0+cpu", "numpy": "2.3.0", "pip": "25.0"}
    assert differences(pins, have) == ["numpy 2.3.0 (locked 2.4.6)", "pandas not installed (locked 3.1.1)"]
    assert differences(pins, {**have, "numpy": "2.4.6", "pandas": "3.1.1", "pytest": "9.2.0"}) == []
    assert differences(pins, {**have, "numpy": "2.4.6", "pandas": "3.1.1", "pytest": "9.0.0"}) == ["pytest 9.0.0 (locked 9.2.0)"]


def _lock_with(tmp_path: Path, numpy: str) -> Path:
    installed = environment.installed()
    lines = [f"{name}=={version}" for name, version in installed.items() if name != "numpy"] + [f"numpy=={numpy}"]
    (lock := tmp_path / "constraints.txt").write_text("\n".join(lines) + "\n")
    return lock


def test_provenance_lists_the_environment_and_whether_it_matches(tmp_path: Path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps({"scale": "demo"}))
    for numpy, matches in ((environment.installed()["numpy"], True), ("0.0.1", False)):
        monkeypatch.setattr(environment, "LOCK", _lock_with(tmp_path, numpy))
        assert main(["provenance", "--config", str(tmp_path / "config.json"), "--output", str(tmp_path / "p.json")]) == 0
        written = json.loads((tmp_path / "p.json").read_text())["environment"]
        assert written["matches"] is matches and written["distributions"]["torch"] == environment.installed()["torch"]
        assert written["differences"] == ([] if matches else [f"numpy {environment.installed()['numpy']} (locked 0.0.1)"])


@pytest.mark.parametrize("reproducible", [True, False])
def test_reproducible_mode_warns_once_at_start_when_the_environment_differs(tmp_path: Path, monkeypatch, capsys, reproducible: bool):
    monkeypatch.setattr(environment, "LOCK", _lock_with(tmp_path, "0.0.1"))
    # The mode asked for, without its process-wide pins and kernels (other tests share this process).
    monkeypatch.setattr(reproducible_mode, "requested", lambda: reproducible)
    monkeypatch.setattr(reproducible_mode, "apply", lambda: None)
    monkeypatch.setattr(reproducible_mode, "install_kernels", lambda: None)
    (tmp_path / "config.json").write_text(json.dumps({"scale": "demo"}))
    assert main(["provenance", "--config", str(tmp_path / "config.json"), "--output", str(tmp_path / "p.json")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    expected = [
        f"rnnmt provenance: warning: this environment differs from constraints.txt: numpy {environment.installed()['numpy']} (locked 0.0.1); "
        "reproducible mode's digits hold for the locked versions (README, Set-up)."
    ]
    assert warnings == (expected if reproducible else [])
