"""Each Triton stage beside its torch reference, on the device that will train, before a run relies on it.

No test may have run a Triton kernel on the user's GPU, compiler and driver: a kernel that fails to
compile, or that computes something else there (a reduction order, a bfloat16 conversion, a race), would
stop the run or train a wrong model for hours. `stage_differences` runs one training update of a small
model of the system's architecture (its output softmax and parameter update too) with every stage run both
ways, on the same inputs, and reports per stage the worst difference (or the error); `verify` is what
training calls (train/loop.py), once per process, device, architecture and precision: the stages that
fail, each with the reason in one line.
The same comparison at ragged and at the papers' sizes is the GPU test suite's (tests/test_kernels_cuda.py).

One discontinuity is compared as it falls: local-p centres its window on ⌊p_t⌋, so where the kernel's p_t and
the reference's (equal to rounding, ~1e-7) lie on either side of an integer, about 2 rows in a million, their
windows differ and the stage reads as differing; the run then trains with `fused`, as for a real fault.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rnnmt.models.kernels import stages

# A kernel's output may differ from the float64 value of its stage by 8× what the torch reference's own
# rounding differs by, plus this share of the value's norm: float32 sums in another order (over 1,000 terms a
# blocked sum and a BLAS's differ by a few times in accuracy where the terms cancel); a bfloat16 copy is off
# by less than one step, 2^-7, rounded either way (Triton's interpreter truncates). A wrong mask, index or
# conversion is off by orders of magnitude more.
SLACK = 8.0
TOLERANCE = {torch.float32: 1e-6, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}

# Columns of the guard's output softmax, and weights of its updates: more than two of their Triton kernels' tiles
# and blocks (2,048, triton_update.py), so that the passes over several are compared, not only one that fits.
WIDE = 5000

# The small model the guard trains one update of: the system's architecture at these sizes.
SMALL = {"emb": 8, "hidden": 16, "align_hidden": 16, "maxout": 8, "output_rank": None, "window": 2, "max_positions": 6}


@dataclass
class StageCheck:
    """One stage's comparison: its calls, the worst difference over its outputs as a share of the tolerance, and
    where its kernel failed to run, the error."""

    calls: int = 0
    worst: float = 0.0
    detail: str = ""
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and self.worst <= 1.0

    def reason(self) -> str:
        """Why it failed, in one line."""
        if self.error is not None:
            return f"its Triton kernel failed to run ({self.error})"
        return f"it differs from its torch reference by {self.detail}"


def _difference(out: Tensor, ref: Tensor, exact: Tensor) -> tuple[float, str]:
    """The kernel's error against the float64 value `exact` as a share of what it may be (the reference `ref`'s own
    error, times SLACK, plus the dtype's tolerance), and in words. Sums that cancel (a softmax's gradient sums to
    0) keep only the low bits of their terms in either order; the reference's error is the scale for those."""
    a, r, e = out.double(), ref.double(), exact.double()
    if not torch.equal(torch.isnan(a), torch.isnan(e)):
        return float("inf"), "NaN where the float64 reference has none"
    # Infinities are compared as values, not through the norms (inf − inf): a stage's outputs can share a buffer
    # with columns it leaves alone, whose uninitialised values both sides keep as they were.
    infinite = torch.isinf(e)
    if not torch.equal(a[infinite], e[infinite]) or bool(torch.isinf(a[~infinite]).any()):
        return float("inf"), "an infinity where the float64 reference has another value"
    known = torch.isfinite(e)
    a, r, e = a[known], r[known], e[known]
    ours, theirs, scale = float((a - e).norm()), float((r - e).norm()), float(e.norm())
    allowed = SLACK * theirs + TOLERANCE.get(out.dtype, 1e-6) * scale
    share = ours / allowed if allowed > 0 else (0.0 if ours == 0 else float("inf"))
    dtype = str(out.dtype).removeprefix("torch.")
    return share, f"{ours / scale if scale else ours:.2e} of its norm in a {dtype} output, where its torch reference errs by {theirs / scale if scale else theirs:.2e}"


