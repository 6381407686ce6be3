"""Stopping a training cleanly: stop signals and the Slurm job's end, noticed from the moment `rnnmt train` starts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

# SIGTERM: pre-emption, scancel, or Slurm's time limit (SIGKILL follows 30 s later); SIGUSR1: the early
# warning the Slurm profile asks for (--signal=USR1@...).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
# A slow controller must not hold up a training for long: without an answer it runs without a clock stop.
SQUEUE_TIMEOUT_S = 30


def clock(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def leave_the_warning_to_training() -> None:
    """Ignore SIGUSR1 in this process and, by inheritance, in the commands it starts; `rnnmt train` installs its own
    handler over it. Slurm sends the profile's warning to every process of the job step (Snakemake, its shell, rnnmt):
    a Snakemake or shell ended by it (the default action) ends the step while rnnmt is still writing its checkpoint."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


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
            self.reason = f"the job's time limit is near (stopping at {clock(self.deadline)})"
        return self.reason is not None


def job_end() -> tuple[float | None, str]:
    """The Slurm job's end (epoch seconds) and where it was read; or None and why not ("" outside a Slurm job).

    Slurm 23.02 and later export SLURM_JOB_END_TIME; older ones only tell the controller's clients, so a job
    without it (SLURM_JOB_ID is set in every job step, the workflow's inner `srun` included) asks squeue."""
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    if end.isdigit():
        return float(end), "SLURM_JOB_END_TIME"
    job = os.environ.get("SLURM_JOB_ID", "")
    return squeue_end(job) if job else (None, "")


def squeue_end(job: str) -> tuple[float | None, str]:
    """Job `job`'s end from `squeue` in epoch seconds (SLURM_TIME_FORMAT=%s: no time zone to guess), or None and why."""
    cmd = ["squeue", "--noheader", "--jobs", job, "--format", "%e"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S, env={**os.environ, "SLURM_TIME_FORMAT": "%s"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`{' '.join(cmd)}` could not run ({exc})"
    answer = done.stdout.strip()
    if done.returncode != 0 or not answer:
        return None, f"`{' '.join(cmd)}` failed (exit {done.returncode}: {done.stderr.strip() or 'no output'})"
    if not answer.isdigit():
        return None, f"squeue gives job {job} no end time ({answer})"
    return float(answer), f"squeue -j {job}"


def job_deadline(margin_s: float) -> tuple[float | None, str]:
    """When to checkpoint and stop by the clock (time.time()): the job's end minus `margin_s`; or None. With a
    line for the log that says which end it is or why there is none ("" outside a Slurm job).

    Slurm sends SIGTERM at the time limit and SIGKILL 30 s later, too little to be sure a large model's
    checkpoint is written; stopping early by the clock needs no signal to reach this process. A job shorter than
    the margin would stop after every first update and never get on, so it runs on until a signal stops it.
    """
    end, source = job_end()
    if end is None:
        return None, f"no stop by the clock before the job's time limit: {source}" if source else ""
    ends = f"the Slurm job ends at {clock(end)} ({source})"
    if end - margin_s <= time.time():
        return None, f"{ends}, within --stop-before-limit ({margin_s:.0f} s): no stop by the clock, only by a signal"
    return end - margin_s, f"{ends}: will checkpoint and stop {margin_s:.0f} s before"
