"""Reproducible mode: the same numbers on every x86-64 CPU with AVX2, whatever else it has.

The libraries under rnnmt pick their kernels by the instruction sets of the CPU at hand (ATen's
vectorised loops, MKL's and OpenBLAS's matrix products, oneDNN's primitives, NumPy's loops), and kernels
for different instruction sets round differently in the last bits. Tiny-model training is chaotic, so the
demo's BLEU then differs by several points between CPUs (README, "The same numbers on every CPU"). In reproducible mode
every rnnmt process caps each library at AVX2 before the library starts, through the libraries' own
documented variables, so that an AVX-512 or AMX machine runs the kernels an AVX2 machine runs; MKL's
conditional numerical reproducibility also fixes its reduction order (STRICT: independent of alignment).
Threads are already fixed (one per process by default, DESIGN.md "CPU threads").

What this cannot pin: GPUs (cuDNN and cuBLAS choose kernels per card), bfloat16 products on a CPU (AMX
and emulation round differently; `precision: auto` keeps the CPU in float32), and CPUs without AVX2, where
the libraries fall back to older kernels.

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
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy's OpenBLAS: its AVX2 kernels
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


def describe() -> dict[str, object]:
    """For provenance.json: whether the mode is on, what it sets, and what it cannot pin."""
    return {
        "on": requested(),
        "pins": PINS if requested() else {},
        "not pinned": "GPU kernels (cuDNN, cuBLAS), bfloat16 products on a CPU, CPUs without AVX2",
    }
