"""GPU claims: one job per GPU through machine-wide locks, released when the holder dies, shared safely
between users (nothing found in the lock directory is trusted); no real GPU needed."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
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


def start_holder(names: str, directory: Path, hold: float, jobs_per_gpu: int = 1) -> subprocess.Popen:
    env = {**os.environ, gpu_lock.JOBS_PER_GPU_ENV: str(jobs_per_gpu)}
    return subprocess.Popen([sys.executable, "-c", HOLDER, names, str(directory), str(hold)], stdout=subprocess.PIPE, text=True, env=env)


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


def test_n_jobs_share_a_gpu_the_next_waits_and_a_crashed_holder_frees_its_slot(tmp_path: Path):
    """gpu.jobs_per_gpu 3: three holders take GPU 0's three slots, a fourth waits naming them; SIGKILL one, it gets that slot."""
    holders = [start_holder("0", tmp_path, 600.0, jobs_per_gpu=3) for _ in range(3)]
    took = [wait_for_line(h, "LOG took GPU 0 (cuda:0, slot ").split(", lock")[0] for h in holders]
    assert sorted(took) == [f"LOG took GPU 0 (cuda:0, slot {k} of 3)" for k in (1, 2, 3)]
    fourth = start_holder("0", tmp_path, 0.0, jobs_per_gpu=3)
    waiting = wait_for_line(fourth, "LOG waiting for a free GPU")
    assert all(f"pid {h.pid}" in waiting for h in holders) and "GPU 0 slot 3:" in waiting
    holders[1].send_signal(signal.SIGKILL)
    holders[1].wait(timeout=30)
    assert wait_for_line(fourth, "LOG took").startswith(took[1])  # the slot the killed holder had
    fourth.communicate(timeout=30)
    for h in holders[::2]:
        h.kill()
        h.wait(timeout=30)
    assert sorted(p.name for p in tmp_path.glob("rnnmt-gpu-*")) == ["rnnmt-gpu-0.lock", "rnnmt-gpu-0.slot1.lock", "rnnmt-gpu-0.slot2.lock"]


def test_every_gpus_first_slot_is_taken_before_a_second(tmp_path: Path):
    first = start_holder("0,1", tmp_path, 600.0, jobs_per_gpu=2)
    second = start_holder("0,1", tmp_path, 600.0, jobs_per_gpu=2)
    assert {wait_for_line(p, "GOT").split()[1] for p in (first, second)} == {"0", "1"}
    for p in (first, second):
        p.kill()
        p.wait(timeout=30)


@pytest.mark.parametrize("given", ["0", "two", "-1"])
def test_a_bad_jobs_per_gpu_is_one_line(monkeypatch, given):
    monkeypatch.setenv(gpu_lock.JOBS_PER_GPU_ENV, given)
    with pytest.raises(UserError, match=f"RNNMT_JOBS_PER_GPU is '{given}'; expected a whole number of jobs per GPU, 1 or more."):
        gpu_lock.jobs_per_gpu()


def test_a_killed_holder_releases_its_gpu(tmp_path: Path):
    holder = start_holder("0", tmp_path, 600.0)
    wait_for_line(holder, "GOT")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    messages: list[str] = []
    took = gpu_lock.claim(["0"], tmp_path, poll_s=0.05, log=messages.append)
    assert took.index == 0
    assert not any("waiting" in m for m in messages)  # taken at once: the kernel released the dead holder's lock


