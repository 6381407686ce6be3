"""The GPU kernels one training update launches, counted on any device by torch.profiler (`rnnmt bench train`'s
`kernels_per_update`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rnnmt.recurrence.kernels.stages import REGION as KERNEL_STAGE
from rnnmt.recurrence.kernels.stages import STAGES


def kernels_per_update(trainer: Any, update: int) -> dict[str, int]:
    """The GPU kernels one update runs (forward, backward, clipping, optimiser), counted on any device by
    torch.profiler: `kernels` for each outermost operator call, and `in_graph`, those inside the forward
    and backward that train.graph `cuda` captures as one graph. The batch is made before, outside the
    count; the output layer's softmax takes one block of rows, as on a GPU (nll.Workspace.blocked)."""
    from torch.profiler import ProfilerActivity, profile

    from rnnmt.train.graphs import CAPTURED_REGION

    batch = trainer.stream.batch(update)  # made on the host beforehand, as a data loader would: no launches
    workspace, static = trainer.setup.workspace, trainer.setup.static
    blocked = workspace is not None and workspace.blocked
    if workspace is not None:  # the plain recurrence's NLL keeps none
        workspace.blocked = False
    # A captured update replays its graph: the operators of the same update run eagerly are what the graph holds.
    capture = static.capture if static is not None else False
    if static is not None:
        static.capture = False
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.step(update, batch)
    finally:
        if workspace is not None:
            workspace.blocked = blocked
        if static is not None:
            static.capture = capture
    outermost = [e for e in prof.events() if _launches(e) and not any(_launches(a) for a in _ancestors(e))]
    in_graph = sum(kernels(e) for e in outermost if any(a.name == CAPTURED_REGION for a in _ancestors(e)))
    return {"kernels": sum(kernels(e) for e in outermost), "in_graph": in_graph, "width": [batch.src.shape[1], batch.tgt.shape[1]]}


def _launches(event: Any) -> bool:
    """An operator call, or a stage of recurrence/kernels/stages.py (one Triton kernel on a GPU, torch operations here)."""
    return event.name.startswith(("aten::", KERNEL_STAGE))


def kernels(event: Any) -> int:
    """The GPU kernels an operator call stands for: one for a matrix product, a reduction or a multi-tensor
    (`_foreach_`) op, a kernel stage's launches (one or two), whatever a CPU runs inside it; otherwise those of the calls inside
    it, or one for a call with none that launches work (views, allocations and dtype no-ops launch nothing)."""
    name = event.name.removeprefix("aten::")
    if name.startswith(KERNEL_STAGE):
        return STAGES[name.removeprefix(KERNEL_STAGE)].launches
    if name in ONE_KERNEL or name.startswith("_foreach_"):
        return 1
    inner = sum(kernels(c) for c in event.cpu_children if c.name.startswith("aten::"))
    return inner or int(name not in NO_KERNEL)


def _ancestors(event: Any) -> Iterator[Any]:
    while event.cpu_parent is not None:
        event = event.cpu_parent
        yield event


# One kernel each on a GPU; a CPU's implementation calls other operators inside (conjugation checks,
# fills of the accumulator, dtype checks).
ONE_KERNEL = frozenset(
    "addbmm addmm addmv amax amin baddbmm bmm dot gather index_select linalg_vector_norm logsumexp max mean min mm mv "
    "norm scatter_add_ sum _log_softmax _log_softmax_backward_data _softmax _softmax_backward_data".split()
)


# Operators that launch nothing when nothing inside them does: views, empty tensors, dtype no-ops, and a dropout
# at rate 0 or in evaluation, which returns its input (torch's Dropout.cpp, on a GPU too).
NO_KERNEL = frozenset(
    "alias as_strided contiguous detach dropout empty empty_like empty_strided expand lift_fresh narrow new_empty permute "
    "promote_types reshape _reshape_alias resize_ resolve_conj resolve_neg result_type select slice split squeeze t to "
    "transpose unbind unflatten unsqueeze view _unsafe_view".split()
)
