"""train.recurrence kernels: the GRU and additive-attention loops as single-kernel stages (the GPU path).

Their torch references (what a CPU runs) must train as the fused loops do; their Triton kernels, run on a
CPU by Triton's interpreter, must compute what the references compute, in float32 and with bfloat16
products; and an update must launch far fewer kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from test_bench import tiny_paper_config  # noqa: F401 (a fixture)
from conftest import tiny_luong_config
from test_graphs import five_updates, make_trainer

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["rnnsearch", "rnnencdec", "luong-global-feed", "luong-local-p-clipped", "luong-no-feed"])
@pytest.mark.parametrize("graph", ["none", "static"])
def test_kernel_loops_train_as_the_fused_loops_do(tiny_corpus, tmp_path, name, graph):
    """Five float32 updates: every weight within 1e-5, the losses within 1e-6 (the stages add in another order)."""
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name, graph=graph))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, graph=graph, recurrence="kernels"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key


def test_luong_kernels_with_dropout_biases_and_clipping_train_as_the_fused_loops_do(tiny_corpus, tmp_path, monkeypatch):
    """Dropout masks between layers and on the fed h̃ (drawn alike on both paths), biases, and a cell clip small
    enough to bite, through the kernel stages' every branch."""
    import test_graphs

    model = tiny_luong_config("global", "dot", dropout=0.3, bias=True, state_clip=0.5)
    monkeypatch.setitem(test_graphs.SYSTEMS, "luong-everything", {"model": model, "train": {"loss": "sentence_mean"}})
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", "luong-everything"))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", "luong-everything", recurrence="kernels"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key


def test_kernel_loops_with_bfloat16_products_stay_close_to_the_fused_ones(tiny_corpus, tmp_path):
    """Under autocast both paths round the same products to bfloat16; the stages differ in float32 rounding only."""
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", "rnnsearch", precision="bfloat16"))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", "rnnsearch", precision="bfloat16", recurrence="kernels"))
    assert losses_b == pytest.approx(losses_a, rel=1e-3)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-3), key


def test_an_update_in_kernels_launches_a_fraction_of_the_fused_kernels(tiny_paper_config, tmp_path):  # noqa: F811
    from rnnmt.cli import main

    counts = {}
    for recurrence in ("fused", "kernels"):
        out = tmp_path / f"{recurrence}.json"
        main(["bench", "train", "--paper-shape", "rnnsearch-50", "--config", str(tiny_paper_config), "--steps", "2", "--device", "cpu",
              "--graph", "static", "--precision", "bfloat16", "--recurrence", recurrence, "--output", str(out)])  # fmt: skip
        result = json.loads(out.read_text())
        counts[recurrence] = result["kernels_per_update"], tuple(result["kernels_counted_at_width"])
    (fused, width_a), (fewer, width_b) = counts["fused"], counts["kernels"]
    assert width_a == width_b and fewer < 0.4 * fused


def test_the_triton_kernels_compute_what_their_references_compute():
    """Each stage's Triton kernel under TRITON_INTERPRET=1, on CPU tensors, against its torch reference
    (tests/triton_stages.py): float32 within rounding; with bfloat16 copies, within one bfloat16 step; and the
    gradients of an RNNsearch, an RNNencdec and a Luong batch (dropout, biases, clipping)."""
    pytest.importorskip("triton", reason="Triton is not installed (pip install -e '.[test]' brings it)")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "tests"))}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "triton_stages.py")], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    worst = json.loads(run.stdout)
    for precision, tolerance in (("float32", 5e-6), ("bfloat16", 2e-2)):
        assert len(worst[precision]) == 14
        assert all(value <= tolerance for value in worst[precision].values()), (precision, worst[precision])
    # A whole padded batch's gradients, through the loops' views and strides.
    assert all(value <= 1e-5 for value in worst["update"].values()), worst["update"]
