"""Batching, length filter, resume equality, stale checkpoints, stop signals, the job deadline and the training clock."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rnnmt.errors import UserError
from rnnmt.models.source import SourceFormat
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train import checkpoint
from rnnmt.train.batching import BatchStream, length_filter
from rnnmt.train.loop import Trainer, TrainingInterrupted, _loss
from rnnmt.train.optim import Clipping, build_optimizer, clip_gradients, global_norm, learning_rate
from rnnmt.train.stop import STOP_SIGNALS, StopFlag, job_deadline
from rnnmt.train.update import NO_KERNEL_L2, KernelStep, TorchStep

from conftest import corrupt_bytes, tiny_system


def make_trainer(corpus: dict[str, Path], out_dir: Path, **kw) -> Trainer:
    system = tiny_system(**kw)
    data = ParallelData.load(corpus["data"])
    return Trainer(
        system,
        data,
        {"dev": data.subset(range(8))},
        Vocab.load(corpus["src_vocab"]),
        Vocab.load(corpus["tgt_vocab"]),
        out_dir,
        torch.device("cpu"),
        {"train": "x"},
    )


def test_length_filter_drops_pairs_instead_of_truncating(tiny_corpus):
    data = ParallelData.load(tiny_corpus["data"])
    kept = length_filter(data, 4)
    assert len(kept) < len(data)
    assert all(data.src_lengths[i] <= 4 and data.tgt_lengths[i] <= 4 for i in kept)
    stream = BatchStream(data, batch_size=4, sort_k=2, max_len=4, seed=1)
    for u in range(20):
        b = stream.batch(u)
        for row, i in enumerate(b.indices):
            # Whole sentences (+EOS), never cut: the batch holds exactly the stored ids.
            assert torch.equal(b.src[row, : int(data.src_lengths[i])], data.src(int(i)))
            assert b.src[row, int(data.src_lengths[i])] == Vocab.EOS


@pytest.mark.parametrize("eos, reverse, multiple", [(True, False, 1), (False, True, 1), (True, True, 8), (False, False, 8)])
def test_a_batch_lays_out_each_sentence_as_the_model_reads_it(tiny_corpus, eos, reverse, multiple):
    data = ParallelData.load(tiny_corpus["data"])
    stream = BatchStream(data, batch_size=5, sort_k=2, max_len=None, seed=3, source=SourceFormat(eos, reverse), pad_to=multiple)
    for u in range(6):
        b = stream.batch(u)
        src_lengths, tgt_lengths = data.src_lengths[b.indices], data.tgt_lengths[b.indices]
        assert b.src.shape[1] % multiple == 0 and b.src.shape[1] >= int(src_lengths.max()) + eos
        assert b.tgt.shape[1] % multiple == 0 and b.tgt.shape[1] >= int(tgt_lengths.max()) + 1
        for row, i in enumerate(b.indices.tolist()):
            words = data.src(i).flip(0) if reverse else data.src(i)
            expected_src = torch.cat([words, torch.tensor([Vocab.EOS] * eos, dtype=torch.long)])
            expected_tgt = torch.cat([data.tgt(i), torch.tensor([Vocab.EOS])])
            for ids, mask, expected in ((b.src, b.src_mask, expected_src), (b.tgt, b.tgt_mask, expected_tgt)):
                assert torch.equal(ids[row, : len(expected)], expected)
                assert (ids[row, len(expected) :] == Vocab.PAD).all()
                assert torch.equal(mask[row], ids[row] != Vocab.PAD)


def test_batches_are_a_function_of_the_update_and_sorted_within_a_group(tiny_corpus):
    data = ParallelData.load(tiny_corpus["data"])
    a = BatchStream(data, batch_size=4, sort_k=3, max_len=None, seed=7)
    b = BatchStream(data, batch_size=4, sort_k=3, max_len=None, seed=7)
    assert torch.equal(a.batch(5).indices, b.batch(5).indices)  # b jumps straight to update 5
    group = [a.batch(u) for u in range(3)]
    widths = [int(torch.maximum(g.src_mask.sum(1), g.tgt_mask.sum(1)).max()) for g in group]
    assert widths == sorted(widths)


def test_resume_gives_the_same_parameters_as_an_uninterrupted_run(tiny_corpus, tmp_path):
    straight = make_trainer(tiny_corpus, tmp_path / "a", updates=6)
    straight.run()
    first = make_trainer(tiny_corpus, tmp_path / "b", updates=3)
    first.run()
    resumed = make_trainer(tiny_corpus, tmp_path / "b", updates=6)
    resumed.run()
    assert resumed.state.update == 6
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(p, q), name


@pytest.fixture
def stop_signal_handlers():
    """Training installs its own SIGTERM/SIGUSR1 handlers; give pytest its own back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_checkpoints_and_the_rerun_ends_where_an_uninterrupted_run_ends(tiny_corpus, tmp_path, sig, stop_signal_handlers):
    """Pre-emption (SIGTERM) or Slurm's early warning (SIGUSR1) at update 4: a checkpoint, then the same final weights."""
    settings = {"updates": 9, "checkpoint_every": 1000, "valid_every": 1000}
    straight = make_trainer(tiny_corpus, tmp_path / "straight", **settings)
    straight.run()
    interrupted = make_trainer(tiny_corpus, tmp_path / "run", **settings)
    step = interrupted.step

    def step_then_signal(update: int):
        out = step(update)
        if update == 3:  # the 4th update: the signal arrives mid-epoch, between periodic checkpoints
            os.kill(os.getpid(), sig)
        return out

    interrupted.step = step_then_signal
    with pytest.raises(TrainingInterrupted, match=f"{sig.name} received; checkpoint at update 4"):
        interrupted.run()
    resumed = make_trainer(tiny_corpus, tmp_path / "run", **settings)
    resumed.run()
    assert resumed.state.update == 9
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(p, q), name


