"""Updates at static shapes, and their capture as CUDA graphs (`train.graph`, the GPU path).

A teacher-forced update launches thousands of small kernels, one or a few per step and layer, forward
and backward: on a GPU the host's launches, not the arithmetic, bound it. `train.graph` changes how an
update runs, not what it computes:

- `static`: every batch is padded to widths that are multiples of `train.pad_to`; the NLL is taken at
  every position with padding's set to 0 (the same sum); gradients accumulate into buffers allocated
  once and zeroed in place; the loss's divisor enters as a tensor. An update's kernels and their shapes
  then depend only on the padded widths, and nothing in it reads a value back to the host. It runs on
  any device, and on a CPU it is how the tests check the GPU path's numerics against `none`.
- `cuda`: that update's forward and backward, captured once per padded shape as one CUDA graph
  (`torch.cuda.graph`, sharing one memory pool) and replayed: a few launches instead of thousands.
  The optimiser and the clipping stay outside, eager (torch's fused Adam is one kernel). On an H200 the
  captured updates replayed what the eager static ones computed (tests/test_graphs.py) and trained
  RNNsearch-50 at paper shape, in bfloat16, at 4.3x the rate of `none` (docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rnnmt.train.batching import Batch
from rnnmt.train.nll import SentenceNLL

# The profiler's name for what a graph captures (rnnmt bench counts the operator calls inside it).
CAPTURED_REGION = "rnnmt::forward_backward"

# Eager updates on a side stream before a shape's capture, so that lazy set-up (cuBLAS workspaces, cuDNN
# plans) happens outside the graph, as torch's own make_graphed_callables does.
WARMUP = 3


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    inputs: tuple[Tensor, ...]  # src, src_mask, tgt, tgt_mask, loss scale: the graph reads these addresses
    per_sentence: Tensor  # and writes the NLL per sentence here


class StaticUpdate:
    """The gradient of scale × (a padded batch's summed NLL) into the parameters' fixed `.grad` buffers."""

    def __init__(self, objective: SentenceNLL, params: list[nn.Parameter], autocast_dtype: torch.dtype | None, capture: bool) -> None:
        self.objective, self.autocast_dtype, self.capture = objective, autocast_dtype, capture
        for p in params:
            p.grad = torch.zeros_like(p)
        self.grads = [p.grad for p in params]
        self.graphs: dict[tuple[torch.Size, torch.Size], _Captured] = {}
        self.pool = torch.cuda.graph_pool_handle() if capture else None

    def __call__(self, batch: Batch, scale: float) -> Tensor:
        """Run the update's forward and backward on `batch` (padded, on the device); returns the NLL per sentence."""
        inputs = (batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)
        if not self.capture:
            return self.forward_backward(*inputs, torch.full((), scale, device=batch.src.device))
        key = (batch.src.shape, batch.tgt.shape)
        if key not in self.graphs:
            self.graphs[key] = self._capture(*inputs, torch.full((), scale, device=batch.src.device))
        captured = self.graphs[key]
        for static, new in zip(captured.inputs, inputs):
            static.copy_(new, non_blocking=True)
        captured.inputs[-1].fill_(scale)
        captured.graph.replay()
        return captured.per_sentence

    def forward_backward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor, scale: Tensor) -> Tensor:
        """What a graph captures: zero the gradients, then add those of scale × the summed NLL (in place)."""
        with torch.profiler.record_function(CAPTURED_REGION):
            torch._foreach_zero_(self.grads)
            dtype = self.autocast_dtype or torch.float32
            # No cast cache: a capture would keep the cached copies' addresses past the autocast region.
            with torch.autocast(src.device.type, dtype=dtype, enabled=self.autocast_dtype is not None, cache_enabled=False):
                per_sentence = self.objective(src, src_mask, tgt, tgt_mask)
            (per_sentence.sum() * scale).backward()
            return per_sentence.detach()

    def _capture(self, *inputs: Tensor) -> _Captured:
        """Warm up on a side stream, then capture one update of these inputs' shapes into the shared pool."""
        static = tuple(t.clone() for t in inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self.forward_backward(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            per_sentence = self.forward_backward(*static)
        return _Captured(graph, static, per_sentence)
