"""One GPU per job on a shared machine: a claim is an exclusive lock on a file per GPU.

Snakemake does not assign GPUs to local jobs, so under `snakemake --cores all` two training jobs would
otherwise share one. A job takes the first GPU whose lock file in a machine-wide directory it can lock
(`flock`, so the kernel releases it when the process ends, crash and SIGKILL included), or waits and
says what it waits for. Two workflows on one machine share the directory and so never share a GPU.
GPUs are named as CUDA_VISIBLE_DEVICES names them when it is set (a scheduler's choice is respected),
else by index. Under Slurm with a GPU allocation the scheduler already isolates jobs, and the job's
device numbering is its own, so no lock is taken.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rnnmt.errors import UserError

DEFAULT_LOCK_DIR = Path("/tmp/rnnmt-gpu-locks")
LOCK_DIR_ENV = "RNNMT_GPU_LOCK_DIR"

# Open lock files of this process: a claim lasts until the process exits.
_held: list[IO[str]] = []


@dataclass(frozen=True)
class Claim:
    """The GPU a job took: its index among the visible devices and the name its lock uses."""

    index: int
    name: str


def lock_dir(override: Path | None = None) -> Path:
    """The machine-wide lock directory: --gpu-lock-dir, else $RNNMT_GPU_LOCK_DIR, else /tmp/rnnmt-gpu-locks."""
    if override is not None:
        return override
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def visible_gpu_names(count: int) -> list[str]:
    """Names of the `count` visible GPUs: CUDA_VISIBLE_DEVICES entries (ids or UUIDs) when set, else indices."""
    listed = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return listed[:count] if len(listed) >= count else [str(i) for i in range(count)]


def scheduler_assigned() -> bool:
    """Slurm gave this job its GPUs (and isolates them), so claiming one again is not needed."""
    return "SLURM_JOB_ID" in os.environ and any(os.environ.get(v) for v in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"))


def lock_path(directory: Path, name: str) -> Path:
    return directory / f"gpu-{name.replace('/', '_')}.lock"


def _open_lock(directory: Path, name: str) -> IO[str]:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if directory.stat().st_uid == os.getuid():
            directory.chmod(0o1777)  # shared by every user's workflows, like /tmp
        fd = os.open(lock_path(directory, name), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise UserError(f"cannot use the GPU lock directory {directory} ({exc.strerror}); set --gpu-lock-dir or ${LOCK_DIR_ENV} to a writable directory.") from None
    return os.fdopen(fd, "r+", encoding="utf-8")


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)}\n")
    handle.flush()
    return True


def _holder(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "unknown holder"


def claim(
    names: list[str],
    directory: Path,
    wanted: int | None = None,
    poll_s: float = 10.0,
    report_every_s: float = 300.0,
    log=print,
) -> Claim:
    """Lock the first free GPU of `names` (or only index `wanted`), waiting while all are taken."""
    candidates = [wanted] if wanted is not None else list(range(len(names)))
    handles = {i: _open_lock(directory, names[i]) for i in candidates}
    waited, last_report = 0.0, None
    while True:
        for i in candidates:
            if _try_lock(handles[i]):
                for j, other in handles.items():
                    if j != i:
                        other.close()
                _held.append(handles[i])
                suffix = f" after waiting {waited:.0f} s" if waited else ""
                log(f"took GPU {names[i]} (cuda:{i}), lock {lock_path(directory, names[i])}{suffix}")
                return Claim(i, names[i])
        if last_report is None or waited - last_report >= report_every_s:
            holders = "; ".join(f"GPU {names[i]}: {_holder(handles[i])}" for i in candidates)
            log(f"waiting for a free GPU (locks in {directory}): {holders}")
            last_report = waited
        time.sleep(poll_s)
        waited += poll_s


def release_all() -> None:
    """Give back every GPU this process claimed (process exit does the same)."""
    while _held:
        _held.pop().close()
