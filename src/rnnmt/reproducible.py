"""Reproducible mode: the same numbers on every x86-64 CPU with AVX2, Intel or AMD, whatever else it has.

The libraries under rnnmt pick their kernels by the CPU at hand (ATen's vectorised loops, MKL's and
OpenBLAS's matrix products, oneDNN's primitives, NumPy's loops), and kernels for different CPUs round
differently in the last bits. Tiny-model training is chaotic, so the demo's BLEU then differs by several
points between CPUs (README, "The same numbers on every CPU"). In reproducible mode every rnnmt process
caps each library at AVX2 before the library starts, through the libraries' own documented variables
(`apply`), so that an AVX-512 or AMX machine runs the kernels an AVX2 machine runs; and, once torch has
started, runs on NumPy what MKL computes by the CPU's vendor (`install_kernels`: matrix products, QR, exp,
log and sqrt; pinned_kernels.py) and torch's LSTM without oneDNN, whose RNN kernels differ between Intel
generations. Threads are fixed (one per process by default, DESIGN.md "CPU threads"; OpenBLAS one).

What this cannot pin: GPUs (cuDNN and cuBLAS choose kernels per card), bfloat16 products on a CPU (AMX
and emulation round differently; `precision: auto` keeps the CPU in float32), CPUs without AVX2, where
the libraries fall back to older kernels, and other versions of torch, NumPy and the libraries they bring.

The workflow turns it on for its jobs (config `reproducible`, the demo scale's default) by setting
`RNNMT_REPRODUCIBLE=1`, which the command line reads at start-up; `results/provenance.json` records it.
"""

from __future__ import annotations

import os

SWITCH = "RNNMT_REPRODUCIBLE"

# Each library's cap at AVX2, by its documented environment variable (read when the library starts).
PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised elementwise and reduction kernels
    "MKL_CBWR": "AVX2,STRICT",  # MKL's products: the AVX2 code path, reduction order independent of alignment
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (torch's LSTM and bfloat16 products on a CPU)
    "DNNL_MAX_CPU_ISA": "AVX2",  # the same, by oneDNN's older name
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's OpenBLAS: its AVX2 kernels (the products of pinned_kernels.py)
    "OPENBLAS_NUM_THREADS": "1",  # one thread: the same sums whatever the number of cores
    # NumPy's dispatched loops: AVX-512 off (X86_V4 names the group in NumPy 2.4, the others older NumPys' targets).
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}


def requested() -> bool:
    """Whether this process was asked to run in reproducible mode."""
    return os.environ.get(SWITCH, "") == "1"


def apply() -> None:
    """Cap every library at AVX2 when reproducible mode is asked for.

    Call before torch or NumPy is imported: the libraries read these variables once, when they start.
    """
    if requested():
        os.environ.update(PINS)


def install_kernels() -> None:
    """In reproducible mode, once torch has started: run on NumPy what MKL computes by the CPU's vendor
    (pinned_kernels.py); nothing otherwise."""
    if requested():
        from rnnmt import pinned_kernels

        pinned_kernels.install()


def describe() -> dict[str, object]:
    """For provenance.json: whether the mode is on, what it sets, and what it cannot pin."""
    return {
        "on": requested(),
        "pins": PINS if requested() else {},
        "kernels": "matrix products, QR, exp, log and sqrt by NumPy (OpenBLAS Haswell, one thread); torch's LSTM without oneDNN" if requested() else "",
        "not pinned": "GPU kernels (cuDNN, cuBLAS), bfloat16 products on a CPU, CPUs without AVX2, other versions of torch and NumPy",
    }
