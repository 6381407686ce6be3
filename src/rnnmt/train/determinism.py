"""A GPU run that repeats bit for bit: what `train.deterministic: on` sets on a CUDA device.

A CPU's kernels are deterministic at a fixed thread count, so a CPU run repeats whatever this says. On a GPU three
things can make two runs of the same system differ: operators whose CUDA kernels accumulate with atomics (their
order changes from run to run), cuBLAS's choice of split reductions when its workspace changes size, and cuDNN's
choice of algorithm by timing. torch's deterministic mode makes every operator that has a deterministic kernel use
it, and warns (once, in the log) for one that has none; a fixed workspace (CUBLAS_WORKSPACE_CONFIG, read when the
process first uses cuBLAS, so `rnnmt` sets it at start) pins cuBLAS; cuDNN picks by rule, not by timing. rnnmt's
own Triton kernels use no atomics and no autotuning: each program writes its own outputs in a fixed order.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `rnnmt` calls prepare_process before any stage imports torch
    import torch

# cuBLAS's documented setting for deterministic results: 8 workspaces of 4 MiB (docs.nvidia.com/cuda/cublas, "Results reproducibility").
CUBLAS_WORKSPACE = ":4096:8"


def prepare_process() -> None:
    """Fix cuBLAS's workspace before anything in this process uses it (a value the user set is kept)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)


def apply(on: bool, device: torch.device) -> None:
    """Make this process's kernels on `device` deterministic (`on`) or let the GPU choose the fastest (off)."""
    import torch

    if device.type != "cuda":
        return
    torch.use_deterministic_algorithms(on, warn_only=True)
    # Filling fresh tensors with NaN would add a kernel per allocation; nothing reads memory before writing it.
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cudnn.deterministic = on
    torch.backends.cudnn.benchmark = not on
    if on:
        warnings.filterwarnings("once", message=".*does not have a deterministic implementation.*")
