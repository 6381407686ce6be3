"""train.recurrence kernels: the recurrent loops as single-kernel stages (the GPU path), on a CPU.

Their torch references (what a CPU runs) must train as the fused loops do, for every architecture and
attention; their Triton kernels, run on a CPU by Triton's interpreter, must compute what the references
compute, in float32 and with bfloat16 products; an update must launch far fewer kernels; and a kernel that
fails its check on the device that trains (train/selfcheck.py) must leave that run on the fused loops.
The same on a GPU: test_kernels_cuda.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rnnmt.models import lstm
from rnnmt.models.loops import Paths
from rnnmt.recurrence.kernels import gru_step, luong_attention, stages
from rnnmt.train import kernel_stages, selfcheck, update

from conftest import tiny_luong_config
from test_bench import tiny_paper_config  # noqa: F401 (a fixture)
from test_graphs import SYSTEMS, five_updates, make_trainer

ROOT = Path(__file__).resolve().parents[1]

DROPOUT = {
    "luong-global-dot-everything": tiny_luong_config("global", "dot", dropout=0.3, bias=True, state_clip=0.5),
    "luong-global-location-dropout": tiny_luong_config("global", "location", dropout=0.3),
    "luong-local-p-concat-dropout": tiny_luong_config("local-p", "concat", dropout=0.3, bias=True, reverse_source=False),
}


@pytest.mark.parametrize("name", SYSTEMS)
@pytest.mark.parametrize("graph", ["none", "static"])
def test_kernel_loops_train_as_the_fused_loops_do(tiny_corpus, tmp_path, name, graph):
    """Five float32 updates: every weight within 1e-5, the losses within 1e-6 (the stages add in another order)."""
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name, graph=graph))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, graph=graph, recurrence="kernels"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key


@pytest.mark.parametrize("name", DROPOUT)
def test_luong_kernels_with_dropout_biases_and_clipping_train_as_the_fused_loops_do(tiny_corpus, tmp_path, monkeypatch, name):
    """Dropout masks between layers and on the fed h̃ (drawn alike on both paths), biases, and a cell clip small
    enough to bite, through the kernel stages' every branch."""
    import test_graphs

    monkeypatch.setitem(test_graphs.SYSTEMS, name, {"model": DROPOUT[name], "train": {"loss": "sentence_mean"}})
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, recurrence="kernels"))
    assert losses_b == pytest.approx(losses_a, rel=1e-6)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-5), key


def dropout_draws(trainer, monkeypatch) -> list[tuple[str, tuple[int, ...], torch.Tensor]]:
    """Every dropout mask one update of `trainer` draws, in order: by what (the fast loops' multipliers or
    nn.functional.dropout, which nn.Dropout calls; torch's own LSTM draws inside its kernel, unseen here), its
    shape, and which values it keeps."""
    draws = []
    multipliers, functional = lstm.dropout_multipliers, torch.nn.functional.dropout

    def drawn_multipliers(shape, p, like, dtype=None):
        out = multipliers(shape, p, like, dtype)
        draws.append(("lstm.dropout_multipliers", tuple(out.shape), out.ne(0).cpu()))
        return out

    def drawn_dropout(x, p=0.5, training=True, inplace=False):
        out = functional(x, p, training, inplace)
        if training and p > 0:
            draws.append(("nn.functional.dropout", tuple(out.shape), (out.ne(0) | x.eq(0)).cpu()))
        return out

    with monkeypatch.context() as patch:
        patch.setattr(lstm, "dropout_multipliers", drawn_multipliers)
        patch.setattr(torch.nn.functional, "dropout", drawn_dropout)
        trainer.step(0)
    return draws


def assert_both_loops_draw_the_same_masks(corpus: dict[str, Path], tmp_path: Path, monkeypatch, name: str, device: str) -> None:
    """What the comparisons with dropout assume, checked on its own: in one update at static shapes the fused and
    the kernel loops draw the same masks, in the same order, by the same means."""
    import test_graphs

    monkeypatch.setitem(test_graphs.SYSTEMS, name, {"model": DROPOUT[name], "train": {"loss": "sentence_mean"}})
    fused, kernels = (
        dropout_draws(make_trainer(corpus, tmp_path / loops, name, device=device, recurrence=loops, graph="static"), monkeypatch)
        for loops in ("fused", "kernels")
    )
    assert [draw[:2] for draw in kernels] == [draw[:2] for draw in fused]
    for k, (a, b) in enumerate(zip(fused, kernels)):
        assert torch.equal(a[2], b[2]), f"draw {k} ({a[0]}, shape {a[1]}) keeps other values on the kernel loops"


