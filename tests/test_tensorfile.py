"""Models and checkpoints are loaded without running code and checked against the digest written inside them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rnnmt import tensorfile
from rnnmt.cli import main
from rnnmt.errors import UserError
from rnnmt.models.artifact import load_model, save_model
from rnnmt.models.build import build_model
from rnnmt.text.vocab import Vocab
from rnnmt.train import checkpoint

from conftest import corrupt_bytes, tiny_model_config


class Planted:
    """What an attacker pickles: unpickling it runs `code` (here it only writes a marker file)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def plant(path: Path, marker: Path, **fields) -> None:
    """A file shaped like an rnnmt model or checkpoint whose unpickling would create `marker`."""
    torch.save({**fields, "payload": Planted(f"open({str(marker)!r}, 'w').write('ran')")}, path)


@pytest.fixture
def model_file(tmp_path: Path) -> tuple[Path, torch.nn.Module]:
    torch.manual_seed(0)
    vocab = Vocab(["the", "cat", "le", "chat"], [4, 3, 2, 1])
    model = build_model(tiny_model_config(), len(vocab), len(vocab))
    path = tmp_path / "model.pt"
    save_model(path, model, {"name": "t", "pair": "en-fr", "model": tiny_model_config()}, vocab, vocab, {"src": None, "tgt": None})
    return path, model


def test_a_model_round_trips(model_file):
    path, model = model_file
    loaded = load_model(path, torch.device("cpu")).model
    for (name, p), q in zip(model.named_parameters(), loaded.parameters()):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("fields", [{"format": "rnnmt-model/1"}, {"format": "rnnmt-model/2", "sha256": "0"}])
def test_a_planted_model_runs_no_code(tmp_path: Path, fields, capsys):
    """Issue 11, defect 2: `rnnmt translate --model evil.pt` must not execute the file's pickle."""
    marker, evil = tmp_path / "marker", tmp_path / "evil.pt"
    plant(evil, marker, **fields)
    error = None
    try:
        load_model(evil, torch.device("cpu"))
    except Exception as exc:  # checked after the marker: whatever a vulnerable loader raised later does not matter
        error = exc
    assert not marker.exists(), "the planted pickle ran"
    assert isinstance(error, UserError) and "refuses to load those because loading them can run code" in str(error)
    assert main(["translate", "--model", str(evil), "--input", str(evil), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(evil) in err
    assert not marker.exists()


def test_a_planted_checkpoint_runs_no_code(tmp_path: Path):
    marker, ckpt = tmp_path / "marker", tmp_path / "ckpt" / "last.pt"
    ckpt.parent.mkdir()
    plant(ckpt, marker, fingerprint="abc")
    error = None
    try:
        checkpoint.load_matching(ckpt, "abc", print)
    except Exception as exc:
        error = exc
    assert not marker.exists(), "the planted pickle ran"
    assert isinstance(error, UserError) and "can run code" in str(error)


def test_a_byte_overwritten_inside_a_tensor_is_caught(model_file):
    """Issue 11, defect 4: before, a weight became 1.3e38 and translation ran on it without a word."""
    path, model = model_file
    corrupt_bytes(path, model.decoder.W_o.weight.detach().numpy().tobytes()[:8], b"\x7f" * 8)
    with pytest.raises(UserError, match=rf"{path} is damaged: its content no longer matches the SHA-256"):
        load_model(path, torch.device("cpu"))


@pytest.mark.parametrize("content, message", [(b"<html>502 Bad Gateway</html>", "cannot be read"), (b"", "cannot be read")])
def test_a_file_that_is_no_model_is_one_clear_error(tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        load_model(path, torch.device("cpu"))


def test_other_files_and_versions_are_named(tmp_path: Path, model_file):
    path, _ = model_file
    with pytest.raises(UserError, match="not a training checkpoint of this rnnmt version"):
        tensorfile.load(path, checkpoint.FORMAT, "training checkpoint", "delete it.")
    old = tmp_path / "old.pt"
    torch.save({"format": "rnnmt-model/1", "state_dict": {}}, old)  # a model written before digests
    with pytest.raises(UserError, match=r"format 'rnnmt-model/1', expected 'rnnmt-model/2'\); train the system again"):
        load_model(old, torch.device("cpu"))


def test_the_digest_covers_values_structure_and_types():
    base = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "n": 1, "names": ["a", "b"]}
    same = {"w": torch.arange(6, dtype=torch.float32).reshape(3, 2).t().contiguous().t().reshape(2, 3), "n": 1, "names": ["a", "b"]}
    assert tensorfile.digest(base) == tensorfile.digest(same)  # the memory layout does not matter
    changed = [
        {**base, "w": base["w"].clone().index_fill_(1, torch.tensor([2]), 7.0)},
        {**base, "w": base["w"].double()},
        {**base, "w": base["w"].reshape(3, 2)},
        {**base, "n": 1.0},
        {**base, "names": ("a", "b")},
        {**base, "names": ["ab"]},
    ]
    assert len({tensorfile.digest(c) for c in changed} | {tensorfile.digest(base)}) == len(changed) + 1
    with pytest.raises(TypeError):
        tensorfile.digest({"x": object()})
