"""Stopping a training cleanly: stop signals and the Slurm job's end, noticed from the moment `rnnmt train` starts."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

# SIGTERM: pre-emption, scancel, or Slurm's time limit (SIGKILL follows 30 s later); SIGUSR1: the early
# warning the Slurm profile asks for (--signal=USR1@...).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@dataclass
class StopFlag:
    """Set by a stop signal or by reaching `deadline` (time.time()); the loop checks it after every update.

    Installed before the data are read and the model is built and checked: Python's default for SIGUSR1 ends
    the process, so a warning during that start-up would end the job without a checkpoint; the flag keeps it
    for the first update, which then writes one."""

    reason: str | None = None
    deadline: float | None = None

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.reason = f"{signal.Signals(signum).name} received"

    @property
    def raised(self) -> bool:
        if self.reason is None and self.deadline is not None and time.time() >= self.deadline:
            self.reason = f"the job's time limit is near (stopping at {time.strftime('%H:%M:%S', time.localtime(self.deadline))})"
        return self.reason is not None


def job_deadline(margin_s: float) -> float | None:
    """When to checkpoint and stop under Slurm: the job's end (SLURM_JOB_END_TIME, epoch seconds) minus `margin_s`.

    Slurm sends SIGTERM at the time limit and SIGKILL 30 s later, too little to be sure a large model's
    checkpoint is written; stopping early by the clock needs no signal to reach this process.
    """
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    return float(end) - margin_s if end.isdigit() else None
