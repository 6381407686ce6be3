"""Before a run relies on a fast recurrence, check it against the model as its modules write it.

A researcher who edits an equation in a module (models/gru.py, lstm.py, attention.py, decoders.py) changes what
the `plain` recurrence computes, autograd through the modules; the fast forms call the same equations in their
forward passes, but their hand-written backward passes and Triton kernels are second forms, which an edit does
not reach. So before training relies on `fused` or `kernels`, `verify` checks it on the system's own
architecture, once per process:

- `path_differences`: a small model of the architecture (SMALL sizes, random weights that make every term of
  every equation count, dropout off: the paths draw their masks differently), float64, on a CPU, one update's
  NLL per sentence and every parameter's gradient by the fast form beside those of `plain`. The equations do not
  depend on the device: the kernels' loops run here with their stages' torch references.
- `stage_differences` (`kernels` where Triton runs): each Triton kernel beside its stage's torch reference on the
  device that trains, through one update of the same small model. No test may have run a kernel on the user's
  GPU, compiler and driver: a kernel that fails to compile, or computes something else there (a reduction
  order, a bfloat16 conversion, a race), would stop the run or train a wrong model for hours.

A model's parts (models/loops.py's PARTS: the encoder's loops, the decoder's loop, the output layer's NLL) are
checked together first and, where that fails, one by one: a part whose form cannot run it (a Luong score without a
kernel form, a module the form cannot read), fails to run, or fails its check is left for the next slower form
(kernels → fused → plain) on its own, with one log line naming the part, what differed and by how much; the other
parts keep theirs. The optimiser's fast step is checked against the run's own torch optimiser in train/update.py.
The same stage comparison at ragged and at the papers' sizes is the GPU test suite's (tests/test_kernels_cuda.py).

One discontinuity is compared as it falls: local-p centres its window on ⌊p_t⌋, so where the kernel's p_t and
the reference's (equal to rounding, ~1e-7) lie on either side of an integer, about 2 rows in a million, their
windows differ and the stage reads as differing; the run then trains with `fused`, as for a real fault.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from rnnmt.models.build import build_model, without_dropout
from rnnmt.models.loops import PARTS, Loops, Paths
from rnnmt.recurrence import forms
from rnnmt.recurrence.kernels import stages
from rnnmt.runtime import log
from rnnmt.train import kernel_stages
from rnnmt.train.nll import SentenceNLL

# The next slower recurrence, where a faster one cannot run the model or fails its check.
FALLBACK = {"kernels": "fused", "fused": "plain"}

# A fast form's NLL and gradients may differ from plain's by this share of their norms: float64 sums in another
# order differ by ~1e-14; an edited equation that one form does not see, by orders of magnitude more.
PATH_TOLERANCE = 1e-8


# A kernel's output may differ from the float64 value of its stage by 8× what the torch reference's own
# rounding differs by, plus this share of the value's norm: float32 sums in another order (over 1,000 terms a
# blocked sum and a BLAS's differ by a few times in accuracy where the terms cancel); a bfloat16 copy is off
# by less than one step, 2^-7, rounded either way (Triton's interpreter truncates). A wrong mask, index or
# conversion is off by orders of magnitude more.
SLACK = 8.0
TOLERANCE = {torch.float32: 1e-6, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}

# Columns of the guard's output softmax, and weights of its updates: more than two of their Triton kernels' tiles
# and blocks (2,048, kernel_stages.py), so that the passes over several are compared, not only one that fits.
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
    return (
        share,
        f"{ours / scale if scale else ours:.2e} of its norm in a {dtype} output, where its torch reference errs by {theirs / scale if scale else theirs:.2e}",
    )


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal values, NaN where the other has NaN."""
    return torch.equal(a, b) or bool(((a == b) | (a.isnan() & b.isnan())).all()) if a.is_floating_point() else torch.equal(a, b)


