"""Reproducible mode: training gives the same parameters, bit for bit, on every x86-64 CPU with AVX2.

Two ways of running on another CPU here: capping the libraries' kernel choice (the variables
rnnmt/reproducible.py sets: AVX2 only, or AVX-512 without AMX), and QEMU's user mode (`qemu-x86_64 -cpu
MODEL`: the same binaries see that model's CPUID, so MKL, oneDNN, ATen and NumPy dispatch as they would on
it, vendor included). Without the mode the CPUs train apart; with it, every run equals every other.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnnmt.reproducible import PINS, SWITCH

from conftest import system_changes_allowed, system_changes_needed

ROOT = Path(__file__).resolve().parents[1]
# A system of each kind: GRU + additive attention, Luong with input feeding, Luong without attention on torch's LSTM.
SYSTEMS = ["rnnsearch", "luong-global-feed", "luong-no-attention"]
# Two AMD generations and an Intel one, as QEMU names them.
EMULATED = ["EPYC-Rome-v2", "EPYC-Milan-v1", "Haswell-v4"]
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
AVX512_NO_AMX = {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "MKL_CBWR": "AVX512"}


def trained_hash(cpu: dict[str, str], mode: bool, emulator: list[str] = []) -> str:  # noqa: B006 (never changed)
    """The parameters' hash of a training in a fresh process on the emulated `cpu` (its caps, and the command that
    runs Python under QEMU's CPU model, if any), mode on or off."""
    env = {k: v for k, v in os.environ.items() if k not in PINS and k != SWITCH}
    env.update(cpu, PYTHONPATH=os.pathsep.join(str(ROOT / d) for d in ("src", "tests")))
    if mode:
        env[SWITCH] = "1"
    run = subprocess.run(
        [*emulator, sys.executable, str(ROOT / "tests" / "reproducible_train.py"), *SYSTEMS], env=env, capture_output=True, text=True, timeout=1200
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


@pytest.fixture(scope="module")
def qemu() -> str:
    """QEMU's x86-64 user mode: running it changes nothing on this machine; installing it where missing (Debian's
    packages, as root) only where the tests may change the machine."""
    found = shutil.which("qemu-x86_64")
    if found is None and not system_changes_allowed():
        pytest.skip(
            system_changes_needed("QEMU's x86-64 user mode (qemu-x86_64) is not here, and the test would install package qemu-user with apt-get as root")
        )
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "qemu-user"], capture_output=True, timeout=900, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        )
        found = shutil.which("qemu-x86_64")
    if found is None:
        pytest.skip("QEMU's x86-64 user mode is not here and cannot be installed (needs root and Debian's apt-get: package qemu-user)")
    return found


def this_cpu_has(flag: str) -> bool:
    path = Path("/proc/cpuinfo")
    return path.exists() and flag in path.read_text().split()


def test_reproducible_mode_trains_the_same_parameters_on_every_emulated_cpu():
    on = {trained_hash(cpu, mode=True) for cpu in ({}, AVX2_ONLY, AVX512_NO_AMX)}
    assert len(on) == 1


@pytest.mark.skipif(not this_cpu_has("avx512f"), reason="this CPU has no AVX-512, so capping it at AVX2 changes no kernel")
def test_without_the_mode_the_emulated_cpus_train_apart():
    assert trained_hash({}, mode=False) != trained_hash(AVX2_ONLY, mode=False)


@pytest.mark.integration
def test_reproducible_mode_trains_the_same_parameters_on_intel_and_amd_cpus(qemu):
    """Natively and under QEMU as two AMD EPYC generations and an Intel Haswell: one hash (each emulated run takes
    about half a minute)."""
    hashes = {"native": trained_hash({}, mode=True)} | {cpu: trained_hash({}, mode=True, emulator=[qemu, "-cpu", cpu]) for cpu in EMULATED}
    assert len(set(hashes.values())) == 1, hashes


@pytest.mark.integration
def test_without_the_mode_intel_and_amd_train_apart(qemu):
    """The same two trainings without the mode, as an Intel and as an AMD CPU: MKL's vendor-specific kernels show."""
    assert trained_hash({}, mode=False, emulator=[qemu, "-cpu", "Haswell-v4"]) != trained_hash({}, mode=False, emulator=[qemu, "-cpu", "EPYC-Rome-v2"])


def test_the_pinned_kernels_compute_what_torch_computes():
    """Every operator reproducible mode replaces (products in every form, QR, exp, log, sqrt, their out= and in-place
    forms, autograd through them, bfloat16 operands), in float64 before and after the replacement: the same to
    rounding (bfloat16: its own)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "tests"))}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "pinned_kernels_check.py")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    differences = json.loads(run.stdout)
    assert differences.pop("bfloat16 mm") <= 0.1
    assert all(value <= 1e-12 for value in differences.values()), differences