@pytest.mark.parametrize("name", DROPOUT)
def test_both_loops_draw_the_same_dropout_masks(tiny_corpus, tmp_path, monkeypatch, name):
    assert_both_loops_draw_the_same_masks(tiny_corpus, tmp_path, monkeypatch, name, "cpu")


# With bfloat16 products, five updates by SGD: Adam's first steps move a weight by ±lr whatever the size of its
# gradient, so a gradient near 0 that rounds to the other sign moves it by 2·lr.
BFLOAT16 = {"rnnsearch": {"name": "adam", "lr": 0.01}, "luong-local-p-concat-feed": {"name": "sgd", "lr": 0.5}, "luong-global-feed": {"name": "sgd", "lr": 0.5}}


@pytest.mark.parametrize("name", BFLOAT16)
def test_kernel_loops_with_bfloat16_products_stay_close_to_the_fused_ones(tiny_corpus, tmp_path, name):
    """Under autocast both paths round the products to bfloat16, in places that differ a little (the kernels' W_c [c; h]
    is one product, the fused loop's two; Luong's query product runs in float32 on the fused path; a layer's bias is
    added to the rounded product instead of inside it): within 1e-3."""
    train = {"precision": "bfloat16", "optimizer": BFLOAT16[name]}
    losses_a, a = five_updates(make_trainer(tiny_corpus, tmp_path / "fused", name, **train))
    losses_b, b = five_updates(make_trainer(tiny_corpus, tmp_path / "kernels", name, recurrence="kernels", **train))
    assert losses_b == pytest.approx(losses_a, rel=1e-3)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=0, atol=1e-3), key


@pytest.mark.parametrize("system, share", [("rnnsearch-50", 0.4), ("luong-localp-general-feed", 0.3), ("luong-global-concat-feed", 0.3)])
def test_an_update_in_kernels_launches_a_fraction_of_the_fused_kernels(tiny_paper_config, tmp_path, system, share):  # noqa: F811
    from rnnmt.cli import main

    counts = {}
    for recurrence in ("fused", "kernels"):
        out = tmp_path / f"{recurrence}.json"
        main(
            [
                "bench",
                "train",
                "--paper-shape",
                system,
                "--config",
                str(tiny_paper_config),
                "--steps",
                "2",
                "--device",
                "cpu",
                "--graph",
                "static",
                "--precision",
                "bfloat16",
                "--recurrence",
                recurrence,
                "--output",
                str(out),
            ]
        )
        result = json.loads(out.read_text())
        counts[recurrence] = result["kernels_per_update"], tuple(result["kernels_counted_at_width"])
    (fused, width_a), (fewer, width_b) = counts["fused"], counts["kernels"]
    assert width_a == width_b and fewer < share * fused


@pytest.mark.integration
def test_the_triton_kernels_compute_what_their_references_compute():
    """Each stage's Triton kernel under TRITON_INTERPRET=1, on CPU tensors, against its torch reference, as every
    architecture and attention uses it (tests/triton_stages.py): within what selfcheck allows, in float32 and with
    bfloat16 products; every stage is reached; and the gradients of whole padded batches agree. Four to seven minutes
    of Triton's interpreter on a CPU: one of the long tests (`pytest -m integration`)."""
    pytest.importorskip("triton", reason="Triton is not installed (pip install -e '.[test]' brings it)")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "tests"))}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "triton_stages.py")], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    for precision in ("float32", "bfloat16"):
        worst = found[precision]
        assert set(worst) == set(found["stages"]), f"stages no system reached: {set(found['stages']) - set(worst)}"
        assert all(not isinstance(v, str) and v <= 1 for v in worst.values()), (precision, worst)
    assert all(value <= 1e-5 for value in found["update"].values()), found["update"]