def test_the_workflow_leaves_slurms_warning_to_the_training_alone():
    """What the Snakefile does in every Snakemake, the job step's among them: the warning no longer ends Snakemake or
    the shell it starts (their default), while an `rnnmt train` below them still catches it."""
    script = """
import os, signal, subprocess, sys
from rnnmt.train.stop import leave_the_warning_to_training
leave_the_warning_to_training()
os.kill(os.getpid(), signal.SIGUSR1)
shell = subprocess.run(["bash", "-c", "kill -USR1 $$; echo shell lives"], capture_output=True, text=True)
training = subprocess.run([sys.executable, "-c", "import os, signal; from rnnmt.train.stop import StopFlag; f = StopFlag(); "
                           "f.install(); os.kill(os.getpid(), signal.SIGUSR1); print(f.reason)"], capture_output=True, text=True)
print("snakemake lives;", shell.stdout.strip(), shell.returncode, ";", training.stdout.strip(), training.returncode)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "snakemake lives; shell lives 0 ; SIGUSR1 received 0"


def test_a_stop_signal_during_start_up_is_kept_for_the_first_update(tiny_corpus, tmp_path, stop_signal_handlers, monkeypatch, capsys):
    """Slurm's warning may come while `rnnmt train` still reads its data and builds and checks the model: the run
    trains one update, writes its checkpoint and exits 143 (Python's default for SIGUSR1 would end it without one)."""
    from rnnmt.train import run

    system = tmp_path / "system.json"
    system.write_text(json.dumps(tiny_system(updates=6, checkpoint_every=1000)))
    read = run.load_data

    def read_then_warned(*args):
        os.kill(os.getpid(), signal.SIGUSR1)
        return read(*args)

    def unhandled(signum, frame):
        raise AssertionError("SIGUSR1 arrived before rnnmt train had installed its stop flag")

    signal.signal(signal.SIGUSR1, unhandled)  # stands in for Python's default, which would end pytest
    monkeypatch.setattr(run, "load_data", read_then_warned)
    inputs = dict(
        valid={},
        src_vocab=tiny_corpus["src_vocab"],
        tgt_vocab=tiny_corpus["tgt_vocab"],
        src_bpe=None,
        tgt_bpe=None,
        out_dir=tmp_path / "out",
        device="cpu",
        gpu_lock_dir=None,
        processes=1,
        stop_before_limit=900.0,
        argv=[],
    )
    with pytest.raises(SystemExit) as stopped:
        run.train_system(system, tiny_corpus["data"], **inputs)
    assert stopped.value.code == 143
    assert "SIGUSR1 received; checkpoint at update 1 written" in capsys.readouterr().err
    monkeypatch.setattr(run, "load_data", read)
    run.train_system(system, tiny_corpus["data"], **inputs)
    assert "at update 1" in capsys.readouterr().err.split("resumed from", 1)[1].splitlines()[0]
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["updates"] == 6


def test_the_job_deadline_stops_training_with_a_checkpoint(tiny_corpus, tmp_path, stop_signal_handlers):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=6, checkpoint_every=1000)
    trainer.stop.deadline = time.time()  # already reached: the first update is the last
    with pytest.raises(TrainingInterrupted, match=r"time limit is near .*; checkpoint at update 1 "):
        trainer.run()
    assert (tmp_path / "ckpt" / "last.pt").exists()


