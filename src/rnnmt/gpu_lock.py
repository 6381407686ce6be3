"""GPU slots on a shared machine: a claim is an exclusive lock on a file per GPU and slot.

Snakemake does not assign GPUs to local jobs, so under `snakemake --cores all` two training jobs would
otherwise share one. Each GPU has `jobs_per_gpu` slots (config `gpu.jobs_per_gpu`, which the workflow passes
as $RNNMT_JOBS_PER_GPU; 1 by default: a GPU to each job). A job takes the first free slot, every GPU's first slot
before any second one (`flock`, so the kernel releases it when the process ends, crash and SIGKILL included), or
waits and says what it waits for.
GPUs are named as CUDA_VISIBLE_DEVICES names them when it is set (a scheduler's choice is respected),
else by index. Under Slurm with a GPU allocation the scheduler already isolates jobs, and the job's
device numbering is its own, so no lock is taken.

Sharing between users: every user's jobs must lock the same files, so by default they are
/tmp/rnnmt-gpu-<GPU>.lock. /tmp belongs to root and has the sticky bit, so nobody can delete or
replace another user's lock file. A lock file is created with mode 0666 whatever the umask, so any
user can open it later; the holder writes a one-line note (pid, host, time, command) into it for
those who wait. Because other users can write in such a directory, rnnmt trusts nothing found there:
it never follows a symbolic link to a lock file, and it writes only into a regular file with a single
name and at most NOTE_BYTES bytes, in place, without truncating it. A lock directory of your own
choice must belong to you or root, and have the sticky bit if others can write to it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rnnmt.errors import UserError

DEFAULT_LOCK_DIR = Path("/tmp")
LOCK_DIR_ENV = "RNNMT_GPU_LOCK_DIR"
JOBS_PER_GPU_ENV = "RNNMT_JOBS_PER_GPU"
# The holder's note is padded to this size and written in place: a lock file never grows past it.
NOTE_BYTES = 1024
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK

# Open lock files (descriptors) of this process: a claim lasts until the process exits.
_held: list[int] = []


@dataclass(frozen=True)
class Claim:
    """The GPU a job took: its index among the visible devices, the name its lock uses, and the slot it holds."""

    index: int
    name: str
    slot: int = 0


def lock_dir(override: Path | None = None) -> Path:
    """The machine-wide lock directory: --gpu-lock-dir, else $RNNMT_GPU_LOCK_DIR, else /tmp."""
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


def jobs_per_gpu() -> int:
    """How many jobs may share one GPU: $RNNMT_JOBS_PER_GPU (the workflow sets it from config `gpu.jobs_per_gpu`), else 1."""
    given = os.environ.get(JOBS_PER_GPU_ENV, "1")
    if not given.isdigit() or int(given) < 1:
        raise UserError(f"${JOBS_PER_GPU_ENV} is {given!r}; expected a whole number of jobs per GPU, 1 or more.")
    return int(given)


def lock_path(directory: Path, name: str, slot: int = 0) -> Path:
    """The lock file of one slot of GPU `name` (slot 0 keeps the name of a GPU's one lock, so every version agrees)."""
    return directory / f"rnnmt-gpu-{name.replace('/', '_')}{f'.slot{slot}' if slot else ''}.lock"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _trusted_owner(uid: int) -> bool:
    return uid in (0, os.getuid())


def _unusable(directory: Path, why: str) -> UserError:
    return UserError(f"cannot use the GPU lock directory {directory}: {why}; set --gpu-lock-dir or ${LOCK_DIR_ENV} to another directory.")


def _open_directory(directory: Path) -> int:
    """A descriptor of the lock directory, created shareable (1777) when missing; one that others could tamper with is refused."""
    try:
        link = os.lstat(directory)
    except FileNotFoundError:
        link = None
    except OSError as exc:
        raise _unusable(directory, exc.strerror) from None
    if link is not None and stat.S_ISLNK(link.st_mode):
        if not _trusted_owner(link.st_uid):
            raise _unusable(directory, f"it is a symbolic link made by {_user(link.st_uid)}, and rnnmt follows no other user's links there")
        directory = Path(os.path.realpath(directory))
    created = False
    try:
        if link is None:
            directory.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(directory, 0o700)
                created = True
            except FileExistsError:
                pass
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _OPEN)
    except OSError as exc:
        # With O_DIRECTORY, Linux answers a symbolic link with ENOTDIR rather than ELOOP.
        why = "it is a symbolic link" if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(directory) else exc.strerror
        raise _unusable(directory, why) from None
    if created:
        os.fchmod(fd, 0o1777)  # like /tmp: everyone may lock, nobody may remove another user's files
    st = os.fstat(fd)
    why = None
    if not _trusted_owner(st.st_uid):
        why = f"it belongs to {_user(st.st_uid)}, who could remove or replace the lock files of every other user (it must be yours or root's)"
    elif st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        why = "other users can write to it but it has no sticky bit, so they could remove or replace the lock files (chmod +t fixes that)"
    if why:
        os.close(fd)
        raise _unusable(directory, why)
    return fd


