"""What a stage is: one step's pointwise work as a single kernel (`train.recurrence: kernels`).

A teacher-forced update at paper size runs each stage once per step and layer, forward and backward; as separate
torch operations each is 4-15 kernel launches, which bound an update on a GPU (docs/performance.md). A stage is a
dataclass of its named operands (built by keyword, so that no two can be swapped) with its torch reference
(`reference`) and its Triton kernel, declared together in the module of its family (gru_step.py,
additive_attention.py, lstm_cell.py, luong_attention.py; the stages after the loops, the output softmax and the
optimiser's step, with what they serve in train/kernel_stages.py). `run` takes the Triton kernel on a CUDA device and
the reference elsewhere; the reference is what the tests and the guard (train/selfcheck.py) compare the kernel with,
and what `rnnmt bench train` counts as one kernel on a CPU (its profiler region is named `rnnmt::kernel::*`). A kernel
is launched by keyword from its stage's operands (`launch`), after one layout check of every operand.

The forward stages' references compute the modules' equations by calling them (models/gru.py, lstm.py,
attention.py, decoders.py), so an edit there reaches this path too; the backward stages' references call the
gradients' formulas where the fused loops read them too (gru.py, lstm.py, attention.py, decoders.py); the Triton kernels are
second forms of both, checked against autograd through the modules before a run relies on them. Products come in
their own dtype (bfloat16 under autocast); every stage computes in float32 and also writes, where a product reads
the result next, a copy in the products' dtype, so no separate cast runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

# The profiler's name prefix for a stage run by its torch reference (bench.kernels counts each as one kernel).
REGION = "rnnmt::kernel::"

# What runs a stage: "auto" (its Triton kernel on a CUDA device, its torch reference elsewhere), "triton"
# (the kernel on any tensors: a CPU's need TRITON_INTERPRET=1) or "reference".
_implementation = "auto"


@contextlib.contextmanager
def implementation(name: str) -> Iterator[None]:
    """Run every stage as `name` ("auto", "triton" or "reference") inside the block."""
    global _implementation
    before, _implementation = _implementation, name
    try:
        yield
    finally:
        _implementation = before


def runs_triton(device: torch.device) -> bool:
    """Whether the stages run their Triton kernels on `device`."""
    return _implementation == "triton" or (_implementation == "auto" and device.type == "cuda")


# While set (`checked`), a stage that would run its Triton kernel is handed to this instead (train/selfcheck.py
# runs both forms and compares them).
_checker: Callable[[Stage], None] | None = None


@contextlib.contextmanager
def checked(checker: Callable[[Stage], None]) -> Iterator[None]:
    """Hand every Triton stage to `checker` inside the block."""
    global _checker
    before, _checker = _checker, checker
    try:
        yield
    finally:
        _checker = before


class Stage:
    """A stage: its operands are a subclass's dataclass fields; it has a torch reference and a Triton launch."""

    name: ClassVar[str]
    launches: ClassVar[int] = 1  # Triton kernels per launch (rnnmt bench counts them)

    def reference(self) -> None:
        raise NotImplementedError

    def launch(self) -> None:
        """Its Triton kernel(s), by `launch` below."""
        raise NotImplementedError

    def run(self) -> None:
        """Its Triton kernel or its reference (inside a profiler region), as `implementation` says."""
        first = next(v for v in self.operands().values() if isinstance(v, Tensor))
        if runs_triton(first.device):
            return self.launch_checked() if _checker is None else _checker(self)
        with torch.profiler.record_function(REGION + self.name):
            self.reference()

    def launch_checked(self) -> None:
        """Its Triton kernel, once its operands are laid out as every kernel reads them (`layout_problem`)."""
        operands = self.operands()
        device = next(v for v in operands.values() if isinstance(v, Tensor)).device
        for name, value in operands.items():
            problem = layout_problem(value, device)
            if problem is not None:
                raise ValueError(f"stage {self.name}: operand {name} {problem}")
        self.launch()

    def operands(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


# The dtypes a kernel reads and writes: float32 states, bfloat16 (or float16) products.
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def layout_problem(value: object, device: torch.device) -> str | None:
    """What in an operand's layout a Triton kernel would misread, in words (triton_common.py: 2-D operands are rows
    with a row stride and contiguous columns, wider ones contiguous, all on the stage's device); None where nothing is."""
    if not isinstance(value, Tensor):
        return None
    shape = "×".join(map(str, value.shape)) or "scalar"
    if value.device != device:
        return f"[{shape}] is on {value.device}, where the stage's first operand is on {device}"
    if value.is_floating_point() and value.dtype not in KERNEL_DTYPES:
        return f"[{shape}] is {value.dtype}; expected one of {', '.join(map(str, KERNEL_DTYPES))}"
    if value.dim() > 2 and not value.is_contiguous():
        return f"[{shape}] is not contiguous (strides {value.stride()}); expected contiguous memory"
    if 0 < value.dim() <= 2 and value.shape[-1] > 1 and value.stride(-1) != 1:
        return f"[{shape}] has its columns {value.stride(-1)} elements apart; expected contiguous columns"
    return None


STAGES: dict[str, type[Stage]] = {}
"""Every stage by name, in the order they are declared."""


def stage(name: str, launches: int = 1) -> Callable[[type[Stage]], type[Stage]]:
    """Declare a Stage subclass: its name and Triton launches; operands by keyword only."""

    def declare(cls: type[Stage]) -> type[Stage]:
        cls = dataclass(kw_only=True, eq=False)(cls)
        cls.name, cls.launches = name, launches
        STAGES[name] = cls
        return cls

    return declare


@functools.cache
def _arguments(kernel: Any, stage: type[Stage]) -> tuple[tuple[str, str | None, bool], ...]:
    """Each of `kernel`'s parameters, the operand it reads of a `stage` (its own name, or `<operand>_stride`'s; None for a
    parameter that no operand names: its value comes with the launch) and whether that operand's rows must be dense (the
    kernel reads the operand itself and takes no `<operand>_stride`)."""
    fields = {f.name for f in dataclasses.fields(stage)}  # type: ignore[arg-type]
    read = [(name, name if name in fields else name.removesuffix("_stride") if name.removesuffix("_stride") in fields else None) for name in kernel.arg_names]
    strided = {operand for name, operand in read if operand is not None and name != operand}
    return tuple((name, operand, name == operand and operand not in strided) for name, operand in read)


def launch(kernel: Any, stage: Stage, grid: tuple[int, ...], **values: Any) -> None:
    """`kernel` on `grid`, each argument by keyword from `stage`'s operands: a parameter named for an operand takes it
    (None where it is absent: the kernel's `if x is not None` branches compile out), `<operand>_stride` its row stride
    (0 where absent); sizes, block widths and launch options (num_warps) come from `values`."""
    operands = stage.operands()
    arguments = {}
    for name, operand, dense in _arguments(kernel, type(stage)):
        if name in values:
            continue
        if operand is None:
            raise TypeError(f"stage {stage.name}: kernel parameter {name} is neither an operand nor given")
        value = operands[operand]
        if dense and isinstance(value, Tensor) and value.dim() == 2 and value.shape[0] > 1 and value.stride(0) != value.shape[1]:
            raise ValueError(
                f"stage {stage.name}: operand {operand} [{value.shape[0]}×{value.shape[1]}] has its rows {value.stride(0)} elements "
                f"apart; its kernel takes no {operand}_stride, so expected rows {value.shape[1]} apart"
            )
        arguments[name] = value if name == operand else value.stride(0) if value is not None else 0
    start(kernel, grid, {**arguments, **values})


def _launch(kernel: Any, grid: tuple[int, ...], arguments: dict[str, Any]) -> None:
    kernel[grid](**arguments)


# What `launch` hands a kernel and its arguments to: Triton's launch, or (tests/triton_stages.py --compile-for) a
# compiler for a GPU this machine does not have.
start: Callable[[Any, tuple[int, ...], dict[str, Any]], None] = _launch


def widened(x: Tensor) -> Tensor:
    """x in float32 or wider (the guard runs the references in float64 too)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def widened_sum(x: Tensor, extra: Tensor | None) -> Tensor:
    """x [+ extra], in float32 or wider."""
    return widened(x) + widened(extra) if extra is not None else widened(x)
