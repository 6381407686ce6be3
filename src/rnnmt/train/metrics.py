"""The per-update training record: `metrics.jsonl` beside meta.json, and TensorBoard events where tensorboardX is installed.

One JSON object per update: `update`, `epoch`, `lr`, `train_nll_per_token` (this update's batch), `grad_norm`
(before clipping; null where it was not finite), `clipped`, `target_tokens`. The update at a log point adds
`wall_time_s` (the run's, summed over resumed runs) and `target_tokens_per_s` (since the previous log point, as
the log line says); an update followed by validation adds `<set>_nll` (per sentence) and `<set>_ppl` for each
held-out set, and `<set>_bleu` for the first where early stopping follows its BLEU (`train.valid_metric`).

The rows of an update wait, on the device, until the next log point, validation, checkpoint or stop, so that
recording them costs no synchronisation; there they are appended to the file. That happens before a
checkpoint is written, so the file always reaches the checkpoint's update, and a resumed run first cuts it back
to that update: no update appears twice.

TensorBoard gets the log points (the training NLL per target token of the log window, learning rate, gradient
norm, tokens/s, epoch) and the validations: a point per update would cost more time than the file (its writer
queues each value) and show mostly batch-to-batch noise.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnmt.fileio import atomic_path
from rnnmt.metrics_file import FILE, WindowMean, read_metrics

if TYPE_CHECKING:
    import torch

    from rnnmt.train.optim import Clipping

EVENTS = "tensorboard"


@dataclass
class _Pending:
    row: dict[str, Any]
    nll: torch.Tensor  # summed over this process's sentences, on the device
    clipping: Clipping  # on the device too


# What TensorBoard shows of a log point's row (the window's NLL replaces the update's).
LOGGED = ("lr", "grad_norm", "target_tokens_per_s", "epoch")


def _tensorboard(folder: Path, resume_at: int) -> Any:
    """A tensorboardX writer into `folder` that drops events after `resume_at` left by an interrupted run, or None
    where tensorboardX is not installed (`pip install -e ".[tensorboard]"`)."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    if resume_at == 0:
        shutil.rmtree(folder, ignore_errors=True)
    # A queue of a thousand events: the writer thread drains it between log points, so adding never waits.
    return SummaryWriter(str(folder), purge_step=resume_at + 1 if resume_at else None, max_queue=1000)


class MetricsLog:
    """Rows of the updates since the last flush, kept on the device; `flush` appends them to `metrics.jsonl`."""

    def __init__(self, out_dir: Path, write: bool) -> None:
        self.path, self.events, self.write = out_dir / FILE, out_dir / EVENTS, write
        self.pending: list[_Pending] = []
        self.tensorboard: Any = None
        self.window = WindowMean()

    def start(self, update: int) -> None:
        """Begin at `update` (a checkpoint's, 0 for a new run): rows after it, from a run that stopped later, go."""
        if not self.write:
            return
        kept = [row for row in read_metrics(self.path) if row["update"] <= update] if update and self.path.exists() else []
        with atomic_path(self.path) as tmp:
            tmp.write_text("".join(json.dumps(row) + "\n" for row in kept), encoding="utf-8")
        self.tensorboard = _tensorboard(self.events, update)

    def add(self, update: int, epoch: float, lr: float, nll: torch.Tensor, tokens: int, clipping: Clipping) -> None:
        row = {"update": update, "epoch": epoch, "lr": lr, "target_tokens": tokens}
        self.pending.append(_Pending(row, nll.detach(), clipping))

    def timed(self, wall_time_s: float, tokens_per_s: float) -> None:
        """The clock of a log point, for the last update added."""
        self.pending[-1].row |= {"wall_time_s": wall_time_s, "target_tokens_per_s": tokens_per_s}

    def validated(self, measured: dict[str, dict[str, float]]) -> None:
        """Held-out NLL per sentence, perplexity and (where early stopping follows it) BLEU, for the last update added."""
        for name, m in measured.items():
            self.pending[-1].row |= {f"{name}_{key}": value for key, value in m.items()}

    def flush(self, total: Any) -> None:
        """Append the waiting rows; `total` sums a tensor over the training processes (every process calls this)."""
        if not self.pending:
            return
        import torch  # here: a figure reads this module's files without starting torch

        nll = total(torch.stack([p.nll.double() for p in self.pending])).tolist()
        norms = torch.stack([p.clipping.norm.float() for p in self.pending]).tolist()
        clipped = torch.stack([p.clipping.clipped for p in self.pending]).tolist()
        rows = []
        for p, summed, norm, was_clipped in zip(self.pending, nll, norms, clipped):
            rows.append(
                {
                    **p.row,
                    "train_nll_per_token": summed / p.row["target_tokens"],
                    "grad_norm": norm if math.isfinite(norm) else None,  # JSON has no NaN or infinity
                    "clipped": was_clipped,
                }
            )
        self.pending = []
        if not self.write:
            return
        with self.path.open("a", encoding="utf-8") as out:
            out.write("".join(json.dumps(row) + "\n" for row in rows))
        if self.tensorboard is not None:
            for row in rows:
                self._to_tensorboard(row)
            self.tensorboard.flush()

    def _to_tensorboard(self, row: dict[str, Any]) -> None:
        """A log point's window NLL and LOGGED values, and a validation's held-out costs (and BLEU)."""
        scalars = {key: value for key, value in row.items() if key.endswith(("_nll", "_ppl", "_bleu"))}
        if (mean := self.window.add(row)) is not None:
            scalars |= {"train_nll_per_token": mean, **{key: row[key] for key in LOGGED if row[key] is not None}}
        for key, value in scalars.items():
            self.tensorboard.add_scalar(key, value, row["update"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