def _compare(found: dict[str, StageCheck], name: str, kernel: Callable[..., None], reference: Callable[..., None], args: tuple[Any, ...]) -> None:
    """Run `kernel` on `args`, `reference` on copies and on float64 copies; keep the worst difference. Where the
    kernel fails, its outputs take the reference's values, so that the update goes on and later stages are checked too."""
    check = found.setdefault(name, StageCheck())
    check.calls += 1
    twins = tuple(a.clone() if isinstance(a, Tensor) else a for a in args)
    exact = tuple(a.double() if isinstance(a, Tensor) and a.is_floating_point() else a.clone() if isinstance(a, Tensor) else a for a in args)
    reference(*twins)
    reference(*exact)
    try:
        kernel(*args)
        first = next(a for a in args if isinstance(a, Tensor))
        if first.is_cuda:
            torch.cuda.synchronize(first.device)  # an asynchronous fault surfaces here, named after this stage
    except Exception as error:  # noqa: BLE001 (a compiler's or driver's error of any kind)
        message = str(error).strip().splitlines()
        check.error = f"{type(error).__name__}: {message[0] if message else ''}"[:300]
        for a, t in zip(args, twins):
            if isinstance(a, Tensor):
                a.copy_(t)
        return
    for a, t, e in zip(args, twins, exact):
        if isinstance(a, Tensor) and a.is_floating_point():
            share, words = _difference(a, t, e)
            if share > check.worst:
                check.worst, check.detail = share, words
        elif isinstance(a, Tensor) and not torch.equal(a, t):
            check.worst, check.detail = float("inf"), "a changed integer operand"


def stage_differences(
    model_cfg: dict[str, Any], device: torch.device, precision: str, *, batch: int = 3, src_len: int = 7, tgt_len: int = 5, vocab: int = 24, seed: int = 0
) -> dict[str, StageCheck]:
    """One training update (dropout on) of `model_cfg`'s network on `device`, every stage that runs its Triton
    kernel also run as its reference on the same inputs: the comparison per stage. Ragged rows (one shorter
    source, one shorter target) reach the masks."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's random state stays as it was
        return _stage_differences(model_cfg, device, precision, batch, src_len, tgt_len, vocab, seed)


def _stage_differences(model_cfg: dict[str, Any], device: torch.device, precision: str, batch: int, src_len: int, tgt_len: int, vocab: int,
                       seed: int) -> dict[str, StageCheck]:  # fmt: skip
    """`stage_differences` with the random state to itself."""
    from rnnmt.models.build import build_model, set_packed, set_recurrence

    torch.manual_seed(seed)
    model = build_model(model_cfg, vocab, vocab).to(device).train()
    set_recurrence(model, "kernels")
    set_packed(model, False)  # Luong's encoder through its kernels too, as a captured update runs it
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    tgt = torch.randint(4, vocab, (batch, tgt_len), device=device)
    src_mask = torch.ones(batch, src_len, dtype=torch.bool, device=device)
    tgt_mask = torch.ones(batch, tgt_len, dtype=torch.bool, device=device)
    src_mask[1 % batch, src_len // 2 + 1 :] = False
    tgt_mask[2 % batch, tgt_len // 2 + 1 :] = False
    found: dict[str, StageCheck] = {}
    with stages.checked(functools.partial(_compare, found)):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            logits, _ = model(src, src_mask, tgt)
            nll = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), reduction="none")
        (nll * tgt_mask.flatten()).sum().backward()
        _update_stages(logits.detach().flatten(0, 1), tgt.flatten())
    return found


def _update_stages(logits: Tensor, target: Tensor) -> None:
    """The stages after the loops: the output softmax on these logits widened with random columns to WIDE, and each
    optimiser's clipped update of WIDE random weights (clipping to half the gradient's norm, so that it rescales)."""
    device = logits.device
    extra = torch.randn(len(target), WIDE - logits.shape[1], device=device).to(logits.dtype)
    stages.output_softmax(torch.cat([logits, extra], dim=1), torch.randn(WIDE, device=device), target, logits.new_empty(len(target), dtype=torch.float32))
    param, grad = torch.randn(WIDE, device=device), torch.randn(WIDE, device=device)
    norm = grad.norm()
    stages.adadelta_update(param.clone(), grad, torch.rand_like(param), torch.rand_like(param), norm, 1.0, float(norm) / 2, 0.95, 1e-6)
    stages.sgd_update(param, grad, norm, 1.0, float(norm) / 2)


def small(model_cfg: dict[str, Any]) -> dict[str, Any]:
    """The system's architecture at the guard's sizes (layers, attention, feeding, dropout, biases and clipping kept)."""
    return {**model_cfg, **{key: value for key, value in SMALL.items() if key in model_cfg}}


def verify(model_cfg: dict[str, Any], device: torch.device, precision: str) -> dict[str, str]:
    """The stages whose Triton kernels fail on `device` for this architecture, each with the reason (empty: all
    pass). Checked once per process for each device, architecture and precision."""
    return dict(_verify(json.dumps(small(model_cfg), sort_keys=True), str(device), precision))


@functools.cache
def _verify(model_json: str, device: str, precision: str) -> tuple[tuple[str, str], ...]:
    found = stage_differences(json.loads(model_json), torch.device(device), precision)
    return tuple((name, check.reason()) for name, check in found.items() if not check.passed)