def _open_lock(dir_fd: int, path: Path) -> int:
    """A descriptor of the lock file `path` (in the directory `dir_fd`), created (mode 0666) if missing; never through a link."""
    directory = path.parent
    while True:
        try:
            fd = os.open(path.name, os.O_RDWR | _OPEN, dir_fd=dir_fd)
        except FileNotFoundError:
            try:
                fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN, 0o666, dir_fd=dir_fd)
            except FileExistsError:
                continue  # another job created it between the two calls
            os.fchmod(fd, 0o666)  # the umask must not keep other users out
        except PermissionError:
            # Not writable by us (its creator has not made it 0666 yet): flock works on a read-only descriptor.
            fd = os.open(path.name, os.O_RDONLY | _OPEN, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(
                    f"GPU lock file {path} is a symbolic link; rnnmt never follows one there (it could make rnnmt write into another file). Remove it, or set --gpu-lock-dir."
                ) from None
            raise _unusable(directory, exc.strerror) from None
        break
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > NOTE_BYTES:
        os.close(fd)
        raise UserError(
            f"{path} is not an rnnmt GPU lock file (expected a regular file with one name and at most {NOTE_BYTES} bytes; "
            f"it belongs to {_user(st.st_uid)}); rnnmt will not write to it. Remove it, or set --gpu-lock-dir."
        )
    return fd


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    note = f"pid {os.getpid()} of {_user(os.getuid())} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)}"
    data = note.encode("utf-8")[: NOTE_BYTES - 1].ljust(NOTE_BYTES - 1) + b"\n"
    try:
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # a read-only descriptor: the lock holds, the note stays the previous holder's
    return True


def _holder(fd: int) -> str:
    return os.pread(fd, NOTE_BYTES, 0).decode("utf-8", errors="replace").strip() or "unknown holder"


def _open_all(names: list[str], candidates: list[tuple[int, int]], directory: Path) -> dict[tuple[int, int], int]:
    """A descriptor for each (GPU index, slot) of `candidates`."""
    dir_fd = _open_directory(directory)
    opened: dict[tuple[int, int], int] = {}
    try:
        for i, slot in candidates:
            opened[i, slot] = _open_lock(dir_fd, lock_path(directory, names[i], slot))
    except BaseException:
        for fd in opened.values():
            os.close(fd)
        raise
    finally:
        os.close(dir_fd)
    return opened


def claim(
    names: list[str], directory: Path, wanted: int | None = None, poll_s: float = 10.0, report_every_s: float = 300.0, log=print, slots: int | None = None
) -> Claim:
    """Lock the first free slot of the GPUs `names` (or of index `wanted` only), every GPU's first slot before any
    second; wait while all are taken. `slots`: jobs per GPU (default: jobs_per_gpu())."""
    gpus = [wanted] if wanted is not None else list(range(len(names)))
    candidates = [(i, slot) for slot in range(jobs_per_gpu() if slots is None else slots) for i in gpus]
    handles = _open_all(names, candidates, directory)
    waited, last_report = 0.0, None
    while True:
        for i, slot in candidates:
            if _try_lock(handles[i, slot]):
                for key, other in handles.items():
                    if key != (i, slot):
                        os.close(other)
                _held.append(handles[i, slot])
                suffix = f" after waiting {waited:.0f} s" if waited else ""
                shared = f", slot {slot + 1} of {len(candidates) // len(gpus)}" if len(candidates) > len(gpus) else ""
                log(f"took GPU {names[i]} (cuda:{i}{shared}), lock {lock_path(directory, names[i], slot)}{suffix}")
                return Claim(i, names[i], slot)
        if last_report is None or waited - last_report >= report_every_s:
            holders = "; ".join(f"GPU {names[i]}{f' slot {slot + 1}' if slot else ''}: {_holder(handles[i, slot])}" for i, slot in candidates)
            log(f"waiting for a free GPU (locks in {directory}): {holders}")
            last_report = waited
        time.sleep(poll_s)
        waited += poll_s


def release_all() -> None:
    """Give back every GPU this process claimed (process exit does the same)."""
    while _held:
        os.close(_held.pop())