def test_the_comparison_keeps_infinities_out_of_the_norms():
    """Columns a stage leaves alone hold what the buffer held (uninitialised memory: an infinity now and then) on
    both sides: equal, not inf − inf = NaN; an infinity on one side only fails."""
    exact = torch.tensor([1.0, float("inf"), 2.0, -float("inf")], dtype=torch.float64)
    same = exact.float()
    assert selfcheck._difference(same, same, exact)[0] == 0.0
    for wrong in ([1.0, 5.0, 2.0, -float("inf")], [1.0, float("inf"), float("inf"), -float("inf")]):
        share, words = selfcheck._difference(torch.tensor(wrong), same, exact)
        assert share == float("inf") and "infinity" in words


# The guard: each Triton stage beside its reference before a run relies on it (train/selfcheck.py). Here the
# "Triton kernels" are stand-ins (the references, or broken copies of them), so that the guard's behaviour is
# tested without Triton; test_kernels_cuda.py runs it with the real kernels on a GPU.


def _failing_to_compile(stage: stages.Stage) -> None:
    raise RuntimeError("CompilationError: at 12:4: unsupported ptr type in tl.store\nmore lines of the compiler's message")


def _off_by_a_little(stage: luong_attention.LuongStep) -> None:
    stage.reference()
    stage.ctx.mul_(1.001)  # the context, 0.1% off


@pytest.fixture
def stand_in_kernels(monkeypatch):
    """Run the stages as 'Triton kernels' on the CPU, each checked afresh; yields a setter for the broken ones (by
    stage name)."""
    monkeypatch.setattr(selfcheck, "_verify", selfcheck._verify.__wrapped__)  # no cache between tests
    for cls in stages.STAGES.values():
        monkeypatch.setattr(cls, "launch", cls.reference)

    def breaking(broken: dict[str, object]) -> None:
        for name, launch in broken.items():
            monkeypatch.setattr(stages.STAGES[name], "launch", launch)

    with stages.implementation("triton"):
        yield breaking


def test_the_guard_keeps_kernels_that_compute_what_their_references_do(tiny_corpus, tmp_path, stand_in_kernels):
    trainer = make_trainer(tiny_corpus, tmp_path, "luong-global-feed", recurrence="kernels")
    assert trainer.choices["recurrence"].value == "kernels"
    assert "each Triton stage against its torch reference on cpu" in trainer.choices["recurrence"].why


@pytest.mark.parametrize(
    "name, broken, why, paths",
    [
        (
            "luong-local-p-concat-feed",
            {"lstm_cell": _failing_to_compile},
            "lstm_cell: its Triton kernel failed to run (RuntimeError: CompilationError: at 12:4",
            Paths("fused", "fused", "kernels"),
        ),
        (
            "luong-global-feed",
            {"luong_attention": _off_by_a_little},
            "luong_attention: it differs from its torch reference by 1.00e-03 of its norm",
            Paths("kernels", "fused", "kernels"),
        ),
    ],
)
def test_a_stage_that_fails_its_check_leaves_its_loops_on_the_fused_form(tiny_corpus, tmp_path, stand_in_kernels, capsys, name, broken, why, paths):
    """A kernel that does not compile, or computes another value, on the device: one log line says which and why,
    the loops that run it (both LSTM loops run the cell; the decoder alone the attention) train with `fused` to the
    end, the others keep their kernels, and meta.json records each part's recurrence."""
    stand_in_kernels(broken)
    trainer = make_trainer(tiny_corpus, tmp_path, name, recurrence="kernels", updates=4)
    assert trainer.paths == paths and trainer.choices["recurrence"].value == str(paths)
    lines = [line for line in capsys.readouterr().err.splitlines() if "recurrence kernels for the" in line]
    assert len(lines) == 1 and why in lines[0] and lines[0].endswith(f"this run trains with recurrence {paths}"), lines
    meta = trainer.run()
    assert meta["updates"] == 4 and meta["recurrence_by_part"] == paths.by_part() and why in meta["settings_why"]["recurrence"]
    assert (trainer.model.encoder.loops.name, trainer.model.decoder.loops.name) == (paths.encoder, paths.decoder)


# The stages of the loops and of the output layer: all but the optimiser's steps.
LOOP_STAGES = [name for name in stages.STAGES if name not in update.KERNEL_FORMS.values()]


