"""metrics.jsonl, the per-update training record: its rows, their agreement with the log, and no duplicates after a resume."""

from __future__ import annotations

import json
import math
import os
import signal
import struct
from pathlib import Path

import pytest
import torch

from rnnmt.metrics_file import FILE, WindowMean, read_metrics
from rnnmt.train.loop import TrainingInterrupted
from rnnmt.train.metrics import EVENTS, MetricsLog
from rnnmt.train.optim import Clipping

from test_training import make_trainer, record_progress, stop_signal_handlers  # noqa: F401 (a fixture)

SETTINGS = {"updates": 12, "log_every": 3, "valid_every": 4, "checkpoint_every": 5}
CLOCK = ("wall_time_s", "target_tokens_per_s")


def without_clock(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in CLOCK} for row in rows]


def test_every_update_has_one_row_with_the_clock_at_log_points_and_dev_costs_at_validations(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, **SETTINGS)
    progress = record_progress(trainer)
    trainer.run()
    rows = read_metrics(tmp_path / FILE)
    assert [row["update"] for row in rows] == list(range(1, 13))
    assert [row["update"] for row in rows if "wall_time_s" in row] == [3, 6, 9, 12] == [update for update, _, _ in progress]
    logged = [rate for _, rate, _ in progress]  # the log line prints whole tokens/s
    assert [row["target_tokens_per_s"] for row in rows if "wall_time_s" in row] == pytest.approx(logged, abs=0.5)
    assert 0 < rows[2]["wall_time_s"] < rows[-1]["wall_time_s"] <= trainer.state.wall_time_s  # the last validation comes after
    validated = [row for row in rows if "dev_nll" in row]
    assert [row["update"] for row in validated] == [4, 8, 12]
    assert [{"update": row["update"], "dev": row["dev_nll"], "dev_ppl": row["dev_ppl"]} for row in validated] == trainer.state.history
    # The last log window's NLL per sentence, from the rows' per-token NLL and the batches' sentences.
    window = rows[9:12]
    summed = sum(row["train_nll_per_token"] * row["target_tokens"] for row in window)
    sentences = sum(len(trainer.stream.batch(row["update"] - 1).indices) for row in window)
    assert summed / sentences == pytest.approx(trainer.state.train_nll, rel=1e-12)
    assert [row["target_tokens"] for row in rows] == [trainer.stream.batch(u).target_tokens for u in range(12)]
    assert all(row["lr"] == 0.01 and row["epoch"] == trainer.stream.epochs(row["update"]) for row in rows)
    assert all(row["clipped"] == (row["grad_norm"] >= 1.0) for row in rows)


def test_a_norm_above_clip_norm_is_marked_clipped(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, tmp_path, updates=4, clip_norm=1e-6)
    trainer.run()
    rows = read_metrics(tmp_path / FILE)
    assert all(row["clipped"] and row["grad_norm"] > 1e-6 for row in rows)


def test_a_row_says_what_the_clipping_of_its_update_did(tmp_path):
    """`clipped` is the update's own decision (optim.Clipping), at clip_norm too, and with a NaN or infinite norm,
    whose `grad_norm` is null."""
    metrics = MetricsLog(tmp_path, write=True)
    metrics.start(0)
    for update, norm in enumerate([0.5, 1.0, 2.0, math.nan, math.inf], 1):
        metrics.add(update, 0.0, 1.0, torch.tensor(4.0), 2, Clipping(torch.tensor(norm), 1.0))
    metrics.flush(lambda summed: summed)
    metrics.close()
    rows = read_metrics(tmp_path / FILE)
    assert [(row["grad_norm"], row["clipped"]) for row in rows] == [(0.5, False), (1.0, True), (2.0, True), (None, True), (None, True)]


def test_a_resumed_run_writes_each_update_once_and_the_rows_of_an_uninterrupted_run(tiny_corpus, tmp_path, stop_signal_handlers):  # noqa: F811
    """SIGTERM during update 7 (checkpoint at 7), then rows 8 and 9 and a cut line as if a later run had been killed
    before its next checkpoint: the resumed run drops them and ends with the uninterrupted run's rows."""
    straight = make_trainer(tiny_corpus, tmp_path / "straight", **SETTINGS)
    straight.run()
    interrupted = make_trainer(tiny_corpus, tmp_path / "run", **SETTINGS)
    step = interrupted.step

    def step_then_signal(update: int):
        out = step(update)
        if update == 6:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    interrupted.step = step_then_signal
    with pytest.raises(TrainingInterrupted, match="checkpoint at update 7"):
        interrupted.run()
    path = tmp_path / "run" / FILE
    assert [row["update"] for row in read_metrics(path)] == list(range(1, 8))
    later = read_metrics(tmp_path / "straight" / FILE)[7:9]
    with path.open("a") as out:
        out.write("".join(json.dumps({**row, "lr": 99.0}) + "\n" for row in later) + '{"update": 10, "ep')
    make_trainer(tiny_corpus, tmp_path / "run", **SETTINGS).run()
    resumed = read_metrics(path)
    assert [row["update"] for row in resumed] == list(range(1, 13))
    assert without_clock(resumed) == without_clock(read_metrics(tmp_path / "straight" / FILE))


def test_a_new_run_starts_a_new_file(tiny_corpus, tmp_path):
    (tmp_path / FILE).write_text(json.dumps({"update": 1, "lr": 99.0}) + "\n")
    make_trainer(tiny_corpus, tmp_path, updates=2).run()
    assert [row["lr"] for row in read_metrics(tmp_path / FILE)] == [0.01, 0.01]


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in `folder`, read from their TFRecord frames (length, CRC, event, CRC)."""
    from tensorboardX.proto.event_pb2 import Event

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            event = Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def test_tensorboard_events_hold_the_log_points_and_validations(tiny_corpus, tmp_path):
    pytest.importorskip("tensorboardX", reason="tensorboardX is not installed (pip install -e '.[tensorboard]'); events are written only with it")
    make_trainer(tiny_corpus, tmp_path, **SETTINGS).run()
    rows, scalars = read_metrics(tmp_path / FILE), tensorboard_scalars(tmp_path / EVENTS)
    window = WindowMean()
    means = [(row["update"], mean) for row in rows if (mean := window.add(row)) is not None]
    assert [update for update, _ in means] == [3, 6, 9, 12]
    expected = {"train_nll_per_token": means}
    expected |= {key: [(row["update"], row[key]) for row in rows if "wall_time_s" in row] for key in ("lr", "grad_norm", "target_tokens_per_s", "epoch")}
    expected |= {key: [(row["update"], row[key]) for row in rows if key in row] for key in ("dev_nll", "dev_ppl")}
    assert set(scalars) == set(expected)
    for key, points in expected.items():
        assert [step for step, _ in scalars[key]] == [step for step, _ in points], key
        assert [value for _, value in scalars[key]] == pytest.approx([value for _, value in points], rel=1e-6), key