# A stand-in squeue: records its arguments and SLURM_TIME_FORMAT, answers as the test says.
SQUEUE = """#!/bin/sh
echo "$SLURM_TIME_FORMAT $*" > "$SQUEUE_CALLS"
printf '%s' "$SQUEUE_ANSWER"
exit "$SQUEUE_EXIT"
"""


@pytest.fixture
def squeue(tmp_path, monkeypatch) -> Path:
    """A Slurm job's environment on Slurm 22.05 (SLURM_JOB_ID, no SLURM_JOB_END_TIME) with a stand-in squeue alone on
    PATH; returns the file its last call is written to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(SQUEUE)
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("SLURM_JOB_END_TIME", raising=False)
    monkeypatch.setenv("SQUEUE_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("SQUEUE_EXIT", "0")
    return tmp_path / "calls"


def test_the_job_deadline_is_the_end_slurm_exports_less_the_margin(squeue, monkeypatch):
    end = int(time.time()) + 1000
    monkeypatch.setenv("SLURM_JOB_END_TIME", str(end))
    deadline, why = job_deadline(600)
    assert deadline == end - 600 and "(SLURM_JOB_END_TIME): will checkpoint and stop 600 s before" in why
    assert not squeue.exists()  # Slurm 23.02 and later: no question to the controller


def test_without_the_exported_end_the_job_deadline_comes_from_squeue_in_epoch_seconds(squeue, monkeypatch):
    end = int(time.time()) + 1000
    monkeypatch.setenv("SQUEUE_ANSWER", f"{end}\n")
    deadline, why = job_deadline(600)
    assert deadline == end - 600 and "(squeue -j 42): will checkpoint and stop 600 s before" in why
    assert squeue.read_text().split() == ["%s", "--noheader", "--jobs", "42", "--format", "%e"]


@pytest.mark.parametrize(
    ("answer", "status", "said"),
    [
        ("NONE", "0", "squeue gives job 42 no end time (NONE)"),  # --time=UNLIMITED
        ("", "1", "failed (exit 1: no output)"),
        (None, None, "could not run"),  # no squeue on PATH
    ],
)
def test_a_job_whose_end_squeue_does_not_give_runs_without_a_deadline_and_says_why(squeue, monkeypatch, answer, status, said):
    if answer is None:
        (squeue.parent / "bin" / "squeue").unlink()
    else:
        monkeypatch.setenv("SQUEUE_ANSWER", answer)
        monkeypatch.setenv("SQUEUE_EXIT", status)
    deadline, why = job_deadline(600)
    assert deadline is None and why.startswith("no stop by the clock before the job's time limit: ") and said in why


def test_a_job_shorter_than_the_margin_is_not_stopped_by_the_clock(squeue, monkeypatch):
    """Its deadline has passed at the start: stopping after each attempt's first update would never finish."""
    monkeypatch.setenv("SLURM_JOB_END_TIME", str(int(time.time()) + 100))
    deadline, why = job_deadline(600)
    assert deadline is None and "within --stop-before-limit (600 s): no stop by the clock, only by a signal" in why


