"""Process-wide settings every command applies: torch threads, device, logging."""

from __future__ import annotations

import sys
import time

import torch

from rnnmt.errors import UserError


def set_threads(threads: int) -> None:
    """Use exactly `threads` intra-op threads; on 2 cores, 2 torch threads ran many times slower than 1."""
    if threads < 1:
        raise UserError(f"--threads is {threads}; expected a positive number.")
    torch.set_num_threads(threads)


def pick_device(name: str) -> torch.device:
    """'auto' takes CUDA when available, else the CPU; 'cuda' without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name!r} is not a device; expected auto, cpu, cuda or cuda:N.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name} was asked for but no CUDA device is available; use --device cpu or auto.")
    return device


def log(message: str) -> None:
    """One timestamped progress line on stderr (rules redirect it to their log file)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
