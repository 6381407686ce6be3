"""Process-wide settings every command applies: torch threads, device, logging.

torch is imported by the functions that use it, so that a command without torch (cli.arguments.Command.torch) that
logs does not start it (about 2.6 s a process).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rnnmt import gpu_lock
from rnnmt.errors import UserError

if TYPE_CHECKING:
    import torch


def set_threads(threads: int) -> None:
    """Use exactly `threads` intra-op threads; on 2 cores, 2 torch threads ran many times slower than 1."""
    if threads < 1:
        raise UserError(f"--threads is {threads}; expected a positive number.")
    import torch

    torch.set_num_threads(threads)


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory in the process for the next allocation; False where there is no glibc.

    By default glibc maps every block above its mmap threshold (at most 32 MiB) afresh and unmaps it when
    freed, and returns the top of the heap to the kernel: each training update then faults its large
    buffers back in, page by page, zeroed by the kernel (~1 µs per 4 KiB page, 3,000-8,000 pages in an
    update of the peers-size systems). Serving all blocks from the heap and never trimming it keeps the
    process at its peak size, like a GPU's caching allocator.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


@functools.cache
def cpu_info() -> tuple[str | None, frozenset[str]]:
    """The CPU's model name and instruction-set flags (Linux's /proc/cpuinfo; nothing known elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None, frozenset()
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), None)
    return model, frozenset(text.split())


# oneDNN's cap on the instruction sets it may use (its documented variables); a value without AMX
# keeps it from AMX's bfloat16 products even on a CPU that has them.
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def _cpu_offers(flags: tuple[str, ...], caps: tuple[str, ...]) -> bool:
    """Whether the CPU has one of `flags` (runtime.cpu_info) and oneDNN's cap, if any, names an ISA with one of `caps`."""
    for variable in ISA_CAPS:
        cap = os.environ.get(variable, "").upper()
        if cap and cap not in ("ALL", "DEFAULT") and not any(c in cap for c in caps):
            return False
    found = cpu_info()[1]
    return any(flag in found for flag in flags)


def cpu_multiplies_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AMX) and oneDNN is allowed to use it."""
    return _cpu_offers(("amx_bf16",), ("AMX", "AVX10"))


def cpu_has_bfloat16() -> bool:
    """Whether oneDNN may use bfloat16 instructions here (AVX512_BF16 or AMX): without them it has no bfloat16 LSTM
    (models/lstm.py then runs torch's LSTM in float32)."""
    return _cpu_offers(("avx512_bf16", "amx_bf16"), ("BF16", "FP16", "AMX", "AVX10"))


def pick_device(name: str, gpu_lock_dir: Path | None = None) -> torch.device:
    """'auto' takes a free GPU when there is one, else the CPU; 'cuda' any free GPU, 'cuda:N' that one.

    A GPU is claimed with a machine-wide lock held until the process exits (gpu_lock.py), so jobs that
    run side by side never share one; a job waits, saying so in its log, while every GPU is taken.
    """
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name!r} is not a device; expected auto, cpu, cuda or cuda:N.") from None
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise UserError(f"--device {name} was asked for but no CUDA device is available; use --device cpu or auto.")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise UserError(f"--device {name}: only {count} GPU(s) are visible (cuda:0 to cuda:{count - 1}).")
    if gpu_lock.scheduler_assigned():
        # torchrun's processes each take the GPU of their local rank among those Slurm allocated.
        index = device.index if device.index is not None else int(os.environ.get("LOCAL_RANK", 0))
        log(f"GPU cuda:{index} assigned by Slurm (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}); no lock taken")
        return torch.device("cuda", index)
    taken = gpu_lock.claim(gpu_lock.visible_gpu_names(count), gpu_lock.lock_dir(gpu_lock_dir), device.index, log=log)
    return torch.device("cuda", taken.index)


def synchronize(device: torch.device) -> None:
    """Wait until `device` has run all the work queued on it (a GPU runs behind the host; a CPU never does)."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def log(message: str) -> None:
    """One timestamped progress line on stderr (rules redirect it to their log file)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