def test_outside_slurm_there_is_no_deadline_and_nothing_to_say(squeue, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID")
    assert job_deadline(600) == (None, "")
    assert not squeue.exists()


def test_stale_checkpoint_is_discarded(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, updates=2).run()
    messages = []
    other = make_trainer(tiny_corpus, tmp_path, updates=4, clip_norm=5.0)
    state = checkpoint.load_matching(other.ckpt_path, other.fingerprint, messages.append)
    assert state is None and "stale" in messages[0]
    assert not other.ckpt_path.exists()


def test_fingerprint_ignores_the_budget_but_not_the_recipe():
    base = tiny_system()
    assert checkpoint.fingerprint(base, {}) == checkpoint.fingerprint(tiny_system(updates=99), {})
    assert checkpoint.fingerprint(base, {}) != checkpoint.fingerprint(tiny_system(batch_size=5), {})
    assert checkpoint.fingerprint(base, {"train": "a"}) != checkpoint.fingerprint(base, {"train": "b"})


def test_training_reduces_heldout_cost(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=30, max_len=None)
    meta = trainer.run()
    history = [h["dev"] for h in meta["history"]]
    assert history[-1] < history[0]
    assert meta["updates"] == 30 and meta["epochs"] == pytest.approx(30 * 4 / 40)


def test_sigterm_handler_sets_the_flag():
    previous = signal.getsignal(signal.SIGTERM)
    flag = StopFlag()
    try:
        flag.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.raised
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_rerun_at_the_budget_keeps_the_statistics(tiny_corpus, tmp_path):
    first = make_trainer(tiny_corpus, tmp_path, updates=4).run()
    again = make_trainer(tiny_corpus, tmp_path, updates=4).run()
    assert again["train_nll"] == first["train_nll"] and again["updates"] == 4


def test_an_early_stop_is_final_when_resumed(tiny_corpus, tmp_path):
    # lr 0 never improves the dev cost, so patience 1 stops at the second validation (update 6).
    stopped = make_trainer(tiny_corpus, tmp_path, updates=30, patience=1, optimizer={"name": "sgd", "lr": 1e-12}).run()
    assert stopped["stopped"] == "early_stopping" and stopped["updates"] == 6
    again = make_trainer(tiny_corpus, tmp_path, updates=30, patience=1, optimizer={"name": "sgd", "lr": 1e-12}).run()
    assert again["updates"] == 6


# Dev cost best at the first validation (update 3), worse at 6 and 9: patience 2 stops at 9 and the
# published model must be update 3's.
DIVERGING = {"updates": 30, "patience": 2, "optimizer": {"name": "sgd", "lr": 5.0}, "checkpoint_every": 1000}


def interrupt_at(trainer: Trainer, update: int) -> None:
    """Make the trainer receive SIGTERM during the given 0-based update."""
    step = trainer.step

    def step_then_signal(u: int):
        out = step(u)
        if u == update:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    trainer.step = step_then_signal


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name


def test_early_stopping_publishes_the_weights_best_update_names(tiny_corpus, tmp_path):
    at_three = make_trainer(tiny_corpus, tmp_path / "three", **{**DIVERGING, "updates": 3, "patience": None})
    at_three.run()
    stopped = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING)
    meta = stopped.run()
    assert (meta["stopped"], meta["updates"], meta["best_update"], meta["model_update"]) == ("early_stopping", 9, 3, 3)
    assert_same_weights(stopped.model, at_three.model)
    assert meta["dev_nll"] == meta["history"][0]["dev"]  # the final cost is that of the published weights


def test_a_resumed_early_stopping_run_still_publishes_the_best_weights(tiny_corpus, tmp_path, stop_signal_handlers):
    """Issue 11, defect 3: after an interruption, and after deleting what an old error message said to
    delete (ckpt/best.pt), the published model must still be the best validation's."""
    straight = make_trainer(tiny_corpus, tmp_path / "straight", **DIVERGING)
    straight.run()
    interrupted = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING)
    interrupt_at(interrupted, 6)  # after the validations at 3 (best) and 6 (worse)
    with pytest.raises(TrainingInterrupted, match="checkpoint at update 7"):
        interrupted.run()
    (tmp_path / "run" / "ckpt" / "best.pt").unlink(missing_ok=True)
    resumed = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING)
    meta = resumed.run()
    assert_same_weights(resumed.model, straight.model)
    assert (meta["updates"], meta["best_update"], meta["model_update"]) == (9, 3, 3)


def test_a_damaged_checkpoint_names_what_to_delete_and_that_restores_the_result(tiny_corpus, tmp_path, stop_signal_handlers):
    straight = make_trainer(tiny_corpus, tmp_path / "straight", **DIVERGING)
    straight.run()
    interrupted = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING)
    interrupt_at(interrupted, 6)
    with pytest.raises(TrainingInterrupted):
        interrupted.run()
    ckpt = tmp_path / "run" / "ckpt"
    weight = interrupted.model.decoder.W_o.weight.detach().numpy().tobytes()[:16]
    corrupt_bytes(ckpt / "last.pt", weight, b"\x7f" * 16)  # four weights become 3.4e38
    with pytest.raises(UserError, match=rf"last.pt is damaged: .*; delete {ckpt} to train this system again from the start"):
        make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING).run()
    shutil.rmtree(ckpt)  # what the message says
    again = make_trainer(tiny_corpus, tmp_path / "run", **DIVERGING)
    assert again.run()["model_update"] == 3
    assert_same_weights(again.model, straight.model)


def test_patience_set_after_a_checkpoint_publishes_the_last_weights_and_says_so(tiny_corpus, tmp_path, capsys):
    """Patience is not part of the fingerprint; the run before kept no best weights, and meta.json must not pretend it did."""
    make_trainer(tiny_corpus, tmp_path, **{**DIVERGING, "updates": 4, "patience": None}).run()
    meta = make_trainer(tiny_corpus, tmp_path, **{**DIVERGING, "updates": 5}).run()
    assert (meta["best_update"], meta["model_update"], meta["updates"]) == (3, 5, 5)
    assert "no weights of the best validation (update 3) were kept" in capsys.readouterr().err


