"""What the training settings left at `auto` become on the device that trains: precision, graph, sync, recurrence.

The fastest faithful path differs by device, so config.yaml says `auto` and this module decides, once,
when training starts; the trainer logs each choice with its reason and `rnnmt show-system` prints them.

- precision: bfloat16 autocast on a CUDA device that multiplies bfloat16 natively (compute capability
  8.0 and later), float32 elsewhere. On a CPU bfloat16 pays only where the CPU multiplies it natively
  (AMX): without AMX, oneDNN emulates the products and an update runs 1.5-15x slower (docs/performance.md);
  and float32 gives the same digits on every x86-64 CPU far more often than bfloat16 does.
- graph: `cuda` (updates captured as CUDA graphs, train/graphs.py) on a CUDA device in one process with
  train.max_len set (it bounds the shapes to capture); `none` elsewhere: on a CPU there are no launches
  to save and the padding of `static` costs time.
- sync: `logging` (clipping decided on the device, the host waits only at log points) on a GPU, `update`
  on a CPU, where the host computed the norm anyway.
- recurrence: `kernels` (recurrence/kernels/: each step's pointwise work as one Triton kernel, and so the output
  softmax and the clipped Adadelta/SGD step, train/nll.py and train/update.py) on a CUDA device where Triton is
  installed, `fused` (recurrence/fused.py) elsewhere: on a CPU the fused loops are faster, and the kernels' torch
  references are there to test and count, not to run. Whatever is chosen or given, a fast recurrence trains only
  where it runs the model's loops and passes its check against the modules (`verified_recurrence`).
- deterministic: `on` everywhere. On a GPU that means deterministic algorithms and a fixed cuBLAS workspace
  (train/determinism.py), so that two runs of a system give the same weights; a CPU's kernels at a fixed thread
  count are deterministic already. `off` lets a GPU take its nondeterministic kernels (atomics) where they are faster.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

from rnnmt.errors import UserError
from rnnmt.models.loops import Paths
from rnnmt.runtime import cpu_multiplies_bfloat16
from rnnmt.train.defaults import DEVICE_CHOICES


@dataclass(frozen=True)
class Choice:
    """A setting's value for this run and why (`auto`'s reason, or that the config gave it)."""

    value: str
    why: str


def cuda_multiplies_bfloat16(device: torch.device) -> bool:
    """Whether a CUDA device has bfloat16 tensor cores (Ampere, 8.0, and later); assumed when none is visible here."""
    if not torch.cuda.is_available():
        return True
    return torch.cuda.get_device_capability(device) >= (8, 0)


def precision(value: str, device: torch.device) -> Choice:
    if value == "bfloat16" and device.type == "cpu" and not cpu_multiplies_bfloat16():
        return Choice(
            value,
            "given in the config; this CPU has no AMX (or oneDNN may not use it): its bfloat16 products are emulated, an update runs many times slower than in float32",
        )
    if value != "auto":
        return Choice(value, "given in the config")
    if device.type == "cuda":
        if cuda_multiplies_bfloat16(device):
            return Choice("bfloat16", "auto: a CUDA device with bfloat16 tensor cores (products in bfloat16, the rest float32)")
        return Choice("float32", "auto: a CUDA device without bfloat16 tensor cores")
    return Choice("float32", "auto: not a GPU (bfloat16 is opt-in on a CPU: faster only with AMX, see the README)")


def graph(value: str, device: torch.device, max_len: int | None, processes: int) -> Choice:
    if value != "auto":
        return Choice(value, "given in the config")
    if device.type != "cuda":
        return Choice("none", "auto: not a CUDA device (nothing to capture)")
    if processes > 1:
        return Choice("none", f"auto: {processes} data-parallel processes (a capture needs one)")
    if max_len is None:
        return Choice("none", "auto: train.max_len is not set (it bounds the shapes to capture)")
    return Choice("cuda", "auto: a CUDA device, one process and train.max_len set: each padded shape is captured once and replayed")


def sync(value: str, device: torch.device) -> Choice:
    if value != "auto":
        return Choice(value, "given in the config")
    if device.type == "cuda":
        return Choice("logging", "auto: a GPU (the host reads the device only at log points)")
    return Choice("update", "auto: not a GPU (the host decides clipping each update)")


def recurrence(value: str, device: torch.device) -> Choice:
    if value != "auto":
        return Choice(value, "given in the config")
    if device.type != "cuda":
        return Choice("fused", "auto: not a GPU (the hand-written loops of recurrence/fused.py, fastest on a CPU)")
    if importlib.util.find_spec("triton") is None:
        return Choice("fused", "auto: Triton is not installed (it comes with torch's CUDA builds)")
    return Choice("kernels", "auto: a CUDA device with Triton: each step's pointwise work as one kernel")


def verified_recurrence(choice: Choice, model: dict[str, Any], device: torch.device, precision: str) -> tuple[Choice, Paths, str | None]:
    """`choice`'s recurrence for each part of the model (models/loops.py's PARTS) where it can run that part and passes
    its checks (train/selfcheck.py: against autograd through the modules, and each Triton stage against its torch
    reference where the kernels run; once per process and architecture), else the next slower one that does; with the
    log line that says what was left behind and why."""
    from rnnmt.train import selfcheck

    verdict = selfcheck.verify(model, choice.value, device, precision)
    checked = f"{verdict.checked} in {verdict.seconds:.2f} s"
    if not verdict.left:
        return Choice(choice.value, f"{choice.why}; {checked}"), verdict.paths, None
    left = "; ".join(verdict.left)
    return (
        Choice(verdict.recurrence, f"{choice.value} ({choice.why}) left behind: {left}; {checked}"),
        verdict.paths,
        f"{left}; this run trains with recurrence {verdict.recurrence}",
    )


def deterministic(value: str, device: torch.device) -> Choice:
    if value != "auto":
        return Choice(value, "given in the config")
    if device.type == "cuda":
        return Choice("on", "auto: deterministic algorithms and a fixed cuBLAS workspace, so that a run repeats bit for bit")
    return Choice("on", "auto: a CPU's kernels are deterministic at a fixed thread count")


def choose(train: dict[str, Any], device: torch.device, processes: int = 1) -> dict[str, Choice]:
    """The device-dependent settings of `train` (defaults filled in) for a run on `device` in `processes` processes."""
    for key, known in DEVICE_CHOICES.items():
        if train[key] not in known:
            raise UserError(f"train.{key} is {train[key]!r}; expected one of {', '.join(known)}.")
    return {
        "precision": precision(train["precision"], device),
        "graph": graph(train["graph"], device, train["max_len"], processes),
        "sync": sync(train["sync"], device),
        "recurrence": recurrence(train["recurrence"], device),
        "deterministic": deterministic(train["deterministic"], device),
    }


def describe(train: dict[str, Any], device: str) -> dict[str, Any]:
    """What `choose` makes of `train` on `device` ('auto': a GPU if this machine has one), for show-system."""
    run_on = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
    return {"device": str(run_on), **{key: {"value": c.value, "why": c.why} for key, c in choose(train, run_on).items()}}
