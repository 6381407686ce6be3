"""scripts/multi30k_peer.py's reading of a Joey NMT run: the dev perplexity curve and its clock, from the step timer's
steps.json or, where the run ended before the timer wrote it, from Joey's own log's time stamps."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "multi30k_peer.py"

JOEY_LOG = """\
2026-12-01 19:00:56,719 - INFO - joeynmt.config -       cfg.training.validation_freq : 1000
2026-12-01 19:00:58,954 - INFO - joeynmt.training - EPOCH 1
2026-12-01 19:01:37,031 - INFO - joeynmt.training - Epoch   1, Step:      100, Batch Loss:    88.557457, Lr: 0.000400
2026-12-01 19:07:27,322 - INFO - joeynmt.training - Epoch   2, Step:     1000, Batch Loss:    54.097515, Lr: 0.000400
\tTokenized hypothesis: ['eine', 'gruppe']
2026-12-01 19:14:10,500 - INFO - joeynmt.training - Epoch   3, Step:     2000, Batch Loss:    44.000000, Lr: 0.000400
"""
VALIDATIONS = "Steps: 1000\tloss: 70.69\tppl: 101.46756\tbleu: 2.05\t*\nSteps: 2000\tloss: 60.1\tppl: 58.60721\tbleu: 9.1\t*\n"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("multi30k_peer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def joey_run(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.log").write_text(JOEY_LOG, encoding="utf-8")
    (tmp_path / "model" / "validations.txt").write_text(VALIDATIONS, encoding="utf-8")
    return tmp_path


def test_the_clock_of_a_run_without_steps_json_is_its_logs_time_stamps(peer, tmp_path):
    curve = peer.joey_curve(joey_run(tmp_path))
    assert [row["update"] for row in curve] == [1000, 2000]
    assert [row["dev_ppl"] for row in curve] == [101.46756, 58.60721]
    assert curve[0]["seconds"] == pytest.approx(6 * 60 + 28.368)  # 19:07:27.322 - 19:00:58.954
    assert curve[1]["seconds"] == pytest.approx(13 * 60 + 11.546)


def test_the_step_timer_wins_where_it_wrote(peer, tmp_path):
    work = joey_run(tmp_path)
    steps = [100.0 + 0.5 * update for update in range(1, 2001)]
    (work / "steps.json").write_text(json.dumps({"t0": 100.0, "steps": steps}))
    curve = peer.joey_curve(work)
    assert [row["seconds"] for row in curve] == [500.0, 1000.0]
