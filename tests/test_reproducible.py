"""Reproducible mode: training gives the same parameters, bit for bit, whatever instruction sets the CPU has.

Two CPUs are emulated on this one by capping the libraries' kernel choice (the variables rnnmt/reproducible.py
sets): one with AVX2 only, one with AVX-512 but no AMX. Without the mode they train apart wherever this
machine has more than AVX2; with it, every run equals every other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnmt.reproducible import PINS, SWITCH

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ["rnnsearch", "luong-global-feed"]
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
AVX512_NO_AMX = {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "MKL_CBWR": "AVX512"}


def trained_hash(cpu: dict[str, str], mode: bool) -> str:
    """The parameters' hash of a training in a fresh process on the emulated `cpu` (its caps), mode on or off."""
    env = {k: v for k, v in os.environ.items() if k not in PINS and k != SWITCH}
    env.update(cpu, PYTHONPATH=os.pathsep.join(str(ROOT / d) for d in ("src", "tests")))
    if mode:
        env[SWITCH] = "1"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "reproducible_train.py"), *SYSTEMS], env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


def this_cpu_has(flag: str) -> bool:
    path = Path("/proc/cpuinfo")
    return path.exists() and flag in path.read_text().split()


def test_reproducible_mode_trains_the_same_parameters_on_every_emulated_cpu():
    on = {trained_hash(cpu, mode=True) for cpu in ({}, AVX2_ONLY, AVX512_NO_AMX)}
    assert len(on) == 1


@pytest.mark.skipif(not this_cpu_has("avx512f"), reason="this CPU has no AVX-512, so capping it at AVX2 changes no kernel")
def test_without_the_mode_the_emulated_cpus_train_apart():
    assert trained_hash({}, mode=False) != trained_hash(AVX2_ONLY, mode=False)