def test_a_checkpoint_of_another_rnnmt_version_is_discarded(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, updates=2).run()
    ckpt = tmp_path / "ckpt" / "last.pt"
    torch.save({"fingerprint": "x", "model": {}}, ckpt)  # the layout before checkpoints had a format and digest
    messages = []
    trainer = make_trainer(tiny_corpus, tmp_path, updates=2)
    assert checkpoint.load_matching(ckpt, trainer.fingerprint, messages.append) is None
    assert "written by another rnnmt version" in messages[0] and not ckpt.exists()


# --- Luong et al. 2015's recipe (paper-spec §4.5) ----------------------------------------------


def test_learning_rate_halves_every_epoch_after_the_fifth():
    sgd = {"name": "sgd", "lr": 1.0}
    decay = {"after_epoch": 5, "factor": 0.5}
    assert [learning_rate(sgd, decay, e) for e in range(8)] == [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125]
    # Dropout systems start halving after epoch 8; no decay means a constant rate.
    assert learning_rate(sgd, {"after_epoch": 8, "factor": 0.5}, 8) == 0.5
    assert learning_rate({"name": "adam"}, None, 11) == 1e-3


def test_trainer_applies_the_schedule_by_epoch(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=30, optimizer={"name": "sgd", "lr": 1.0}, lr_decay={"after_epoch": 1, "factor": 0.5})
    seen = []
    for u in range(30):
        trainer.step(u)
        seen.append((int(trainer.stream.epochs(u)), trainer.optimizer.param_groups[0]["lr"]))
    assert {epoch: lr for epoch, lr in seen} == {e: 0.5**e for e in range(max(e for e, _ in seen) + 1)}


def test_clipping_can_leave_the_embeddings_out_of_the_norm():
    """Luong: the norm of all gradients but the embeddings; if above 5, every gradient is rescaled."""
    emb, other = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    emb.grad, other.grad = torch.tensor([30.0, 40.0]), torch.tensor([6.0, 8.0])
    clipping = clip_gradients([emb, other], 5.0, [other])
    assert float(clipping.norm) == pytest.approx(10.0) and bool(clipping.clipped)
    assert other.grad.tolist() == pytest.approx([3.0, 4.0]) and emb.grad.tolist() == pytest.approx([15.0, 20.0])
    emb.grad, other.grad = torch.tensor([30.0, 40.0]), torch.tensor([0.6, 0.8])
    clip_gradients([emb, other], 5.0, [other])  # norm 1 without the embeddings: nothing changes
    assert emb.grad.tolist() == [30.0, 40.0]


@pytest.mark.parametrize(
    "grads", [[[0.3, -0.4], [0.1, 0.2]], [[30.0, -40.0], [1.0, 2.0]], [[float("nan"), 1.0], [1.0, 2.0]], [[float("inf"), 1.0], [1.0, 2.0]]]
)
def test_every_form_of_the_clipping_rule_gives_the_same_bits(grads):
    """Below the threshold, above it, NaN and inf (GroundHog: 0.1·p): clip_gradients deciding on the host or on the
    device, and the kernel steps' reference (Clipping.clip), to the bit."""
    params = [torch.nn.Parameter(torch.tensor([1.5, -2.0])), torch.nn.Parameter(torch.tensor([0.25, 4.0]))]
    reference = Clipping(global_norm([torch.tensor(g) for g in grads]), 1.0)
    results = [[reference.clip(p.detach(), torch.tensor(g)).tolist() for p, g in zip(params, grads)]]
    for on_device in (False, True):
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        clip_gradients(params, 1.0, on_device=on_device)
        results.append([p.grad.tolist() for p in params])
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("optimizer", [{"name": "adadelta"}, {"name": "sgd", "lr": 0.5}])
@pytest.mark.parametrize(
    "grads", [[[0.3, -0.4], [0.1, 0.2]], [[30.0, -40.0], [1.0, 2.0]], [[float("nan"), 1.0], [1.0, 2.0]], [[float("inf"), 1.0], [1.0, 2.0]]]
)
def test_the_kernel_step_is_clipping_then_torchs_optimiser(optimizer, grads):
    """The `kernels` path's one stage per parameter (its reference on a CPU): three updates as clip_gradients and
    torch's Adadelta / SGD make them, within float32 rounding, and the optimiser state torch's own would hold."""
    runs = []
    for kernels in (False, True):
        params = [torch.nn.Parameter(torch.tensor([1.5, -2.0])), torch.nn.Parameter(torch.tensor([0.25, 4.0]))]
        opt = build_optimizer(params, optimizer)
        for update in range(3):
            for p, g in zip(params, grads):
                p.grad = torch.tensor(g) * (update + 1)
            if kernels:
                KernelStep(opt, params, params, 1.0, on_device=True)()
            else:
                clip_gradients(params, 1.0, on_device=True)
                opt.step()
        runs.append((params, opt.state_dict()))
    (torch_params, torch_state), (kernel_params, kernel_state) = runs
    for a, b in zip(torch_params, kernel_params):
        assert torch.allclose(a, b, rtol=1e-6, atol=0)
    assert kernel_state["state"].keys() == torch_state["state"].keys()
    for key, state in torch_state["state"].items():
        assert state.keys() == kernel_state["state"][key].keys()
        for name, value in state.items():
            assert torch.allclose(value, kernel_state["state"][key][name], rtol=1e-6, atol=0), name
    build_optimizer(kernel_params, optimizer).load_state_dict(kernel_state)  # a checkpoint resumes on either path


