"""The GPU path on a GPU (`python -m pytest -m cuda`): every Triton kernel against its torch reference on CUDA
tensors, at ragged and at the papers' sizes, in float32 and with bfloat16 products; the kernel loops against
the fused ones over five updates, eager and captured; and the guard passing each architecture. Without a
CUDA device every test here skips, saying so (conftest.py).
"""

from __future__ import annotations

import pytest
import torch

from rnnmt.models.loops import Paths
from rnnmt.recurrence.kernels import stages
from rnnmt.train import device_choices, selfcheck

import triton_stages
from test_graphs import SYSTEMS, five_updates, make_trainer
from test_kernels import DROPOUT, assert_both_loops_draw_the_same_masks

pytestmark = pytest.mark.cuda

CUDA = torch.device("cuda")


@pytest.mark.parametrize("size", ["ragged", "paper"])
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_every_triton_stage_computes_what_its_reference_does_on_cuda(size, precision):
    """Through one update of each architecture and attention (tests/triton_stages.py): every stage reached, none
    failing to compile, none beyond what selfcheck allows (paper sizes: RNNsearch B 80, H and A 1000, S 50;
    Luong B 128, H 1000, S 50, 4 layers)."""
    worst = triton_stages.differences(CUDA, precision, size)
    assert set(worst) == set(stages.STAGES), f"stages no system reached: {set(stages.STAGES) - set(worst)}"
    failed = {name: share for name, share in worst.items() if isinstance(share, str) or share > 1}
    assert not failed, failed


@pytest.mark.parametrize("name", triton_stages.SYSTEMS)
def test_a_padded_batch_has_the_same_gradients_with_the_triton_kernels_on_cuda(name):
    assert triton_stages.update_difference(triton_stages.SYSTEMS[name], CUDA) <= 1e-5


# Five updates by SGD: the two paths multiply in other shapes (cuBLAS rounds them otherwise), and Adam's first
# steps move a weight by ±lr whatever the size of its gradient, so a gradient near 0 that rounds to the other
# sign would move it by 2·lr.
SGD = {"name": "sgd", "lr": 0.5}


# Every architecture and attention (test_graphs.SYSTEMS), and three with dropout, biases and a clip that bites.
EVERY = {**SYSTEMS, **{name: {"model": model, "train": {"loss": "sentence_mean"}} for name, model in DROPOUT.items()}}


@pytest.mark.parametrize("name", EVERY)
@pytest.mark.parametrize("graph", ["static", "cuda"])
def test_kernel_loops_train_as_the_fused_loops_do_on_cuda(tiny_corpus, tmp_path, monkeypatch, name, graph):
    """Five float32 updates, eager (`static`) and replayed from captured graphs (`cuda`): every weight within 1e-5.
    With dropout both paths draw the same masks (the same draws in the same order)."""
    import test_graphs

    monkeypatch.setitem(test_graphs.SYSTEMS, name, EVERY[name])
    train = {"graph": graph, "precision": "float32", "optimizer": SGD}
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name, device="cuda", recurrence="fused", **train))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, device="cuda", recurrence="kernels", **train))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key


@pytest.mark.parametrize("name", DROPOUT)
def test_both_loops_draw_the_same_dropout_masks_on_cuda(tiny_corpus, tmp_path, monkeypatch, name):
    """Where the comparison above fails with dropout only, this says whether the two loops' masks differ, and which."""
    assert_both_loops_draw_the_same_masks(tiny_corpus, tmp_path, monkeypatch, name, "cuda")


@pytest.mark.parametrize("name", ["rnnsearch", "luong-local-p-concat-feed", "luong-global-feed"])
def test_kernel_loops_with_bfloat16_products_stay_close_to_the_fused_ones_on_cuda(tiny_corpus, tmp_path, name):
    train = {"graph": "cuda", "precision": "bfloat16", "optimizer": SGD}
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name, device="cuda", recurrence="fused", **train))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, device="cuda", recurrence="kernels", **train))
    assert losses_b == pytest.approx(losses_a, rel=1e-3)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-3), key


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_guard_passes_every_architecture_on_this_gpu(precision):
    """What training checks before it relies on the kernels (selfcheck.verify, each part) finds nothing wrong here, and
    the optimisers' update stages match their references on this GPU."""
    for name, model in triton_stages.SYSTEMS.items():
        choice, paths, failure = device_choices.verified_recurrence(device_choices.Choice("kernels", "test"), model, CUDA, precision)
        assert failure is None and choice.value == "kernels" and paths == Paths.every("kernels"), (name, failure)
    failed = {name: check.reason() for name, check in selfcheck.update_stage_differences(CUDA).items() if not check.passed}
    assert not failed, failed