@pytest.mark.parametrize("broken, recurrence, step", [([], "kernels", "kernels"), (LOOP_STAGES, "fused", "torch")])
def test_the_update_step_follows_the_recurrence_the_check_leaves(tiny_corpus, tmp_path, stand_in_kernels, broken, recurrence, step):
    """The kernel step comes with the `kernels` recurrence as the start-of-run check leaves it, not as asked: where
    every stage of the loops fails on the device, the run trains with `fused` and torch's step, though the step's own
    stage would pass its check."""
    stand_in_kernels(dict.fromkeys(broken, _failing_to_compile))
    trainer = make_trainer(tiny_corpus, tmp_path, "rnnsearch-adadelta", recurrence="kernels", updates=1)
    assert trainer.paths == Paths.every(recurrence) and trainer.choices["update"].value == step
    assert trainer.choices["update"].why.startswith("the recurrence's" if step == "kernels" else "the recurrence is fused (the kernel step comes")


def test_the_guard_checks_stages_only_where_triton_would_run(tiny_corpus, tmp_path, monkeypatch):
    """On a CPU the stages run their references: no stage to check (the loops are checked against the model), and
    `kernels` stays as asked."""
    monkeypatch.setattr(selfcheck, "_verify", selfcheck._verify.__wrapped__)
    monkeypatch.setattr(selfcheck, "stage_differences", lambda *args: pytest.fail("the stages were checked where no Triton kernel runs"))
    trainer = make_trainer(tiny_corpus, tmp_path, "rnnsearch", recurrence="kernels")
    assert trainer.choices["recurrence"].value == "kernels"


@pytest.mark.parametrize(
    "param, problem",
    [
        (torch.zeros(4, 6).t(), r"operand param \[6×4\] has its columns 6 elements apart; expected contiguous columns"),
        (torch.zeros(6, 4, dtype=torch.float64), r"operand param \[6×4\] is torch.float64; expected one of torch.float32"),
        (torch.zeros(2, 4, 6).transpose(0, 1), r"operand param \[4×2×6\] is not contiguous"),
    ],
)
def test_a_kernel_is_launched_only_on_operands_laid_out_as_it_reads_them(monkeypatch, param, problem):
    """One layout check before every launch (triton_common.py's contract): an operand a kernel would misread stops
    the launch with one sentence naming the stage and the operand, and the kernel never runs."""
    monkeypatch.setattr(kernel_stages.SGDUpdate, "launch", lambda self: pytest.fail("the kernel ran"))
    stage = kernel_stages.SGDUpdate(param=param, grad=torch.zeros(param.shape), norm=torch.tensor(1.0), lr=1.0, max_norm=1.0)
    with stages.implementation("triton"), pytest.raises(ValueError, match="stage sgd_update: " + problem):
        stage.run()


def test_an_operand_whose_kernel_reads_dense_rows_must_have_them(monkeypatch):
    """A 2-D operand the kernel reads without a row stride (GRUBackCand's `extra`) must have rows shape[1] apart: a
    wider buffer's column slice stops the launch with one sentence; a dense one reaches the launch."""
    pytest.importorskip("triton", reason="the launch reads the kernel's parameters, which Triton's jit gives")
    launched = []
    monkeypatch.setattr(stages, "start", lambda kernel, grid, arguments: launched.append(kernel))
    rows, H = 3, 4

    def stage(extra: torch.Tensor) -> gru_step.GRUBackCand:
        z = lambda *shape: torch.zeros(*shape)  # noqa: E731
        return gru_step.GRUBackCand(
            base=z(rows, H),
            recurrent=z(rows, H),
            extra=extra,
            gates=z(rows, 2 * H),
            cand=z(rows, H),
            keep=None,
            dh=z(rows, H),
            dx=z(rows, 3 * H),
            dx_c=z(rows, 3 * H),
        )

    with stages.implementation("triton"):
        with pytest.raises(ValueError, match=r"stage gru_back_cand: operand extra \[3×4\] has its rows 8 elements apart; its kernel takes no extra_stride"):
            stage(torch.zeros(rows, 2 * H)[:, :H]).run()
        assert not launched
        stage(torch.zeros(rows, H)).run()
    assert len(launched) == 1
