"""results/provenance.json: what produced the results (config, installed packages against the lock, git revision, hardware)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from rnnmt import environment, reproducible
from rnnmt.fileio import write_json


def git_revision(where: Path) -> dict[str, Any]:
    """HEAD and whether the work tree has uncommitted changes (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def hardware() -> dict[str, Any]:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"machine": platform.machine(), "cpu": cpu(), "cpus": os.cpu_count(), "python": platform.python_version(), "gpus": gpus}


# The instruction sets that decide which kernels the libraries run on a CPU (and so the last bits of a result).
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu() -> dict[str, Any]:
    """The CPU's model name and which of ISA_FLAGS it has (empty where /proc/cpuinfo is not)."""
    from rnnmt.runtime import cpu_info

    model, flags = cpu_info()
    return {"model": model, "instruction_sets": [flag for flag in ISA_FLAGS if flag in flags]} if flags else {}


def write_provenance(config: dict[str, Any], out: Path) -> None:
    write_json(
        out,
        {
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "config": config,
            "environment": environment.describe(),
            "git": git_revision(Path(__file__).resolve().parent),
            "hardware": hardware(),
            "reproducible": reproducible.describe(),
        },
    )