@pytest.mark.parametrize("scale", [0.1, 10.0])
def test_the_l2_penalty_is_nmtpys_decay_c_in_the_cost_before_clipping(scale):
    """train.l2 = c: the update nmtpy makes (basemodel.py build_optimizer) from cost + c·Σ‖W‖² over the weight matrices
    (biases left out), clipped on the norm of all of it, below and above the threshold."""
    c, clip = 0.05, 1.0
    runs = []
    for ours in (True, False):
        torch.manual_seed(0)
        weight, bias = torch.nn.Parameter(torch.randn(3, 2, dtype=torch.float64)), torch.nn.Parameter(torch.randn(3, dtype=torch.float64))
        params = [weight, bias]
        opt = build_optimizer(params, {"name": "sgd", "lr": 0.5})
        x = torch.tensor([0.5, -1.0], dtype=torch.float64)
        cost = scale * (weight @ x + bias).tanh().sum()
        if ours:
            cost.backward()
            TorchStep(opt, params, params, clip, False, l2=c)()
        else:
            (cost + c * (weight**2).sum()).backward()
            g2 = sum(float((p.grad**2).sum()) for p in params)
            for p in params:
                p.grad = p.grad / g2**0.5 * clip if g2 > clip**2 else p.grad
            opt.step()
        runs.append([p.detach().clone() for p in params])
    for a, b in zip(*runs):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-15)


def test_an_l2_penalty_leaves_the_kernel_step_for_torchs(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, l2=1e-5, recurrence="kernels", optimizer={"name": "sgd", "lr": 0.1})
    assert isinstance(trainer.setup.update_step, TorchStep) and trainer.setup.update_step.l2 == 1e-5
    assert trainer.choices["update"].why == NO_KERNEL_L2
    with pytest.raises(ValueError, match="no L2 penalty"):
        KernelStep(trainer.optimizer, [], [], 1.0, True, l2=1e-5)


HOST_READS = ("aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero")


@pytest.mark.parametrize("sync, reads", [("logging", False), ("update", True)])
def test_an_update_reads_nothing_back_from_the_device_unless_asked(tiny_corpus, tmp_path, sync, reads):
    """train.sync: logging (a GPU's default) makes an update without the host reading a device value (each
    read would wait for the GPU): the real target tokens are found when the batch is made, the loss is
    summed at log points, clipping is decided on the device. Counted on CPU: the ops that read a value back.
    (SGD here: torch's fused Adam reads its step count on the host on a CPU, on the device on a GPU.)"""
    from torch.profiler import ProfilerActivity, profile

    trainer = make_trainer(tiny_corpus, tmp_path, sync=sync, optimizer={"name": "sgd", "lr": 0.5})
    batch = trainer.stream.batch(0)
    trainer.stream.batch = lambda update: batch  # made on the host before the update, as a data loader would
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(0)
    assert any(e.name in HOST_READS for e in prof.events()) == reads


def test_five_updates_are_the_same_whether_the_host_reads_the_device_or_not(tiny_corpus, tmp_path):
    """train.sync logging and update, clip_norm low enough that clipping happens: identical weights."""
    weights = []
    for sync in ("logging", "update"):
        trainer = make_trainer(tiny_corpus, tmp_path / sync, sync=sync, clip_norm=0.05)
        losses = [float(trainer.step(u)[0]) for u in range(5)]
        weights.append((losses, trainer.model.state_dict()))
    (loss_a, a), (loss_b, b) = weights
    assert loss_a == loss_b and all(torch.equal(a[k], b[k]) for k in a)