def _compare(found: dict[str, StageCheck], stage: stages.Stage) -> None:
    """Run the stage's Triton kernel on its operands, its reference on copies and on float64 copies; keep the worst
    difference. Where the kernel fails, its outputs take the reference's values, so that the update goes on and
    later stages are checked too."""
    check = found.setdefault(stage.name, StageCheck())
    check.calls += 1
    operands = {name: value for name, value in stage.operands().items() if isinstance(value, Tensor)}
    twin = dataclasses.replace(stage, **{name: value.clone() for name, value in operands.items()})
    exact = dataclasses.replace(stage, **{name: value.double() if value.is_floating_point() else value.clone() for name, value in operands.items()})
    twin.reference()
    exact.reference()
    try:
        stage.launch_checked()
        first = next(iter(operands.values()))
        if first.is_cuda:
            torch.cuda.synchronize(first.device)  # an asynchronous fault surfaces here, named after this stage
    except Exception as error:  # noqa: BLE001 (a compiler's or driver's error of any kind)
        message = str(error).strip().splitlines()
        check.error = f"{type(error).__name__}: {message[0] if message else ''}"[:300]
        for name, value in operands.items():  # the outputs only: an input autograd keeps must stay at its version
            if not _same(value, getattr(twin, name)):
                value.copy_(getattr(twin, name))
        return
    for name, value in operands.items():
        if value.is_floating_point():
            share, words = _difference(value, getattr(twin, name), getattr(exact, name))
            if share > check.worst:
                check.worst, check.detail = share, words
        elif not torch.equal(value, getattr(twin, name)):
            check.worst, check.detail = float("inf"), "a changed integer operand"


