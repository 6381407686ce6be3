"""GPU claims: one job per GPU through machine-wide locks, released when the holder dies; no real GPU needed."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from rnnmt import gpu_lock
from rnnmt.errors import UserError
from rnnmt.runtime import pick_device

# A job that claims one of the GPUs named on its command line, prints when it got it and when it lets go.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from rnnmt import gpu_lock
    names, directory, hold = sys.argv[1].split(","), Path(sys.argv[2]), float(sys.argv[3])
    took = gpu_lock.claim(names, directory, poll_s=0.05, log=lambda m: print("LOG", m, flush=True))
    print("GOT", took.name, time.time(), flush=True)
    time.sleep(hold)
    print("DONE", took.name, time.time(), flush=True)
    """
)


def start_holder(names: str, directory: Path, hold: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, names, str(directory), str(hold)], stdout=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen, prefix: str) -> str:
    for line in proc.stdout:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"the holder ended without printing {prefix}")


@pytest.fixture(autouse=True)
def _release():
    yield
    gpu_lock.release_all()


def test_two_claims_on_one_gpu_run_one_after_the_other(tmp_path: Path):
    first = start_holder("0", tmp_path, 1.0)
    wait_for_line(first, "GOT")
    second = start_holder("0", tmp_path, 0.0)
    out_first, _ = first.communicate(timeout=30)
    out_second, _ = second.communicate(timeout=30)
    released = float(next(line for line in out_first.splitlines() if line.startswith("DONE")).split()[2])
    got = float(next(line for line in out_second.splitlines() if line.startswith("GOT")).split()[2])
    assert got >= released
    waiting = [line for line in out_second.splitlines() if "waiting for a free GPU" in line]
    assert waiting and f"pid {first.pid}" in waiting[0]  # it says what it waits for


def test_two_gpus_take_two_jobs_at_once(tmp_path: Path):
    first = start_holder("0,1", tmp_path, 1.0)
    second = start_holder("0,1", tmp_path, 1.0)
    names = {wait_for_line(p, "GOT").split()[1] for p in (first, second)}
    assert names == {"0", "1"}
    for p in (first, second):
        p.communicate(timeout=30)


def test_a_killed_holder_releases_its_gpu(tmp_path: Path):
    holder = start_holder("0", tmp_path, 600.0)
    wait_for_line(holder, "GOT")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    messages: list[str] = []
    start = time.monotonic()
    took = gpu_lock.claim(["0"], tmp_path, poll_s=0.05, log=messages.append)
    assert took.index == 0 and time.monotonic() - start < 5
    assert not any("waiting" in m for m in messages)


def test_pick_device_spreads_jobs_over_visible_gpus(tmp_path: Path, monkeypatch):
    """With two (simulated) GPUs, two claims in one process get cuda:0 and cuda:1; a lock is per open file."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    for var in ("SLURM_JOB_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        monkeypatch.delenv(var, raising=False)
    assert pick_device("auto", tmp_path) == torch.device("cuda", 0)
    assert pick_device("cuda", tmp_path) == torch.device("cuda", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-3.lock", "gpu-5.lock"]  # physical names
    assert "pid" in (tmp_path / "gpu-5.lock").read_text()
    with pytest.raises(UserError, match="only 2 GPU"):
        pick_device("cuda:2", tmp_path)


def test_a_slurm_allocation_is_used_without_a_lock(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_GPUS", "2")
    assert pick_device("auto", tmp_path) == torch.device("cuda", 0)
    assert not any(tmp_path.iterdir())


def test_cpu_takes_no_lock_and_names_follow_cuda_visible_devices(tmp_path: Path, monkeypatch):
    assert pick_device("cpu", tmp_path) == torch.device("cpu")
    assert not any(tmp_path.iterdir())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2a,GPU-11c0")
    assert gpu_lock.visible_gpu_names(2) == ["GPU-8f2a", "GPU-11c0"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_lock.visible_gpu_names(2) == ["0", "1"]


def test_an_unusable_lock_directory_is_one_clear_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot use the GPU lock directory"):
        gpu_lock.claim(["0"], blocker / "locks")