# A fresh process frees and re-allocates 64 MiB (above glibc's largest mmap threshold, 32 MiB) under one
# train.host_memory policy and prints whether the policy took effect and the page faults of the second
# allocation.
_FAULTS_OF_A_REUSED_BUFFER = """
import resource, sys, torch
from rnnmt.train.loop import HOST_MEMORY
applied = HOST_MEMORY[sys.argv[1]]()
def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 * 2**20).fill_(1.0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(applied, *[faults() for _ in range(12)][9:])
"""


def test_kept_host_memory_is_reused_without_page_faults():
    """train.host_memory keep: a large buffer freed and allocated again is served from the process's own
    memory (the release policy, glibc's default, maps and faults in all 16,384 pages of it again).
    Rounds 10–12 are counted: in some runs the heap grows again in rounds 2 to 6 (up to four times with the
    modules training imports, depending on where their allocations left the heap) before the freed blocks are
    reused (strace: a second brk right after the first block); none grew after round 6 in 13 runs."""
    out = {}
    for policy in ("keep", "release"):
        run = subprocess.run([sys.executable, "-c", _FAULTS_OF_A_REUSED_BUFFER, policy], capture_output=True, text=True, check=True)
        applied, *faults = run.stdout.split()
        out[policy] = (applied == "True", [int(f) for f in faults])
    if not out["keep"][0]:
        pytest.skip("the C library is not glibc: host_memory keep has nothing to set")
    assert sum(out["keep"][1]) < 500
    assert min(out["release"][1]) > 10_000


def test_an_unknown_host_memory_policy_is_a_clear_error(tiny_corpus, tmp_path):
    with pytest.raises(UserError, match="train.host_memory is 'forever'; expected one of keep, release"):
        make_trainer(tiny_corpus, tmp_path, host_memory="forever")


def test_trainer_measures_the_norm_without_embeddings(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, clip_embeddings=False)
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    measured = trainer.setup.update_step.norm_params
    assert all(".embed." not in names[id(p)] for p in measured)
    assert len(measured) < len(list(trainer.model.parameters()))


def test_sentence_mean_loss_is_the_sum_over_the_batch_size(tiny_corpus):
    data = ParallelData.load(tiny_corpus["data"])
    batch = BatchStream(data, batch_size=4, sort_k=1, max_len=None, seed=1).batch(0)
    per_sentence = torch.tensor([1.0, 2.0, 3.0, 6.0])
    assert float(_loss(per_sentence, batch, "sentence_mean")) == 3.0
    assert float(_loss(per_sentence, batch, "sum")) == 12.0
    assert float(_loss(per_sentence, batch, "token_mean")) == pytest.approx(12.0 / batch.target_tokens)


def test_luong_batches_sort_by_target_length_and_shuffle_their_order(tiny_corpus):
    data = ParallelData.load(tiny_corpus["data"])
    fmt = SourceFormat(eos=False, reverse=True)
    stream = BatchStream(data, batch_size=2, sort_k=10, max_len=None, seed=4, sort_by="target", shuffle_batches=True, source=fmt)
    group = [stream.batch(u) for u in range(10)]
    widths = [int(b.tgt_mask.sum(1).max()) for b in group]
    assert widths != sorted(widths)  # the batch order is shuffled
    # Sorted by target length before cutting: the batches' length ranges do not overlap.
    ranges = sorted((int(b.tgt_mask.sum(1).min()), int(b.tgt_mask.sum(1).max())) for b in group)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))
    for b in group:
        for row, i in enumerate(b.indices):
            assert b.src[row, : int(data.src_lengths[i])].tolist() == data.src(int(i)).flip(0).tolist()
            assert not (b.src[row] == Vocab.EOS).any()
    again = BatchStream(data, batch_size=2, sort_k=10, max_len=None, seed=4, sort_by="target", shuffle_batches=True, source=fmt)
    assert torch.equal(again.batch(7).indices, stream.batch(7).indices)


def test_an_epoch_budget_sets_the_updates(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, epochs=2, updates=1, max_len=None)
    assert trainer.budget == 2 * 40 // 4
    assert trainer.run()["updates"] == 20


# --- The clock: wall time and the logged rate, read where the device has finished its queued work -------

PROGRESS = re.compile(r"update (\d+)/\d+ \|.* \| ([\d,]+) tgt tok/s \| ETA ")