def stage_differences(
    model_cfg: dict[str, Any],
    device: torch.device,
    precision: str,
    *,
    paths: Paths = Paths.every("kernels"),
    batch: int = 3,
    src_len: int = 7,
    tgt_len: int = 5,
    vocab: int = 24,
    seed: int = 0,
) -> dict[str, StageCheck]:
    """One training update (dropout on) of `model_cfg`'s network on `device` with its parts by `paths`, every stage
    that runs its Triton kernel also run as its reference on the same inputs: the comparison per stage. Ragged rows
    (one shorter source, one shorter target) reach the masks."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's random state stays as it was
        return _stage_differences(model_cfg, device, precision, paths, batch, src_len, tgt_len, vocab, seed)


def _stage_differences(
    model_cfg: dict[str, Any], device: torch.device, precision: str, paths: Paths, batch: int, src_len: int, tgt_len: int, vocab: int, seed: int
) -> dict[str, StageCheck]:
    """`stage_differences` with the random state to itself."""
    torch.manual_seed(seed)
    # Luong's encoder through its kernels too (not packed), as a captured update runs it.
    model = build_model(model_cfg, vocab, vocab, forms.part_loops(paths, packed=False)).to(device).train()
    src, src_mask, tgt, tgt_mask = _ragged_batch(device, batch, src_len, tgt_len, vocab)
    found: dict[str, StageCheck] = {}
    with stages.checked(functools.partial(_compare, found)):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            logits, _ = model(src, src_mask, tgt)
            nll = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), reduction="none")
        (nll * tgt_mask.flatten()).sum().backward()
        if paths.output == "kernels":
            _output_stage(logits.detach().flatten(0, 1), tgt.flatten())
    return found


def _ragged_batch(device: torch.device, batch: int, src_len: int, tgt_len: int, vocab: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Random source and target ids with their masks; one shorter source and one shorter target reach the masks."""
    src = torch.randint(4, vocab, (batch, src_len), device=device)
    tgt = torch.randint(4, vocab, (batch, tgt_len), device=device)
    src_mask = torch.ones(batch, src_len, dtype=torch.bool, device=device)
    tgt_mask = torch.ones(batch, tgt_len, dtype=torch.bool, device=device)
    src_mask[1 % batch, src_len // 2 + 1 :] = False
    tgt_mask[2 % batch, tgt_len // 2 + 1 :] = False
    return src, src_mask, tgt, tgt_mask


def _output_stage(logits: Tensor, target: Tensor) -> None:
    """The output softmax on these logits widened with random columns to WIDE."""
    device = logits.device
    extra = torch.randn(len(target), WIDE - logits.shape[1], device=device).to(logits.dtype)
    kernel_stages.OutputSoftmax(
        logits=torch.cat([logits, extra], dim=1), bias=torch.randn(WIDE, device=device), target=target, nll=logits.new_empty(len(target), dtype=torch.float32)
    ).run()


def update_stage_differences(device: torch.device) -> dict[str, StageCheck]:
    """Each optimiser's clipped update of WIDE random weights on `device` as its Triton kernel and as its reference,
    once clipping to half the gradient's norm (so that it rescales) and once with a NaN norm: the comparison per stage."""
    found: dict[str, StageCheck] = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), stages.checked(functools.partial(_compare, found)):
        torch.manual_seed(0)
        param, grad = torch.randn(WIDE, device=device), torch.randn(WIDE, device=device)
        for norm in (grad.norm(), torch.tensor(float("nan"), device=device)):
            clipping = {"norm": norm, "lr": 1.0, "max_norm": float(grad.norm()) / 2}
            adadelta = {"square_avg": torch.rand_like(param), "acc_delta": torch.rand_like(param), "rho": 0.95, "eps": 1e-6}
            kernel_stages.AdadeltaUpdate(param=param.clone(), grad=grad, **clipping, **adadelta).run()
            kernel_stages.SGDUpdate(param=param.clone(), grad=grad, **clipping).run()
    return found


def small(model_cfg: dict[str, Any]) -> dict[str, Any]:
    """The system's architecture at the guard's sizes (layers, attention, feeding, dropout, biases and clipping kept)."""
    return {**model_cfg, **{key: value for key, value in SMALL.items() if key in model_cfg}}


@dataclass
class Comparison:
    """A fast form beside its home in torch: each difference as (what, share of its norm), and the check's time."""

    differences: list[tuple[str, float]]
    seconds: float
    tolerance: ClassVar[float]
    home: ClassVar[str]  # what the fast form is compared with, in words

    @property
    def passed(self) -> bool:
        return all(share <= self.tolerance for _, share in self.differences)  # NaN fails

    def reason(self) -> str:
        """What differs, in one line: the NLL where it differs (the fast form does not compute the modules'
        equations), else what differs most (a backward pass that differentiates another, a step that updates another)."""
        failing = [item for item in self.differences if not item[1] <= self.tolerance]  # NaN fails too
        what, share = failing[0] if failing[0][0] == "the NLL" else max(failing, key=lambda item: item[1] if item[1] == item[1] else math.inf)
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        return f"{what} differs from {self.home} by {share:.2e} of its norm{more}, where {self.tolerance:.0e} is allowed"


@dataclass
class PathCheck(Comparison):
    """A model's parts by fast recurrences against `plain` on a small model."""

    tolerance: ClassVar[float] = PATH_TOLERANCE
    home: ClassVar[str] = "autograd through the modules (recurrence plain)"


def _objective(model: torch.nn.Module, output: str, batch: tuple[Tensor, ...], weights: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """One update's NLL per sentence (the output layer's by `output`) and every parameter's gradient of its weighted sum."""
    src, src_mask, tgt, tgt_mask = batch
    model.zero_grad(set_to_none=True)
    per_sentence = SentenceNLL(model, output)(src, src_mask, tgt, tgt_mask, tgt_mask.flatten().nonzero().squeeze(1))
    (per_sentence * weights).sum().backward()
    return per_sentence.detach(), {name: p.grad if p.grad is not None else torch.zeros_like(p) for name, p in model.named_parameters()}


def share_of(value: Tensor, reference: Tensor, floor: float) -> float:
    """‖value − reference‖ as a share of ‖reference‖ (at least `floor`)."""
    return float((value - reference).norm()) / max(float(reference.norm()), floor)


def path_differences(
    model_cfg: dict[str, Any], paths: Paths | str, *, batch: int = 3, src_len: int = 7, tgt_len: int = 5, vocab: int = 24, seed: int = 0
) -> PathCheck:
    """The model's parts by `paths` (or every part by one recurrence) beside `plain` on a small float64 model of
    `model_cfg`'s architecture on a CPU (the random state stays as it was): the NLL per sentence and each parameter's
    gradient, as shares of their norms."""
    paths = Paths.every(paths) if isinstance(paths, str) else paths
    start = time.perf_counter()
    cfg = without_dropout(small(model_cfg))
    with torch.random.fork_rng(devices=[]), stages.implementation("reference"):
        torch.manual_seed(seed)
        plain = build_model(cfg, vocab, vocab).double().train()
        with torch.no_grad():
            for p in plain.parameters():
                p.uniform_(-0.5, 0.5)
        fast = build_model(cfg, vocab, vocab, forms.part_loops(paths)).double().train()
        fast.load_state_dict(plain.state_dict())
        inputs = _ragged_batch(torch.device("cpu"), batch, src_len, tgt_len, vocab)
        weights = torch.rand(batch, dtype=torch.float64) + 0.5
        (nll, grads), (fast_nll, fast_grads) = (_objective(m, output, inputs, weights) for m, output in ((plain, "plain"), (fast, paths.output)))
    floor = 1e-6 * float(torch.cat([g.flatten() for g in grads.values()]).norm())
    differences = [("the NLL", share_of(fast_nll, nll, 1e-300))]
    differences += [(f"the gradient of {name}", share_of(fast_grads[name], g, floor)) for name, g in grads.items()]
    return PathCheck(differences, time.perf_counter() - start)


@dataclass(frozen=True)
class Verdict:
    """The recurrence each part of a model runs by, how it was checked, and what was left behind (one line each)."""

    paths: Paths
    checked: str
    left: tuple[str, ...]
    seconds: float

    @property
    def recurrence(self) -> str:
        """The recurrence, or each part's where they differ."""
        return str(self.paths)


def verify(model_cfg: dict[str, Any], recurrence: str, device: torch.device, precision: str) -> Verdict:
    """For each part of `model_cfg`'s model, the first of `recurrence` and the slower ones (FALLBACK) that can run it
    and passes its checks on `device` in `precision`. Checked once per process for each architecture, recurrence,
    device and precision."""
    return _verify(json.dumps(small(model_cfg), sort_keys=True), recurrence, str(device), precision)


def failure(error: Exception) -> str:
    """An error a fast form raised, in one line."""
    lines = str(error).strip().splitlines()
    return f"it failed to run ({type(error).__name__}: {lines[0] if lines else ''})"[:300]


def _problem(model_cfg: dict[str, Any], paths: Paths, device: torch.device, precision: str) -> str | None:
    """Why the model's parts by `paths` cannot train it, in words; None where they run it and pass every check."""
    for part, name in paths.by_part().items():
        problem = forms.loops(name).unsupported(model_cfg, part)
        if problem is not None:
            return problem
    try:
        path = path_differences(model_cfg, paths)
    except Exception as error:  # noqa: BLE001 (an edited module that a fast form cannot read: it falls back, it never stops the run)
        return failure(error)
    if not path.passed:
        return path.reason()
    if "kernels" in paths.by_part().values() and stages.runs_triton(device):
        failed = {name: check.reason() for name, check in stage_differences(model_cfg, device, precision, paths=paths).items() if not check.passed}
        if failed:
            return f"{len(failed)} Triton stage(s) failed their check on {device} ({'; '.join(f'{name}: {reason}' for name, reason in failed.items())})"
    return None


def _how(paths: Paths, device: torch.device) -> str:
    """How the parts by `paths` were checked, in words."""
    if set(paths.by_part().values()) == {"plain"}:
        return "the reference: autograd through the modules"
    how = "checked against the plain path (autograd through the modules)"
    if "kernels" in paths.by_part().values() and stages.runs_triton(device):
        how += f" and each Triton stage against its torch reference on {device}"
    return how


@functools.cache
def _verify(model_json: str, recurrence: str, device_name: str, precision: str) -> Verdict:
    model_cfg, device = json.loads(model_json), torch.device(device_name)
    start = time.perf_counter()
    asked = Paths.every(recurrence)
    if recurrence == "plain" or _problem(model_cfg, asked, device, precision) is None:
        return Verdict(asked, _how(asked, device), (), time.perf_counter() - start)
    paths, left = Paths(), []
    for part in PARTS:
        form = recurrence
        while form != "plain":
            problem = _problem(model_cfg, Paths().with_part(part, form), device, precision)
            if problem is None:
                break
            left.append(f"recurrence {form} for the {part}: {problem}")
            form = FALLBACK[form]
        paths = paths.with_part(part, form)
    problem = _problem(model_cfg, paths, device, precision)  # the parts as they will run together
    if problem is not None:
        left.append(f"recurrence {paths} together: {problem}")
        paths = Paths()
    return Verdict(paths, _how(paths, device), tuple(left), time.perf_counter() - start)


def checked_loops(model_cfg: dict[str, Any]) -> dict[str, Loops]:
    """The loops a trained model translates with: `fused` where it passes its check on this architecture, else `plain`
    (said once per process in the log). Beam search runs the encoder's loops; float32 on a CPU is what they compute."""
    verdict = verify(model_cfg, "fused", torch.device("cpu"), "float32")
    if verdict.left and verdict not in _said:
        _said.add(verdict)
        log(f"{'; '.join(verdict.left)}; this model translates with recurrence {verdict.recurrence}")
    return forms.part_loops(verdict.paths)


_said: set[Verdict] = set()