def test_pick_device_spreads_jobs_over_visible_gpus(tmp_path: Path, monkeypatch):
    """With two (simulated) GPUs, two claims in one process get cuda:0 and cuda:1; a lock is per open file."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    for var in ("SLURM_JOB_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        monkeypatch.delenv(var, raising=False)
    assert pick_device("auto", tmp_path) == torch.device("cuda", 0)
    assert pick_device("cuda", tmp_path) == torch.device("cuda", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rnnmt-gpu-3.lock", "rnnmt-gpu-5.lock"]  # physical names
    assert "pid" in (tmp_path / "rnnmt-gpu-5.lock").read_text()
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


# --- a lock directory other users can write to (issue 11, defects 1 and 5) ------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user (chown, setuid)")
NOBODY = 65534


def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path: Path):
    """Another user plants the lock file as a link to one of your files: it is neither truncated nor written."""
    victim = tmp_path / "thesis.tex"
    victim.write_text("years of work\n")
    locks = tmp_path / "locks"
    locks.mkdir()
    gpu_lock.lock_path(locks, "0").symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        gpu_lock.claim(["0"], locks)
    assert victim.read_text() == "years of work\n"


def test_a_hard_link_to_another_file_is_refused(tmp_path: Path):
    victim = tmp_path / "results.csv"
    victim.write_text("a,b\n")
    locks = tmp_path / "locks"
    locks.mkdir()
    os.link(victim, gpu_lock.lock_path(locks, "0"))
    with pytest.raises(UserError, match="not an rnnmt GPU lock file"):
        gpu_lock.claim(["0"], locks)
    assert victim.read_text() == "a,b\n"


def test_an_existing_directory_keeps_its_mode_even_through_a_link(tmp_path: Path):
    """Only a directory rnnmt creates is made shareable (1777); a link does not pass that on to its target."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    gpu_lock.claim(["0"], link)
    gpu_lock.release_all()
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    created = tmp_path / "new" / "locks"
    gpu_lock.claim(["0"], created)
    assert stat.S_IMODE(created.stat().st_mode) == 0o1777


def test_a_directory_others_can_write_without_a_sticky_bit_is_refused(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UserError, match="no sticky bit"):
        gpu_lock.claim(["0"], shared)
    shared.chmod(0o1777)
    assert gpu_lock.claim(["0"], shared).name == "0"


def test_lock_files_can_be_opened_by_every_user_whatever_the_umask(tmp_path: Path):
    previous = os.umask(0o077)
    try:
        gpu_lock.claim(["0"], tmp_path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(gpu_lock.lock_path(tmp_path, "0").stat().st_mode) == 0o666


@needs_root
def test_a_directory_or_link_of_another_user_is_refused(tmp_path: Path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o1777)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(UserError, match="belongs to nobody"):
        gpu_lock.claim(["0"], theirs)
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    planted = tmp_path / "planted"
    planted.symlink_to(target)
    os.lchown(planted, NOBODY, NOBODY)
    with pytest.raises(UserError, match="symbolic link made by nobody"):
        gpu_lock.claim(["0"], planted)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700 and not any(target.iterdir())


def claim_as_nobody(directory: Path) -> str:
    """Fork, become user nobody, claim GPU 0 and return what that claim logged (the interpreter under /root
    may not be executable by nobody, so the child runs the already imported module instead of a new python)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            messages: list[str] = []
            took = gpu_lock.claim(["0"], directory, poll_s=0.05, log=messages.append)
            messages.append(f"GOT {took.name}")
            os.write(write_end, "\n".join(messages).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        out = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


@needs_root
def test_two_users_share_one_gpu_lock():
    """Root holds GPU 0; user nobody waits for it, names the holder, then takes the same lock file."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="rnnmt-locks-", dir="/tmp"))
    try:
        shared.chmod(0o1777)  # a root-owned sticky directory, as /tmp
        holder = start_holder("0", shared, 1.0)
        wait_for_line(holder, "GOT")
        out = claim_as_nobody(shared)
        holder.communicate(timeout=30)
        assert "GOT 0" in out and f"pid {holder.pid} of root" in out
        assert "of nobody" in gpu_lock.lock_path(shared, "0").read_text()
    finally:
        shutil.rmtree(shared)


@pytest.mark.parametrize("command", ["train", "translate", "bench train"])
def test_the_lock_directory_default_in_the_help_is_the_codes(command, capsys):
    """--gpu-lock-dir's help names the variable and the directory gpu_lock.lock_dir falls back to."""
    from rnnmt.cli import main
    from rnnmt.gpu_lock import DEFAULT_LOCK_DIR, LOCK_DIR_ENV, lock_dir

    with pytest.raises(SystemExit):
        main([*command.split(), "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default: ${LOCK_DIR_ENV}, else {DEFAULT_LOCK_DIR})" in help_text
    assert lock_dir() == DEFAULT_LOCK_DIR or LOCK_DIR_ENV in os.environ