def record_progress(trainer: Trainer) -> list[tuple[int, float, float]]:
    """Replace the trainer's log: each progress line becomes (update, logged tgt tok/s, time.perf_counter() at the call)."""
    lines = []

    def log(message: str) -> None:
        now = time.perf_counter()
        if m := PROGRESS.match(message):
            lines.append((int(m[1]), float(m[2].replace(",", "")), now))

    trainer.log = log
    return lines


def target_tokens(trainer: Trainer, start: int, end: int) -> int:
    """Target tokens of the updates that took the count from `start` to `end`."""
    return sum(trainer.stream.batch(u).target_tokens for u in range(start, end))


class LateDevice:
    """Stands in for a GPU behind the host: each synchronisation waits for the queued work (the next of
    `waits`, in turn: unequal, so that a clock read before the wait would be seen), and records the update,
    the wait and the time the device was done."""

    def __init__(self, trainer: Trainer, waits: tuple[float, ...]) -> None:
        self.trainer, self.waits = trainer, waits
        self.calls: list[tuple[int, float, float]] = []
        trainer.synchronize = self

    def __call__(self) -> None:
        wait = self.waits[len(self.calls) % len(self.waits)]
        time.sleep(wait)
        self.calls.append((self.trainer.state.update, wait, time.perf_counter()))

    def updates(self) -> list[int]:
        return [u for u, _, _ in self.calls]

    def seconds_between(self, first: int, last: int) -> float:
        return self.calls[last][2] - self.calls[first][2]

    def waited_after(self, first: int) -> float:
        """The waits of the calls after call `first`: the ones inside the clock's time from there."""
        return sum(wait for _, wait, _ in self.calls[first + 1 :])


def test_the_logged_rate_is_the_target_tokens_over_the_wall_time_between_log_lines(tiny_corpus, tmp_path):
    """Validation is made slow (50 ms): the rate is the run's, with it, not that of the updates alone."""
    trainer = make_trainer(tiny_corpus, tmp_path, updates=12, log_every=3, valid_every=2)
    lines = record_progress(trainer)
    validate = trainer.validate

    def slow_validation() -> bool:
        time.sleep(0.05)
        return validate()

    trainer.validate = slow_validation
    trainer.run()
    assert [u for u, _, _ in lines] == [3, 6, 9, 12]
    for (start, _, before), (end, rate, now) in zip(lines, lines[1:]):
        assert rate == pytest.approx(target_tokens(trainer, start, end) / (now - before), rel=0.05)


def test_the_clock_waits_for_the_device_at_log_points_and_not_per_update(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=12, log_every=3)
    device = LateDevice(trainer, (0.05, 0.15))
    lines = record_progress(trainer)
    meta = trainer.run()
    assert device.updates() == [0, 3, 6, 9, 12, 12]  # the loop's start, each log point, its end
    for i, (end, rate, _) in enumerate(lines):
        start, seconds = device.calls[i][0], device.seconds_between(i, i + 1)
        assert seconds >= device.calls[i + 1][1]  # the log line waited for the device
        assert rate == pytest.approx(target_tokens(trainer, start, end) / seconds, rel=0.05)
    assert meta["wall_time_s"] >= device.waited_after(0)
    assert meta["wall_time_s"] == pytest.approx(device.seconds_between(0, -1), rel=0.05)


def test_the_wall_time_of_a_resumed_run_adds_both_runs_loop_times(tiny_corpus, tmp_path, stop_signal_handlers):
    """The stop's checkpoint holds the interrupted loop's time, synced; the resumed run adds its own."""
    settings = {"updates": 9, "log_every": 3, "checkpoint_every": 1000}
    interrupted = make_trainer(tiny_corpus, tmp_path, **settings)
    first = LateDevice(interrupted, (0.02, 0.04, 0.06, 0.08))
    interrupt_at(interrupted, 4)
    with pytest.raises(TrainingInterrupted, match="checkpoint at update 5"):
        interrupted.run()
    assert first.updates() == [0, 3, 5]
    saved = checkpoint.load_matching(interrupted.ckpt_path, interrupted.fingerprint, print)["state"]["wall_time_s"]
    assert saved >= first.waited_after(0)
    assert saved == pytest.approx(first.seconds_between(0, -1), rel=0.05)
    resumed = make_trainer(tiny_corpus, tmp_path, **settings)
    second = LateDevice(resumed, (0.02, 0.04, 0.06, 0.08))
    meta = resumed.run()
    assert second.updates() == [5, 6, 9, 9]
    assert meta["wall_time_s"] - saved >= second.waited_after(0)
    assert meta["wall_time_s"] == pytest.approx(saved + second.seconds_between(0, -1), rel=0.05)
